"""VLM-as-tool: a registered model backend behind prompt templates, concurrent calls batched."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from PIL import Image
from vista_plugin_detection.vlm_tool import ChartToTableTool, DescribeRegionTool, VLMTool

import vista_rl
from vista_rl import ToolContext
from vista_rl_sdk import check_tool


def chart() -> Image.Image:
    image = Image.new("RGB", (112, 84), "white")
    for index, height in enumerate((30, 60, 45)):
        image.paste((40, 90, 200), (15 + index * 30, 80 - height, 35 + index * 30, 80))
    return image


class Recording:
    """Wraps a real backend's ``generate`` to record each call's chats (the backend still runs)."""

    def __init__(self, tool: VLMTool) -> None:
        self.calls: list[list[Any]] = []
        backend = tool.backend
        original = backend.generate

        def generate(chats: Any, params: Any) -> Any:
            self.calls.append(list(chats))
            return original(chats, params)

        backend.generate = generate  # type: ignore[method-assign]


def scripted(tool_class: type[VLMTool] = VLMTool, **kwargs: Any) -> VLMTool:
    return tool_class("scripted", {"responses": ["| x | y |\n| a | 3 |"]}, **kwargs)


def test_templates_reach_the_backend_and_output_comes_back() -> None:
    tool = scripted(ChartToTableTool)
    recording = Recording(tool)
    result = tool({}, ToolContext(images=[chart()]))
    assert not result.error, result.text
    assert result.text.startswith("chart_to_table (to_table) on image 0, the whole image:\n| x | y |")
    assert result.metadata["task_type"] == "to_table" and result.metadata["success"]
    (chat,) = recording.calls[0]
    assert chat[-1].role == "user" and "data table" in chat[-1].content and chat[-1].images[0].size == (112, 84)
    answer = tool({"task": "answer", "question": "Which bar is tallest?"}, ToolContext(images=[chart()]))
    assert "Which bar is tallest?" in recording.calls[1][0][-1].content and not answer.error


def test_user_templates_and_system_prompt() -> None:
    tool = VLMTool("scripted", {"responses": ["42"]}, templates={"count": "Count the {question} in {region}."},
                   system_prompt="You are a chart reader.")
    recording = Recording(tool)
    result = tool({"question": "bars", "region": [10, 0, 70, 84]}, ToolContext(images=[chart()]))
    assert not result.error
    system, user = recording.calls[0][0]
    assert system.content == "You are a chart reader."
    assert "Count the bars in the region [10, 0, 70, 84]." in user.content
    assert user.images[0].size == (60, 84)
    with pytest.raises(ValueError, match="unknown field"):
        VLMTool("scripted", {"responses": ["x"]}, templates={"bad": "{colour}"})
    with pytest.raises(ValueError, match="default_task"):
        VLMTool("scripted", {"responses": ["x"]}, default_task="nope")


def test_describe_region_crops_before_the_model_sees_it() -> None:
    tool = scripted(DescribeRegionTool)
    recording = Recording(tool)
    full = chart()
    result = tool({"region": [15, 50, 35, 80]}, ToolContext(images=[full]))
    assert not result.error
    shown = recording.calls[0][0][-1].images[0]
    assert shown.size == (20, 30)
    assert shown.tobytes() == full.crop((15, 50, 35, 80)).tobytes()


@pytest.mark.parametrize("arguments, needle", [
    ({"task": "nope"}, "unknown task"),
    ({"task": "answer"}, "needs a question"),
    ({"region": [500, 500, 600, 600]}, "is empty"),
    ({"region": [1, 2, 3]}, "region"),
    ({"image": 4}, "does not exist"),
])
def test_bad_calls_are_error_results(arguments: dict[str, Any], needle: str) -> None:
    result = scripted(ChartToTableTool)(arguments, ToolContext(images=[chart()]))
    assert result.error and needle in result.text


def test_an_unbuildable_backend_is_an_error_result() -> None:
    result = VLMTool("transformers", {"path": "/nonexistent/model"})({}, ToolContext(images=[chart()]))
    assert result.error and "failed" in result.text


def test_registry_and_conformance() -> None:
    tool = vista_rl.make_tool("detection/chart-to-table", backend="scripted", backend_config={"responses": ["t"]})
    assert isinstance(tool, ChartToTableTool)
    assert check_tool(tool, {"task": "describe"}).ok


def test_calls_from_many_episodes_become_one_backend_call(tiny_model_dir: Path) -> None:
    """The real transformers backend on a tiny Qwen2.5-VL: 6 concurrent episodes, few generate calls."""
    tool = ChartToTableTool("transformers", {"path": str(tiny_model_dir), "device": "cpu"}, max_tokens=8,
                            max_batch=8, max_wait_ms=300)
    recording = Recording(tool)
    results: list[Any] = [None] * 6

    def call(index: int) -> None:
        results[index] = tool({"task": "describe"}, ToolContext(images=[chart()]))

    threads = [threading.Thread(target=call, args=(i,)) for i in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert all(result is not None and not result.error for result in results), results
    assert sum(len(chats) for chats in recording.calls) == 6
    assert len(recording.calls) < 6 and max(len(chats) for chats in recording.calls) > 1
    assert tool.batcher.stats.largest == max(len(chats) for chats in recording.calls)


def test_vista_tools_lists_the_detector_and_vlm_tools() -> None:
    from click.testing import CliRunner

    from vista_rl.cli import build_cli

    result = CliRunner().invoke(build_cli(), ["tools", "--json"])
    assert result.exit_code == 0, result.output
    listed = result.output
    for tool_id in ("detection/grounding-dino", "detection/vlm", "detection/chart-to-table",
                    "detection/describe-region"):
        assert f'"{tool_id}"' in listed
