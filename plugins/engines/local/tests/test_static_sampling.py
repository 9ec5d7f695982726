"""The local engine's sampler on the static-cache decode (issue 36 item 3): with
``engine_config.local.static_decode: on`` on CPU (no compile there, the same static cache, the same
batch padding rows, the same positions), greedy replies equal the dynamic path's token for token,
on one turn and on a second turn whose rows continue their episodes' kept KV caches (kept from the
static cache of the first turn; the second runs on the dynamic cache and is counted as a fallback).
``auto`` keeps the dynamic path on CPU; a bad value is refused naming the key."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from PIL import Image
from vista_plugin_local.config import LocalSection
from vista_plugin_local.policy import Policy, load_pretrained
from vista_plugin_local.policy_backend import PolicyBackend

from vista_rl import ConfigError, Message, SamplingParams, escape_placeholders
from vista_rl.config import engine_section

GREEDY = SamplingParams(temperature=0.0, max_tokens=8)


def chats(count: int) -> list[list[Message]]:
    """Image chats of different lengths (left padding and M-RoPE deltas differ per row)."""
    return [[Message("system", "Answer briefly."),
             Message("user", f"Chat {index}{' with more words' * index}: <image> which colour?",
                     [Image.new("RGB", (56, 56 + 28 * (index % 2)), (index * 70, 30, 160))])]
            for index in range(count)]


@pytest.fixture(scope="module")
def policies(tiny_model_dir: Path) -> tuple[Policy, Policy]:
    """A static policy (``on``) and a dynamic one (``off``) over the same weights."""
    model, processor = load_pretrained(str(tiny_model_dir))
    static = Policy(model, processor, torch.device("cpu"), static_decode="on")
    dynamic = Policy(model, processor, torch.device("cpu"), static_decode="off")
    return static, dynamic


def test_greedy_policy_sample_equals_the_dynamic_path(policies: tuple[Policy, Policy]) -> None:
    static, dynamic = policies
    prefixes = [static.encoder.render(chat) for chat in chats(3)]
    fast = static.sample(prefixes, 8, 0.0)
    slow = dynamic.sample(prefixes, 8, 0.0)
    stats = static.static_decode.stats
    assert stats.static_calls == 1 and stats.padded_rows == 1  # 3 rows ran as 4, the 4th dropped
    assert dynamic.static_decode.stats.static_calls == 0
    assert len(fast) == len(slow) == 3
    for (ours, our_logprobs), (theirs, their_logprobs) in zip(fast, slow, strict=True):
        assert ours == theirs
        assert our_logprobs == pytest.approx(their_logprobs, abs=1e-4)


def test_two_turns_with_the_kept_cache_equal_the_dynamic_path(policies: tuple[Policy, Policy]) -> None:
    """Turn 1 starts the episodes on the static cache (their caches kept from it); turn 2 continues
    them on the dynamic cache, a fallback the stats count; replies equal a full re-prefill's."""
    static, dynamic = policies
    cached, reference = PolicyBackend(static), PolicyBackend(dynamic, episode_cache_mb=0)
    assert cached.sampler.enabled, cached.sampler.cache.why_not
    before = static.static_decode.stats.static_calls
    histories = chats(3)
    keys = [f"episode-{index}" for index in range(3)]
    for turn in range(2):
        ours = cached.generate(histories, GREEDY, episode_keys=keys)
        theirs = reference.generate(histories, GREEDY)
        for mine, other in zip(ours, theirs, strict=True):
            assert mine[0].token_ids == other[0].token_ids, f"turn {turn}"
            assert mine[0].logprobs == pytest.approx(other[0].logprobs, abs=1e-4)
        for history, other in zip(histories, theirs, strict=True):
            history += [Message("assistant", escape_placeholders(other[0].text)),
                        Message("user", f"Turn {turn}: <image> and now?", [Image.new("RGB", (56, 56), (9, turn * 90, 9))])]
    stats = static.static_decode.stats
    assert stats.static_calls == before + 1  # turn 1
    assert stats.fallback_rows == 3 and stats.fallback_reason is not None and "kept KV cache" in stats.fallback_reason
    assert cached.sampler.stats.reused_rows == 3  # turn 2 reused what turn 1's static cache held
    cached.end_episodes(keys)


def test_auto_keeps_the_dynamic_path_on_cpu(policies: tuple[Policy, Policy]) -> None:
    static, _ = policies
    auto = Policy(static.model, static.processor, torch.device("cpu"))
    assert auto.static_decode.mode == "auto"
    use, why = auto.static_decode.active(auto.model, auto.device)
    assert not use and why is not None and "CUDA" in why


def test_config_accepts_the_three_modes_and_refuses_others() -> None:
    def section(value: object) -> LocalSection:
        run = SimpleNamespace(engine_config={"local": {"static_decode": value}})
        return engine_section(run, "local", LocalSection)  # type: ignore[arg-type]

    assert LocalSection().static_decode == "auto"
    assert [section(mode).static_decode for mode in ("auto", "on", "off")] == ["auto", "on", "off"]
    with pytest.raises(ConfigError, match=r"engine_config\.local\.static_decode") as refused:
        section("fast")
    assert "auto" in str(refused.value) and "off" in str(refused.value)
