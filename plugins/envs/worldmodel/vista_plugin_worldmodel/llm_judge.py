"""LLM-as-judge grounding and world-modeling judges, through any registered model backend.

``mode: yes_no`` asks the judge model whether the agent's text agrees with the true state (VAGEN's
navigation / ManiSkill / SVG judges): YES scores 1, NO scores 0.  ``mode: parse`` asks it to turn
the text into VAGEN's relation list and scores that with the rule arithmetic (VAGEN's Sokoban and
FrozenLake judge), so ``partial_credit`` and ``type_weights`` apply as in the rule judges.

The judge model is any backend id (``openai`` for an OpenAI-compatible server such as ``vista
serve`` or vLLM's, ``vllm``, ``transformers``, ``scripted``) with its ``backend_config``, or a backend
object.  Requests go through a shared :class:`~vista_plugin_worldmodel.service.JudgeService`
(batching, cache, timeouts, retries).  A failed judgement scores 0 with ``details["judge_error"]``
set; it never raises.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any, ClassVar, Literal

from vista_plugin_worldmodel.prompts import STATE_PHRASES, load_template
from vista_plugin_worldmodel.relations import describe_relations, normalize_relations
from vista_plugin_worldmodel.scoring import match_score
from vista_plugin_worldmodel.service import Reply, shared_service
from vista_rl import Judge, JudgeResult, ModelBackend

_VERDICT = re.compile(r"\b(yes|no)\b", re.IGNORECASE)

#: What :meth:`LLMStateJudge.submit` returns: call it to get the result (blocks until judged).
PendingResult = Callable[[], JudgeResult]


def read_verdict(text: str) -> bool | None:
    """The first YES/NO word of a reply (``None`` when there is none)."""
    match = _VERDICT.search(text or "")
    return None if match is None else match.group(1).lower() == "yes"


def read_relation_json(text: str) -> list[dict[str, str]] | None:
    """The first JSON list in a reply as relations (``None`` when there is none)."""
    start, end = (text or "").find("["), (text or "").rfind("]")
    if start < 0 or end < start:
        return None
    return normalize_relations(text[start:end + 1])


class LLMStateJudge(Judge):
    """See the module docstring.  Service settings (``timeout_s``, ``retries``, ``batch_size``, ...)
    are those of :class:`~vista_plugin_worldmodel.service.JudgeService`."""

    name: ClassVar[str] = "worldmodel/state-llm"
    tag: ClassVar[str] = "observation"
    truth_key: ClassVar[str] = "observation_state"

    def __init__(self, backend: str | ModelBackend = "openai", backend_config: Mapping[str, Any] | None = None,
                 mode: Literal["yes_no", "parse"] = "yes_no", template: str | None = None,
                 template_file: str | None = None, system_prompt: str | None = None, max_text_chars: int = 2000,
                 partial_credit: float = 0.0, type_weights: Mapping[str, float] | None = None,
                 max_tokens: int | None = None, temperature: float = 0.1, timeout_s: float = 15.0,
                 retries: int = 2, backoff_s: float = 0.5, batch_size: int = 64, batch_wait_s: float = 0.05,
                 cache_size: int = 10_000) -> None:
        if mode not in ("yes_no", "parse"):
            raise ValueError(f"mode must be 'yes_no' or 'parse', got {mode!r}")
        self.mode = mode
        self.template = load_template(mode, template, template_file)
        self.max_text_chars = max_text_chars
        self.partial_credit = partial_credit
        self.type_weights = dict(type_weights) if type_weights is not None else None
        self.service = shared_service(
            backend, dict(backend_config or {}), system_prompt=system_prompt,
            max_tokens=max_tokens or (8 if mode == "yes_no" else 400), temperature=temperature,
            timeout_s=timeout_s, retries=retries, backoff_s=backoff_s, batch_size=batch_size,
            batch_wait_s=batch_wait_s, cache_size=cache_size)

    # ------------------------------------------------------------------ prompts
    def prompt(self, text: str, truth: list[dict[str, str]]) -> str:
        objects = sorted({item["object_id"] for item in truth})
        return self.template.safe_substitute(
            tag=self.tag, state_phrase=STATE_PHRASES.get(self.tag, "the state"),
            text=text[:self.max_text_chars].replace('"""', '"'),  # the text cannot close its own quotes
            truth=describe_relations(truth), truth_json=json.dumps(truth), objects=", ".join(objects) or "none")

    def _usable(self, reply: str) -> bool:
        return (read_verdict(reply) is not None) if self.mode == "yes_no" else read_relation_json(reply) is not None

    # ------------------------------------------------------------------ scoring
    def submit(self, prediction: Any, reference: Any, **context: Any) -> PendingResult:
        """Queue the judgement now and return a function that waits for it, so that a caller with
        several descriptions (grounding and world modeling of one turn) gets them into one batch."""
        truth = normalize_relations(reference)
        if truth is None:
            return _ready(JudgeResult(0.0, {"scorer": "llm", "judge_error": "reference is not a relation list"}))
        if isinstance(prediction, (list, tuple)) and normalize_relations(list(prediction)) is not None:
            prediction = describe_relations(normalize_relations(list(prediction)) or [])
        if not isinstance(prediction, str) or not prediction.strip():
            return _ready(JudgeResult(0.0, {"scorer": "llm", "skipped": "no text to judge"}))
        prompt = self.prompt(prediction, truth)
        (future,) = self.service.ask([prompt], self._usable)
        return lambda: self._result(future, truth)

    def score(self, prediction: Any, reference: Any, **context: Any) -> JudgeResult:
        return self.submit(prediction, reference, **context)()

    def _result(self, future: Future[Reply], truth: list[dict[str, str]]) -> JudgeResult:
        try:
            reply = future.result(timeout=self.service.wait_s())
        except FutureTimeout:
            reply = Reply(error="no judge reply in time")
        details: dict[str, Any] = {"scorer": "llm", "mode": self.mode, "cached": reply.cached,
                                   "attempts": reply.attempts}
        if reply.error is not None or reply.text is None:
            details["judge_error"] = reply.error or "no reply"
            return JudgeResult(0.0, details)
        details["reply"] = reply.text[:500]
        if self.mode == "yes_no":
            verdict = bool(read_verdict(reply.text))
            details["verdict"] = "YES" if verdict else "NO"
            return JudgeResult(1.0 if verdict else 0.0, details)
        parsed = read_relation_json(reply.text) or []
        match = match_score(parsed, truth, self.partial_credit, self.type_weights)
        details.update(parsed=parsed, **match.details())
        return JudgeResult(match.score, details)


def _ready(result: JudgeResult) -> PendingResult:
    return lambda: result


class GroundingLLMJudge(LLMStateJudge):
    """``<observation>`` vs the state before the turn, judged by a model."""

    name = "worldmodel/grounding-llm"
    tag = "observation"
    truth_key = "observation_state"


class WorldModelingLLMJudge(LLMStateJudge):
    """``<prediction>`` vs the state after the turn, judged by a model."""

    name = "worldmodel/worldmodeling-llm"
    tag = "prediction"
    truth_key = "prediction_state"
