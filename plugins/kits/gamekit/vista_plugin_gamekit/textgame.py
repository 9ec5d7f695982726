"""The turn machinery shared by discrete-action games (Sokoban, FrozenLake, wrapped gymnasium envs).

A subclass supplies the game (reset from a seed, apply one action index, render, ground-truth state,
a shortest plan); this base turns the model's raw text into a turn: parse the prompt format, split
the answer into at most ``max_actions_per_step`` actions, run them in order, stop at the first
invalid one (with feedback naming the valid actions), at the end of the episode, or at
``max_steps``; add VAGEN's format reward; and report ``info`` with metrics and the state before and
after.  Nothing raises out of :meth:`step`.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from PIL import Image
from pydantic import BaseModel, ConfigDict, Field, model_validator

from vista_plugin_gamekit.formats import FormatSpec, PromptFormat, format_spec
from vista_rl import (
    Env,
    Observation,
    StepResult,
    episode_seed,
    escape_placeholders,
    parse_response,
    split_actions,
)

RenderMode = Literal["vision", "text", "both"]
_PREVIEW = 40


class GameConfig(BaseModel):
    """Settings every text-action game shares.  Seeds: datasets draw training episodes from
    ``train_seeds`` and evaluation episodes from ``test_seeds`` (half-open ranges that must not
    overlap), so a test level is never a training level."""

    model_config = ConfigDict(extra="forbid")

    render_mode: RenderMode = "vision"
    prompt_format: PromptFormat = "grounding_worldmodeling"
    prompt_style: Literal["full", "brief"] = Field(
        "full", description="full: VAGEN's rules, symbols and per-turn feedback; brief: a one-line system "
        "prompt and bare observations (a model trained from scratch reads none of the prose, and every "
        "token of it costs compute at each turn)")
    action_sep: str = Field(",", min_length=1, description="separator between actions in <answer>")
    max_actions_per_step: int = Field(3, ge=1, le=100)
    max_steps: int = Field(100, ge=1, description="env steps (single actions) before truncation")
    format_reward: float = Field(0.5, description="added when the format is right and all actions valid")
    format_reward_turns: int = Field(5, ge=0, description="turns of an episode that can earn format_reward "
                                     "(VAGEN's rollouts last at most 5 turns; over a 100-step limit an "
                                     "uncapped per-turn bonus pays wall-bumping more than solving)")
    strict_format: bool = Field(True, description="strict tag parsing (VAGEN's full-string match)")
    train_seeds: tuple[int, int] = (0, 1_000_000)
    test_seeds: tuple[int, int] = (1_000_000, 1_010_000)

    @model_validator(mode="after")
    def _check_seed_split(self) -> GameConfig:
        for name, (start, stop) in (("train_seeds", self.train_seeds), ("test_seeds", self.test_seeds)):
            if not 0 <= start < stop:
                raise ValueError(f"{name} must be a range [start, stop) with 0 <= start < stop")
        (a, b), (c, d) = self.train_seeds, self.test_seeds
        if a < d and c < b:
            raise ValueError(f"train_seeds {self.train_seeds} and test_seeds {self.test_seeds} overlap")
        return self

    def seeds(self, split: Literal["train", "test"]) -> range:
        start, stop = self.train_seeds if split == "train" else self.test_seeds
        return range(start, stop)


@dataclass(frozen=True)
class ActionResult:
    """What one single action did."""

    reward: float
    effective: bool
    terminated: bool
    success: bool
    truncated: bool = False  # the game itself cut the episode short (e.g. a gymnasium TimeLimit)


class TextGameEnv(Env):
    """Base of the grid games.  See the module docstring for what subclasses provide."""

    #: Canonical action names, index = the game's action id.
    action_names: tuple[str, ...] = ()
    #: Goal phrase for oracle reasoning, e.g. "push every box onto a target".
    goal: str = "reach the goal"

    def __init__(self, config: GameConfig) -> None:
        self.config = config
        self._format: FormatSpec = format_spec(config.prompt_format)
        self._response_format = self._format.response_format(config.strict_format)
        self._lookup = {name.lower(): index for index, name in enumerate(self.action_names)}
        self._done = True
        self._started = False
        self._steps = 0
        self._success = False

    # ------------------------------------------------------------------ game hooks
    def idle_reward(self) -> float:
        """The reward of a reply that moved nothing (a broken format, no valid action).  0 here; a
        game whose every step costs overrides it, so that replying nonsense is never cheaper than
        playing (else a policy that idles until the turn limit beats one that walks to the goal)."""
        return 0.0

    @abc.abstractmethod
    def _new_episode(self, seed: int) -> None:
        """Build the episode for ``seed`` (deterministically)."""

    @abc.abstractmethod
    def _apply(self, action: int) -> ActionResult:
        """Run one action."""

    @abc.abstractmethod
    def _image(self) -> np.ndarray:
        """The current frame as an HxWx3 uint8 array."""

    @abc.abstractmethod
    def _text_grid(self) -> str:
        """The current state as symbols."""

    @abc.abstractmethod
    def _state(self) -> dict[str, Any]:
        """Ground-truth state (JSON-ready)."""

    @abc.abstractmethod
    def _relations(self) -> list[dict[str, str]]:
        """The state in VAGEN's relation form (objects relative to the player)."""

    @abc.abstractmethod
    def _describe(self) -> str:
        """The state in one or two true sentences (the oracle's <observation>)."""

    @abc.abstractmethod
    def _rules(self) -> str:
        """Game rules and symbols for the system prompt."""

    def _plan(self) -> list[int] | None:
        """A shortest action sequence from the current state to success, or ``None``."""
        return None

    def _snapshot(self) -> Any:
        """Everything ``_apply`` changes, so the oracle can look ahead and undo."""
        raise NotImplementedError

    def _restore(self, snapshot: Any) -> None:
        raise NotImplementedError

    def _oracle_chunk(self) -> int:
        """How many planned actions the oracle sends per turn."""
        return self.config.max_actions_per_step

    # ------------------------------------------------------------------ rendering
    def render_image(self) -> Image.Image:
        return Image.fromarray(self._image())

    def _observe(self, lead: str) -> Observation:
        mode = self.config.render_mode
        images: list[Image.Image] = []
        body = ""
        if mode in ("vision", "both"):
            images.append(self.render_image())
            body = "<image>"
        if mode in ("text", "both"):
            body = (body + "\n" if body else "") + self._text_grid()
        if self.config.prompt_style == "brief":
            return Observation(body, images)
        reminder = (f"Decide your next action(s): up to {self.config.max_actions_per_step}, separated by "
                    f"{self.config.action_sep!r}, as {self._format.skeleton()}.")
        return Observation(f"{escape_placeholders(lead)}\n{body}\n{reminder}", images)  # lead may echo the model

    def _truth(self) -> tuple[dict[str, Any], list[dict[str, str]]]:
        """Fresh objects every call: callers may keep and mutate what an info dict holds."""
        return self._state(), self._relations()

    # ------------------------------------------------------------------ public API
    def system_prompt(self) -> str:
        names = ", ".join(self.action_names)
        if self.config.prompt_style == "brief":
            return f"{type(self).__name__.removesuffix('Env')}: {self.goal}. Actions: {names}. Reply {self._format.skeleton()}."
        example = self.config.action_sep.join(self.action_names[: min(2, self.config.max_actions_per_step)])
        return (f"{self._rules()}\nActions you can take: {names}.\n"
                + self._format.instructions(self.config.action_sep, self.config.max_actions_per_step, example))

    def reset(self, seed: int | None = None) -> tuple[Observation, dict[str, Any]]:
        seed = episode_seed(seed)
        self._new_episode(seed)
        self._done, self._started, self._steps, self._success = False, True, 0, False
        self._format_paid = 0
        state, rels = self._truth()
        info = {"seed": seed, "state": state, "relations": rels, "success": False}
        return self._observe("[Initial Observation]:"), info

    def step(self, action: str) -> StepResult:
        try:
            return self._step(action)
        except Exception as exc:  # noqa: BLE001 - an env must turn its own failures into results
            self._done = True
            message = f"The environment failed on this action ({type(exc).__name__}: {exc}); the episode ends."
            return StepResult(Observation(escape_placeholders(message)), 0.0, False, True,
                              {"success": False, "format_ok": False, "action_valid": False,
                               "action_effective": False, "error": f"{type(exc).__name__}: {exc}"})

    def _finished_result(self) -> StepResult:
        text = "The episode is over; call reset()." if self._started else "Call reset() before step()."
        return StepResult(Observation(text), 0.0, True, False,
                          {"success": self._success, "format_ok": False, "action_valid": False,
                           "action_effective": False})

    def _step(self, action: str) -> StepResult:
        if self._done:
            return self._finished_result()
        config = self.config
        parsed = parse_response(action, self._response_format)
        state_before, relations_before = self._truth()
        requested = split_actions(parsed.answer, config.action_sep) if parsed.format_ok else []
        chosen = requested[: config.max_actions_per_step]
        executed: list[str] = []
        invalid: str | None = None
        reward, effective, terminated, truncated = 0.0, False, False, False
        for name in chosen:
            index = self._lookup.get(name.lower())
            if index is None:
                invalid = name
                break
            outcome = self._apply(index)
            self._steps += 1
            executed.append(self.action_names[index])
            reward += outcome.reward
            effective = effective or outcome.effective
            if outcome.success:
                self._success = True
            if outcome.terminated:
                terminated = True
                break
            if outcome.truncated or self._steps >= config.max_steps:
                truncated = True
                break
        action_valid = bool(chosen) and invalid is None
        if not executed:
            reward += self.idle_reward()
        if parsed.format_ok and action_valid and self._format_paid < config.format_reward_turns:
            reward += config.format_reward
            self._format_paid += 1
        self._done = terminated or truncated
        state_after, relations_after = self._truth()
        feedback = self._feedback(parsed.format_ok, parsed.feedback, requested, chosen, invalid, executed)
        if terminated:
            feedback += " Success!" if self._success else " The episode has ended without success."
        elif truncated:
            feedback += f" The step limit ({config.max_steps}) is reached."
        lead = (f"After your answer, the extracted valid action is {executed}.{feedback}\n"
                "After that, the observation is:")
        info: dict[str, Any] = {
            "success": self._success,
            "format_ok": parsed.format_ok,
            "action_valid": action_valid,
            "action_effective": effective,
            "actions": executed,
            "actions_requested": chosen,
            "invalid_action": invalid,
            "feedback": feedback.strip(),
            "steps": self._steps,
            "state_before": state_before,
            "state": state_after,
            "relations_before": relations_before,
            "relations": relations_after,
            "observation_state": relations_before,  # VAGEN's names: truth for <observation>
            "prediction_state": relations_after,  # ... and for <prediction>
            "parsed": {tag: parsed.get(tag) for tag in ("think", "observation", "reasoning", "prediction",
                                                        "answer")},
        }
        return StepResult(self._observe(lead), reward, terminated, truncated, info)

    def _feedback(self, format_ok: bool, format_feedback: str, requested: Sequence[str],
                  chosen: Sequence[str], invalid: str | None, executed: Sequence[str]) -> str:
        names = ", ".join(self.action_names)
        if not format_ok:
            return f" {format_feedback} Expected {self._format.skeleton()}. No action was taken."
        if not chosen:
            return f" Your <answer> holds no action. Valid actions are {names}."
        parts = []
        if len(requested) > len(chosen):
            parts.append(f"Only the first {len(chosen)} action(s) are used.")
        if invalid is not None:
            shown = invalid if len(invalid) <= _PREVIEW else invalid[:_PREVIEW] + "..."
            parts.append(f"{shown!r} is not a valid action; valid actions are {names} "
                         f"(separated by {self.config.action_sep!r}). It and the actions after it were not run.")
        elif executed and len(executed) < len(chosen) and not self._done:
            parts.append("The remaining actions were not run.")
        return (" " + " ".join(parts)) if parts else ""

    def turn_limit(self) -> int:
        """``max_steps``: each turn that acts takes at least one step, so the game ends within this
        many such turns (the rollout's default ``rollout.max_turns``; see :meth:`vista_rl.Env.turn_limit`)."""
        return self.config.max_steps

    def action_response(self, name: str) -> str:
        """A well-formed reply that takes the one action ``name`` in this env's prompt format: what
        ``scripted:random`` and ``vista_rl_sdk.check_env`` send for a declared action.  Its think
        parts say nothing about the state (a policy that uses them is not reading the image)."""
        return self._format.compose(name, think=f"I try {name}.", observation="I look at the grid.",
                                    reasoning=f"I try {name}.", prediction=f"The grid after {name}.")

    # ------------------------------------------------------------------ oracle
    def oracle_actions(self) -> list[str] | None:
        """The actions the oracle sends this turn (a prefix of a shortest plan)."""
        if self._done or not self._started:
            return None
        plan = self._plan()
        if not plan:
            return None
        return [self.action_names[index] for index in plan[: self._oracle_chunk()]]

    def oracle_response(self) -> str | None:
        """A correct response in this env's prompt format; its think text comes from the true state
        and its prediction from actually running the actions on a snapshot."""
        if self._done or not self._started:
            return None
        plan = self._plan()
        if not plan:
            return None
        chunk = plan[: self._oracle_chunk()]
        names = [self.action_names[index] for index in chunk]
        answer = self.config.action_sep.join(names)
        observation = self._describe()
        reasoning = (f"The shortest way to {self.goal} from here takes {len(plan)} more move(s); "
                     f"I do {', '.join(names)} now.")
        prediction = ""
        if self._format.name in ("worldmodeling", "grounding_worldmodeling"):
            snapshot = self._snapshot()
            try:
                for index in chunk:
                    if self._apply(index).terminated:
                        break
                prediction = self._describe()
            finally:
                self._restore(snapshot)
        return self._format.compose(answer, think=f"{observation} {reasoning}", observation=observation,
                                    reasoning=reasoning, prediction=prediction)

    def close(self) -> None:
        self._done = True
