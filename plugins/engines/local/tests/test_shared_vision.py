"""Vision once per unique image in training: the policy's scores and gradients are the same whether
each image occurrence goes through the vision tower or each unique image once (tiny real Qwen2.5-VL
and InternVL), a forward hook counts the vision tower's calls and the patches it sees, and skipping
the old-log-prob pass when it must equal the update's own log-probs changes no weight."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import torch
from PIL import Image

pytest.importorskip("transformers")

from vista_plugin_local.advantages import compute_advantages  # noqa: E402
from vista_plugin_local.chat_tokens import EpisodeTokens  # noqa: E402
from vista_plugin_local.policy import Policy, load_pretrained  # noqa: E402
from vista_plugin_local.ppo_update import OldScores, score_episodes  # noqa: E402
from vista_plugin_local.trainer import LocalEngine  # noqa: E402

from tests.engine_helpers import run_config  # noqa: E402
from vista_rl import AdvantageBatch, AdvantageOutput  # noqa: E402

PICTURES = [Image.new("RGB", (56, 56), (200, 40, 90)), Image.new("RGB", (40, 64), (10, 140, 90))]


def _policy(model_dir: Path) -> Policy:
    model, processor = load_pretrained(str(model_dir))
    return Policy(model, processor, torch.device("cpu"))


def _sequences(policy: Policy, pictures: list[int]) -> list[EpisodeTokens]:
    """One prompt + response per entry, each image encoded on its own (as separate episodes do)."""
    seqs = []
    for index, picture in enumerate(pictures):
        ids, vision = policy.encoder.prompt_segment("Answer.", "<image> which shape?", [PICTURES[picture]])
        seq = EpisodeTokens()
        seq.extend(ids, trainable=False)
        seq.images.extend(vision)
        seq.extend([11 + index, 12, 13, policy.encoder.im_end_id], trainable=True)
        seqs.append(seq)
    return seqs


@contextmanager
def _vision_rows(policy: Policy) -> Iterator[list[int]]:
    """Rows (patches or tiles) of every vision-tower forward inside the block, one entry per call."""
    inner = policy.model.model
    tower = getattr(inner, "visual", None) or inner.vision_tower
    rows: list[int] = []

    def hook(_module: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        rows.append(int((args[0] if args else kwargs["pixel_values"]).shape[0]))

    handle = tower.register_forward_pre_hook(hook, with_kwargs=True)
    try:
        yield rows
    finally:
        handle.remove()


def _loss_and_grads(policy: Policy, seqs: list[EpisodeTokens], micro: int) -> tuple[float, dict[str, torch.Tensor]]:
    """Summed response log-probs over micro-batches of ``micro``, backward per micro-batch (as the
    update accumulates), inside one :meth:`Policy.shared_vision` block."""
    policy.model.zero_grad(set_to_none=True)
    total = 0.0
    with policy.shared_vision(seqs, micro):
        for start in range(0, len(seqs), micro):
            batch = policy.collate(seqs[start:start + micro], left_pad=False)
            loss = (policy.score(batch).logprobs * batch["loss_mask"]).sum()
            loss.backward()
            total += float(loss.detach())
    grads = {name: p.grad.clone() for name, p in policy.model.named_parameters() if p.grad is not None}
    return total, grads


@pytest.mark.parametrize("model_fixture", ["tiny_model_dir", "tiny_internvl_dir"])
@pytest.mark.parametrize("micro", [4, 2])
def test_each_unique_image_is_encoded_once_with_the_same_loss_and_gradients(
        model_fixture: str, micro: int, request: pytest.FixtureRequest) -> None:
    policy = _policy(request.getfixturevalue(model_fixture))
    seqs = _sequences(policy, [0, 0, 1, 0])  # three samples share picture 0; each image encoded separately
    unique_rows = sum(int(seqs[i].images[0].pixel_values.shape[0]) for i in (0, 2))
    all_rows = sum(int(seq.images[0].pixel_values.shape[0]) for seq in seqs)

    policy.dedup_vision = False
    with _vision_rows(policy) as plain_rows:
        plain_loss, plain_grads = _loss_and_grads(policy, seqs, micro)
    policy.dedup_vision = True
    with _vision_rows(policy) as dedup_rows:
        dedup_loss, dedup_grads = _loss_and_grads(policy, seqs, micro)

    assert sum(plain_rows) == all_rows and len(plain_rows) == len(seqs) // micro
    assert dedup_rows == [unique_rows]  # one call for the whole mini-batch, each picture once
    assert dedup_loss == pytest.approx(plain_loss, rel=1e-5)
    assert dedup_grads.keys() == plain_grads.keys()
    vision_grads = [name for name in plain_grads if "visual" in name or "vision_tower" in name]
    assert vision_grads and any(plain_grads[name].abs().sum() > 0 for name in vision_grads)
    for name, grad in plain_grads.items():
        torch.testing.assert_close(dedup_grads[name], grad, rtol=1e-4, atol=1e-5, msg=name)


def test_the_no_grad_pass_encodes_in_micro_batch_chunks_and_the_reference_encodes_its_own(
        tiny_model_dir: Path) -> None:
    policy = _policy(tiny_model_dir)
    seqs = _sequences(policy, [0, 1, 1, 0])
    with torch.no_grad():
        policy.dedup_vision = False
        plain = [policy.score(policy.collate(seqs[i:i + 1], left_pad=False)).logprobs for i in range(4)]
        policy.dedup_vision = True
        policy.make_reference()
        with _vision_rows(policy) as rows, policy.shared_vision(seqs, 1):
            shared = [policy.score(policy.collate(seqs[i:i + 1], left_pad=False)).logprobs for i in range(4)]
            policy.score(policy.collate(seqs, left_pad=False), reference=True)  # another model: not shared
    per_image = [int(seq.images[0].pixel_values.shape[0]) for seq in seqs[:2]]
    assert rows == per_image  # two chunks of one micro-batch's images, none during the scoring
    for got, want in zip(shared, plain, strict=True):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def _one_rl_step(tmp_path: Path, model_dir: Path, name: str, keep_pass: bool,
                 monkeypatch: pytest.MonkeyPatch, overrides: tuple[str, ...] = ()) -> tuple[LocalEngine, int]:
    """One GRPO step on oddshape, counting the old-log-prob passes.  A random tiny model earns no
    reward, so every advantage would be 0 and no gradient could tell the two updates apart: the
    estimator's output gets a fixed -1 .. 2 per sample on the response tokens (a stand-in for
    rewards, named as such)."""
    passes = 0

    def counted(*args: Any, **kwargs: Any) -> OldScores:
        nonlocal passes
        passes += 1
        return score_episodes(*args, **kwargs)

    def signed_advantages(estimator: Any, batch: AdvantageBatch) -> AdvantageOutput:
        out = compute_advantages(estimator, batch)
        signs = torch.linspace(-1.0, 2.0, batch.response_mask.shape[0])
        return AdvantageOutput(out.advantages + signs[:, None] * batch.response_mask, out.returns)

    with monkeypatch.context() as patch:
        patch.setattr("vista_plugin_local.rl_step.score_episodes", counted)
        patch.setattr("vista_plugin_local.rl_step.compute_advantages", signed_advantages)
        if keep_pass:
            patch.setattr("vista_plugin_local.rl_step.old_logprobs_are_update_logprobs", lambda *args: False)
        run = run_config(model_dir, tmp_path / name, overrides=(
            "sft.steps=0", "trainer.steps=1", "trainer.lr=0.01", "eval.seeds.count=1", *overrides))
        engine = LocalEngine(run)
        engine.run()
    return engine, passes


def test_skipping_the_old_logprob_pass_gives_the_same_update(tmp_path: Path, tiny_model_dir: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    before = _policy(tiny_model_dir).model.state_dict()
    skipped, skipped_passes = _one_rl_step(tmp_path, tiny_model_dir, "skip", False, monkeypatch)
    kept, kept_passes = _one_rl_step(tmp_path, tiny_model_dir, "keep", True, monkeypatch)
    assert (skipped_passes, kept_passes) == (0, 1)
    metrics = [json.loads((tmp_path / name / "metrics.jsonl").read_text().splitlines()[-1])
               for name in ("skip", "keep")]
    assert metrics[0]["optimizer_steps"] == metrics[1]["optimizer_steps"] == 1
    assert metrics[0]["pg_loss"] != 0 and metrics[0]["grad_norm"] > 0
    for key in ("loss", "pg_loss", "entropy", "grad_norm"):
        assert metrics[0][key] == pytest.approx(metrics[1][key], rel=1e-4, abs=1e-6), key
    assert metrics[0]["clip_fraction"] == metrics[1]["clip_fraction"] == 0.0
    after_skip, after_keep = skipped.policy.model.state_dict(), kept.policy.model.state_dict()
    assert any(not torch.equal(after_skip[key], before[key]) for key in before)  # the step did train
    for key, value in after_keep.items():
        torch.testing.assert_close(after_skip[key], value, rtol=1e-4, atol=1e-6, msg=key)


def test_the_old_logprob_pass_stays_when_a_kl_reference_needs_it(tmp_path: Path, tiny_model_dir: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    _engine, passes = _one_rl_step(tmp_path, tiny_model_dir, "kl", False, monkeypatch,
                                   ("algorithm.kl_coef=0.01",))
    assert passes == 1
