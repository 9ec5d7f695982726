"""The request bodies ``vista serve`` accepts: OpenAI's chat-completions and legacy completions fields.

Only what the server honours is declared; unknown fields are ignored, as OpenAI-compatible servers
do.  Every number is range-checked here (finite, within OpenAI's ranges), so a hostile value is a
400 naming the field before anything reaches the model; the server adds the limits that depend on
its configuration (``max_tokens`` cap, ``n``, stop strings, prompts per request).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from vista_rl import SamplingParams

SEED_MIN, SEED_MAX = -(2**63), 2**63 - 1
MAX_TEMPERATURE = 10.0
#: the most alternatives per token (OpenAI's chat limit; vLLM's default cap too)
MAX_TOP_LOGPROBS = 20


class StreamOptions(BaseModel):
    """``stream_options``: ``include_usage`` adds a last chunk holding the request's usage."""

    model_config = ConfigDict(extra="allow")

    include_usage: bool = False


class SamplingRequest(BaseModel):
    """The fields both endpoints share."""

    model_config = ConfigDict(extra="allow")

    model: str | None = None
    temperature: float = Field(1.0, ge=0.0, le=MAX_TEMPERATURE, allow_inf_nan=False)
    top_p: float = Field(1.0, gt=0.0, le=1.0, allow_inf_nan=False)
    max_tokens: int | None = Field(None, ge=1)
    n: int = Field(1, ge=1)
    stop: str | list[str] | None = None
    seed: int | None = Field(None, ge=SEED_MIN, le=SEED_MAX)
    presence_penalty: float = Field(0.0, ge=-2.0, le=2.0, allow_inf_nan=False)  # OpenAI's ranges; not applied
    frequency_penalty: float = Field(0.0, ge=-2.0, le=2.0, allow_inf_nan=False)
    stream: bool = False
    stream_options: StreamOptions | None = None
    return_token_ids: bool = False

    @property
    def asked_max_tokens(self) -> int | None:
        return self.max_tokens

    @property
    def include_usage(self) -> bool:
        return bool(self.stream_options and self.stream_options.include_usage)

    @property
    def top_logprobs_wanted(self) -> int:
        """How many alternatives per token the response lists (0: none)."""
        return 0

    def sampling_params(self, default_max_tokens: int) -> SamplingParams:
        stop = [self.stop] if isinstance(self.stop, str) else list(self.stop or [])
        return SamplingParams(temperature=self.temperature, top_p=self.top_p, n=self.n, stop=stop, seed=self.seed,
                              max_tokens=self.asked_max_tokens or default_max_tokens)


class ChatCompletionRequest(SamplingRequest):
    """``POST /v1/chat/completions``.  Extra as in vLLM: ``return_token_ids`` (adds
    ``prompt_token_ids`` to the response and ``token_ids`` to each choice)."""

    messages: list[dict[str, Any]]
    max_completion_tokens: int | None = Field(None, ge=1)
    logprobs: bool = False
    top_logprobs: int | None = Field(None, ge=0, le=MAX_TOP_LOGPROBS)

    @property
    def asked_max_tokens(self) -> int | None:
        return self.max_completion_tokens or self.max_tokens

    @property
    def top_logprobs_wanted(self) -> int:
        return (self.top_logprobs or 0) if self.logprobs else 0

    def problem(self) -> str | None:
        if self.top_logprobs and not self.logprobs:
            return "top_logprobs needs logprobs: true (as in OpenAI's API)"
        return None


class CompletionRequest(SamplingRequest):
    """``POST /v1/completions`` (the legacy text API): text prompts sent without a chat template."""

    prompt: str | list[str]
    logprobs: int | None = Field(None, ge=0, le=MAX_TOP_LOGPROBS)
    echo: bool = False
    best_of: int | None = Field(None, ge=1)
    suffix: str | None = None

    @field_validator("prompt", mode="before")
    @classmethod
    def _text_prompts_only(cls, value: Any) -> Any:
        if isinstance(value, list) and any(not isinstance(item, str) for item in value):
            raise ValueError("token-id prompts are not supported by vista serve; send the prompt as text")
        return value

    @property
    def prompts(self) -> list[str]:
        return [self.prompt] if isinstance(self.prompt, str) else list(self.prompt)

    @property
    def top_logprobs_wanted(self) -> int:
        return self.logprobs or 0

    def problem(self) -> str | None:
        if self.echo:
            return "echo=true is not supported by vista serve (the completion is returned without the prompt)"
        if self.suffix:
            return "suffix is not supported by vista serve"
        if self.best_of not in (None, self.n):
            return "best_of is not supported by vista serve (leave it out or equal to n)"
        if not self.prompts:
            return "prompt must not be an empty list"
        if any(not prompt for prompt in self.prompts):
            return "a prompt must not be empty"
        return None
