"""``POST /observe`` is bounded like ``/step`` (issue 33, item 2): the limits as functions, then over
real HTTP on 127.0.0.1.

The attacks these replay: eight ~7 MB requests, each one call whose argument held a 7M-element list,
grew a server by 430 MB for the session's life; 12,000 distinct zoom points sent through
``/observe`` lifted a grounded reward to 960.9 and made the final ``/step`` take 5.1 s."""

from __future__ import annotations

import gc
import random
import sys
import time
import tracemalloc
from collections.abc import Sequence
from typing import Any

import pytest
from vista_plugin_envserver.app import ServerSettings, create_app
from vista_plugin_envserver.client import EnvServerClient, ItemError
from vista_plugin_envserver.codec import CONTENT_TYPE, pack, unpack
from vista_plugin_envserver.limits import LimitError
from vista_plugin_envserver.observe_limits import (
    PARSED_VALUE_BYTES,
    ObserveLimits,
    ObserveUsage,
    held_bytes,
    response_bytes,
)
from vista_plugin_envserver.server import BackgroundServer
from vista_plugin_grounding.coords import format_bonus

import vista_rl
from vista_rl import Env, Observation, StepResult, ToolCallRecord
from vista_rl.config import RolloutSection
from vista_rl.rollout import RolloutEngine, episode_specs
from vista_rl.serving import nesting_depth

SPOT = "grounding/zoom-spot-v0"  # grounding_reward: multi_turn by default
MiB = 1024 * 1024


def _call(arguments: Any, name: str = "zoom", result_text: str = "") -> ToolCallRecord:
    return ToolCallRecord(name, arguments, result_text, 0, False)


# ------------------------------------------------------------------------------- the functions

def test_held_bytes_counts_the_memory_of_json_values() -> None:
    arguments = {"coordinate": [3, 4.5], "label": "dot", "flag": True, "none": None}
    expected = (sys.getsizeof(arguments) + sys.getsizeof([3, 4.5]) + sys.getsizeof(3) + sys.getsizeof(4.5)
                + sys.getsizeof("dot") + sum(sys.getsizeof(key) for key in arguments))
    assert held_bytes(arguments, 10_000, 8, "args") == expected
    assert held_bytes([[[1]]], 10_000, 3, "args") > 0  # depth as nesting_depth counts it: 3


@pytest.mark.parametrize(("value", "status", "words"), [
    ([0] * 100_000, 413, "more than 16,384 bytes"),  # refused on the list's own size, unwalked
    ({"text": "x" * 20_000}, 413, "more than 16,384 bytes"),
    ([[[[[[[[[1]]]]]]]]], 422, "deeper than 8 levels"),
    ({"a": b"\x00"}, 422, "holds a bytes"),
    ({1: "a"}, 422, "keys must be strings"),
    ({"a": {1, 2}}, 422, "holds a set"),
])
def test_held_bytes_refuses_large_deep_and_non_json_values(value: Any, status: int, words: str) -> None:
    with pytest.raises(LimitError) as caught:
        held_bytes(value, 16 * 1024, 8, "call 0's arguments")
    assert caught.value.status == status and words in caught.value.message
    assert caught.value.message.startswith("call 0's arguments")


def test_a_response_is_charged_for_what_a_parse_of_it_may_keep() -> None:
    plain, parsable = "x" * 300, "[" + ",".join(["{}"] * 100) + "]"
    assert response_bytes(plain) == 2 * sys.getsizeof(plain) + PARSED_VALUE_BYTES
    assert response_bytes(parsable) == 2 * sys.getsizeof(parsable) + PARSED_VALUE_BYTES * 201
    assert response_bytes("\ud800") > 0  # a lone surrogate (from a JSON body) is counted, not an error


def test_admit_charges_an_episode_and_refuses_without_charging() -> None:
    limits = ObserveLimits(max_turns_per_episode=3, max_calls_per_episode=5, max_bytes_per_episode=5000)
    usage = ObserveUsage()
    limits.admit(usage, "r", [_call({"coordinate": [1, 2]})] * 2)
    assert (usage.turns, usage.calls) == (1, 2) and 0 < usage.bytes < 3000
    before = (usage.turns, usage.calls, usage.bytes)
    for response, calls, words in [
        ("r", [_call({"coordinate": [1, 2]})] * 4, "limit of 5 per episode"),
        ("x" * 2000, [], "5,000 bytes per session per episode"),
        ("[" + "0," * 20 + "0]", [], "5,000 bytes per session per episode"),  # 21 values it could parse into
        ("r", [_call({"v": [0] * 10_000})], "more than 16,384 bytes"),
        ("x" * (64 * 1024 + 1), [], "65,537 characters"),
        ("r", [_call({}, name="n" * 300)], "tool name"),
        ("r", [_call({}, result_text=None)], "result_text must be a string"),  # type: ignore[arg-type]
    ]:
        with pytest.raises(LimitError) as caught:
            limits.admit(usage, response, calls)
        assert words in caught.value.message
        assert (usage.turns, usage.calls, usage.bytes) == before  # a refused item costs nothing
    limits.admit(usage, "r", [])
    limits.admit(usage, "r", [])
    with pytest.raises(LimitError, match="3 tool turns this episode"):
        limits.admit(usage, "r", [])
    usage.clear()  # a reset starts a new episode
    limits.admit(usage, "r", [_call({})] * 5)


def _walked_depth(value: Any, stop_at: int) -> int:
    """The element-by-element walk ``nesting_depth`` used to be (the reference for its answers)."""
    deepest, stack = 0, [(value, 0)]
    while stack:
        item, depth = stack.pop()
        deepest = max(deepest, depth)
        if deepest > stop_at:
            return deepest
        children = item.values() if isinstance(item, dict) else item if isinstance(item, (list, tuple)) else ()
        stack.extend((child, depth + 1) for child in children)
    return deepest


def test_nesting_depth_answers_as_the_walk_did_and_reads_flat_lists_whole() -> None:
    """The body check every request passes (``vista_rl.serving.nesting_depth``) now visits only
    containers: a 7M-element list took 11 s on the event loop before.  Same answers as the walk."""
    rng = random.Random(0)

    def value(depth: int) -> Any:
        roll = rng.random()
        if depth > 10 or roll < 0.3:
            return rng.choice([1, "s", None, 2.5, True])
        children = [value(depth + 1) for _ in range(rng.randint(0, 3))]
        return children if roll < 0.6 else tuple(children) if roll < 0.7 else {str(i): c for i, c in enumerate(children)}

    for _ in range(3000):
        sample, stop_at = value(0), rng.randint(0, 12)
        expected = _walked_depth(sample, stop_at)
        got = nesting_depth(sample, stop_at)
        assert got == expected or (got > stop_at and expected > stop_at), (sample, stop_at)
    shapes: list[Any] = [5, [], [1], {"a": [1]}, [[], [[]]], {"a": {}}]
    assert [nesting_depth(shape, 32) for shape in shapes] == [0, 0, 1, 2, 2, 1]
    deep: list[Any] = []
    cursor = deep
    for _ in range(100_000):
        cursor.append([])
        cursor = cursor[0]
    assert nesting_depth(deep, 32) == 33
    assert nesting_depth({"items": [{"v": [0] * 1_000_000}]}, 32) == 4


# ------------------------------------------------------------------------------- over HTTP

class _Recorder(Env):
    """Keeps everything ``/observe`` shows it, for the session's life: the worst case for memory."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, list[ToolCallRecord]]] = []

    def reset(self, seed: int | None = None) -> tuple[Observation, dict[str, Any]]:
        return Observation("hello"), {}

    def step(self, action: str) -> StepResult:
        return StepResult(Observation("ok"), 0.0, False, False)

    def observe_tool_turn(self, response: str, calls: Sequence[ToolCallRecord]) -> None:
        self.seen.append((response, list(calls)))


def _recording_server(settings: ServerSettings) -> tuple[BackgroundServer, list[_Recorder]]:
    made: list[_Recorder] = []

    def make(_env_id: str, _config: dict[str, Any]) -> Env:
        made.append(_Recorder())
        return made[-1]

    return BackgroundServer(settings, app=create_app(settings, make_env=make)), made


def _traced_growth(action: Any) -> int:
    """Bytes of Python memory ``action`` leaves allocated (the server runs in this process)."""
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        action()
        gc.collect()
        return tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()


def test_a_7mb_argument_is_refused_per_item_and_the_server_keeps_none_of_it() -> None:
    """Eight ~7 MB requests, each with one call whose argument holds a 7M-element list (the attack
    took a server from 71 to 503 MB): each such item is refused with an item error, the small item
    beside it in the batch still runs, and what stays allocated is far under the per-session bound."""
    import httpx

    server, made = _recording_server(ServerSettings(env_ids=["test/recorder-v0"]))
    with server:
        client = EnvServerClient(server.url)
        hostile, fine = client.create(2)
        body = pack({"items": [
            {"session": hostile.id, "response": "r", "calls": [{"name": "zoom", "arguments": {"v": [0] * 7_000_000}}]},
            {"session": fine.id, "response": "ok", "calls": [{"name": "zoom", "arguments": {"coordinate": [1, 2]}}]},
        ]})
        assert 7_000_000 < len(body) < 8 * MiB  # under the body limit: only the new limits refuse it
        replies: list[Any] = []

        def attack() -> None:
            with httpx.Client(base_url=server.url, timeout=60) as http:
                for _ in range(8):
                    response = http.post("/observe", content=body, headers={"content-type": CONTENT_TYPE})
                    replies.append((response.status_code, unpack(response.content)))

        growth = _traced_growth(attack)
        # the old server kept ~56 MB per request; the bound is 1 MiB per session per episode
        assert growth < 4 * MiB, f"{growth / MiB:.1f} MiB stayed allocated"
        for status, reply in replies:
            refused, accepted = reply["results"]
            assert status == 200 and accepted == {"ok": True}
            assert refused["ok"] is False and "arguments holds more than" in refused["error"]
        assert made[0].seen == [] and len(made[1].seen) == 8


def test_a_session_holds_at_most_its_episode_budget() -> None:
    """A client that fills one episode with the largest items each limit allows, to an env that
    keeps all it is shown: what stays allocated is within ``max_bytes_per_episode`` (4 MiB); calls
    and turns per episode are capped; a reset starts over."""
    limits = ObserveLimits()
    server, made = _recording_server(ServerSettings(env_ids=["test/recorder-v0"]))  # the default limits
    with server:
        client = EnvServerClient(server.url)
        (session,) = client.create(1)
        big = [_call({"text": "x" * 15_000}, result_text="y" * 60_000)]

        def flood() -> None:
            for _ in range(40):
                client.observe_tool_turn([(session.id, "r" * 60_000, big)])

        growth = _traced_growth(flood)
        kept = sum(sys.getsizeof(response) + sum(sys.getsizeof(call.result_text) + held_bytes(call.arguments, MiB, 8, "")
                                                  for call in calls) for response, calls in made[0].seen)
        assert 0 < len(made[0].seen) < 40 and kept <= limits.max_bytes_per_episode
        assert growth < limits.max_bytes_per_episode, f"{growth / MiB:.1f} MiB stayed allocated"

        client.reset([(session.id, 0)])
        results = client.observe_tool_turn([(session.id, "r", [_call({"coordinate": [i, i]})] * 64)
                                            for i in range(5)])
        assert results[:4] == [None] * 4  # 256 calls this episode
        assert isinstance(results[4], ItemError) and "limit of 256 per episode" in results[4].message
        client.reset([(session.id, 0)])
        results = client.observe_tool_turn([(session.id, "r", [])] * 65)
        assert results[:64] == [None] * 64
        assert isinstance(results[64], ItemError) and "64 tool turns this episode" in results[64].message


def _tool_call(arguments: str) -> str:
    return '<tool_call>{"name":"search_coordinate","arguments":' + arguments + "}</tool_call>"


@pytest.mark.parametrize("response", [
    "<think>(1, 2)</think>" + _tool_call('{"coordinate":[1,2],' + ",".join(f'"{i:x}":0' for i in range(3000)) + "}"),
    "".join(_tool_call(f'{{"coordinate":[{i},{i}]}}') for i in range(600)),
    _tool_call('{"coordinate":[1,2],"x":[' + ",".join(["{}"] * 2500) + "]}"),
], ids=["many-keys", "many-tool-calls", "many-dicts"])
def test_a_grounded_env_keeps_at_most_the_episode_budget(response: str) -> None:
    """What the real zoom env keeps (every response and a parse of its ``<tool_call>`` JSON) when a
    client repeats a response built to parse into many objects, 70 times in one episode: within the
    stated bound, ``max_bytes_per_episode`` (the old server let all 70 in: 20 to 40 MiB)."""
    limits = ObserveLimits()
    with BackgroundServer(ServerSettings(env_ids=[SPOT])) as server:
        client = EnvServerClient(server.url)
        (session,) = client.create(1)
        client.reset([(session.id, 0)])
        results: list[Any] = []
        growth = _traced_growth(lambda: results.extend(
            client.observe_tool_turn([(session.id, response, [])])[0] for _ in range(70)))
    assert growth < limits.max_bytes_per_episode, f"{growth / MiB:.1f} MiB stayed allocated"
    accepted = results.count(None)
    assert 0 < accepted < 70 and "bytes per session per episode" in results[-1].message


def _oracle_reward(url: str, seed: int) -> float:
    specs = episode_specs("remote", [seed], env_config={"url": url, "env": SPOT})
    with RolloutEngine(vista_rl.make_model("scripted", path="oracle"), RolloutSection()) as engine:
        (trajectory,) = engine.run(specs)
    assert trajectory.failure is None and trajectory.success
    return trajectory.total_reward


def test_12000_observed_points_never_beat_an_honest_episode_and_the_step_stays_fast() -> None:
    """12,000 distinct zoom points (10 px apart, on the image and off it) over a few ``/observe``
    requests, then the oracle's answer: the reward is never above what an honest episode can earn
    under the env's stated rule, and ``/step`` takes under 0.1 s (the fastest of three sessions, so a
    loaded machine does not fail it).  Needs both sides of issue 33: the server's caps and the env's
    (the grounded bonus capped, errored, over-budget and off-image calls ignored, unique points
    counted in linear time).

    The ceiling is not the oracle's own episode: ViGoRL's multi-turn rule pays +0.2 format per
    distinct zoom beyond the first, so an honest policy that zooms at two places within zoom-spot's
    image budget (3 images: the view and two zooms) earns 1.08 to the one-zoom oracle's 1.00.  The
    spam must earn no more than that (it earned 960.9 before the fix)."""
    points = [(10 * i, 10 * j) for i in range(120) for j in range(100)]
    seeds = [0, 3, 5]
    with BackgroundServer(ServerSettings(env_ids=[SPOT])) as server:
        oracle = max(_oracle_reward(server.url, seed) for seed in seeds)
        client = EnvServerClient(server.url)
        sessions = client.create(len(seeds), env_id=SPOT)
        client.reset([(s.id, seed) for s, seed in zip(sessions, seeds, strict=True)])
        for session in sessions:
            for start in range(0, len(points), 4000):  # three requests per session
                chunk = points[start:start + 4000]
                client.observe_tool_turn([
                    (session.id, f"<think>The frame is at {chunk[k]}.</think>",
                     [_call({"coordinate": list(point)}, name="search_coordinate") for point in chunk[k:k + 64]])
                    for k in range(0, len(chunk), 64)])
        rewards, seconds = [], []
        for session in sessions:
            (answer,) = client.oracle([session.id])
            assert answer is not None and "<answer>" in answer
            started = time.perf_counter()
            (result,) = client.step([(session.id, answer)])
            seconds.append(time.perf_counter() - started)
            assert isinstance(result, StepResult) and result.terminated
            rewards.append(result.reward)
    config = vista_rl.make_env(SPOT).config
    distinct_zooms = min(config.max_images - 1, config.bonus_points)
    honest_best = config.correct_reward + config.coordinate_reward * format_bonus(distinct_zooms, config.bonus_points)
    assert oracle <= honest_best + 1e-9
    assert max(rewards) <= honest_best + 1e-9, f"spam earned {max(rewards):.2f}, an honest episode at most {honest_best:.2f}"
    assert min(seconds) < 0.1, f"/step took {min(seconds):.2f} s"
