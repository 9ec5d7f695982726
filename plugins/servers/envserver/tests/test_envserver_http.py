"""The env server over real HTTP on 127.0.0.1: batched API, RemoteEnv, and every kind of bad request."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from vista_plugin_envserver.app import ServerSettings, create_app
from vista_plugin_envserver.client import EnvServerClient, EnvServerError, ItemError, RemoteEnv
from vista_plugin_envserver.codec import CONTENT_TYPE, pack, unpack
from vista_plugin_envserver.limits import ClientLimits, KeyRule, parse_key_rule
from vista_plugin_envserver.server import BackgroundServer

import vista_rl
from vista_rl import Env, Observation, StepResult
from vista_rl_sdk.checks import check_env, observation_fingerprint

ENV_ID = "oddshape/odd-colour-v0"
TOKEN = "s3cret-token"


@pytest.fixture(scope="module")
def server() -> Iterator[BackgroundServer]:
    settings = ServerSettings(env_ids=[ENV_ID], env_config={ENV_ID: {"grid": 3, "cell_size": 24}},
                              max_sessions=64, max_body_bytes=64 * 1024, max_batch=32)
    with BackgroundServer(settings) as running:
        yield running


@pytest.fixture(scope="module")
def token_server() -> Iterator[BackgroundServer]:
    with BackgroundServer(ServerSettings(env_ids=[ENV_ID], token=TOKEN)) as running:
        yield running


def _post(server: BackgroundServer, path: str, content: bytes, headers: dict[str, str] | None = None) -> httpx.Response:
    return httpx.post(server.url + path, content=content,
                      headers={"content-type": CONTENT_TYPE, **(headers or {})}, timeout=10)


def _healthy(server: BackgroundServer) -> bool:
    return httpx.get(server.url + "/health", timeout=5).json()["status"] == "ok"


def test_batched_reset_and_step_match_local_envs(server: BackgroundServer) -> None:
    client = EnvServerClient(server.url)
    sessions = client.create(4)
    seeds = [3, 4, 5, 6]
    resets = client.reset([(s.id, seed) for s, seed in zip(sessions, seeds, strict=True)])
    local = vista_rl.make_env(ENV_ID, grid=3, cell_size=24)
    for (observation, info), seed in zip(resets, seeds, strict=True):  # type: ignore[misc]
        expected, expected_info = local.reset(seed=seed)
        assert observation_fingerprint(observation) == observation_fingerprint(expected)
        assert info == expected_info
    answers = [f"<think>x</think><answer>{info['answer']}</answer>" for _, info in resets]  # type: ignore[misc]
    answers[1] = "no tags at all"
    steps = client.step([(s.id, a) for s, a in zip(sessions, answers, strict=True)])
    assert [r.reward for r in steps] == [1.0, 0.0, 1.0, 1.0]  # type: ignore[union-attr]
    assert steps[1].info["format_ok"] is False  # type: ignore[union-attr]
    assert client.close_sessions([s.id for s in sessions]) == 4
    assert client.close_sessions([s.id for s in sessions]) == 0  # idempotent


def test_remote_env_passes_check_env(server: BackgroundServer) -> None:
    # through the registry, exactly as a rollout would make it; includes the cross-process check
    check_env("remote", {"url": server.url, "env": ENV_ID})
    check_env(f"remote/{ENV_ID}", {"url": server.url}, cross_process=False)


def test_remote_env_is_a_vista_env_with_prompt_and_oracle(server: BackgroundServer) -> None:
    with vista_rl.make_env("remote", url=server.url) as env:
        assert isinstance(env, Env)
        assert "grid of shapes" in env.system_prompt()
        observation, info = env.reset(seed=11)
        assert len(observation.images) == 1
        oracle = env.oracle_response()
        assert oracle is not None and str(info["answer"]) in oracle
        result = env.step(oracle)
        assert result.reward == 1.0 and result.terminated


def test_unknown_session_is_404_and_changes_nothing(server: BackgroundServer) -> None:
    client = EnvServerClient(server.url)
    good = client.create(1)[0]
    client.reset([(good.id, 1)])
    with pytest.raises(EnvServerError) as caught:
        client.step([(good.id, "<answer>1</answer>"), ("nope", "<answer>1</answer>")])
    assert caught.value.status == 404 and "unknown session 'nope'" in caught.value.message
    # the valid session in the rejected batch did not move: its episode is still open
    result = client.step([(good.id, "<think>t</think><answer>1</answer>")])[0]
    assert isinstance(result, StepResult) and "episode is over" not in result.observation.text
    client.close_sessions([good.id])


@pytest.mark.parametrize(("body", "status", "words"), [
    (b"\xc1\xc1 not msgpack", 400, "malformed body"),
    (pack([1, 2, 3]), 400, "expected a map"),
    (pack({"items": [{"session": 5}]}), 422, "items.0.session"),
    (pack({"items": [], "surprise": 1}), 422, "surprise"),
    (pack({"items": [{"session": "a", "action": "x"}] * 33}), 413, "batch of 33"),
    (b"\x00" * (65 * 1024), 413, "exceeds the limit"),
])
def test_bad_bodies_get_clear_errors(server: BackgroundServer, body: bytes, status: int, words: str) -> None:
    response = _post(server, "/step", body)
    assert response.status_code == status
    assert words in response.json()["error"]
    assert _healthy(server)


def test_oversized_chunked_body_without_content_length(server: BackgroundServer) -> None:
    def chunks() -> Any:
        for _ in range(100):
            yield b"\x00" * 1024

    response = httpx.post(server.url + "/step", content=chunks(), headers={"content-type": CONTENT_TYPE}, timeout=10)
    assert response.status_code == 413
    assert _healthy(server)


def test_json_bodies_are_accepted_for_debugging(server: BackgroundServer) -> None:
    response = httpx.post(server.url + "/sessions", json={"count": 1}, timeout=10)
    assert response.status_code == 200
    session_id = unpack(response.content)["sessions"][0]["id"]
    assert EnvServerClient(server.url).close_sessions([session_id]) == 1


def test_token_auth(token_server: BackgroundServer) -> None:
    for headers, words in (({}, "missing bearer token"), ({"authorization": "Bearer wrong"}, "wrong bearer token"),
                           ({"authorization": "Basic abc"}, "missing bearer token")):
        response = _post(token_server, "/sessions", pack({"count": 1}), headers)
        assert response.status_code == 401 and words in response.json()["error"]
        assert response.headers["www-authenticate"] == "Bearer"
    with pytest.raises(EnvServerError) as caught:
        RemoteEnv(token_server.url, token="wrong")
    assert caught.value.status == 401
    with RemoteEnv(token_server.url, token=TOKEN) as env:
        observation, _ = env.reset(seed=0)
        assert observation.images
    assert _healthy(token_server)  # /health stays open for probes


def test_token_from_environment(token_server: BackgroundServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VISTA_ENV_SERVER_TOKEN", TOKEN)
    with RemoteEnv(token_server.url) as env:
        env.reset(seed=1)


def test_bad_env_config_and_unknown_env_id(server: BackgroundServer) -> None:
    client = EnvServerClient(server.url)
    with pytest.raises(EnvServerError) as caught:
        client.create(1, config={"grid": 99})
    assert caught.value.status == 400 and "grid" in caught.value.message
    with pytest.raises(EnvServerError) as caught:
        client.create(1, env_id="other/env-v0")
    assert caught.value.status == 404 and ENV_ID in caught.value.message
    assert _healthy(server)


def test_session_cap() -> None:
    with BackgroundServer(ServerSettings(env_ids=[ENV_ID], max_sessions=3)) as server:
        client = EnvServerClient(server.url)
        sessions = client.create(2)
        with pytest.raises(EnvServerError) as caught:
            client.create(2)
        assert caught.value.status == 429 and "session cap" in caught.value.message
        client.close_sessions([sessions[0].id])
        assert len(client.create(2)) == 2  # room again after closing


def test_idle_sessions_expire() -> None:
    # 0.5 s of idleness, not less: on a loaded 2-core CI machine the two requests after the keep-alive
    # loop have taken over 0.2 s, so the busy session expired too.
    with BackgroundServer(ServerSettings(env_ids=[ENV_ID], idle_timeout_s=0.5)) as server:
        client = EnvServerClient(server.url)
        idle, busy = client.create(2)
        deadline = time.monotonic() + 1.2
        while time.monotonic() < deadline:
            client.reset([(busy.id, 0)])  # keeps the busy session alive
            time.sleep(0.05)
        with pytest.raises(EnvServerError) as caught:
            client.reset([(idle.id, 0)])
        assert caught.value.status == 404 and "expired" in caught.value.message
        assert isinstance(client.reset([(busy.id, 0)])[0], tuple)
        assert client.health()["sessions"]["expired"] == 1


class _CrashingEnv(Env):
    """Raises on step (a buggy env): the server must report it per item and keep serving."""

    def reset(self, seed: int | None = None) -> tuple[Observation, dict[str, Any]]:
        return Observation("ready"), {}

    def step(self, action: str) -> StepResult:
        if action == "boom":
            raise RuntimeError("kaboom")
        return StepResult(Observation("fine"), 1.0, False, False)


def test_crashing_env_fails_only_its_item() -> None:
    settings = ServerSettings(env_ids=["test/crash-v0"])
    app = create_app(settings, make_env=lambda _id, _config: _CrashingEnv())
    with BackgroundServer(settings, app=app) as server:
        client = EnvServerClient(server.url)
        a, b = client.create(2)
        results = client.step([(a.id, "boom"), (b.id, "ok")])
        assert isinstance(results[0], ItemError) and "kaboom" in results[0].message
        assert isinstance(results[1], StepResult) and results[1].reward == 1.0
        env = RemoteEnv(server.url)
        result = env.step("boom")  # never raises out of an Env
        assert result.truncated and "kaboom" in result.info["env_error"]
        assert env.step("ok").reward == 1.0


def test_lone_surrogate_action_is_a_bad_action_not_an_exception(server: BackgroundServer) -> None:
    """``"\\ud800"`` cannot be UTF-8 encoded; it must reach the env as an ordinary malformed action."""
    with RemoteEnv(server.url) as env:
        env.reset(seed=2)
        result = env.step("\ud800")
        assert not result.truncated and "env_error" not in result.info
        assert result.info["format_ok"] is False and result.reward == 0.0
        assert result.observation.text.startswith("Invalid response format")
        # a surrogate pair split into two code points is joined, a lone one replaced: the answer still counts
        _, info = env.reset(seed=3)
        result = env.step(f"<think>\ud83d\ude00 \udfff</think><answer>{info['answer']}</answer>")
        assert result.reward == 1.0 and result.info["success"]


class _SurrogateEnv(Env):
    """Echoes a lone surrogate in its observation (say, from a byte-level detokenizer)."""

    def reset(self, seed: int | None = None) -> tuple[Observation, dict[str, Any]]:
        return Observation("start \ud800"), {}

    def step(self, action: str) -> StepResult:
        return StepResult(Observation(f"you said {action!s} \udc80"), 0.0, False, False)


def test_surrogates_in_observations_do_not_fail_the_batch() -> None:
    settings = ServerSettings(env_ids=["test/surrogate-v0"])
    app = create_app(settings, make_env=lambda _id, _config: _SurrogateEnv())
    with BackgroundServer(settings, app=app) as server, RemoteEnv(server.url) as env:
        observation, _ = env.reset(seed=0)
        assert observation.text == "start \ufffd"
        result = env.step("hi")
        assert not result.truncated and result.observation.text == "you said hi \ufffd"


def test_remote_env_step_survives_a_dead_server() -> None:
    server = BackgroundServer(ServerSettings(env_ids=[ENV_ID])).start()
    env = RemoteEnv(server.url, timeout_s=2)
    env.reset(seed=0)
    server.stop()
    result = env.step("<answer>1</answer>")
    assert result.truncated and "unreachable" in result.info["env_error"]
    env.close()  # quiet even though the server is gone


# ---------------------------------------------------------------- issue 13 item 5: hostile clients

def test_client_config_that_renders_huge_frames_is_refused() -> None:
    # {"size": 32, "tile_size": 256} made 192 MB FrozenLake frames; 8 sessions took a server to 8 GB
    with BackgroundServer(ServerSettings(env_ids=["frozenlake/frozenlake-v0"])) as running:
        client = EnvServerClient(running.url)
        with pytest.raises(EnvServerError) as caught:
            client.create(8, config={"size": 32, "tile_size": 256})
        assert caught.value.status == 413 and "8192x8192" in caught.value.message
        assert httpx.get(running.url + "/health", timeout=5).json()["sessions"]["open"] == 0  # none kept
        with pytest.raises(EnvServerError) as caught:
            client.create(1, config={"size": 10**9})
        assert caught.value.status == 422 and "outside" in caught.value.message
        small = client.create(1, config={"size": 4, "tile_size": 16})  # a sane config still works
        observation, _ = client.reset([(small[0].id, 0)])[0]  # type: ignore[misc]
        assert observation.images[0].size == (64, 64)


def test_an_oversized_frame_fails_its_item_not_the_batch() -> None:
    settings = ServerSettings(env_ids=[ENV_ID], env_config={ENV_ID: {"grid": 3, "cell_size": 24}},
                              limits=ClientLimits(max_image_pixels=60 * 60))
    with BackgroundServer(settings) as running:  # the operator's own config renders 72x72 frames
        client = EnvServerClient(running.url)
        session = client.create(1)[0]
        result = client.reset([(session.id, 0)])[0]
        assert isinstance(result, ItemError) and "72x72" in result.message
        assert _healthy(running)


def test_allow_listed_client_config_keys_and_ranges() -> None:
    limits = ClientLimits(allowed={"grid": KeyRule(minimum=2, maximum=4), "palette": KeyRule(choices=("a", "b"))})
    with BackgroundServer(ServerSettings(env_ids=[ENV_ID], limits=limits)) as running:
        client = EnvServerClient(running.url)
        for config, status, words in (({"cell_size": 8}, 403, "cell_size"), ({"grid": 5}, 422, "maximum 4"),
                                      ({"grid": "3"}, 422, "must be a number"), ({"palette": "z"}, 422, "not one of")):
            with pytest.raises(EnvServerError) as caught:
                client.create(1, config=config)
            assert caught.value.status == status and words in caught.value.message, caught.value.message
        assert client.create(1, config={"grid": 3})


@pytest.mark.parametrize("body", [
    b"[" * 60_000,
    b'{"config": {"a": ' + b"[" * 5_000 + b"]" * 5_000 + b"}}",
    b'{"config": {"a": ' + b"[" * 500 + b"]" * 500 + b"}}",  # parses, but deeper than any real body
    b"\x91" * 60_000,  # msgpack
])
def test_deeply_nested_bodies_are_400_not_500(server: BackgroundServer, body: bytes) -> None:
    content_type = "application/msgpack" if body.startswith(b"\x91") else "application/json"
    response = _post(server, "/sessions", body, {"content-type": content_type})
    assert response.status_code == 400 and "malformed body" in response.json()["error"]
    assert _healthy(server)


@pytest.mark.parametrize("path", ["/docs", "/openapi.json", "/redoc"])
def test_docs_need_the_token_when_one_is_set(token_server: BackgroundServer, path: str) -> None:
    assert httpx.get(token_server.url + path, timeout=10).status_code == 401
    assert httpx.get(token_server.url + path, headers={"authorization": f"Bearer {TOKEN}"}, timeout=10).status_code == 200


def test_parse_key_rule() -> None:
    assert parse_key_rule("size=2..8") == ("size", KeyRule(minimum=2, maximum=8))
    assert parse_key_rule("size=..8") == ("size", KeyRule(maximum=8))
    assert parse_key_rule("slippery=true|false") == ("slippery", KeyRule(choices=(True, False)))
    assert parse_key_rule("seed_offset") == ("seed_offset", KeyRule())
    with pytest.raises(ValueError, match="MIN..MAX"):
        parse_key_rule("size=a..b")
