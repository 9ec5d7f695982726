"""Tools in real Ray actors (a local cluster): same results as in process, killed workers replaced."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

import vista_rl
from vista_rl import ToolContext

ray = pytest.importorskip("ray")

from vista_plugin_toolserve.proxy import ServedTool  # noqa: E402
from vista_plugin_toolserve.ray_service import RayToolTransport  # noqa: E402


@pytest.fixture(scope="module", autouse=True)
def local_ray() -> Iterator[None]:
    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    from vista_plugin_toolserve.services import close_all

    close_all()
    if started:
        ray.shutdown()


def test_ray_tool_matches_the_local_tool(context: ToolContext) -> None:
    served = vista_rl.make_tool("ray/mark", replicas=1)
    assert isinstance(served, ServedTool) and vista_rl.make_tool("ray/mark", replicas=1) is served
    local = vista_rl.make_tool("mark")
    assert served.name == "mark" and served.openai_schema() == local.openai_schema()
    arguments = {"boxes": [[50, 20, 80, 60]], "image": 0}
    here, there = local(arguments, context), served(arguments, context)
    assert not there.error and there.text == here.text and there.images[0].tobytes() == here.images[0].tobytes()
    assert served({"boxes": [[1, 2]]}, context).error


def test_killed_worker_is_replaced_and_the_call_is_an_error(tiny_detector: Path, context: ToolContext) -> None:
    transport = RayToolTransport("detection/grounding-dino",
                                 {"model": str(tiny_detector), "device": "cpu", "max_wait_ms": 3000},
                                 replicas=1, call_timeout_s=60)
    try:
        from vista_plugin_toolserve.proxy import served_tool

        tool = served_tool(transport)
        assert tool.name == "grounding_dino"
        pid = transport.worker_pid()
        killer = threading.Timer(1.0, os.kill, (pid, signal.SIGKILL))  # mid-call: the detector waits 3 s
        killer.start()
        lost = tool({"caption": "red car"}, context)
        killer.join()
        assert lost.error and "died during this call" in lost.text and lost.metadata["worker_lost"]
        assert transport.replacements == 1
        found = tool({"caption": "red car", "box_threshold": 0.0}, context)
        assert not found.error, found.text
        assert found.metadata["num_detections"] > 0 and transport.worker_pid() != pid
    finally:
        transport.close()


def test_a_hung_call_times_out_into_an_error(tiny_detector: Path, context: ToolContext) -> None:
    transport = RayToolTransport("detection/grounding-dino",
                                 {"model": str(tiny_detector), "device": "cpu", "max_wait_ms": 5000},
                                 replicas=1, call_timeout_s=1.0)
    try:
        result = transport.call({"caption": "car"}, context)
        assert result.error and "did not answer" in result.text and transport.replacements == 1
    finally:
        transport.close()
