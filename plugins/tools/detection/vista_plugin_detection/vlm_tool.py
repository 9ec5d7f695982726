"""VLM-as-tool: any registered model backend answers a templated prompt about an image.

VISTA-Gym runs chart, geometry and math VLMs (ChartMoE, G-LLaVA, MultiMath) as tools the policy
calls.  Here the engine is whatever ``vista_rl.make_model(backend, **backend_config)`` builds
(transformers, vLLM, an OpenAI-compatible server, ...), so "chart -> table" with a local ChartMoE
checkpoint and "describe this region" through a hosted API are the same tool with different config.

- Prompts are templates per task (``{question}`` and ``{region}`` are filled from the arguments);
  users replace or add tasks with ``templates={...}``.
- Calls arriving together from many episodes are sent as one ``backend.generate`` batch.
- The backend is built on the first call and held for the tool's lifetime (one copy of the weights).
"""

from __future__ import annotations

import string
import threading
from collections.abc import Mapping
from typing import Annotated, Any

from PIL import Image
from pydantic import BaseModel, ConfigDict, Field
from vista_plugin_tools.base import ImageTool, ToolInputError, as_rgb, clamp_box, fmt, pick_image

import vista_rl
from vista_plugin_detection.batching import MicroBatcher
from vista_rl import IMAGE_PLACEHOLDER, Chat, Message, ModelBackend, SamplingParams, ToolContext, ToolResult

#: ChartMoE-style tasks (VISTA-Gym's chartmoe ``to_table``, ``describe``, ``answer``, ``custom``).
DEFAULT_TEMPLATES: dict[str, str] = {
    "to_table": "Convert the chart into a data table in Markdown, one row per data point, with a header row. "
                "Reply with the table only.",
    "describe": "Describe this image precisely: what it shows, its text, labels and numbers.",
    "answer": "Answer the question about this image briefly.\nQuestion: {question}",
    "custom": "{question}",
}
TEMPLATE_FIELDS = frozenset({"question", "region"})


def template_fields(template: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(template) if name}


class VLMArguments(BaseModel):
    model_config = ConfigDict(extra="forbid")
    task: str | None = Field(None, description="which prompt template (see the tool description); default: the tool's")
    question: str = Field("", max_length=2000, description="the question or custom prompt, where the task uses one")
    region: Annotated[list[float], Field(min_length=4, max_length=4)] | None = Field(
        None, description="optional box [x1, y1, x2, y2] in pixels: only this part of the image is shown")
    image: int = Field(-1, description="which image: 0 is the original, -1 the latest")


class VLMTool(ImageTool):
    """A model backend behind a prompt template.  ``backend`` is a registered model id and
    ``backend_config`` its config (e.g. ``{"path": "/ckpt/chartmoe"}``); or pass a ready ``model``."""

    name = "ask_vlm"
    description = "Ask a vision-language model about an image (or a region of it)."
    Arguments = VLMArguments
    default_task = "describe"

    def __init__(self, backend: str = "transformers", backend_config: Mapping[str, Any] | None = None, *,
                 model: ModelBackend | None = None, templates: Mapping[str, str] | None = None,
                 default_task: str | None = None, system_prompt: str | None = None, max_tokens: int = 256,
                 temperature: float = 0.0, max_batch: int = 8, max_wait_ms: float = 10.0) -> None:
        self.templates = dict(DEFAULT_TEMPLATES if templates is None else templates)
        if not self.templates:
            raise ValueError("a VLM tool needs at least one prompt template")
        for task, template in self.templates.items():
            unknown = template_fields(template) - TEMPLATE_FIELDS
            if unknown:
                raise ValueError(f"template {task!r} uses unknown field(s) {sorted(unknown)}; "
                                 f"allowed: {sorted(TEMPLATE_FIELDS)}")
        self.task = default_task or (self.default_task if self.default_task in self.templates
                                     else next(iter(self.templates)))
        if self.task not in self.templates:
            raise ValueError(f"default_task {self.task!r} is not one of the templates {sorted(self.templates)}")
        self.backend_id = backend
        self.backend_config = dict(backend_config or {})
        self.system_prompt = system_prompt
        self.sampling = SamplingParams(n=1, temperature=temperature, max_tokens=max_tokens)
        self._backend = model
        self._lock = threading.Lock()
        self.backend_calls = 0
        self.batcher: MicroBatcher[Chat, str] = MicroBatcher(self._generate, max_batch=max_batch,
                                                             max_wait_s=max_wait_ms / 1000.0, name="vista-vlm-tool")

    # ------------------------------------------------------------------- backend
    @property
    def backend(self) -> ModelBackend:
        with self._lock:
            if self._backend is None:
                self._backend = vista_rl.make_model(self.backend_id, **self.backend_config)
            return self._backend

    def _generate(self, chats: list[Chat]) -> list[str | BaseException]:
        self.backend_calls += 1
        outputs = self.backend.generate(chats, self.sampling)
        texts: list[str | BaseException] = []
        for output in outputs:
            if isinstance(output, BaseException):
                texts.append(output)
            elif not output:
                texts.append(RuntimeError("the backend returned no generation"))
            else:
                texts.append(output[0].text)
        return texts

    # ---------------------------------------------------------------------- call
    def prompt_for(self, task: str, arguments: VLMArguments, region_text: str) -> str:
        template = self.templates[task]
        if "question" in template_fields(template) and not arguments.question.strip():
            raise ToolInputError(f"task {task!r} needs a question")
        return template.format(question=arguments.question.strip(), region=region_text)

    def apply(self, arguments: VLMArguments, context: ToolContext) -> ToolResult:
        task = arguments.task or self.task
        if task not in self.templates:
            raise ToolInputError(f"unknown task {task!r}; this tool knows {', '.join(sorted(self.templates))}")
        picked = pick_image(context, arguments.image)
        image: Image.Image = as_rgb(picked.source)
        region_text = "the whole image"
        if arguments.region is not None:
            width, height = picked.shown.size
            box, _ = clamp_box(arguments.region, width, height)
            if box[2] - box[0] < 2 or box[3] - box[1] < 2:
                raise ToolInputError(f"the region [{', '.join(fmt(v) for v in arguments.region)}] is empty inside "
                                     f"the {width}x{height} image")
            sx, sy = picked.scale
            image = image.crop((round(box[0] * sx), round(box[1] * sy), round(box[2] * sx), round(box[3] * sy)))
            region_text = f"the region [{', '.join(fmt(v) for v in box)}]"
        prompt = self.prompt_for(task, arguments, region_text)
        chat: Chat = []
        if self.system_prompt:
            chat.append(Message("system", self.system_prompt.replace(IMAGE_PLACEHOLDER, "")))
        chat.append(Message("user", f"{IMAGE_PLACEHOLDER}\n{prompt.replace(IMAGE_PLACEHOLDER, '')}", [image]))
        output = self.batcher.submit(chat)
        return ToolResult(text=f"{self.name} ({task}) on image {picked.index}, {region_text}:\n{output.strip()}",
                          metadata={"task_type": task, "prompt": prompt, "raw_output": output, "success": True})


class ChartToTableTool(VLMTool):
    """Chart understanding in VISTA-Gym's ChartMoE style: ``to_table`` by default."""

    name = "chart_to_table"
    description = ("Read a chart with a chart-understanding model. task: to_table (default: the chart's data "
                   "as a Markdown table), describe, answer (with question), custom (question is the prompt).")
    default_task = "to_table"


class DescribeRegionTool(VLMTool):
    """Describe a box of the image: the region is cropped before the model sees it."""

    name = "describe_region"
    description = "Describe what is inside region [x1, y1, x2, y2] (pixels) of an image, or the whole image."
    default_task = "describe_region"

    def __init__(self, backend: str = "transformers", backend_config: Mapping[str, Any] | None = None,
                 **kwargs: Any) -> None:
        kwargs.setdefault("templates", {"describe_region": "Describe precisely what is in {region} of the image "
                                                           "(shown here): objects, text, colours, numbers."})
        super().__init__(backend, backend_config, **kwargs)
