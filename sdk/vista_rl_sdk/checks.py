"""Conformance checks that actively exercise a plugin's items (gymnasium's ``check_env`` for VISTA).

Each check collects every problem it finds and raises one :class:`CheckFailure` listing them, so a
plugin author sees the whole picture in one run.
"""

from __future__ import annotations

import json
import math
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from PIL import Image

import vista_rl
from vista_rl import (
    Env,
    Judge,
    Observation,
    StepResult,
    Tool,
    ToolContext,
    ToolResult,
    count_placeholders,
    declared_actions,
    is_import_path,
    observation_fingerprint,
    resolve_import_path,
)
from vista_rl_sdk.fresh_process import call_in_fresh_process
from vista_rl_sdk.image_checks import cornered_everywhere, describe

#: Hostile model outputs by name, for plugin tests that assert what an env answers to each one
#: (``pytest.mark.parametrize("action", ADVERSARIAL_ACTIONS.values(), ids=ADVERSARIAL_ACTIONS.keys())``).
ADVERSARIAL_ACTIONS: dict[str, str] = {
    "huge-int-tool-call": "<tool_call>" + "1" * 5000 + "</tool_call>",  # json -> int past the 4,300-digit limit
    "huge-int-answer": "<think>x</think><answer>" + "7" * 5000 + "</answer>",  # int() of the answer: same limit
    "deep-nesting": "<tool_call>" + "[" * 100_000 + "</tool_call>",  # nesting past the recursion limit
    "bare-nesting": "[" * 100_000,
    "lone-surrogate": "\ud800",  # a str Python holds but UTF-8 cannot encode
    "empty": "",
    "one-megabyte": "<think>" + "x" * 1_000_000 + "</think><answer>",
    "image-placeholder": "<image><prediction><image>",  # echoed in feedback: more slots than images
}
#: What ``check_env`` steps every env with: none may raise.
GARBAGE_ACTIONS: tuple[str, ...] = (
    "   ",
    "\x00\x01\x02",
    "<answer>",
    "</answer></answer><think>",
    "<answer><answer>nested</answer></answer>",
    '<tool_call>{"name": </tool_call>',
    "ÜñíçødÉ 🤖 <answer>✓</answer>",
    "x" * 100_000,
    *ADVERSARIAL_ACTIONS.values(),
)
#: What ``check_judge`` scores besides the given predictions: none may raise or leave ``[0, max_score]``.
GARBAGE_PREDICTIONS: tuple[Any, ...] = (None, "", "x" * 1_000_000, {"a": 1}, "<answer>", float("nan"))
INVALID_ACTION = "<think>hmm</think><answer>definitely-not-a-valid-action-xyz</answer>"
#: How ``check_env`` phrases one declared action for an env without ``action_response``: the
#: response formats of the core's parsers, tried in order until the env reports ``format_ok``.
ACTION_PHRASINGS: tuple[str, ...] = (
    "<think>I try {action}.</think><answer>{action}</answer>",
    "<answer>{action}</answer>",
    "<think><observation>x</observation><reasoning>I try {action}.</reasoning></think><answer>{action}</answer>",
    "<think><reasoning>I try {action}.</reasoning><prediction>x</prediction></think><answer>{action}</answer>",
    "<think><observation>x</observation><reasoning>I try {action}.</reasoning><prediction>x</prediction></think>"
    "<answer>{action}</answer>",
    "{action}",
)


class CheckWarning(UserWarning):
    """A conformance check found something suspicious that is not a failure (pytest lists these in its
    warnings summary)."""


class CheckFailure(AssertionError):
    """A conformance check found problems; ``problems`` lists them all, ``report`` (when the check
    made one) also what passed."""

    def __init__(self, subject: str, problems: list[str], report: CheckReport | None = None) -> None:
        self.problems = problems
        self.report = report
        super().__init__(f"{subject} failed {len(problems)} check(s):\n- " + "\n- ".join(problems))


@dataclass
class CheckReport:
    """What a check found: ``passed`` names each check that passed (so a report shows what was
    checked, not only what failed), ``problems`` the failures, ``warnings`` what looked wrong but
    does not fail."""

    subject: str
    passed: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def ok(self, what: str) -> None:
        self.passed.append(what)

    def fail(self, what: str) -> None:
        self.problems.append(what)

    def warn(self, what: str) -> None:
        """Record a warning and emit it as a :class:`CheckWarning`, so a test run shows it."""
        self.warnings.append(what)
        warnings.warn(CheckWarning(f"{self.subject}: {what}"), stacklevel=3)

    def raise_if_failed(self) -> CheckReport:
        if self.problems:
            raise CheckFailure(self.subject, self.problems, report=self)
        return self


# ---------------------------------------------------------------------------------------- envs
EnvFactory = str | Callable[..., Env]


def _make(factory: EnvFactory, config: dict[str, Any]) -> Env:
    return vista_rl.make_env(factory, **config) if isinstance(factory, str) else factory(**config)


def _factory_path(factory: EnvFactory) -> str | None:
    if isinstance(factory, str):
        return factory
    module, qualname = getattr(factory, "__module__", None), getattr(factory, "__qualname__", "")
    if not module or "<locals>" in qualname or module == "__main__":
        return None
    return f"{module}:{qualname}"


def fingerprints(factory: EnvFactory, config: dict[str, Any], seeds: Sequence[int]) -> list[str]:
    out = []
    for seed in seeds:
        env = _make(factory, config)
        try:
            observation, _ = env.reset(seed=seed)
            out.append(observation_fingerprint(observation))
        finally:
            env.close()
    return out


def _fingerprints_of(path: str, config: dict[str, Any], seeds: list[int]) -> list[str]:
    """:func:`fingerprints` for a factory named by registry id or import path (what a fresh process
    can be told)."""
    factory: EnvFactory = resolve_import_path(path) if is_import_path(path) else path
    return fingerprints(factory, config, seeds)


def _check_observation(report: CheckReport, observation: Any, where: str) -> bool:
    if not isinstance(observation, Observation):
        report.fail(f"{where}: observation is {type(observation).__name__}, not vista_rl.Observation")
        return False
    placeholders = count_placeholders(observation.text)
    if placeholders != len(observation.images):
        report.fail(f"{where}: {placeholders} <image> placeholder(s) but {len(observation.images)} image(s)")
        return False
    if not all(isinstance(image, Image.Image) for image in observation.images):
        report.fail(f"{where}: images must be PIL.Image.Image")
        return False
    return True


def _check_step(report: CheckReport, env: Env, action: str, label: str) -> StepResult | None:
    try:
        result = env.step(action)
    except Exception as exc:  # noqa: BLE001
        report.fail(f"step raised on {label} action: {type(exc).__name__}: {exc}")
        return None
    if not isinstance(result, StepResult):
        report.fail(f"step on {label} action returned {type(result).__name__}, not StepResult")
        return None
    if not math.isfinite(result.reward):
        report.fail(f"step on {label} action returned a non-finite reward {result.reward}")
    if not isinstance(result.info, dict):
        report.fail(f"step on {label} action returned info of type {type(result.info).__name__}")
    _check_observation(report, result.observation, f"step on {label} action")
    return result


def _phrase(env: Env, action: str, phrasing: str) -> str:
    respond = getattr(env, "action_response", None)
    return str(respond(action)) if callable(respond) else phrasing.format(action=action)


def _try_declared_actions(report: CheckReport, env: Env, actions: list[str],
                          fresh: Callable[[], Env | None]) -> None:
    """Each declared action once, from a fresh reset: none may raise, fail inside the env
    (``info["error"]``) or be reported invalid.  Why: without an oracle the valid step was skipped, and an
    env whose every action crashed (a Dict observation the bridge could not read) passed."""
    phrasings = [ACTION_PHRASINGS[0]] if callable(getattr(env, "action_response", None)) else list(ACTION_PHRASINGS)
    tried, locked = 0, False
    for action in actions:
        for phrasing in list(phrasings):
            if fresh() is None:
                return
            label = f"declared {action!r}"
            result = _check_step(report, env, _phrase(env, action, phrasing), label)
            if result is None:
                break
            info = result.info if isinstance(result.info, dict) else {}
            if info.get("error"):
                tried += 1
                report.fail(f"step on {label} action failed inside the env: {str(info['error'])[:300]}")
                break
            if info.get("format_ok") is False and not locked:
                phrasings.remove(phrasing)  # not this env's response format: try the next one
                if not phrasings:
                    report.fail(f"no phrasing of the declared actions {actions[:5]} was accepted "
                                "(format_ok=False); give the env an action_response(name) method or pass "
                                "valid_action")
                    return
                continue
            locked, phrasings[:] = True, [phrasing]  # the env's format: keep it for the other actions
            tried += 1
            if info.get("action_valid") is False:
                report.fail(f"the {label} action was reported as action_valid=False "
                            f"(feedback: {str(info.get('feedback', ''))[:200]!r})")
            break
    if tried == len(actions):
        report.ok(f"each of the {len(actions)} declared actions was stepped once")


def _warn_about_cornered_images(report: CheckReport, first_images: list[list[Image.Image]], env_id: str) -> None:
    """Warn when an image's content fills only a corner of a constant canvas on every seed."""
    try:
        for index, content in cornered_everywhere(first_images):
            report.warn(describe(index, first_images[0][index].size, content, env_id))
    except Exception as exc:  # noqa: BLE001 - a heuristic must never fail a check
        report.warn(f"could not inspect the observation images: {type(exc).__name__}: {exc}")


def check_env(
    env: EnvFactory,
    config: dict[str, Any] | None = None,
    *,
    seeds: Sequence[int] = (0, 1, 2),
    valid_action: str | None = None,
    cross_process: bool = True,
) -> CheckReport:
    """Exercise an env: resets with several seeds, determinism within and across processes,
    placeholder/image agreement, a valid step (the env's oracle if ``valid_action`` is None; with
    neither, each action the env declares in ``action_names`` once, from a fresh reset, phrased by the
    env's ``action_response(name)`` or by :data:`ACTION_PHRASINGS`), an invalid step and garbage steps
    (none may raise; rewards finite), and a double close.

    ``env`` is a registered id or a factory (class); instances cannot be re-created in another
    process, so pass the class.
    """
    config = dict(config or {})
    subject = f"env {env if isinstance(env, str) else getattr(env, '__qualname__', env)!r}"
    report = CheckReport(subject)
    try:
        instance = _make(env, config)
    except Exception as exc:  # noqa: BLE001
        report.fail(f"could not be created: {type(exc).__name__}: {exc}")
        return report.raise_if_failed()
    if not isinstance(instance, Env):
        report.fail(f"factory returned {type(instance).__name__}, not a vista_rl.Env")
        return report.raise_if_failed()
    try:
        prompt = instance.system_prompt()
        if not isinstance(prompt, str):
            report.fail(f"system_prompt() returned {type(prompt).__name__}, not str")
    except Exception as exc:  # noqa: BLE001
        report.fail(f"system_prompt() raised {type(exc).__name__}: {exc}")

    local: list[str] = []
    first_images: list[list[Image.Image]] = []
    before = len(report.problems)
    for seed in seeds:
        try:
            first, info = instance.reset(seed=seed)
            if not _check_observation(report, first, f"reset(seed={seed})"):
                continue
            first_images.append(list(first.images))
            if not isinstance(info, dict):
                report.fail(f"reset(seed={seed}) info is {type(info).__name__}, not dict")
            local.append(observation_fingerprint(first))
            with _make(env, config) as other:
                second, _ = other.reset(seed=seed)
            if observation_fingerprint(second) != local[-1]:
                report.fail(f"reset(seed={seed}) is not deterministic: two resets gave different observations")
        except Exception as exc:  # noqa: BLE001
            report.fail(f"reset(seed={seed}) raised {type(exc).__name__}: {exc}")
    if len(local) == len(seeds) and len(report.problems) == before:
        report.ok(f"reset is deterministic within the process ({len(seeds)} seeds)")
        report.ok("every first observation has one <image> placeholder per image")
    _warn_about_cornered_images(report, first_images, env if isinstance(env, str) else "ENV_ID")

    path = _factory_path(env)
    if cross_process and path is not None and len(local) == len(seeds):
        try:
            remote = call_in_fresh_process("vista_rl_sdk.checks:_fingerprints_of", path, config, list(seeds))
            if remote != local:
                differing = [s for s, a, b in zip(seeds, local, remote, strict=True) if a != b]
                report.fail(f"seeds {differing} give different observations in another process "
                            "(is something seeded from hash(), time or global random state?)")
            else:
                report.ok("reset is deterministic across processes")
        except Exception as exc:  # noqa: BLE001
            report.fail(f"cross-process determinism check failed: {exc}")

    def fresh() -> Env | None:
        try:
            instance.reset(seed=seeds[0])
            return instance
        except Exception:  # noqa: BLE001 - already reported above
            return None

    if fresh() is not None:
        action = valid_action
        if action is None:
            try:
                action = instance.oracle_response()
            except Exception as exc:  # noqa: BLE001
                report.fail(f"oracle_response() raised {type(exc).__name__}: {exc}")
        if action is not None:
            before = len(report.problems)
            result = _check_step(report, instance, action, "valid")
            if result is not None and result.info.get("action_valid") is False:
                report.fail("the valid (oracle) action was reported as action_valid=False")
            if result is not None and result.info.get("error"):
                report.fail(f"the valid (oracle) action failed inside the env: {str(result.info['error'])[:300]}")
            if result is not None and len(report.problems) == before:
                report.ok(f"the {'oracle' if valid_action is None else 'given valid'} action steps without error")
        elif declared_actions(instance):
            _try_declared_actions(report, instance, declared_actions(instance), fresh)
        else:
            report.ok("no valid action known (no valid_action, oracle or action_names): valid step skipped")
    if fresh() is not None:
        result = _check_step(report, instance, INVALID_ACTION, "invalid")
        if result is not None and result.info.get("action_valid") is True:
            report.fail("an invalid action was reported as action_valid=True")
        elif result is not None:
            report.ok("an invalid action is feedback, not an exception")
    before = len(report.problems)
    stepped = 0
    for garbage in GARBAGE_ACTIONS:
        if fresh() is None:
            break
        stepped += _check_step(report, instance, garbage, f"garbage {garbage[:20]!r}") is not None
    if stepped == len(GARBAGE_ACTIONS) and len(report.problems) == before:
        report.ok(f"{stepped} garbage actions neither raise nor give a non-finite reward")
    try:
        instance.close()
        instance.close()
        report.ok("close() is safe to call twice")
    except Exception as exc:  # noqa: BLE001
        report.fail(f"close() raised {type(exc).__name__}: {exc} (it must be safe to call twice)")
    return report.raise_if_failed()


# --------------------------------------------------------------------------------------- tools
def check_tool(
    tool: Tool,
    valid_arguments: dict[str, Any],
    context: ToolContext | None = None,
) -> CheckReport:
    """Schema is a valid OpenAI function entry; valid arguments work; bad arguments give an error
    result (never an exception)."""
    report = CheckReport(f"tool {getattr(tool, 'name', tool)!r}")
    context = context or ToolContext(images=[Image.new("RGB", (64, 64), "white")])
    try:
        schema = tool.openai_schema()
        function = schema.get("function", {})
        if schema.get("type") != "function" or not function.get("name"):
            report.fail("openai_schema() must be {'type': 'function', 'function': {'name': ..., ...}}")
        if function.get("parameters", {}).get("type") != "object":
            report.fail("openai_schema() parameters must be a JSON schema of type object")
        json.dumps(schema)
    except Exception as exc:  # noqa: BLE001
        report.fail(f"openai_schema() failed: {type(exc).__name__}: {exc}")
    if not report.problems:
        report.ok("openai_schema() is a JSON-serialisable OpenAI function entry")
    wrong_types: dict[str, Any] = {key: {"nested": ["junk"]} for key in valid_arguments} or {"junk": 1}
    cases: list[tuple[str, Any, bool]] = [
        ("valid", valid_arguments, False),
        ("not-json", "{not json", True),
        ("non-object", "[1, 2]", True),
        ("wrong-types", wrong_types, True),
    ]
    for label, arguments, expect_error in cases:
        before = len(report.problems)
        try:
            result = tool(arguments, context)
        except Exception as exc:  # noqa: BLE001
            report.fail(f"{label} arguments raised {type(exc).__name__}: {exc}")
            continue
        if not isinstance(result, ToolResult):
            report.fail(f"{label} arguments returned {type(result).__name__}, not ToolResult")
            continue
        if expect_error and not result.error:
            report.fail(f"{label} arguments were accepted; expected an error result")
        if not expect_error and result.error:
            report.fail(f"valid arguments gave an error: {result.text}")
        if not isinstance(result.text, str) or not all(isinstance(i, Image.Image) for i in result.images):
            report.fail(f"{label} result must hold text (str) and PIL images")
        if expect_error and result.error and not result.text.strip():
            report.fail(f"{label} arguments gave an error result without a message")
        if len(report.problems) == before:
            report.ok(f"{label} arguments give {'an error result with a message' if expect_error else 'a result'}")
    return report.raise_if_failed()


# -------------------------------------------------------------------------------------- judges
def check_judge(
    judge: Judge,
    reference: Any,
    wrong: Sequence[Any],
    correct: Any | None = None,
    context: dict[str, Any] | None = None,
) -> CheckReport:
    """The reference (or ``correct``) scores ``max_score``; each wrong prediction scores less;
    garbage predictions neither raise nor leave ``[0, max_score]``."""
    report = CheckReport(f"judge {getattr(judge, 'name', judge)!r}")
    context = context or {}
    top = getattr(judge, "max_score", 1.0)
    try:
        best = judge.score(reference if correct is None else correct, reference, **context).score
        if not math.isclose(best, top, rel_tol=1e-9, abs_tol=1e-9):
            report.fail(f"the correct prediction scored {best}, expected max_score {top}")
        else:
            report.ok(f"the {'reference' if correct is None else 'correct prediction'} scores max_score {top}")
    except Exception as exc:  # noqa: BLE001
        report.fail(f"scoring the correct prediction raised {type(exc).__name__}: {exc}")
    before = len(report.problems)
    for prediction in wrong:
        try:
            score = judge.score(prediction, reference, **context).score
            if not score < top:
                report.fail(f"wrong prediction {prediction!r} scored {score}, not less than {top}")
        except Exception as exc:  # noqa: BLE001
            report.fail(f"scoring {prediction!r} raised {type(exc).__name__}: {exc}")
    if wrong and len(report.problems) == before:
        report.ok(f"each of the {len(wrong)} wrong predictions scores less than {top}")
    before = len(report.problems)
    for garbage in GARBAGE_PREDICTIONS:
        try:
            score = judge.score(garbage, reference, **context).score
            if not (math.isfinite(score) and -1e-9 <= score <= top + 1e-9):
                report.fail(f"garbage prediction {str(garbage)[:20]!r} scored {score}, outside [0, {top}]")
        except Exception as exc:  # noqa: BLE001
            report.fail(f"garbage prediction {str(garbage)[:20]!r} raised {type(exc).__name__}: {exc}")
    if len(report.problems) == before:
        report.ok(f"{len(GARBAGE_PREDICTIONS)} garbage predictions (None, empty, 1 MB, a dict, a bare tag, NaN) "
                  f"neither raise nor leave [0, {top}]")
    return report.raise_if_failed()


# ---------------------------------------------------------------------------------- estimators
def random_advantage_batch(batch: int = 6, tokens: int = 24, turns: int = 3, groups: int = 2, seed: int = 0) -> Any:
    """A random but well-formed padded batch: responses with observation gaps, turn ends, groups."""
    import torch

    from vista_rl import AdvantageBatch

    gen = torch.Generator().manual_seed(seed)
    response_mask = torch.zeros(batch, tokens)
    turn_ends = torch.zeros(batch, tokens)
    rewards = torch.zeros(batch, tokens)
    span = tokens // turns
    for row in range(batch):
        length = int(torch.randint(turns * 2, tokens + 1, (1,), generator=gen))
        for turn in range(turns):
            start = turn * span
            end = min(start + span, length)
            if end - start < 2:
                break
            assistant_start = start + (end - start) // 2  # first half is the observation
            response_mask[row, assistant_start:end] = 1
            turn_ends[row, end - 1] = 1
            rewards[row, end - 1] = float(torch.randn(1, generator=gen))
    return AdvantageBatch(
        token_rewards=rewards,
        response_mask=response_mask,
        advantage_mask=response_mask.clone(),
        group_ids=torch.arange(batch) % groups,
        values=torch.randn(batch, tokens, generator=gen) * response_mask,
        turn_ends=turn_ends,
    )


def check_estimator(estimator: Callable[..., Any], **params: Any) -> CheckReport:
    """Shapes match the batch, outputs are finite, and advantages are zero outside the advantage
    mask (masks respected)."""
    import torch

    report = CheckReport(f"estimator {getattr(estimator, '__name__', estimator)!r}")
    batch = random_advantage_batch()
    try:
        out = estimator(batch, **params)
    except Exception as exc:  # noqa: BLE001
        report.fail(f"raised {type(exc).__name__}: {exc}")
        return report.raise_if_failed()
    for name in ("advantages", "returns"):
        tensor = getattr(out, name, None)
        if not isinstance(tensor, torch.Tensor):
            report.fail(f"output has no tensor {name!r}")
            continue
        if tuple(tensor.shape) != tuple(batch.response_mask.shape):
            report.fail(f"{name} has shape {tuple(tensor.shape)}, expected {tuple(batch.response_mask.shape)}")
        elif not torch.isfinite(tensor).all():
            report.fail(f"{name} has non-finite values")
    advantages = getattr(out, "advantages", None)
    if isinstance(advantages, torch.Tensor) and advantages.shape == batch.response_mask.shape:
        mask = batch.advantage_mask if batch.advantage_mask is not None else batch.response_mask
        leaked = (advantages * (1 - mask)).abs().max().item()
        if leaked > 1e-6:
            report.fail(f"advantages are non-zero outside the advantage mask (max {leaked:.3g})")
    return report.raise_if_failed()
