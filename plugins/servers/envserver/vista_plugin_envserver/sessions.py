"""Sessions: one env instance per session id, with a cap, idle expiry and per-session locking.

The manager is synchronous and thread-safe so the HTTP layer can run env calls in worker threads
(an env that blocks must not stall the event loop, health checks or other sessions).
"""

from __future__ import annotations

import contextlib
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from vista_plugin_envserver.observe_limits import ObserveUsage
from vista_rl import Env


class SessionError(Exception):
    """Base of session errors; ``status`` is the HTTP status the server answers with."""

    status = 400


class UnknownSessionError(SessionError):
    status = 404


class SessionCapError(SessionError):
    status = 429


@dataclass
class Session:
    id: str
    env_id: str
    env: Env
    created: float
    last_used: float
    lock: threading.Lock = field(default_factory=threading.Lock)
    steps: int = 0
    episodes: int = 0
    #: what ``/observe`` handed the env this episode (cleared by a reset)
    observed: ObserveUsage = field(default_factory=ObserveUsage)


class SessionManager:
    """Creates, finds, expires and closes sessions.

    ``max_sessions`` bounds memory (each session holds a live env); ``idle_timeout_s`` frees the
    sessions of clients that died without closing.  Recently expired ids are remembered so a late
    client is told its session *expired* rather than that it never existed.
    """

    def __init__(
        self,
        make_env: Callable[[str, dict[str, Any]], Env],
        *,
        max_sessions: int = 1024,
        idle_timeout_s: float = 600.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._make_env = make_env
        self.max_sessions = max_sessions
        self.idle_timeout_s = idle_timeout_s
        self._clock = clock
        self._sessions: dict[str, Session] = {}
        self._expired: OrderedDict[str, str] = OrderedDict()
        self._lock = threading.Lock()
        self.total_created = 0
        self.total_expired = 0

    def __len__(self) -> int:
        return len(self._sessions)

    def create(self, env_id: str, config: dict[str, Any], count: int = 1) -> list[Session]:
        with self._lock:
            free = self.max_sessions - len(self._sessions)
            if count > free:
                raise SessionCapError(
                    f"session cap reached: {len(self._sessions)} of {self.max_sessions} sessions are open and "
                    f"{count} more were requested; close sessions or start the server with a larger "
                    "--max-sessions"
                )
            # Reserve the slots before building envs (which may be slow) outside the lock.
            ids = [secrets.token_hex(8) for _ in range(count)]
            for session_id in ids:
                self._sessions[session_id] = None  # type: ignore[assignment]
        created: list[Session] = []
        try:
            for session_id in ids:
                env = self._make_env(env_id, config)
                now = self._clock()
                created.append(Session(session_id, env_id, env, now, now))
        except BaseException:
            with self._lock:
                for session_id in ids:
                    self._sessions.pop(session_id, None)
            for session in created:
                _close_quietly(session.env)
            raise
        with self._lock:
            for session in created:
                self._sessions[session.id] = session
            self.total_created += len(created)
        return created

    def get(self, session_id: Any) -> Session:
        if not isinstance(session_id, str):
            raise SessionError(f"session ids are strings, got {type(session_id).__name__}")
        with self._lock:
            session = self._sessions.get(session_id)
            if session is None:
                if session_id in self._expired:
                    raise UnknownSessionError(
                        f"session {session_id!r} expired after {self.idle_timeout_s:g} s idle "
                        f"({self._expired[session_id]}); create a new session"
                    )
                raise UnknownSessionError(f"unknown session {session_id!r}; create one with POST /sessions")
            session.last_used = self._clock()
            return session

    def close(self, session_ids: list[str]) -> int:
        """Close the given sessions; unknown ids are ignored (closing is idempotent)."""
        with self._lock:
            sessions = [self._sessions.pop(sid) for sid in session_ids if self._sessions.get(sid) is not None]
        for session in sessions:
            with session.lock:
                _close_quietly(session.env)
        return len(sessions)

    def expire_idle(self) -> int:
        """Close sessions idle for longer than the timeout; returns how many."""
        now = self._clock()
        with self._lock:
            stale = [s for s in self._sessions.values()
                     if s is not None and now - s.last_used > self.idle_timeout_s and not s.lock.locked()]
            for session in stale:
                del self._sessions[session.id]
                self._expired[session.id] = session.env_id
            while len(self._expired) > 10_000:
                self._expired.popitem(last=False)
            self.total_expired += len(stale)
        for session in stale:
            _close_quietly(session.env)
        return len(stale)

    def close_all(self) -> None:
        with self._lock:
            sessions = [s for s in self._sessions.values() if s is not None]
            self._sessions.clear()
        for session in sessions:
            _close_quietly(session.env)

    def stats(self) -> dict[str, Any]:
        return {
            "open": len(self._sessions),
            "max_sessions": self.max_sessions,
            "idle_timeout_s": self.idle_timeout_s,
            "created": self.total_created,
            "expired": self.total_expired,
        }


def _close_quietly(env: Env) -> None:
    # a broken close must not take other sessions with it
    with contextlib.suppress(Exception):
        env.close()
