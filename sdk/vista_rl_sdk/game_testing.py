"""Test helpers for text-action games (imported by the plugins' tests; needs ``hypothesis``).

- :func:`model_outputs`: a hypothesis strategy of hostile model responses (empty, 1 MB, unicode,
  JSON, unclosed tags, wrong case, stray separators) mixed with well-formed ones.
- :func:`episode_fingerprint` / :func:`fingerprint_in_subprocess`: a hash of a whole episode
  (every observation's text and pixels, rewards, flags) to compare across processes.
- :func:`play_oracle_checked`: the oracle's responses parse strictly and its predictions come true.
- :func:`assert_incremental_frames_match`: a game's repainted frames equal full redraws.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Sequence
from typing import Any

import vista_rl
from vista_rl import observation_fingerprint
from vista_rl_sdk.fresh_process import call_in_fresh_process


def model_outputs(action_names: Sequence[str], sep: str = ",") -> Any:
    """Strategy of arbitrary response strings, biased toward the shapes that break parsers."""
    from hypothesis import strategies as st

    names = st.sampled_from([*action_names, *(n.upper() for n in action_names), *(n.lower() for n in action_names),
                             "Jump", "", " ", "Up Down", "↑", "0"])
    answer = st.lists(names, max_size=6).map(lambda parts: sep.join(parts))
    seps = st.sampled_from([sep, sep * 3, f" {sep} ", ";", "|", "\n"])
    joined = st.tuples(st.lists(names, max_size=5), seps).map(lambda pair: pair[1].join(pair[0]))
    tag = st.sampled_from(["think", "answer", "observation", "reasoning", "prediction", "tool_call", "ANSWER"])
    fragments = st.one_of(
        st.text(max_size=60),
        answer, joined,
        tag.map(lambda t: f"<{t}>"), tag.map(lambda t: f"</{t}>"),
        st.just('{"action": "Up", "nested": [1, {"a": null}]}'),
        st.just("<answer>" + "Left," * 50),
        st.just("\x00\ud7ff\U0001f916"),
    )
    composed = st.lists(fragments, max_size=8).map("".join)
    wrapped = st.tuples(st.text(max_size=30), answer).map(
        lambda pair: f"<think>{pair[0]}</think><answer>{pair[1]}</answer>")
    huge = st.sampled_from(["x" * 1_000_000, "<answer>" + "Up," * 300_000 + "</answer>",
                            "<think>" * 10_000])
    return st.one_of(composed, wrapped, huge, st.text(), st.just(""))


def episode_fingerprint(env_id: str, config: dict[str, Any], seed: int, responses: Sequence[str]) -> str:
    """Hash of an episode: reset(seed), then the responses (``"oracle"`` means the env's oracle)."""
    env = vista_rl.make_env(env_id, **config)
    digest = hashlib.sha256()

    def add(observation: vista_rl.Observation, *extra: object) -> None:
        digest.update(observation_fingerprint(observation).encode())
        digest.update(repr(extra).encode())

    observation, _ = env.reset(seed=seed)
    add(observation)
    for response in responses:
        text = env.oracle_response() if response == "oracle" else response
        result = env.step(text or "")
        add(result.observation, round(result.reward, 9), result.terminated, result.truncated,
            result.info.get("success"), result.info.get("state"))
    env.close()
    return digest.hexdigest()


def fingerprint_in_subprocess(env_id: str, config: dict[str, Any], seed: int, responses: Sequence[str],
                              hash_seed: str = "4242") -> str:
    """The same fingerprint computed in a fresh interpreter with another ``PYTHONHASHSEED``."""
    return str(call_in_fresh_process("vista_rl_sdk.game_testing:episode_fingerprint", env_id, config, seed,
                                     list(responses), hash_seed=hash_seed, timeout=120))


def play_oracle_checked(env: Any, seed: int, max_turns: int = 200) -> vista_rl.StepResult:
    """Play one episode with the oracle, asserting every response parses strictly in the env's
    prompt format and every ``<prediction>`` matches the true state after the turn.  Returns the
    last step result."""
    from vista_rl import parse_response

    env.reset(seed=seed)
    strict = env._format.response_format(strict=True)
    for _ in range(max_turns):
        response = env.oracle_response()
        assert response is not None, f"no oracle response at seed {seed}"
        parsed = parse_response(response, strict)
        assert parsed.format_ok, parsed.errors
        result = env.step(response)
        assert result.info["action_valid"] and result.info["format_ok"], result.info["feedback"]
        if parsed.prediction is not None:
            assert parsed.prediction == env._describe()
        if result.done:
            return result
    raise AssertionError(f"the oracle did not finish seed {seed} within {max_turns} turns")


def assert_incremental_frames_match(env: Any, action_names: Sequence[str], seed: int, turns: int = 40,
                                    rng_seed: int = 0) -> None:
    """Play random single actions mixed with oracle turns (whose look-ahead snapshots and restores
    the state) and assert after each step that the frame the env repainted cell by cell equals one
    composed from scratch.  For games that keep their frame in a kit ``TileFrame`` at ``env._frame``;
    the env must render images (``render_mode`` "vision" or "both") with one action per turn."""
    rng = random.Random(rng_seed)
    env.reset(seed=seed)
    for turn in range(turns):
        response = env.oracle_response() if turn % 3 == 2 else None
        result = env.step(response or env._format.compose(rng.choice(list(action_names))))
        incremental = result.observation.images[0].tobytes()
        env._frame.reset()  # the next render composes the whole frame from the state
        assert env.render_image().tobytes() == incremental, f"turn {turn}: repainted frame differs"
        if result.done:
            env.reset(seed=rng.randrange(1000))
