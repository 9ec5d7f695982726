"""Small envs, tools and a token-level backend for the rollout, store and eval tests.

``CharTokenBackend`` is a test double standing in for a real tokenizer-backed backend (the
transformers/vLLM backends have their own tests): it renders chats with a Qwen-style template at the
character level, so token views can be decoded back to text and checked exactly.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from PIL import Image
from pydantic import BaseModel

import vista_rl
from vista_rl import Env, Observation, StepResult
from vista_rl.model import Generation, ModelBackend, SamplingParams
from vista_rl.observation import Chat
from vista_rl.parsing import parse_response
from vista_rl.tool import Tool, ToolContext, ToolResult


def swatch(value: int, size: int = 16) -> Image.Image:
    return Image.new("RGB", (size, size), ((value * 40) % 256, (value * 90) % 256, (value * 15) % 256))


class CounterEnv(Env):
    """Needs ``target`` turns of ``<answer>inc</answer>``; each observation shows an image."""

    def __init__(self, target: int = 3, raise_on_step: int | None = None, sleep_on_step: float = 0.0,
                 truncate_at: int | None = None) -> None:
        self.target, self.raise_on_step, self.sleep_on_step = target, raise_on_step, sleep_on_step
        self.count = 0
        self.steps = 0
        self.closed = 0

    def system_prompt(self) -> str:
        return f"Reply <answer>inc</answer> until the counter reaches {self.target}."

    def reset(self, seed: int | None = None) -> tuple[Observation, dict[str, Any]]:
        self.count = self.steps = 0
        return Observation("<image>\nCounter at 0.", [swatch(seed or 0)]), {"seed": seed}

    def step(self, action: str) -> StepResult:
        self.steps += 1
        if self.raise_on_step is not None and self.steps == self.raise_on_step:
            raise RuntimeError(f"counter env broke on step {self.steps}")
        if self.sleep_on_step:
            RELEASE.wait(self.sleep_on_step)
        parsed = parse_response(action)
        valid = parsed.answer == "inc"
        self.count += int(valid)
        done = self.count >= self.target
        info = {"success": done, "format_ok": parsed.format_ok, "action_valid": valid}
        text = f"<image>\nCounter at {self.count}." if valid else "Invalid: answer inc. <image>"
        return StepResult(Observation(text, [swatch(self.count + 10)]), 1.0 if done else 0.1 * valid,
                          done, False, info)

    def oracle_response(self) -> str | None:
        return "<answer>inc</answer>"

    def close(self) -> None:
        self.closed += 1


class GuessEnv(Env):
    """One question, answer ``seed % 3``; a wrong answer is final (reflection retries it)."""

    def reset(self, seed: int | None = None) -> tuple[Observation, dict[str, Any]]:
        self.answer = (seed or 0) % 3
        self.done = False
        return Observation("Guess a number from 0 to 2."), {}

    def step(self, action: str) -> StepResult:
        guess = parse_response(action).answer
        success = guess == str(self.answer)
        return StepResult(Observation("Right." if success else "Wrong."), float(success), True, False,
                          {"success": success, "format_ok": guess is not None,
                           "reflection_feedback": f"{guess} is not it."})

    def oracle_response(self) -> str | None:
        return f"<answer>{self.answer}</answer>"


class ZoomArgs(BaseModel):
    factor: int = 2


class ZoomTool(Tool):
    """Returns the first image of the episode, scaled up, so tests see that tools get the context."""

    name = "zoom"
    description = "Zoom into the first image."
    Arguments = ZoomArgs

    def run(self, arguments: Any, context: ToolContext) -> ToolResult:
        first = context.images[0]
        return ToolResult(text=f"zoomed x{arguments.factor} ({len(context.images)} images seen)",
                          images=[first.resize((first.width * arguments.factor, first.height * arguments.factor))])


RELEASE = threading.Event()  # set by tests when they are done, so hung daemon threads end


class HangArgs(BaseModel):
    seconds: float = 30.0


class HangTool(Tool):
    name = "hang"
    description = "Sleeps."
    Arguments = HangArgs

    def run(self, arguments: Any, context: ToolContext) -> ToolResult:
        RELEASE.wait(arguments.seconds)
        return ToolResult(text="woke up")


class ToolCounterEnv(CounterEnv):
    tools = ("test/zoom", "test/hang")


class RolloutTestPlugin:
    """Registered per test with the ``vista_plugin`` fixture."""

    @vista_rl.hookimpl
    def register_envs(self, register: Any) -> None:
        register("test/counter-v0", CounterEnv)
        register("test/guess-v0", GuessEnv)
        register("test/tool-counter-v0", ToolCounterEnv)

    @vista_rl.hookimpl
    def register_tools(self, register: Any) -> None:
        register("test/zoom", ZoomTool)
        register("test/hang", HangTool)


# ----------------------------------------------------------------- token-level test backend
SPECIALS = ["<|im_start|>", "<|im_end|>", "<|image_pad|>", "<|endoftext|>"]
IMAGE_TOKENS = 3  # every image becomes this many <|image_pad|> tokens


class CharTokenizer:
    """Characters are tokens (their code point + 10); specials are 0..3."""

    def encode(self, text: str) -> list[int]:
        return [ord(char) + 10 for char in text]

    def decode(self, ids: Sequence[int]) -> str:
        return "".join(SPECIALS[i] if i < len(SPECIALS) else chr(i - 10) for i in ids)

    def render(self, chat: Chat) -> list[int]:
        ids: list[int] = []
        for message in chat:
            ids += [0] + self.encode(f"{message.role}\n")
            pieces = message.content.split("<image>")
            for index, piece in enumerate(pieces):
                ids += self.encode(piece)
                if index < len(pieces) - 1:
                    ids += [2] * IMAGE_TOKENS
            ids += [1] + self.encode("\n")
        return ids + [0] + self.encode("assistant\n")


class CharTokenBackend(ModelBackend):
    """Answers from a list of responses (or the env oracle) with prompt/generated ids and logprobs."""

    def __init__(self, responses: Sequence[str] | None = None, oracle: bool = False) -> None:
        self.needs_oracle = oracle
        self.responses = list(responses or [])
        self.tokenizer = CharTokenizer()
        self.calls: list[int] = []
        self.cursor = 0
        self.chats: list[Chat] = []

    def generate(self, chats: Sequence[Chat], params: SamplingParams,
                 oracle_responses: Sequence[str | None] | None = None) -> list[list[Generation]]:
        self.calls.append(len(chats))
        self.chats = list(chats)
        out = []
        for index, chat in enumerate(chats):
            if self.needs_oracle:
                text = (oracle_responses or [None] * len(chats))[index] or ""
            else:
                text = self.responses[self.cursor % len(self.responses)]
                self.cursor += 1
            generated = self.tokenizer.encode(text) + [1]
            out.append([Generation(text=text, token_ids=generated, logprobs=[-0.5] * len(generated),
                                   prompt_token_ids=self.tokenizer.render(chat))])
        return out
