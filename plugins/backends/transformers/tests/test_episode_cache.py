"""Each episode's KV cache kept between turns (issue 36 item 1) in the transformers backend: greedy
replies identical token for token to a full re-prefill of the whole history, for both VLM families,
with images in later turns, a tool result carrying an image and the context windowed (0, 2, none);
rows of different cached lengths in one call; a picture swapped under the same ids is not reused;
the memory bound; caches freed when the rollout engine ends the episodes."""

from __future__ import annotations

from pathlib import Path

import pytest
from PIL import Image
from vista_plugin_decodekit.testing import next_message
from vista_plugin_transformers.backend import TransformersBackend

from vista_rl import Generation, Message, SamplingParams, escape_placeholders
from vista_rl.config import RolloutSection, SamplingSection
from vista_rl.rollout import RolloutEngine, episode_specs, window

GREEDY = SamplingParams(temperature=0.0, max_tokens=10)


def play(cached: TransformersBackend, reference: TransformersBackend, window_size: int | None, episodes: int = 4,
         turns: int = 5) -> list[list[Generation]]:
    """Episodes played turn by turn (a later episode starts a turn late, so rows of one call hold
    different cached lengths); each turn's replies of both backends compared, the reference's kept."""
    systems = [Message("system", f"Play well (episode {seed}).") for seed in range(episodes)]
    histories = [[Message("user", f"Start {seed}: <image> where?", [Image.new("RGB", (56, 56), (seed * 60, 9, 90))])]
                 for seed in range(episodes)]
    played: list[list[Generation]] = [[] for _ in range(episodes)]
    for turn in range(turns + episodes - 1):
        live = [seed for seed in range(episodes) if seed <= turn and len(played[seed]) < turns]
        chats = [[systems[seed], *window(histories[seed], window_size)] for seed in live]
        ours = cached.generate(chats, GREEDY, episode_keys=[f"episode-{seed}" for seed in live])
        theirs = reference.generate(chats, GREEDY)
        for seed, mine, other in zip(live, ours, theirs, strict=True):
            assert mine[0].prompt_token_ids == other[0].prompt_token_ids
            assert mine[0].token_ids == other[0].token_ids, f"episode {seed}, turn {len(played[seed])}"
            assert mine[0].logprobs == pytest.approx(other[0].logprobs, abs=1e-4)
            played[seed].append(other[0])
            histories[seed] += [Message("assistant", escape_placeholders(other[0].text)),
                                next_message(seed, len(played[seed]))]
    return played


@pytest.fixture(scope="module", params=["qwen2_5_vl", "internvl"])
def pair(request: pytest.FixtureRequest, tiny_model_dir: Path,
         tiny_internvl_dir: Path) -> tuple[TransformersBackend, TransformersBackend]:
    path = tiny_model_dir if request.param == "qwen2_5_vl" else tiny_internvl_dir
    cached = TransformersBackend(path=str(path), device="cpu")
    return cached, TransformersBackend(model=cached.model, processor=cached.processor, device="cpu",
                                       incremental_prompts=False, episode_cache_mb=0)


@pytest.mark.parametrize("window_size", [None, 0, 2])
def test_greedy_replies_equal_a_full_re_prefill(pair: tuple[TransformersBackend, TransformersBackend],
                                                window_size: int | None) -> None:
    cached, reference = pair
    assert cached.episodes.enabled, cached.episodes.cache.why_not
    assert not reference.episodes.enabled
    stats = cached.episodes.cache.stats
    reused_before, rows_before = stats.reused_tokens, stats.rows
    play(cached, reference, window_size)
    assert stats.rows - rows_before == 4 * 5
    assert stats.reused_tokens > reused_before  # later turns started from kept caches
    cached.end_episodes([f"episode-{seed}" for seed in range(4)])
    assert stats.entries == 0 and stats.bytes == 0


def test_a_different_picture_under_the_same_ids_is_not_reused(pair: tuple[TransformersBackend, TransformersBackend]) -> None:
    """Two pictures of one size are the same placeholder ids: the cached keys and values of the
    first must not serve the second (the prefix stops where the image starts)."""
    cached, reference = pair
    chats = [[Message("system", "s"), Message("user", "look <image> now", [Image.new("RGB", (56, 56), colour)])]
             for colour in ("red", "blue")]
    first = cached.generate([chats[0]], GREEDY, episode_keys=["swap"])
    second = cached.generate([chats[1]], GREEDY, episode_keys=["swap"])
    assert [first[0][0].token_ids, second[0][0].token_ids] == [g[0].token_ids for g in reference.generate(chats, GREEDY)]
    image_token = cached.episodes.cache.image_token_id
    ids = second[0][0].prompt_token_ids or []
    assert cached.episodes.cache.stats.reused_tokens >= ids.index(image_token) > 0
    cached.end_episodes(["swap"])


def test_over_the_memory_bound_a_row_falls_back_to_a_full_prefill(tiny_model_dir: Path) -> None:
    cached = TransformersBackend(path=str(tiny_model_dir), device="cpu", episode_cache_mb=0.2)
    reference = TransformersBackend(model=cached.model, processor=cached.processor, device="cpu", episode_cache_mb=0)
    play(cached, reference, None, episodes=4, turns=3)
    stats = cached.episodes.cache.stats
    assert stats.over_budget_rows > 0 and stats.peak_bytes <= 0.2 * 2**20
    assert stats.full_prefill_rows > 4  # more than the four first turns: the rows that did not fit


def test_the_rollout_engine_names_episodes_and_frees_them(tiny_model_dir: Path) -> None:
    cached = TransformersBackend(path=str(tiny_model_dir), device="cpu")
    reference = TransformersBackend(model=cached.model, processor=cached.processor, device="cpu", episode_cache_mb=0)
    settings = RolloutSection(max_turns=3, batch_size=3, sampling=SamplingSection(temperature=0.0, max_tokens=8))
    replies = []
    for backend in (cached, reference):
        with RolloutEngine(backend, settings, seed=0) as engine:
            trajectories = engine.run(episode_specs("sokoban/sokoban-v0", range(4)))
        replies.append([[turn.response for turn in trajectory.turns] for trajectory in trajectories])
    assert replies[0] == replies[1] and sum(map(len, replies[0])) > 4
    stats = cached.episodes.cache.stats
    assert stats.reused_rows > 0 and stats.ended == 4 and stats.entries == 0 and stats.bytes == 0


def test_keys_must_match_the_chats(tiny_model_dir: Path) -> None:
    backend = TransformersBackend(path=str(tiny_model_dir), device="cpu")
    with pytest.raises(ValueError, match="1 keys for 2 chats"):
        backend.generate([[Message("user", "a")], [Message("user", "b")]], GREEDY, episode_keys=["one"])
