"""The grounding tool on tiny random GroundingDINO / OWLv2 checkpoints (real transformers classes)."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest
from PIL import Image, ImageChops
from vista_plugin_detection.detector import (
    DetectionRequest,
    ZeroShotDetector,
    grounding_caption,
    split_caption,
)
from vista_plugin_detection.grounding import GroundingTool

import vista_rl
from vista_rl import ToolContext
from vista_rl_sdk import check_tool


def scene(width: int = 96, height: int = 64) -> Image.Image:
    image = Image.new("RGB", (width, height), (240, 240, 240))
    image.paste((200, 20, 20), (10, 10, 40, 40))
    image.paste((20, 20, 200), (55, 20, 90, 60))
    return image


def payload(text: str) -> dict:
    return json.loads(text.split("\n", 1)[1].split("\n")[0])


@pytest.fixture()
def context() -> ToolContext:
    return ToolContext(images=[scene()])


def test_tiny_detectors_load_with_auto_classes(tiny_grounding_dino: Path, tiny_owlv2: Path) -> None:
    from transformers import AutoModelForZeroShotObjectDetection, AutoProcessor

    for path, kind in ((tiny_grounding_dino, "grounding-dino"), (tiny_owlv2, "owlv2")):
        model = AutoModelForZeroShotObjectDetection.from_pretrained(path)
        AutoProcessor.from_pretrained(path)
        assert model.config.model_type == kind
        assert sum(p.numel() for p in model.parameters()) < 2_000_000


def test_caption_normalisation() -> None:
    assert split_caption("Red car . bicycle.") == ["red car", "bicycle"]
    assert grounding_caption("Red car . bicycle") == "red car . bicycle ."
    assert split_caption(" . . ") == []


@pytest.mark.parametrize("which", ["tiny_grounding_dino", "tiny_owlv2"])
def test_output_shapes_follow_vista_gym(which: str, request: pytest.FixtureRequest, context: ToolContext) -> None:
    tool = GroundingTool(model=request.getfixturevalue(which), device="cpu")
    result = tool({"caption": "red car . bicycle", "box_threshold": 0.0, "text_threshold": 0.0}, context)
    assert not result.error, result.text
    found = payload(result.text)
    assert found == {key: result.metadata[key] for key in found}
    assert set(found) == {"boxes", "logits", "phrases", "size", "num_detections", "mode"}
    assert found["size"] == [64, 96] and found["mode"] == "cpu"
    count = found["num_detections"]
    assert 0 < count <= 50
    assert len(found["boxes"]) == len(found["logits"]) == len(found["phrases"]) == count
    for x1, y1, x2, y2 in found["boxes"]:
        assert 0 <= x1 < x2 <= 96 and 0 <= y1 < y2 <= 64
    assert found["logits"] == sorted(found["logits"], reverse=True)
    if which == "tiny_owlv2":
        assert set(found["phrases"]) <= {"red car", "bicycle"}
    assert result.images == []


def test_thresholds_filter(tiny_grounding_dino: Path, context: ToolContext) -> None:
    tool = GroundingTool(model=tiny_grounding_dino, device="cpu", max_detections=100)
    counts = []
    for threshold in (0.0, 0.5, 0.9, 1.0):
        found = payload(tool({"caption": "red car", "box_threshold": threshold}, context).text)
        assert all(score >= threshold - 1e-3 for score in found["logits"])
        counts.append(found["num_detections"])
    assert counts == sorted(counts, reverse=True)
    assert counts[-1] == 0  # no score exceeds 1


def test_nms_leaves_no_heavily_overlapping_pair(tiny_grounding_dino: Path) -> None:
    from vista_plugin_detection.detector import box_iou

    request = DetectionRequest(scene(), "red car . bicycle", 0.0, 0.0)
    loose = ZeroShotDetector(tiny_grounding_dino, device="cpu", nms_threshold=1.0, max_detections=1000).detect([request])[0]
    strict = ZeroShotDetector(tiny_grounding_dino, device="cpu", nms_threshold=0.3, max_detections=1000).detect([request])[0]
    assert 0 < len(strict) <= len(loose)
    worst = max((box_iou(a.box, b.box) for i, a in enumerate(strict) for b in strict[i + 1:]), default=0.0)
    assert worst <= 0.3 + 1e-6


def test_nms_keeps_the_best_of_overlapping_boxes() -> None:
    from vista_plugin_detection.detector import Detection, nms

    boxes = [Detection((0, 0, 10, 10), 0.5, "a"), Detection((1, 1, 10, 10), 0.9, "b"),
             Detection((20, 20, 30, 30), 0.4, "c"), Detection((1, 1, 10, 9.5), 0.7, "d")]
    assert [d.label for d in nms(boxes, 0.8)] == ["b", "c"]
    assert [d.label for d in nms(boxes, 1.0)] == ["b", "d", "a", "c"]


def test_draw_returns_annotated_copy(tiny_grounding_dino: Path, context: ToolContext) -> None:
    tool = GroundingTool(model=tiny_grounding_dino, device="cpu")
    result = tool({"caption": "red car", "box_threshold": 0.0, "draw": True}, context)
    assert not result.error and len(result.images) == 1
    drawn = result.images[0]
    assert drawn.size == context.images[0].size
    assert ImageChops.difference(drawn, context.images[0]).getbbox() is not None
    assert "image 1" in result.text  # the next image index the model can refer to


@pytest.mark.parametrize("arguments, needle", [
    ({}, "caption"),
    ({"caption": " . "}, "no phrase"),
    ({"caption": "car", "box_threshold": 1.5}, "box_threshold"),
    ({"caption": "car", "text_threshold": -0.1}, "text_threshold"),
    ({"caption": "car", "colour": "red"}, "colour"),
    ({"caption": "car", "image": 3}, "does not exist"),
    ("{not json", "not valid JSON"),
])
def test_bad_arguments_are_error_results(tiny_grounding_dino: Path, context: ToolContext, arguments: object,
                                         needle: str) -> None:
    result = GroundingTool(model=tiny_grounding_dino, device="cpu")(arguments, context)  # type: ignore[arg-type]
    assert result.error and needle in result.text


def test_missing_checkpoint_is_an_error_result(tmp_path: Path, context: ToolContext) -> None:
    tool = GroundingTool(model=tmp_path / "nope", device="cpu", local_files_only=True)
    result = tool({"caption": "car"}, context)
    assert result.error and "could not load detector" in result.text and "model=PATH" in result.text
    started = time.perf_counter()
    again = tool({"caption": "car"}, context)  # the failure is remembered, not retried on every call
    assert again.text == result.text and time.perf_counter() - started < 1.0


def test_conformance_and_registry(tiny_grounding_dino: Path) -> None:
    tool = vista_rl.make_tool("detection/grounding-dino", model=str(tiny_grounding_dino), device="cpu")
    assert isinstance(tool, GroundingTool) and tool.name == "grounding_dino"
    report = check_tool(tool, {"caption": "red car", "box_threshold": 0.0})
    assert report.ok, report


def test_concurrent_calls_share_one_forward(tiny_grounding_dino: Path) -> None:
    tool = GroundingTool(model=tiny_grounding_dino, device="cpu", max_batch=8, max_wait_ms=200)
    single = tool({"caption": "red car . bicycle", "box_threshold": 0.2}, ToolContext(images=[scene()]))
    results: list = [None] * 6

    def call(index: int) -> None:
        results[index] = tool({"caption": "red car . bicycle", "box_threshold": 0.2}, ToolContext(images=[scene()]))

    threads = [threading.Thread(target=call, args=(i,)) for i in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert tool.batcher.stats.largest > 1
    assert tool.batcher.stats.batches < 1 + 6
    expected = payload(single.text)
    for result in results:
        found = payload(result.text)
        assert found["num_detections"] == expected["num_detections"]
        for box, reference in zip(found["boxes"], expected["boxes"], strict=True):
            assert max(abs(a - b) for a, b in zip(box, reference, strict=True)) <= 1
