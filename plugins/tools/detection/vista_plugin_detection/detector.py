"""Open-vocabulary detection with transformers' zero-shot detectors (GroundingDINO, OWLv2, OWL-ViT).

One :class:`ZeroShotDetector` holds one model and answers batches of (image, caption, thresholds)
requests in one forward pass.  The caption follows GroundingDINO's convention, phrases separated by
" . " (``"red car . bicycle"``); OWL models get the same phrases as separate queries, so a tool call
means the same thing whichever architecture is loaded.  Boxes are pixels of the given image,
``[x1, y1, x2, y2]``, clipped to it, then class-agnostic NMS (VISTA-Gym's ``nms_threshold``).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from PIL import Image

#: ``config.model_type`` values this module knows how to prompt and post-process.
GROUNDING_TYPES = frozenset({"grounding-dino", "mm-grounding-dino"})
OWL_TYPES = frozenset({"owlv2", "owlvit"})
_SPECIAL = re.compile(r"\[(?:CLS|SEP|PAD|UNK|MASK)\]")


class DetectorLoadError(RuntimeError):
    """The model could not be loaded; the message says what to pass instead."""


@dataclass(frozen=True)
class DetectionRequest:
    image: Image.Image
    caption: str
    box_threshold: float = 0.35
    text_threshold: float = 0.25


@dataclass(frozen=True)
class Detection:
    box: tuple[float, float, float, float]  # x1, y1, x2, y2 in pixels of the request's image
    score: float
    label: str


def split_caption(caption: str) -> list[str]:
    """``"Red car . bicycle."`` -> ``["red car", "bicycle"]`` (lower case, empty phrases dropped)."""
    return [phrase.strip() for phrase in caption.lower().split(".") if phrase.strip()]


def grounding_caption(caption: str) -> str:
    """GroundingDINO's expected form: lower case, phrases joined by " . ", ending with "."."""
    return " . ".join(split_caption(caption)) + " ."


def clean_label(label: str) -> str:
    return " ".join(_SPECIAL.sub(" ", label).replace(" .", " ").strip(" .").split())


def box_iou(a: tuple[float, float, float, float], b: tuple[float, float, float, float]) -> float:
    inter_w = min(a[2], b[2]) - max(a[0], b[0])
    inter_h = min(a[3], b[3]) - max(a[1], b[1])
    if inter_w <= 0 or inter_h <= 0:
        return 0.0
    inter = inter_w * inter_h
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


def nms(detections: Sequence[Detection], iou_threshold: float) -> list[Detection]:
    """Greedy class-agnostic non-maximum suppression, best score first.  Plain Python on purpose:
    a detector returns at most a few hundred boxes, and torchvision's compiled ops are not always
    loadable next to the installed torch (they are not on this project's CPU machines)."""
    kept: list[Detection] = []
    for detection in sorted(detections, key=lambda d: d.score, reverse=True):
        if all(box_iou(detection.box, other.box) <= iou_threshold for other in kept):
            kept.append(detection)
    return kept


def resolve_device(device: str) -> str:
    if device != "auto":
        return device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


class ZeroShotDetector:
    """A zero-shot detector loaded by Hub name or local path (``model``), on ``device``.

    Loading is lazy (first :meth:`detect`) and thread-safe, so making the tool is cheap and a
    process that never calls it never pays for the weights.  ``local_files_only`` is for machines
    without network access: a name then resolves only from the local Hugging Face cache.
    """

    def __init__(self, model: str | Path, *, device: str = "auto", dtype: str = "float32",
                 nms_threshold: float = 0.8, max_detections: int = 100, local_files_only: bool = False) -> None:
        if not 0.0 < nms_threshold <= 1.0:
            raise ValueError("nms_threshold must be in (0, 1]")
        if max_detections < 1:
            raise ValueError("max_detections must be at least 1")
        self.model_name = str(model)
        self.device = device  # "auto" is resolved on load, so making the tool does not import torch
        self.dtype = dtype
        self.nms_threshold = nms_threshold
        self.max_detections = max_detections
        self.local_files_only = local_files_only
        self._lock = threading.Lock()
        self._model: Any = None
        self._processor: Any = None
        self._load_error: str | None = None
        self.model_type = ""

    # --------------------------------------------------------------------- loading
    def load(self) -> None:
        with self._lock:
            if self._model is not None:
                return
            if self._load_error is not None:  # fail fast: a Hub lookup offline retries for minutes
                raise DetectorLoadError(self._load_error)
            import torch
            from transformers import AutoModelForZeroShotObjectDetection, AutoProcessor

            self.device = resolve_device(self.device)

            try:
                processor = AutoProcessor.from_pretrained(self.model_name, local_files_only=self.local_files_only)
                model = AutoModelForZeroShotObjectDetection.from_pretrained(
                    self.model_name, local_files_only=self.local_files_only, dtype=getattr(torch, self.dtype))
            except Exception as exc:  # noqa: BLE001 - many causes (missing dir, no network, bad config)
                self._load_error = (
                    f"could not load detector {self.model_name!r} ({type(exc).__name__}: {str(exc)[:300]}); pass model=PATH to "
                    "a local checkpoint directory (e.g. IDEA-Research/grounding-dino-tiny saved with "
                    "save_pretrained) or a Hub name this machine can download")
                raise DetectorLoadError(self._load_error) from None
            model_type = str(getattr(model.config, "model_type", ""))
            if model_type not in GROUNDING_TYPES | OWL_TYPES:
                self._load_error = (f"{self.model_name!r} is a {model_type!r} model; the detector supports "
                                    f"{', '.join(sorted(GROUNDING_TYPES | OWL_TYPES))}")
                raise DetectorLoadError(self._load_error)
            self._processor, self._model = processor, model.to(self.device).eval()
            self.model_type = model_type

    # ------------------------------------------------------------------- detecting
    def detect(self, requests: Sequence[DetectionRequest]) -> list[list[Detection]]:
        """Detections per request, best first, in one forward pass over the whole batch."""
        if not requests:
            return []
        self.load()
        images = [request.image.convert("RGB") for request in requests]
        if self.model_type in GROUNDING_TYPES:
            raw = self._grounding(images, requests)
        else:
            raw = self._owl(images, requests)
        return [self._finish(found, image.size) for found, image in zip(raw, images, strict=True)]

    def _forward(self, inputs: Any) -> Any:
        import torch

        inputs = inputs.to(self.device)
        with torch.inference_mode():
            return self._model(**inputs), inputs

    def _grounding(self, images: list[Image.Image], requests: Sequence[DetectionRequest]) -> list[list[Detection]]:
        captions = [grounding_caption(request.caption) for request in requests]
        outputs, inputs = self._forward(self._processor(images=images, text=captions, return_tensors="pt",
                                                        padding=True))
        import torch

        probs = torch.sigmoid(outputs.logits.float()).cpu()  # (batch, queries, text positions)
        boxes = outputs.pred_boxes.float().cpu()  # (batch, queries, 4): cx, cy, w, h relative
        found: list[list[Detection]] = []
        for index, (image, request) in enumerate(zip(images, requests, strict=True)):
            ids = inputs.input_ids[index].tolist()
            scores = probs[index].max(dim=-1).values
            found.append([self._grounded(probs[index, query], boxes[index, query], float(scores[query]), ids,
                                         request.text_threshold, image.size)
                          for query in (scores > request.box_threshold).nonzero().flatten().tolist()])
        return found

    def _grounded(self, prob: Any, box: Any, score: float, ids: list[int], text_threshold: float,
                  size: tuple[int, int]) -> Detection:
        """One query's box in pixels and its phrase: the caption tokens whose probability passes
        ``text_threshold`` (GroundingDINO's phrase-from-posmap rule), special tokens left out."""
        width, height = size
        cx, cy, w, h = (float(v) for v in box)
        tokenizer = self._processor.tokenizer
        special = set(tokenizer.all_special_ids)
        picked = [ids[position] for position in (prob[: len(ids)] > text_threshold).nonzero().flatten().tolist()
                  if ids[position] not in special]
        label = clean_label(tokenizer.decode(picked)) if picked else ""
        return Detection(((cx - w / 2) * width, (cy - h / 2) * height, (cx + w / 2) * width, (cy + h / 2) * height),
                         score, label)

    def _owl(self, images: list[Image.Image], requests: Sequence[DetectionRequest]) -> list[list[Detection]]:
        queries = [split_caption(request.caption) or ["object"] for request in requests]
        outputs, _ = self._forward(self._processor(images=images, text=queries, return_tensors="pt",
                                                   padding="max_length", truncation=True))
        found: list[list[Detection]] = []
        for index, (image, request, labels) in enumerate(zip(images, requests, queries, strict=True)):
            side = max(image.size)  # OWLv2 pads to a square: boxes are relative to the padded side
            one = SimpleNamespace(logits=outputs.logits[index:index + 1], pred_boxes=outputs.pred_boxes[index:index + 1])
            result = self._processor.post_process_grounded_object_detection(
                one, threshold=request.box_threshold, target_sizes=[(side, side)] if self.model_type == "owlv2"
                else [(image.height, image.width)], text_labels=[labels])[0]
            found.append([Detection((float(x1), float(y1), float(x2), float(y2)), float(score), labels[int(label)])
                          for (x1, y1, x2, y2), score, label in zip(result["boxes"].tolist(), result["scores"].tolist(),
                                                       result["labels"].tolist(), strict=True)])
        return found

    def _finish(self, found: list[Detection], size: tuple[int, int]) -> list[Detection]:
        """Clip to the image, drop empty boxes, class-agnostic NMS, best first, at most ``max_detections``."""
        width, height = size
        kept: list[Detection] = []
        for detection in found:
            x1, y1, x2, y2 = detection.box
            box = (min(max(x1, 0.0), width), min(max(y1, 0.0), height), min(max(x2, 0.0), width),
                   min(max(y2, 0.0), height))
            if box[2] - box[0] >= 1.0 and box[3] - box[1] >= 1.0:
                kept.append(Detection(box, detection.score, detection.label))
        if not kept:
            return []
        return nms(kept, self.nms_threshold)[: self.max_detections]
