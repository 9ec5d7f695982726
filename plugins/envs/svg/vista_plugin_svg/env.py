"""SvgReconstructEnv: see a target image, write SVG code, get your render back, refine.

VAGEN's SVG task, multi-turn: each turn the model answers with an ``<svg>`` element inside
``<answer>``; the env checks and renders it in a capped child process (:mod:`.render`), scores the
render against the target (:mod:`.similarity`) and shows the render as the next observation.  The
episode runs ``max_turns`` turns (VAGEN never ends it early), or stops at the first render whose
score reaches ``success_threshold`` when ``stop_on_success`` is set.

Reward of a turn (VAGEN's formula, with pixel and SSIM terms that need no weights)::

    format_reward * [format ok and rendered]
      + max(0, pixel_weight * pixel + ssim_weight * ssim + embedding_weight * embedding)

A turn whose SVG is missing, refused or fails to render scores 0 and gets the reason as feedback.
"""

from __future__ import annotations

import functools
import threading
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Literal

from PIL import Image
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from vista_plugin_svg.encoders import NON_CODE_PREFIXES, VisionEncoder, encoder_kind, load_encoder
from vista_plugin_svg.render import (
    RenderLimits,
    RenderPool,
    RenderResult,
    RenderWorker,
    render_svg,
    shared_pool,
)
from vista_plugin_svg.safety import SvgLimits, extract_svg
from vista_plugin_svg.similarity import RewardWeights, combine, cosine_score, pixel_score, ssim_score
from vista_plugin_svg.targets import PRIMITIVES, SvgTarget, synthetic_target
from vista_rl import (
    Env,
    Observation,
    ResponseFormat,
    StepResult,
    config_fields,
    episode_seed,
    escape_placeholders,
    parse_response,
)

EXAMPLE_SVG = ('<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 100 100"><rect width="100" height="100" '
               'fill="#ffffff"/><circle cx="50" cy="50" r="20" fill="#dc2828"/></svg>')


_TARGET_RENDERS: OrderedDict[tuple[str, int], Image.Image] = OrderedDict()  # a pure memo of target pixels
_TARGET_CACHE_SIZE = 256
_TARGET_LOCK = threading.Lock()


def _cached_render(svg: str, size: int, render: Callable[[str], RenderResult]) -> RenderResult:
    """Render a target once per process; failures (a timeout on a busy machine) are not remembered.
    Thread-safe: the rollout engine resets envs from a thread pool."""
    key = (svg, size)
    with _TARGET_LOCK:
        if key in _TARGET_RENDERS:
            _TARGET_RENDERS.move_to_end(key)
            return RenderResult(_TARGET_RENDERS[key])
    result = render(svg)
    if result.image is not None:
        with _TARGET_LOCK:
            _TARGET_RENDERS[key] = result.image
            while len(_TARGET_RENDERS) > _TARGET_CACHE_SIZE:
                _TARGET_RENDERS.popitem(last=False)
    return result


@functools.lru_cache(maxsize=8)
def _record_targets(path: str, split: str | None) -> tuple[SvgTarget, ...]:
    """Record files are read once per process, not once per episode (the engine makes an env per episode)."""
    from vista_plugin_svg.records import load_svg_icon_targets  # noqa: PLC0415

    return tuple(load_svg_icon_targets(path, split))


class SvgEnvConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    source: Literal["synthetic", "records"] = Field("synthetic", description="where targets come from")
    records_path: Annotated[str | None, config_fields.HostPath] = Field(None, description="svg-icons-simple parquet/json/jsonl file or folder")
    records_split: str | None = Field(None, description="keep record files whose name holds this split")
    image_size: int = Field(128, ge=16, le=1024, description="target and render size in pixels (square)")
    min_shapes: int = Field(1, ge=1, le=20)
    max_shapes: int = Field(4, ge=1, le=20)
    primitives: tuple[str, ...] = PRIMITIVES
    max_turns: int = Field(2, ge=1, le=64, description="turns per episode (VAGEN's example uses 2)")
    stop_on_success: bool = False
    success_threshold: float = Field(0.95, ge=0.0, le=1.0,
                                     description="weighted mean similarity that counts as reconstructed")
    prompt_format: Literal["free_think", "no_think"] = "free_think"
    format_reward: float = 0.5
    pixel_weight: float = Field(0.0, ge=0.0)
    ssim_weight: float = Field(1.0, ge=0.0)
    embedding_weight: float = Field(0.0, ge=0.0)
    relative_to_blank: bool = Field(True, description="rescale pixel and SSIM so an empty white canvas scores 0")
    encoder: Annotated[str | None, config_fields.ImportTarget, config_fields.NonCodePrefixes(NON_CODE_PREFIXES)] = Field(
        None, description="'tiny-random', 'hf:<name-or-path>', a folder, or 'module:factory' (code the config names: "
        "an encoder class, or a function annotated to return one)")
    encoder_device: str = "cpu"
    show_target_each_turn: bool = Field(False, description="repeat the target image in every observation")
    max_svg_chars: int = Field(100_000, ge=100)
    max_depth: int = Field(48, ge=2, le=500)
    render_timeout_s: float = Field(10.0, gt=0)
    render_cpu_s: int = Field(5, ge=1)
    render_memory_mb: int = Field(768, ge=128)
    renderer: Literal["pool", "worker", "one_shot"] = Field(
        "pool", description="capped renderer processes shared by the process's envs, one per env, or one per render")
    render_workers: int = Field(2, ge=1, le=64, description="size of the shared pool (renderer='pool')")

    @field_validator("encoder")
    @classmethod
    def _encoder_shape(cls, value: str | None) -> str | None:
        """A malformed encoder fails with the config, before the first embedding imports anything."""
        if value is not None:
            encoder_kind(value)
        return value

    @model_validator(mode="after")
    def _consistent(self) -> SvgEnvConfig:
        if self.max_shapes < self.min_shapes:
            raise ValueError("max_shapes must be >= min_shapes")
        unknown = sorted(set(self.primitives) - set(PRIMITIVES))
        if unknown or not self.primitives:
            raise ValueError(f"primitives must be a non-empty subset of {PRIMITIVES}, got unknown {unknown}")
        if self.source == "records" and not self.records_path:
            raise ValueError("source='records' needs records_path (svg-icons-simple files)")
        if self.embedding_weight > 0 and not self.encoder:
            raise ValueError("embedding_weight > 0 needs an encoder ('tiny-random', 'hf:<name-or-path>', ...)")
        if self.pixel_weight + self.ssim_weight + self.embedding_weight <= 0:
            raise ValueError("at least one of pixel_weight, ssim_weight, embedding_weight must be > 0")
        return self


class SvgReconstructEnv(Env):
    """Multi-turn SVG reconstruction with render feedback; see the module docstring for the reward."""

    config_class = SvgEnvConfig

    def __init__(self, **config: Any) -> None:
        self.config = SvgEnvConfig(**config)
        required = ("think", "answer") if self.config.prompt_format == "free_think" else ("answer",)
        self.response_format = ResponseFormat(required=required)
        self.weights = RewardWeights(self.config.pixel_weight, self.config.ssim_weight, self.config.embedding_weight)
        self.svg_limits = SvgLimits(max_chars=self.config.max_svg_chars, max_depth=self.config.max_depth)
        self.render_limits = RenderLimits(timeout_s=self.config.render_timeout_s, cpu_s=self.config.render_cpu_s,
                                          memory_mb=self.config.render_memory_mb)
        self._worker: RenderWorker | None = None
        self._encoder: VisionEncoder | None = None
        self._target: SvgTarget | None = None
        self._target_image: Image.Image | None = None
        self._target_embedding: Any = None
        self._turn = 0
        self._done = True
        self._best = 0.0
        self._blank_scores: dict[str, float] = {}

    # ---------------------------------------------------------------- targets
    def _record_targets(self) -> tuple[SvgTarget, ...]:
        assert self.config.records_path is not None  # the config validator guarantees it
        return _record_targets(str(Path(self.config.records_path).resolve()), self.config.records_split)

    def _render(self, svg: str) -> RenderResult:
        size = self.config.image_size
        renderer: RenderWorker | RenderPool | None = None
        if self.config.renderer == "pool":
            renderer = shared_pool(self.render_limits, self.config.render_workers)
        elif self.config.renderer == "worker":
            if self._worker is None:
                self._worker = RenderWorker(self.render_limits)
            renderer = self._worker
        return render_svg(svg, size, size, "white", self.svg_limits, self.render_limits, renderer)

    def _render_target(self, svg: str) -> RenderResult:
        """Targets repeat (GRPO groups, eval sweeps, every reset of a seed), so their renders are
        cached per process; model answers are always rendered afresh."""
        size = self.config.image_size
        result = _cached_render(svg, size, self._render)
        return RenderResult(result.image.copy() if result.image is not None else None, result.error, result.stage)

    def _pick_target(self, seed: int) -> tuple[SvgTarget, Image.Image, list[str]]:
        skipped: list[str] = []
        if self.config.source == "synthetic":
            target = synthetic_target(seed, self.config.min_shapes, self.config.max_shapes, self.config.primitives)
            result = self._render_target(target.svg)
            if result.image is None:
                raise RuntimeError(f"the synthetic target for seed {seed} did not render: {result.error}")
            return target, result.image, skipped
        records = self._record_targets()
        for offset in range(min(len(records), 16)):  # skip a few unrenderable icons, never loop forever
            target = records[(seed + offset) % len(records)]
            result = self._render_target(target.svg)
            if result.image is not None:
                return target, result.image, skipped
            skipped.append(f"{target.id}: {result.error}")
        raise RuntimeError(f"no renderable record near seed {seed}; first problems: {skipped[:3]}")

    def _embedding_scores(self, render: Image.Image) -> float:
        if self._encoder is None:
            assert self.config.encoder is not None
            self._encoder = load_encoder(self.config.encoder, self.config.encoder_device)
        if self._target_embedding is None:
            assert self._target_image is not None
            self._target_embedding = self._encoder.embed([self._target_image])[0]
        return cosine_score(self._encoder.embed([render])[0], self._target_embedding)

    def raw_scores(self, render: Image.Image) -> dict[str, float]:
        """Pixel and SSIM similarity of ``render`` to the current target, each in [0, 1]."""
        assert self._target_image is not None, "call reset() first"
        return {"pixel": pixel_score(render, self._target_image), "ssim": ssim_score(render, self._target_image)}

    def score(self, render: Image.Image) -> dict[str, float]:
        """The scores the reward uses, each in [0, 1].

        With ``relative_to_blank`` the pixel and SSIM terms are rescaled as ``(s - b) / (1 - b)``
        (clipped), ``b`` being what an empty white canvas scores on this target: on icon-like targets
        that are mostly background, a blank answer already gets raw SSIM 0.75-0.9, which would leave
        the reward almost flat between "nothing" and "right"."""
        scores = self.raw_scores(render)
        if self.config.relative_to_blank:
            for name, value in scores.items():
                base = self._blank_scores.get(name, 0.0)
                scores[name] = (1.0 if value >= 1.0 - 1e-9 else 0.0) if base >= 1.0 - 1e-9 else \
                    min(1.0, max(0.0, (value - base) / (1.0 - base)))
        if self.config.embedding_weight > 0 or self.config.encoder:
            scores["embedding"] = self._embedding_scores(render)
        return scores

    def _mean_score(self, scores: dict[str, float]) -> float:
        """Weighted mean of the active scores: what ``success_threshold`` is compared with."""
        weights = {"pixel": self.weights.pixel, "ssim": self.weights.ssim, "embedding": self.weights.embedding}
        total = sum(weights.values())
        return sum(weight * scores.get(name, 0.0) for name, weight in weights.items()) / total

    # ---------------------------------------------------------------------- api
    def system_prompt(self) -> str:
        tags = "<think>...</think><answer>...</answer>" if self.config.prompt_format == "free_think" \
            else "<answer>...</answer>"
        think = "<think>A red circle in the middle of a white canvas.</think>" \
            if self.config.prompt_format == "free_think" else ""
        return (
            "You are shown a target image. Write SVG code that reproduces it as closely as possible.\n"
            "Put one complete <svg xmlns=\"http://www.w3.org/2000/svg\" ...>...</svg> element inside <answer>. "
            "Use basic shapes (rect, circle, ellipse, polygon, line, path) and a viewBox. External files, "
            "links, scripts and DOCTYPE declarations are refused.\n"
            f"After each answer you see how your SVG renders and can improve it; you have {self.config.max_turns} "
            f"turn(s). The reward grows with the similarity between your render and the target.\n"
            f"Format: {tags}\nExample: {think}<answer>{EXAMPLE_SVG}</answer>"
        )

    def reset(self, seed: int | None = None) -> tuple[Observation, dict[str, Any]]:
        episode = episode_seed(seed)
        self._target, self._target_image, skipped = self._pick_target(episode)
        self._target_embedding = None
        self._turn, self._done, self._best = 0, False, 0.0
        size = self.config.image_size
        self._blank_scores = self.raw_scores(Image.new("RGB", (size, size), "white"))
        text = (f"[Target image]\n<image>\nWrite SVG code that reproduces this {size}x{size} image. "
                f"You have {self.config.max_turns} turn(s).")
        info: dict[str, Any] = {"target_id": self._target.id, "target_source": self._target.source,
                                "image_size": size}
        if skipped:
            info["skipped_targets"] = skipped
        return Observation(text, [self._target_image.copy()]), info

    def _feedback(self, text: str, render: Image.Image | None, last: bool) -> Observation:
        images: list[Image.Image] = []
        parts = [escape_placeholders(text)]  # error messages may quote model text
        if render is not None:
            parts.insert(0, "Your SVG rendered as:\n<image>")
            images.append(render)
        if self.config.show_target_each_turn and self._target_image is not None and not last:
            parts.append("The target is:\n<image>")
            images.append(self._target_image.copy())
        if not last:
            parts.append("Answer with an improved SVG.")
        return Observation("\n".join(parts), images)

    def step(self, action: str) -> StepResult:
        if self._done or self._target is None:
            return StepResult(Observation("The episode is over; call reset()."), 0.0, True, False,
                              {"success": False, "format_ok": False, "action_valid": False})
        self._turn += 1
        last = self._turn >= self.config.max_turns
        parsed = parse_response(action, self.response_format)
        svg = extract_svg(parsed.answer or "")
        info: dict[str, Any] = {"format_ok": parsed.format_ok, "turn": self._turn, "target_id": self._target.id}
        render: Image.Image | None = None
        reward = 0.0
        if svg is None:
            problem = parsed.feedback if not parsed.format_ok and parsed.answer is None else \
                "No <svg>...</svg> element was found in your <answer>."
            info.update(action_valid=False, render_error=problem, render_stage="missing")
            message = problem
        else:
            result = self._render(svg)
            info.update(render_stage=result.stage)
            if result.image is None:
                info.update(action_valid=False, render_error=result.error)
                message = f"Your SVG was not rendered: {result.error}."
            else:
                render = result.image
                scores = self.score(render)
                mean = self._mean_score(scores)
                self._best = max(self._best, mean)
                reward = combine(scores, self.weights) + (self.config.format_reward if parsed.format_ok else 0.0)
                info.update(action_valid=True, scores=scores, score=mean, raw_scores=self.raw_scores(render),
                            blank_scores=dict(self._blank_scores))
                shown = ", ".join(f"{name} {value:.3f}" for name, value in scores.items())
                message = f"Similarity to the target: {shown}."
                if not parsed.format_ok:
                    message += " " + parsed.feedback
        success = self._best >= self.config.success_threshold
        terminated = bool(success and self.config.stop_on_success)
        truncated = last and not terminated
        self._done = terminated or truncated
        info.update(success=success, best_score=self._best)
        return StepResult(self._feedback(message, render, self._done), reward, terminated, truncated, info)

    def oracle_response(self) -> str | None:
        if self._target is None or self._done:
            return None
        if self.config.prompt_format == "no_think":
            return f"<answer>{self._target.svg}</answer>"
        return f"<think>I copy the shapes I see, with their positions and colours.</think><answer>{self._target.svg}</answer>"

    def close(self) -> None:
        if self._worker is not None:
            self._worker.close()
            self._worker = None
        self._target = None
        self._target_image = None
        self._done = True
