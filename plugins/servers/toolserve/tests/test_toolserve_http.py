"""Tools on a real HTTP tool server (a child process on 127.0.0.1), including killing it."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from vista_plugin_toolserve.http_client import HttpToolTransport, LocalToolServer
from vista_plugin_toolserve.proxy import ServedTool, served_tool
from vista_plugin_toolserve.services import http_tool

import vista_rl
from vista_rl import ToolContext


@pytest.fixture(scope="module")
def mark_server() -> Iterator[LocalToolServer]:
    server = LocalToolServer("mark", {}, threads=4)
    yield server
    server.close()


def test_served_tool_behaves_like_the_local_one(mark_server: LocalToolServer, context: ToolContext) -> None:
    local = vista_rl.make_tool("mark")
    served = served_tool(HttpToolTransport("mark", mark_server.url))
    assert served.name == "mark" and served.openai_schema() == local.openai_schema()
    arguments = {"points": [[10, 12]], "boxes": [[50, 20, 80, 60]], "image": 0}
    here, there = local(arguments, context), served(arguments, context)
    assert not there.error and there.text == here.text
    assert [i.tobytes() for i in there.images] == [i.tobytes() for i in here.images]
    bad = served({"points": "nowhere"}, context)
    assert bad.error and "bad arguments for mark" in bad.text
    assert served("{not json", context).error


def test_unknown_tool_and_auth(mark_server: LocalToolServer) -> None:
    from vista_plugin_toolserve.http_client import ToolServerError

    with pytest.raises(ToolServerError, match="does not host"):
        HttpToolTransport("crop_zoom", mark_server.url)
    assert httpx.get(f"{mark_server.url}/health").json()["tools"] == ["mark"]


def test_a_killed_server_is_restarted_and_the_call_is_an_error(context: ToolContext) -> None:
    server = LocalToolServer("mark", {}, threads=2)
    tool = served_tool(HttpToolTransport("mark", server=server))
    try:
        arguments = {"points": [[5, 5]], "image": 0}
        assert not tool(arguments, context).error
        first_pid = server.pid
        os.kill(first_pid, signal.SIGKILL)
        time.sleep(0.2)
        lost = tool(arguments, context)
        assert lost.error and "was lost" in lost.text and "restarted" in lost.text
        assert lost.metadata["worker_lost"] and server.restarts == 1 and server.pid != first_pid
        again = tool(arguments, context)
        assert not again.error and len(again.images) == 1
    finally:
        tool.close()
    assert not server.alive()


def test_killed_mid_call(tiny_detector: Path, context: ToolContext) -> None:
    """The detector waits 3 s to gather a batch: the server is killed while the call is in flight."""
    tool = http_tool("detection/grounding-dino", config={"model": str(tiny_detector), "device": "cpu",
                                                          "max_wait_ms": 3000})
    assert isinstance(tool, ServedTool)
    assert http_tool("detection/grounding-dino", config={"model": str(tiny_detector), "device": "cpu",
                                                         "max_wait_ms": 3000}) is tool  # one server per process
    server = tool.transport.server  # type: ignore[attr-defined]
    killer = threading.Timer(1.0, os.kill, (server.pid, signal.SIGKILL))
    killer.start()
    lost = tool({"caption": "red car"}, context)
    killer.join()
    assert lost.error and "lost" in lost.text and server.restarts == 1
    found = tool({"caption": "red car", "box_threshold": 0.0}, context)
    assert not found.error and '"num_detections"' in found.text
    tool.close()


def test_a_server_that_cannot_start_says_why() -> None:
    from vista_plugin_toolserve.http_client import ToolServerError

    with pytest.raises(ToolServerError, match="exited on start") as caught:
        LocalToolServer("no-such/tool", {}, start_timeout_s=120)
    assert "no-such/tool" in str(caught.value)


def test_tool_server_command_checks_ids_and_config() -> None:
    from click.testing import CliRunner

    from vista_rl.cli import build_cli

    unknown = CliRunner().invoke(build_cli(), ["tool-server", "--tool", "no-such/tool"])
    assert unknown.exit_code != 0
    bad_set = CliRunner().invoke(build_cli(), ["tool-server", "--tool", "mark", "--set", "ocr:language=deu"])
    assert bad_set.exit_code != 0 and "TOOL_ID:KEY=VALUE" in bad_set.output


def test_vlm_as_tool_served_over_http(context: ToolContext) -> None:
    pytest.importorskip("vista_plugin_detection")
    tool = http_tool("detection/chart-to-table", config={"backend": "scripted",
                                                         "backend_config": {"responses": ["| year | sales |"]}})
    try:
        assert tool.name == "chart_to_table"
        result = tool({"task": "to_table", "region": [0, 0, 48, 32]}, context)
        assert not result.error, result.text
        assert result.text.endswith("| year | sales |") and result.metadata["task_type"] == "to_table"
        assert tool({"task": "answer"}, context).error  # validated where the tool lives
    finally:
        tool.close()


def test_a_closed_served_tool_is_made_afresh() -> None:
    first = http_tool("mark")
    first.close()
    second = http_tool("mark")
    try:
        assert second is not first and not second({"points": [[1, 1]]}, ToolContext(images=[scene_image()])).error
    finally:
        second.close()


def scene_image():  # noqa: ANN201 - tiny helper
    from PIL import Image

    return Image.new("RGB", (32, 32), "white")
