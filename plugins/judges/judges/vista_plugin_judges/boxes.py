"""Grounding judges: box IoU and point-in-box.  Boxes are ``[x1, y1, x2, y2]`` in pixels; both
accept lists or text such as ``"(12, 30, 50, 80)"`` or ``"[12,30,50,80]"``, the forms models write."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

from vista_rl import Judge, JudgeResult

_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def read_numbers(value: Any, count: int) -> list[float] | None:
    """Exactly ``count`` finite numbers from a list/tuple or the first ``count`` numbers in text of
    at most 500 characters; otherwise ``None``."""
    if isinstance(value, (list, tuple)):
        if len(value) != count:
            return None
        try:
            numbers = [float(v) for v in value]
        except (TypeError, ValueError, OverflowError):  # 10**400 is no coordinate
            return None
    elif isinstance(value, str) and len(value) <= 500:
        found = _NUMBER.findall(value)
        if len(found) < count:
            return None
        numbers = [float(v) for v in found[:count]]
    else:
        return None
    return numbers if all(math.isfinite(n) for n in numbers) else None


def normalize_box(box: Sequence[float]) -> tuple[float, float, float, float]:
    x1, y1, x2, y2 = box
    return min(x1, x2), min(y1, y2), max(x1, x2), max(y1, y2)


def box_iou(a: Sequence[float], b: Sequence[float]) -> float:
    ax1, ay1, ax2, ay2 = normalize_box(a)
    bx1, by1, bx2, by2 = normalize_box(b)
    inter = max(0.0, min(ax2, bx2) - max(ax1, bx1)) * max(0.0, min(ay2, by2) - max(ay1, by1))
    union = (ax2 - ax1) * (ay2 - ay1) + (bx2 - bx1) * (by2 - by1) - inter
    return inter / union if union > 0 else 0.0


def point_in_box(point: Sequence[float], box: Sequence[float], margin: float = 0.0) -> bool:
    x, y = point
    x1, y1, x2, y2 = normalize_box(box)
    return x1 - margin <= x <= x2 + margin and y1 - margin <= y <= y2 + margin


class IoUJudge(Judge):
    """``mode="threshold"`` (default): 1 when IoU >= ``threshold``; ``mode="continuous"``: the IoU."""

    name = "iou"

    def __init__(self, threshold: float = 0.5, mode: str = "threshold") -> None:
        if mode not in {"threshold", "continuous"}:
            raise ValueError("mode must be 'threshold' or 'continuous'")
        self.threshold = threshold
        self.mode = mode

    def score(self, prediction: Any, reference: Any, **context: Any) -> JudgeResult:
        ref = read_numbers(reference, 4)
        if ref is None:
            raise ValueError(f"iou reference must be a box [x1, y1, x2, y2], got {reference!r}")
        pred = read_numbers(prediction, 4)
        if pred is None:
            return JudgeResult(0.0, {"reason": "prediction is not a box [x1, y1, x2, y2]"})
        iou = box_iou(pred, ref)
        value = iou if self.mode == "continuous" else float(iou >= self.threshold)
        return JudgeResult(value, {"iou": iou})


class PointInBoxJudge(Judge):
    """1 when the predicted ``(x, y)`` lies inside the reference box (grown by ``margin`` pixels).
    ``scale`` (constructor or context) maps prediction coordinates into the box's frame, for a model
    that saw a resized image."""

    name = "point_in_box"

    def __init__(self, margin: float = 0.0, scale: float = 1.0) -> None:
        self.margin = margin
        self.scale = scale

    def score(self, prediction: Any, reference: Any, **context: Any) -> JudgeResult:
        box = read_numbers(reference, 4)
        if box is None:
            raise ValueError(f"point_in_box reference must be a box [x1, y1, x2, y2], got {reference!r}")
        point = read_numbers(prediction, 2)
        if point is None:
            return JudgeResult(0.0, {"reason": "prediction is not a point (x, y)"})
        scale = float(context.get("scale", self.scale))
        scaled = (point[0] * scale, point[1] * scale)
        return JudgeResult(float(point_in_box(scaled, box, self.margin)), {"point": scaled})
