"""What the env server's routes run on a worker thread, once a request is valid: plain functions
over sessions and limits, so each is tested without a server or an event loop.

An env that raises fails only its own item (``{"ok": false, "error": ...}``), as does an item past
a limit; the rest of the batch still runs.  Every env call holds its session's lock.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from vista_plugin_envserver.app_state import EnvServerState
from vista_plugin_envserver.app_validation import HTTPError, ObserveItem, ResetItem, StepItem
from vista_plugin_envserver.codec import ImageEncoding, encode_observation, encode_step
from vista_plugin_envserver.limits import ClientLimits, LimitError
from vista_plugin_envserver.observe_limits import ObserveLimits
from vista_plugin_envserver.sessions import Session, SessionError
from vista_rl import ToolCallRecord, config_fields
from vista_rl.serving import short

ItemT = TypeVar("ItemT")


def each_session(sessions: list[Session], items: list[ItemT], call: Callable[[Session, ItemT], dict[str, Any]],
                 what: str) -> list[dict[str, Any]]:
    """Run ``call`` on every (session, item) under the session's lock; an env that raises fails only
    its own item (``{"ok": False, "error": ...}``), as does an item past a limit, the rest of the
    batch still runs."""
    out: list[dict[str, Any]] = []
    for session, item in zip(sessions, items, strict=True):
        with session.lock:
            try:
                out.append({"ok": True, **call(session, item)})
            except LimitError as exc:
                out.append({"ok": False, "error": f"{what} refused: {exc.message}", "status": exc.status})
            except Exception as exc:  # noqa: BLE001 - a crashing env must not take the batch down
                out.append({"ok": False, "error": f"{what} raised {type(exc).__name__}: {exc}"})
    return out


def reset_one(limits: ClientLimits, encoding: ImageEncoding, session: Session, item: ResetItem) -> dict[str, Any]:
    """One ``/reset`` item: a new episode (its ``/observe`` budget starts over), its first frame
    within the limits."""
    observation, info = session.env.reset(seed=item.seed)
    session.observed.clear()
    limits.check_observation(observation)
    session.episodes += 1
    return {"observation": encode_observation(observation, encoding), "info": info}


def step_one(limits: ClientLimits, encoding: ImageEncoding, session: Session, item: StepItem) -> dict[str, Any]:
    """One ``/step`` item: the action is text the env parses, its frame within the limits."""
    result = session.env.step(item.action)
    limits.check_observation(result.observation)
    session.steps += 1
    return encode_step(result, encoding)


def observe_turn(limits: ObserveLimits, session: Session, item: ObserveItem) -> dict[str, Any]:
    """One ``/observe`` item: checked against ``limits`` and charged to the session's episode
    before the env sees any of it (a refused item changes nothing)."""
    limits.admit(session.observed, item.response, item.calls)
    session.env.observe_tool_turn(item.response, [ToolCallRecord(**call.model_dump()) for call in item.calls])
    return {}


def oracle_responses(sessions: list[Session]) -> list[str | None]:
    """Each session's ``oracle_response()``, or None where the env has none or raises."""
    out: list[str | None] = []
    for session in sessions:
        with session.lock:
            try:
                out.append(session.env.oracle_response())
            except Exception:  # noqa: BLE001 - no oracle is an answer, not an error
                out.append(None)
    return out


def probe(state: EnvServerState, made: list[Session]) -> None:
    """Reset the first of ``made`` once and check its frame; on any failure close them all.

    A client-chosen config is tried before it is handed out: frames past the caps are refused now,
    before the client holds sessions that each cost hundreds of MB.  One probe at a time, so hostile
    clients in parallel cost one oversized frame, not many."""
    try:
        with state.probe_lock, made[0].lock:
            observation, _info = made[0].env.reset(seed=0)
            state.limits.check_observation(observation)
            del observation
    except BaseException:
        state.sessions.close([s.id for s in made])
        raise


def create_sessions(state: EnvServerState, env_id: str, config: dict[str, Any], count: int) -> list[dict[str, Any]]:
    """``count`` new sessions of ``env_id`` described for the client.  A client ``config`` passes
    :class:`~vista_plugin_envserver.client_config.ClientConfigCheck` (server-only fields, host paths,
    image sizes) and a probe first; every failure is an :class:`HTTPError` that says why."""
    try:
        checked = state.client_config.check(env_id, config) if config else {}
        made = state.sessions.create(env_id, checked, count)
        if config:
            probe(state, made)
        return [{"id": s.id, "env_id": s.env_id, "system_prompt": s.env.system_prompt(),
                 "tools": list(s.env.tools)} for s in made]
    except SessionError as exc:
        raise HTTPError(exc.status, str(exc)) from None
    except config_fields.ClientConfigRefused as exc:
        raise HTTPError(exc.status, f"env {env_id!r}: {exc.message}") from None
    except LimitError as exc:
        raise HTTPError(exc.status, f"config {short(config)} refused: {exc.message}") from None
    except Exception as exc:  # noqa: BLE001 - a bad config must not crash the server
        raise HTTPError(400, f"could not create env {env_id!r} with config {short(config)}: "
                             f"{type(exc).__name__}: {short(str(exc), 300)}") from None
