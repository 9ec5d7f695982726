"""The local engine's rollout keeps each episode's KV cache between turns (issue 36 item 1): greedy
replies identical token for token (and log-probs equal) to :meth:`Policy.sample`'s full re-prefill,
for both VLM families, with images in later turns, a tool result carrying an image and the context
windowed (0, 2, none); rows of different cached lengths in one call; the memory bound; caches freed
when the rollout engine ends the episodes; sampling with the cache draws what ``Policy.sample``
draws under the same seed."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from PIL import Image
from vista_plugin_decodekit.testing import next_message
from vista_plugin_local.policy import Policy, load_pretrained
from vista_plugin_local.policy_backend import PolicyBackend

from vista_rl import Generation, Message, SamplingParams, escape_placeholders
from vista_rl.config import RolloutSection, SamplingSection
from vista_rl.rollout import RolloutEngine, episode_specs, window

GREEDY = SamplingParams(temperature=0.0, max_tokens=10)


def play(cached: PolicyBackend, reference: PolicyBackend, window_size: int | None, params: SamplingParams = GREEDY,
         episodes: int = 4, turns: int = 5) -> None:
    """Episodes played turn by turn (episode k starts k turns late, so one call holds rows of
    different cached lengths); both backends' replies compared every turn."""
    systems = [Message("system", f"Play well (episode {seed}).") for seed in range(episodes)]
    histories = [[Message("user", f"Start {seed}: <image> where?", [Image.new("RGB", (56, 56), (seed * 60, 9, 90))])]
                 for seed in range(episodes)]
    played: list[list[Generation]] = [[] for _ in range(episodes)]
    for turn in range(turns + episodes - 1):
        live = [seed for seed in range(episodes) if seed <= turn and len(played[seed]) < turns]
        chats = [[systems[seed], *window(histories[seed], window_size)] for seed in live]
        torch.manual_seed(turn)
        ours = cached.generate(chats, params, episode_keys=[f"episode-{seed}" for seed in live])
        torch.manual_seed(turn)
        theirs = reference.generate(chats, params)
        for seed, mine, other in zip(live, ours, theirs, strict=True):
            assert mine[0].prompt_token_ids == other[0].prompt_token_ids
            assert mine[0].token_ids == other[0].token_ids, f"episode {seed}, turn {len(played[seed])}"
            assert mine[0].logprobs == pytest.approx(other[0].logprobs, abs=1e-4)
            played[seed].append(other[0])
            histories[seed] += [Message("assistant", escape_placeholders(other[0].text)),
                                next_message(seed, len(played[seed]))]


@pytest.fixture(scope="module", params=["qwen2_5_vl", "internvl"])
def policy(request: pytest.FixtureRequest, tiny_model_dir: Path, tiny_internvl_dir: Path) -> Policy:
    model, processor = load_pretrained(str(tiny_model_dir if request.param == "qwen2_5_vl" else tiny_internvl_dir))
    return Policy(model, processor, torch.device("cpu"))


@pytest.mark.parametrize("window_size", [None, 0, 2])
def test_greedy_replies_equal_policy_sample(policy: Policy, window_size: int | None) -> None:
    cached, reference = PolicyBackend(policy), PolicyBackend(policy, episode_cache_mb=0)
    assert cached.sampler.enabled, cached.sampler.cache.why_not
    assert not reference.sampler.enabled
    play(cached, reference, window_size)
    stats = cached.sampler.stats
    assert stats.rows == 4 * 5 and stats.reused_rows > 0 and stats.reused_tokens > 0
    cached.end_episodes([f"episode-{seed}" for seed in range(4)])
    assert stats.entries == 0 and stats.bytes == 0


def test_sampling_with_the_cache_draws_what_policy_sample_draws(policy: Policy) -> None:
    """Same seed, same draws: the cache changes what is computed, not the distribution."""
    play(PolicyBackend(policy), PolicyBackend(policy, episode_cache_mb=0), None,
         SamplingParams(temperature=1.0, max_tokens=6), episodes=2, turns=3)


def test_over_the_memory_bound_a_row_falls_back_to_a_full_prefill(policy: Policy) -> None:
    cached = PolicyBackend(policy, episode_cache_mb=0.2)
    play(cached, PolicyBackend(policy, episode_cache_mb=0), None, episodes=4, turns=3)
    stats = cached.sampler.stats
    assert stats.over_budget_rows > 0 and stats.peak_bytes <= 0.2 * 2**20 and stats.full_prefill_rows > 4


def test_the_rollout_engine_names_episodes_and_frees_them(policy: Policy) -> None:
    settings = RolloutSection(max_turns=3, batch_size=3, sampling=SamplingSection(temperature=0.0, max_tokens=8))
    cached = PolicyBackend(policy)
    replies = []
    for backend in (cached, PolicyBackend(policy, episode_cache_mb=0)):
        with RolloutEngine(backend, settings, seed=0) as engine:
            trajectories = engine.run(episode_specs("sokoban/sokoban-v0", range(4)))
        replies.append([[turn.response for turn in trajectory.turns] for trajectory in trajectories])
    assert replies[0] == replies[1] and sum(map(len, replies[0])) > 4
    stats = cached.sampler.stats
    assert stats.reused_rows > 0 and stats.ended == 4 and stats.entries == 0


def test_a_lora_policy_keeps_its_caches_too(tiny_model_dir: Path) -> None:
    from vista_plugin_local.config import LoraSection

    model, processor = load_pretrained(str(tiny_model_dir))
    lora = Policy(model, processor, torch.device("cpu"))
    lora.enable_lora(LoraSection(enabled=True))
    cached = PolicyBackend(lora)
    assert cached.sampler.enabled, cached.sampler.cache.why_not
    play(cached, PolicyBackend(lora, episode_cache_mb=0), None, episodes=2, turns=3)
    assert cached.sampler.stats.reused_rows > 0
