"""What the audit learns about an env before it attacks it: the oracle's episode and a :class:`SeedTask`.

For each seed the oracle plays one episode through ``env.step`` (its reward is the bar on the step
path).  Its replies give the right answer and the env's reply format (the text around the oracle's
``<answer>``), and its first tool call a call the env accepts.  The env's own declarations give
the rest: ``action_names`` (games), the options of a multiple-choice problem (``problem.judge_kwargs
["choices"]``, as the QA envs keep them), the tools it offers and the image size.

Wrong answers (decoys) for an answer env are checked, not assumed: each candidate (another option,
another seed's right answer, a far-off number, "none of these") is answered once from a fresh reset,
and only those the env judges wrong are kept.  So a hedge that the env accepts was accepted for the
right answer it hid, not for a decoy that happened to be right.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import vista_rl
from vista_rl.audit.adversaries import SeedTask
from vista_rl.audit.tool_calls import ToolTemplate, schema_arguments
from vista_rl.env import Env, declared_actions
from vista_rl.parsing import ResponseFormat, parse_response

EnvFactory = Callable[[], Env]
_ANSWER = re.compile(r"<answer>(.*?)</answer>", re.IGNORECASE | re.DOTALL)
_ANY_FORMAT = ResponseFormat(required=())
LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
#: Wrong answers that name nothing in any answer space (the last resort for decoys).
NON_ANSWERS = ("none of these", "zzz")
_SHIFT = str.maketrans("0123456789", "5678901234")
#: Decoys kept per seed (wrong answers the env confirmed).
DECOYS = 3
#: Candidates tried to find them (each costs one reset and one step).
DECOY_TRIES = 8


@dataclass
class OracleRun:
    """The oracle's episode on one seed: its return, the env's verdict and its replies."""

    seed: int
    reward: float = 0.0
    success: bool = False
    replies: list[str] = field(default_factory=list)
    error: str | None = None


def problem_options(env: Env, right: str) -> tuple[str, ...]:
    """The options of the current multiple-choice problem (the QA envs' ``problem.judge_kwargs
    ["choices"]``), as letters when the oracle answers with a letter, else as the option texts."""
    problem = getattr(env, "problem", None)
    kwargs = getattr(problem, "judge_kwargs", None)
    choices = kwargs.get("choices") if isinstance(kwargs, dict) else None
    if not isinstance(choices, (list, tuple)) or not choices:
        return ()
    if len(right) == 1 and right.upper() in LETTERS:
        return tuple(LETTERS[: min(len(choices), len(LETTERS))])
    return tuple(str(choice) for choice in choices)


def oracle_run(env: Env, seed: int, max_turns: int) -> OracleRun:
    """The oracle's episode through ``env.step``; an env that raises is recorded, not raised."""
    run = OracleRun(seed)
    try:
        env.reset(seed=seed)
        for _ in range(max_turns):
            reply = env.oracle_response()
            if reply is None:
                if not run.replies:
                    run.error = "the env has no oracle (oracle_response() gave None)"
                break
            run.replies.append(reply)
            result = env.step(reply)
            run.reward += result.reward
            if "success" in result.info:
                run.success = bool(result.info["success"])
            if result.done:
                break
    except Exception as exc:  # noqa: BLE001 - one seed's failure is reported with the audit
        run.error = f"the oracle's episode raised {type(exc).__name__}: {exc}"
    return run


def answer_format(replies: Sequence[str]) -> tuple[str, str, str]:
    """``(right answer, prefix, suffix)`` from the oracle's first reply with an ``<answer>``:
    the reply is ``prefix + answer + suffix``.  Without one: ``("", "<answer>", "</answer>")``."""
    for reply in replies:
        match = _ANSWER.search(reply)
        if match:
            return match.group(1).strip(), reply[: match.start(1)], reply[match.end(1):]
    return "", "<answer>", "</answer>"


def tool_template(env: Env, replies: Sequence[str]) -> ToolTemplate | None:
    """The oracle's first call of a tool the env offers; else a call built from the schema of the
    env's first tool that takes a point or a box (else its first tool)."""
    tools = tuple(env.tools)
    if not tools:
        return None
    for reply in replies:
        for call in parse_response(reply, _ANY_FORMAT).tool_calls:
            if call.error is None and call.name in tools and isinstance(call.arguments, dict):
                return ToolTemplate(call.name, dict(call.arguments))
    built: list[ToolTemplate] = []
    for name in tools:
        try:
            schema = vista_rl.make_tool(name).Arguments.model_json_schema()
        except Exception:  # noqa: BLE001 - a tool that cannot be made is skipped here; the engine reports it
            continue
        arguments = schema_arguments(schema)
        built.append(ToolTemplate(name, arguments))
        if any(isinstance(value, list) and len(value) in (2, 4) for value in arguments.values()):
            return built[-1]
    return built[0] if built else ToolTemplate(tools[0], {})


def image_size(observation: Any) -> tuple[int, int] | None:
    images = getattr(observation, "images", None) or []
    try:
        width, height = images[0].size
        return int(width), int(height)
    except (IndexError, AttributeError, TypeError, ValueError):
        return None


def shifted_digits(answer: str) -> str:
    """``answer`` with every digit moved by five ("(238, 40)" -> "(783, 95)", "click [18]" ->
    "click [63]"): a wrong answer of the same shape, for answers no option list describes."""
    return answer.translate(_SHIFT)


def decoy_candidates(right: str, options: Sequence[str], others: Sequence[str]) -> tuple[list[str], int]:
    """Wrong-answer candidates, most plausible first, and how many of them are plausible (in the
    answer space: other options, other seeds' answers, the right answer with its digits shifted,
    numbers far from a numeric answer); then "none of these", which names no answer."""
    found: list[str] = [*options, *others]
    if any(ch.isdigit() for ch in right):
        found.append(shifted_digits(right))
    try:
        number = float(right)
    except ValueError:
        number = None
    if number is not None and number == number and abs(number) < 1e15:
        found += [_number(number * 3 + 7), _number(-abs(number) - 5)]
    norm = right.strip().lower()
    plausible = list(dict.fromkeys(candidate for candidate in found if candidate.strip().lower() != norm))
    return [*plausible, *(word for word in NON_ANSWERS if word.lower() != norm)], len(plausible)


def _number(value: float) -> str:
    return str(int(value)) if value == int(value) else f"{value:g}"


def confirmed_decoys(make: EnvFactory, task: SeedTask, candidates: Sequence[str], plausible: int) -> tuple[tuple[str, ...], int]:
    """Up to :data:`DECOYS` of ``candidates`` that the env judges wrong when answered from a fresh
    reset (``info["success"]`` false), and how many of those kept are plausible (among the first
    ``plausible`` candidates).  Candidates that raise are skipped."""
    kept: list[str] = []
    kept_plausible = 0
    env = make()
    try:
        for index, candidate in enumerate(list(candidates)[:DECOY_TRIES]):
            try:
                env.reset(seed=task.seed)
                result = env.step(task.reply(candidate))
            except Exception:  # noqa: BLE001 - the adversaries' episodes will report the env's errors
                continue
            if not result.info.get("success"):
                kept.append(candidate)
                kept_plausible += index < plausible
            if len(kept) >= DECOYS:
                break
    finally:
        env.close()
    return tuple(kept), kept_plausible


def seed_task(make: EnvFactory, run: OracleRun, others: Sequence[str]) -> SeedTask:
    """The :class:`SeedTask` of ``run.seed``, with decoys confirmed (answer envs) or chosen among
    the moves the oracle did not make first (games).  ``others`` are other seeds' right answers."""
    right, prefix, suffix = answer_format(run.replies)
    env = make()
    try:
        observation, _ = env.reset(seed=run.seed)
        actions = tuple(declared_actions(env))
        options = actions or problem_options(env, right)
        task = SeedTask(run.seed, right, (), options, bool(actions), prefix, suffix, tuple(env.tools),
                        tool_template(env, run.replies), image_size(observation))
    finally:
        env.close()
    if actions:
        first = right.split(",")[0].strip().lower()
        return replace(task, decoys=tuple(action for action in actions if action.lower() != first) or actions,
                       plausible_decoys=True)
    candidates, plausible = decoy_candidates(right, options, others)
    decoys, kept_plausible = confirmed_decoys(make, task, candidates, plausible)
    return replace(task, decoys=decoys or NON_ANSWERS[:1], plausible_decoys=kept_plausible > 0)
