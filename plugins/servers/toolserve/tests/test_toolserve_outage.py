"""A tool server at ``url=`` that comes and goes: down when the run starts, back, stopped and
started again on the same port, all within one episode of the real rollout engine.  Every call
made while it is down is an error result the model reads (naming the url and the retries), the
episode goes on, and the calls after it is back work."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import httpx
import pytest
from vista_plugin_toolserve.http_client import HttpToolTransport, free_port
from vista_plugin_toolserve.proxy import served_tool
from vista_plugin_toolserve.services import close_all

import vista_rl
from vista_rl import ModelBackend, SamplingParams, ToolContext
from vista_rl.config import RolloutSection
from vista_rl.rollout import EpisodeSpec, RolloutEngine

ENV = "visual_search/zoom-small-v0"
CALL = '<tool_call>{"name": "crop_zoom", "arguments": {"coordinate": [20, 20]}}</tool_call>'


class ToolServer:
    """``python -m vista_plugin_toolserve.http_server`` on a fixed port, stopped and started at will."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self.process: subprocess.Popen[bytes] | None = None
        self.starts = 0

    def start(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "vista_plugin_toolserve.http_server", "--tool", "crop_zoom",
             "--host", "127.0.0.1", "--port", str(self.port), "--threads", "2"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            assert self.process.poll() is None, "the tool server exited on start"
            try:
                if httpx.get(f"{self.url}/health", timeout=1.0).status_code == 200:
                    self.starts += 1
                    return
            except httpx.TransportError:
                time.sleep(0.1)
        raise AssertionError("the tool server did not start within 120 s")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=30)
        self.process = None


@pytest.fixture()
def server() -> Iterator[ToolServer]:
    running = ToolServer(free_port())
    yield running
    running.stop()
    close_all()


class Scheduled(ModelBackend):
    """The scripted backend (one response per turn), running ``before[k]`` before it answers turn
    ``k``: the response's tool call then meets the server in that state."""

    def __init__(self, responses: Sequence[str], before: dict[int, Callable[[], None]]) -> None:
        self.inner = vista_rl.make_model("scripted", responses=list(responses), per_turn=True)
        self.before = before
        self.turn = 0

    def generate(self, chats: Sequence[Any], params: SamplingParams, **kwargs: Any) -> Any:
        action = self.before.get(self.turn)
        if action is not None:
            action()
        self.turn += 1
        return self.inner.generate(chats, params, **kwargs)


def test_a_server_down_at_start_and_restarted_mid_episode(server: ToolServer) -> None:
    backend = Scheduled([CALL, CALL, CALL, CALL, "<answer>red</answer>"],
                        before={1: server.start, 2: server.stop, 3: server.start})
    settings = RolloutSection(max_turns=5, batch_size=1,
                              tools={"crop_zoom": {"use": "http/crop_zoom",
                                                   "config": {"url": server.url, "connect_retries": 1}}})
    local_schema = vista_rl.make_tool("crop_zoom").openai_schema()
    with RolloutEngine(backend, settings, seed=0) as engine:
        (trajectory,) = engine.run([EpisodeSpec(ENV, 0)])
        served = engine._tool_cache["crop_zoom"]
    calls = [turn.tool_calls[0] for turn in trajectory.turns[:4]]
    down = [calls[0], calls[2]]
    for call in down:
        assert call.error
        assert f"cannot reach the tool server at {server.url}" in call.result_text
        assert "retried 1 times" in call.result_text and "did not run" in call.result_text
    up = [calls[1], calls[3]]
    assert not any(call.error for call in up)
    assert calls[1].result_text.startswith("Zoomed view")  # "... It is image 1." then "image 2."
    assert calls[1].result_text.rsplit("image", 1)[0] == calls[3].result_text.rsplit("image", 1)[0]
    assert calls[1].num_images == calls[3].num_images == 1
    assert len(trajectory.turns) == 5 and "<answer>red</answer>" in trajectory.turns[4].response
    assert server.starts == 2
    # made while the server was down: described from the local registry, then by the server itself
    assert served.openai_schema() == local_schema and served.transport.schema_from_server


def test_a_tool_not_installed_here_gets_an_open_schema_and_error_results() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    tool = served_tool(HttpToolTransport("elsewhere/count-things", url, connect_retries=0))
    try:
        function = tool.openai_schema()["function"]
        assert tool.name == function["name"] == "count_things" and url in function["description"]
        assert function["parameters"]["additionalProperties"] is True
        result = tool({"anything": 1}, ToolContext())
        assert result.error and result.metadata == {"unreachable": True, "url": url, "retries": 0}
        assert "retried 0 times" in result.text and "ConnectError" in result.text
    finally:
        tool.close()


def test_config_errors_still_raise_when_the_server_answers(server: ToolServer) -> None:
    """Only an unreachable server is deferred; one that answers and lacks the tool is a config error."""
    from vista_plugin_toolserve.http_client import ToolServerError

    server.start()
    with pytest.raises(ToolServerError, match="does not host"):
        HttpToolTransport("mark", server.url)
