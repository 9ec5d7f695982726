"""On-policy log-probs: why the local engine may skip the old-log-prob pass, and where it may not
take the sampling log-probs for the update's.

With one epoch over one mini-batch (``mini_batches: 1``, no KL reference, no value head) the engine
runs no separate log-prob pass: the update's own forward, detached, is the old log-prob (ratio 1).
That is only sound because, on CPU in fp32 without dropout, the log-probs recorded while sampling
equal a fresh forward's (checked here from what the rollout hands over: ``Generation.logprobs``,
its prompt ids and ``Generation.encoded_images``).  Under bf16 autocast or with dropout active they
do not, so the sampling numbers are never used as old log-probs: the update recomputes them.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import torch
from PIL import Image

pytest.importorskip("transformers")

from vista_plugin_local.chat_tokens import EpisodeTokens  # noqa: E402
from vista_plugin_local.policy import Policy, load_pretrained  # noqa: E402
from vista_plugin_local.policy_backend import PolicyBackend  # noqa: E402

from vista_rl import Generation, Message, SamplingParams  # noqa: E402

FP32_TOLERANCE = 1e-4
CHAT = [Message("system", "Find the box."),
        Message("user", "<image> Where is the box?", [Image.new("RGB", (56, 56), (200, 40, 90))])]


def _gap(policy: Policy, temperature: float, *, train: bool = False) -> float:
    """Largest |sampling log-prob - recomputed log-prob| over three samples, the recomputation
    scoring exactly what the rollout handed over (prompt ids, sampled ids, encoded images)."""
    params = SamplingParams(temperature=temperature, max_tokens=12, n=3, seed=1)
    generations: list[Generation] = PolicyBackend(policy).generate([CHAT], params)[0]
    sequences = []
    for generation in generations:
        assert generation.prompt_token_ids and generation.logprobs and generation.encoded_images
        sequence = EpisodeTokens()
        sequence.extend(generation.prompt_token_ids, trainable=False)
        sequence.extend(generation.token_ids, trainable=True)
        sequence.images.extend(generation.encoded_images)
        sequences.append(sequence)
    policy.train(train)
    try:
        with torch.no_grad():
            scores = policy.score(policy.collate(sequences, left_pad=False), temperature).logprobs.float()
    finally:
        policy.train(False)
    gaps = []
    for row, generation in enumerate(generations):
        start = len(generation.prompt_token_ids or [])
        recomputed = scores[row, start:start + len(generation.token_ids)]
        gaps.append(float((recomputed - torch.tensor(generation.logprobs)).abs().max()))
    return max(gaps)


@contextmanager
def _dropout(policy: Policy, rate: float) -> Iterator[None]:
    attention = [module for module in policy.model.modules() if hasattr(module, "attention_dropout")]
    assert attention, "the tiny model has attention modules with a dropout rate"
    before = [module.attention_dropout for module in attention]
    for module in attention:
        module.attention_dropout = rate
    try:
        yield
    finally:
        for module, value in zip(attention, before, strict=True):
            module.attention_dropout = value


@pytest.fixture(scope="module")
def policy(tiny_model_dir: Path) -> Policy:
    model, processor = load_pretrained(str(tiny_model_dir))
    return Policy(model, processor, torch.device("cpu"))


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_sampling_logprobs_equal_recomputed_ones_on_cpu_fp32(policy: Policy, temperature: float) -> None:
    assert _gap(policy, temperature) < FP32_TOLERANCE


def test_with_dropout_the_update_must_recompute(policy: Policy) -> None:
    with _dropout(policy, 0.3):
        assert _gap(policy, 1.0) < FP32_TOLERANCE  # sampling runs in eval mode: no dropout there
        assert _gap(policy, 1.0, train=True) > 100 * FP32_TOLERANCE  # the update's forward drops


def test_under_bf16_the_update_must_recompute(tiny_model_dir: Path) -> None:
    model, processor = load_pretrained(str(tiny_model_dir))
    assert _gap(Policy(model, processor, torch.device("cpu"), precision="bf16"), 1.0) > 10 * FP32_TOLERANCE
