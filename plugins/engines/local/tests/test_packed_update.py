"""The update scored as packed sequences, each group's shared prompt computed once: the log-probs,
losses and every parameter's gradient equal the padded batch's (tiny real Qwen2.5-VL and InternVL,
sdpa and eager attention), for per-turn and whole-conversation rows, groups whose prompts differ,
identical replies, a group that lost a failed episode, a value head and a KL reference; the decoder
sees the shared prompt once; and the chunked log-probs equal ``log_softmax`` in value and gradient."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from PIL import Image

pytest.importorskip("transformers")

from vista_plugin_local import packed_forward, token_logprobs  # noqa: E402
from vista_plugin_local.chat_tokens import EpisodeTokens  # noqa: E402
from vista_plugin_local.config import Layout, update_layout, validate_engine_config  # noqa: E402
from vista_plugin_local.optim import Optimization  # noqa: E402
from vista_plugin_local.packing import plan_packs, row_keys  # noqa: E402
from vista_plugin_local.policy import Policy, load_pretrained  # noqa: E402
from vista_plugin_local.policy_backend import PolicyBackend  # noqa: E402
from vista_plugin_local.ppo_update import OldScores, PolicyUpdate, score_episodes  # noqa: E402
from vista_plugin_local.samples import TrainSample, training_samples  # noqa: E402
from vista_plugin_local.shared_vision import base_model  # noqa: E402
from vista_plugin_local.step_metrics import UpdateMetrics  # noqa: E402

from tests.engine_helpers import run_config  # noqa: E402
from vista_rl import TokenView, Trajectory  # noqa: E402
from vista_rl.config import AlgorithmSection  # noqa: E402

COLOURS = [(200, 40, 90), (10, 140, 90), (30, 30, 200), (240, 200, 10)]
PICTURES = [Image.new("RGB", (56, 56), colour) for colour in COLOURS]
SYSTEM = "Answer with the cell of the odd shape."
LAYOUTS: tuple[Layout, ...] = ("padded", "packed", "shared_prefix")


def _policy(model_dir: Path, *, value_head: bool = False, attention: str | None = None,
            precision: str = "fp32") -> Policy:
    model, processor = load_pretrained(str(model_dir))
    if attention is not None:
        model.set_attn_implementation(attention)
    torch.manual_seed(0)
    return Policy(model, processor, torch.device("cpu"), value_head=value_head, precision=precision)


class Rows:
    """Training rows as the rollout builds them: system prompt, image observations, sampled replies."""

    def __init__(self, policy: Policy) -> None:
        self.encoder = policy.encoder

    def reply(self, text: str) -> list[int]:
        return self.encoder.response_ids(text)

    def turn_prompt(self, picture: int, question: str) -> tuple[list[int], list[Any]]:
        return self.encoder.prompt_segment(SYSTEM, f"<image> {question}", [PICTURES[picture]])

    def per_turn(self, picture: int, question: str, reply: str) -> EpisodeTokens:
        """One turn's own sequence: its prompt (system + this observation) and its reply."""
        ids, vision = self.turn_prompt(picture, question)
        seq = EpisodeTokens()
        seq.extend(ids, trainable=False)
        seq.images.extend(vision)
        seq.extend(self.reply(reply), trainable=True)
        seq.turn_ends.append(len(seq) - 1)
        return seq

    def conversation(self, turns: list[tuple[int, str]]) -> EpisodeTokens:
        """A whole conversation: every observation with its image, every reply trained."""
        first, reply = turns[0]
        seq = self.per_turn(first, "which cell?", reply)
        for picture, text in turns[1:]:
            seq.extend(self.encoder.message_end, trainable=False)
            ids, vision = self.encoder.message_segment("user", "<image> and now?", [PICTURES[picture]])
            seq.extend(ids, trainable=False)
            seq.images.extend(vision)
            seq.extend(self.encoder.assistant_header, trainable=False)
            seq.extend(self.reply(text), trainable=True)
            seq.turn_ends.append(len(seq) - 1)
        return seq


def _samples(policy: Policy, kind: str) -> list[TrainSample]:
    """Groups of rows: G alike prompts with different (and two identical) replies; another group;
    a group whose prompts differ (two seeds' images, so nothing but the system prompt is shared)."""
    rows = Rows(policy)
    if kind == "per_turn":
        groups = [[rows.per_turn(0, "which cell?", text) for text in ("1", "2", "1", "3 4")],
                  [rows.per_turn(1, "which one?", text) for text in ("4", "2 3")],
                  [rows.per_turn(2, "which cell?", "1"), rows.per_turn(3, "which cell?", "2")]]
    else:
        groups = [[rows.conversation([(0, "1"), (1, "2")]), rows.conversation([(0, "1"), (2, "3")]),
                   rows.conversation([(0, "2"), (1, "2 2")]), rows.conversation([(0, "1")])],
                  [rows.conversation([(3, "4"), (3, "1")]), rows.conversation([(2, "1")])]]
    return [TrainSample(Trajectory(env_id="test", seed=g), seq, g, [1.0]) for g, group in enumerate(groups)
            for seq in group]


@contextmanager
def _decoder_tokens(policy: Policy) -> Iterator[list[tuple[int, ...]]]:
    """The ``[batch, length]`` of every decoder-body forward inside the block."""
    shapes: list[tuple[int, ...]] = []
    body = base_model(policy.model).model

    def hook(_module: Any, _args: Any, kwargs: dict[str, Any]) -> None:
        shapes.append(tuple(kwargs["input_ids"].shape))

    handle = body.register_forward_pre_hook(hook, with_kwargs=True)
    try:
        yield shapes
    finally:
        handle.remove()


def _update(policy: Policy, samples: list[TrainSample], layout: Layout, *, old: OldScores,
            algorithm: AlgorithmSection, micro: int) -> tuple[UpdateMetrics, dict[str, torch.Tensor]]:
    """One PolicyUpdate with fixed signed advantages; the gradients as the optimizer got them.
    The weights are put back afterwards, so every layout starts from the same policy."""
    state = {key: value.clone() for key, value in policy.model.state_dict().items()}
    head = {key: value.clone() for key, value in policy.value_head.state_dict().items()} if policy.value_head else None
    width = max(len(sample.tokens) for sample in samples)
    masks = torch.zeros((len(samples), width))
    for row, sample in enumerate(samples):
        masks[row, :len(sample.tokens)] = torch.tensor(sample.tokens.loss_mask, dtype=torch.float32)
    advantages = torch.linspace(-1.0, 2.0, len(samples))[:, None] * masks
    returns = torch.linspace(0.5, -0.5, len(samples))[:, None] * masks
    optimization = Optimization(policy.parameters(), 1e-3, betas=(0.9, 0.999), weight_decay=0.0, total_steps=1,
                                warmup=0, schedule="constant")
    grads: dict[str, torch.Tensor] = {}
    step = optimization.step

    def recording_step(max_grad_norm: float | None, loss: float) -> tuple[float, bool]:
        named = list(policy.model.named_parameters()) + (
            [(f"value_head.{n}", p) for n, p in policy.value_head.named_parameters()] if policy.value_head else [])
        grads.update({name: p.grad.clone() for name, p in named if p.grad is not None})
        return step(max_grad_norm, loss)

    optimization.step = recording_step  # type: ignore[method-assign]
    update = PolicyUpdate(policy, optimization, algorithm, value_coef=0.5, micro_batch_size=micro,
                          max_grad_norm=1.0, layout=layout)
    metrics = update(samples, old, advantages, returns, 0.9, shuffle_seed=5)
    policy.model.load_state_dict(state)
    if head is not None and policy.value_head is not None:
        policy.value_head.load_state_dict(head)
    return metrics, grads


def _assert_same_update(results: dict[Layout, tuple[UpdateMetrics, dict[str, torch.Tensor]]]) -> None:
    (padded_metrics, padded_grads) = results["padded"]
    assert padded_metrics["pg_loss"] != 0 and padded_metrics["grad_norm"] > 0
    for layout in ("packed", "shared_prefix"):
        metrics, grads = results[layout]
        for key in ("loss", "pg_loss", "entropy", "kl", "clip_fraction", "grad_norm", "value_loss"):
            if key in padded_metrics:
                assert metrics[key] == pytest.approx(padded_metrics[key], rel=1e-4, abs=1e-6), (layout, key)
        assert grads.keys() == padded_grads.keys()
        vision = [name for name in grads if "visual" in name or "vision_tower" in name]
        assert vision and any(padded_grads[name].abs().sum() > 0 for name in vision)
        for name, grad in padded_grads.items():
            torch.testing.assert_close(grads[name], grad, rtol=1e-4, atol=1e-6, msg=f"{layout}: {name}")


@pytest.mark.parametrize("kind", ["per_turn", "conversation"])
@pytest.mark.parametrize("model_fixture", ["tiny_model_dir", "tiny_internvl_dir"])
def test_packed_and_shared_prefix_updates_equal_the_padded_update(
        model_fixture: str, kind: str, request: pytest.FixtureRequest) -> None:
    policy = _policy(request.getfixturevalue(model_fixture))
    samples = _samples(policy, kind)
    algorithm = AlgorithmSection(entropy_coef=0.01)
    results = {}
    tokens: dict[Layout, int] = {}
    for layout in LAYOUTS:
        with _decoder_tokens(policy) as shapes:
            results[layout] = _update(policy, samples, layout, old=OldScores(), algorithm=algorithm, micro=len(samples))
        tokens[layout] = sum(int(np.prod(shape)) for shape in shapes)
    _assert_same_update(results)
    # The padded batch computes every row to the longest; the tree stores each shared run once.
    seqs = [sample.tokens for sample in samples]
    keys = row_keys(seqs, policy.encoder.image_token_id, policy.encoder.vision_tokens)
    shared = plan_packs(seqs, keys, share=True, capacity=10_000, pad_id=0)
    assert tokens["padded"] == len(seqs) * max(len(seq) for seq in seqs)
    assert tokens["shared_prefix"] < tokens["packed"] <= tokens["padded"]
    assert int((shared.input_ids != 0).sum()) < sum(len(seq) for seq in seqs) * 0.6


@pytest.mark.parametrize("model_fixture", ["tiny_model_dir", "tiny_internvl_dir"])
def test_clipped_ppo_with_a_value_head_and_a_kl_reference_equals_the_padded_update(
        model_fixture: str, request: pytest.FixtureRequest) -> None:
    """Old log-probs, values and reference log-probs from :func:`score_episodes` in each layout;
    old log-probs shifted so that clipping is active; micro-batches of 3 rows."""
    policy = _policy(request.getfixturevalue(model_fixture), value_head=True)
    policy.make_reference()
    samples = _samples(policy, "per_turn")
    algorithm = AlgorithmSection(estimator="gae", kl_coef=0.05, clip_ratio_low=0.1, clip_ratio_high=0.1)
    olds = {layout: score_episodes(policy, samples, 0.9, reference=True, micro_batch_size=3, layout=layout)
            for layout in LAYOUTS}
    padded = olds["padded"]
    assert padded.logprobs is not None and padded.ref_logprobs is not None and padded.values is not None
    mask = torch.zeros_like(padded.logprobs)
    for row, sample in enumerate(samples):
        mask[row, :len(sample.tokens)] = torch.tensor(sample.tokens.loss_mask, dtype=torch.float32)
    lengths = torch.tensor([len(sample.tokens) for sample in samples])
    inside = torch.arange(mask.shape[1])[None, :] < lengths[:, None]
    for layout in ("packed", "shared_prefix"):
        scored = olds[layout]
        assert scored.logprobs is not None and scored.ref_logprobs is not None and scored.values is not None
        torch.testing.assert_close(scored.logprobs * mask, padded.logprobs * mask, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(scored.ref_logprobs * mask, padded.ref_logprobs * mask, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(scored.values * inside, padded.values * inside, rtol=1e-5, atol=1e-5)
    results = {}
    for layout in LAYOUTS:
        logprobs = olds[layout].logprobs
        assert logprobs is not None
        shift = 0.3 * torch.sign(torch.sin(torch.arange(logprobs.numel()).view_as(logprobs).float()))
        old = dataclasses.replace(olds[layout], logprobs=logprobs + shift)
        results[layout] = _update(policy, samples, layout, old=old, algorithm=algorithm, micro=3)
    assert results["padded"][0]["clip_fraction"] > 0 and results["padded"][0]["value_loss"] > 0
    _assert_same_update(results)


@pytest.mark.parametrize("model_fixture", ["tiny_model_dir", "tiny_internvl_dir"])
def test_row_positions_are_the_models_own(model_fixture: str, request: pytest.FixtureRequest) -> None:
    """Each row's positions, computed once per distinct head (prompt through the last image), equal
    what the model's forward derives for the padded batch: M-RoPE (Qwen2.5-VL) over a wide image,
    two images, a text-only row; plain positions (InternVL)."""
    policy = _policy(request.getfixturevalue(model_fixture))
    rows = Rows(policy)
    seqs = [rows.per_turn(0, "which cell?", "1"), rows.per_turn(0, "which cell?", "2 3"),
            rows.conversation([(0, "1"), (1, "4")])]
    text = rows.reply("no image here")
    seqs.append(EpisodeTokens(text, [1] * len(text)))
    wide, vision = policy.encoder.prompt_segment(SYSTEM, "<image> wide?", [Image.new("RGB", (40, 96), (9, 9, 9))])
    answer = rows.reply("2")
    seqs.append(EpisodeTokens(wide + answer, [0] * len(wide) + [1] * len(answer), [], vision))
    got = policy.family.row_position_ids(policy.model, seqs, policy.encoder.image_token_id)
    batch = policy.collate(seqs, left_pad=False)
    inner = base_model(policy.model).model
    if hasattr(inner, "get_rope_index"):
        want, _ = inner.get_rope_index(batch["input_ids"], mm_token_type_ids=batch["mm_token_type_ids"],
                                       image_grid_thw=batch["image_grid_thw"], attention_mask=batch["attention_mask"])
        assert any(len(set(want[:, 0, i].tolist())) > 1 for i in range(len(seqs[0])))  # 3-D positions on the image
    else:
        want = torch.arange(batch["input_ids"].shape[1]).expand(len(seqs), -1)
    for row, seq in enumerate(seqs):
        assert torch.equal(got[row], want[..., row, :len(seq)]), row


def test_eager_attention_takes_the_additive_mask(tiny_model_dir: Path) -> None:
    policy = _policy(tiny_model_dir, attention="eager")
    samples = _samples(policy, "per_turn")
    results = {layout: _update(policy, samples, layout, old=OldScores(), algorithm=AlgorithmSection(), micro=4)
               for layout in LAYOUTS}
    _assert_same_update(results)


@pytest.mark.parametrize("attention", ["sdpa", "eager"])
def test_under_bf16_autocast_the_packed_update_matches_within_bf16_rounding(attention: str,
                                                                           tiny_model_dir: Path) -> None:
    """bf16 autocast (as on a GPU; here on the CPU): the mask, positions and chunked head run in
    the autocast dtype; losses and gradients agree with the padded batch to bf16's precision."""
    policy = _policy(tiny_model_dir, attention=attention, precision="bf16")
    assert policy.amp_dtype == torch.bfloat16
    samples = _samples(policy, "per_turn")
    results = {layout: _update(policy, samples, layout, old=OldScores(), algorithm=AlgorithmSection(), micro=len(samples))
               for layout in ("padded", "shared_prefix")}
    (padded, padded_grads), (shared, shared_grads) = results["padded"], results["shared_prefix"]
    for key in ("loss", "pg_loss", "entropy", "grad_norm"):
        assert shared[key] == pytest.approx(padded[key], rel=3e-2, abs=1e-3), key
    flat = torch.cat([grad.flatten() for grad in padded_grads.values()])
    other = torch.cat([shared_grads[name].flatten() for name in padded_grads])
    assert torch.nn.functional.cosine_similarity(flat, other, dim=0) > 0.99


def test_a_group_that_lost_a_failed_episode_shares_what_is_left(tiny_model_dir: Path) -> None:
    """Trajectories as the rollout hands them over, one of a group failed: ``training_samples``
    drops it and the group's other rows still share their prompt, with the padded update's result."""
    policy = _policy(tiny_model_dir)
    rows = Rows(policy)
    trajectories = []
    for index, (picture, reply) in enumerate([(0, "1"), (0, "2"), (0, "3"), (1, "1"), (1, "4")]):
        seq = rows.per_turn(picture, "which cell?", reply)
        trajectory = Trajectory(env_id="test", seed=picture, sample_index=index)
        trajectory.token_view = TokenView(list(seq.input_ids), list(seq.loss_mask), list(seq.turn_ends),
                                          [float(index % 2)], image_refs=[f"ref-{picture}"],
                                          image_inputs=list(seq.images))
        if index == 1:
            trajectory.failure = "env crashed"
        trajectories.append(trajectory)
    batch = training_samples(trajectories, PolicyBackend(policy))
    assert [why for _, why in batch.dropped] == ["episode failed: env crashed"]
    assert [sample.group for sample in batch.samples] == [0, 0, 1, 1]
    results = {}
    tokens = {}
    for layout in LAYOUTS:
        with _decoder_tokens(policy) as shapes:
            results[layout] = _update(policy, batch.samples, layout, old=OldScores(), algorithm=AlgorithmSection(), micro=4)
        tokens[layout] = sum(int(np.prod(shape)) for shape in shapes)
    _assert_same_update(results)
    prompt = len(rows.turn_prompt(0, "which cell?")[0])
    assert tokens["shared_prefix"] <= tokens["packed"] - prompt  # group 0's prompt once, not twice


def test_without_a_4d_mask_or_row_positions_the_update_is_padded(tiny_model_dir: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    policy = _policy(tiny_model_dir)
    samples = _samples(policy, "per_turn")
    assert packed_forward.packing_unsupported(policy, policy.model) is None
    monkeypatch.setattr(packed_forward, "MASKED_ATTENTION", ("flash_attention_2",))
    assert "takes no 4-D mask" in (packed_forward.packing_unsupported(policy, policy.model) or "")
    with _decoder_tokens(policy) as shapes:
        _update(policy, samples, "shared_prefix", old=OldScores(), algorithm=AlgorithmSection(), micro=len(samples))
    assert shapes == [(len(samples), max(len(sample.tokens) for sample in samples))]


def test_the_setting_turns_sharing_on_for_group_estimators(tiny_model_dir: Path, tmp_path: Path) -> None:
    def layout(*overrides: str) -> Layout:
        return update_layout(validate_engine_config(run_config(tiny_model_dir, tmp_path, overrides=overrides)))

    assert layout() == "shared_prefix"  # grpo
    assert layout("algorithm.estimator=rloo") == "shared_prefix"
    assert layout("algorithm.estimator=gae") == "packed"
    assert layout("engine_config.local.shared_prefix=true", "algorithm.estimator=gae") == "shared_prefix"
    assert layout("engine_config.local.shared_prefix=false") == "packed"
    assert layout("engine_config.local.packing=false") == "padded"


def _row_visibility(plan: Any, slot: Any) -> torch.Tensor:
    visible = plan.visible()[slot.bin]
    index = torch.as_tensor(slot.positions)
    return visible[index][:, index]


def test_the_plan_stores_shared_runs_once_and_each_token_sees_only_its_own_row() -> None:
    """Pure bookkeeping: image tokens count as shared only when the images agree; every token of a
    row sees exactly that row's earlier tokens; a full bin starts another; without sharing each row
    is its own chain."""
    seqs = [EpisodeTokens([1, 2, 9, 9, 3, 4, 5], [0, 0, 0, 0, 0, 1, 1]),
            EpisodeTokens([1, 2, 9, 9, 3, 4, 6, 7], [0, 0, 0, 0, 0, 1, 1, 1]),
            EpisodeTokens([1, 2, 9, 9, 3, 8], [0, 0, 0, 0, 0, 1]),
            EpisodeTokens([1, 2, 9, 9, 3, 4, 5], [0, 0, 0, 0, 0, 1, 1])]
    from vista_plugin_local.image_input import ImageInput

    for index, seq in enumerate(seqs):
        seq.images.append(ImageInput(torch.zeros(2), digest="other" if index == 2 else "same"))
    keys = row_keys(seqs, 9, lambda image: 2)
    plan = plan_packs(seqs, keys, share=True, capacity=100, pad_id=0)
    assert plan.input_ids.shape[0] == 1
    stored = int((plan.input_ids != 0).sum())
    assert stored == 7 + 2 + 4  # rows 0 and 3 identical; row 1 adds 6, 7; row 2 differs from its image on
    positions = {i: plan.rows[i].positions.tolist() for i in range(4)}
    assert positions[0] == positions[3] and positions[1][:6] == positions[0][:6] and positions[1][6] != positions[0][6]
    assert positions[2][:2] == positions[0][:2] and positions[2][2] not in positions[0]
    for slot in plan.rows:
        n = len(slot.positions)
        assert torch.equal(_row_visibility(plan, slot), torch.ones(n, n, dtype=torch.bool).tril())
        outside = [p for p in range(plan.input_ids.shape[1]) if p not in slot.positions.tolist()]
        assert not plan.visible()[slot.bin][torch.as_tensor(slot.positions)][:, outside].any()
    # one image per stored image span, in packed order (the order the model fills image tokens in)
    starts = sorted([(positions[0][2], "same"), (positions[2][2], "other")])
    assert [image.digest for image in plan.images] == [digest for _, digest in starts]
    small = plan_packs(seqs, keys, share=True, capacity=9, pad_id=0)
    assert small.input_ids.shape[0] > 1 and small.input_ids.shape[1] <= 9
    plain = plan_packs(seqs, keys, share=False, capacity=100, pad_id=0)
    assert int((plain.input_ids != 0).sum()) == sum(len(seq) for seq in seqs)
    for slot in plain.rows:
        n = len(slot.positions)
        assert torch.equal(_row_visibility(plain, slot), torch.ones(n, n, dtype=torch.bool).tril())


@pytest.mark.parametrize("chunk_rows", [3, 100])  # 4 chunks (recomputed in the backward), or one (kept)
@pytest.mark.parametrize("bias", [False, True])
def test_chunked_logprobs_equal_log_softmax_in_value_and_gradient(bias: bool, chunk_rows: int,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    torch.manual_seed(0)
    monkeypatch.setattr(token_logprobs, "CHUNK_ELEMENTS", chunk_rows * 50)  # rows of a 50-token vocabulary
    head = torch.nn.Linear(16, 50, bias=bias)
    hidden = torch.randn(11, 16, requires_grad=True)
    targets = torch.randint(0, 50, (11,))
    targets[0] = 7  # a suppressed target (prompt positions hold such tokens)
    suppressed = [7, 31]
    weights_lp, weights_ent = torch.randn(11), torch.randn(11)

    logits = head(hidden) / 0.7
    logits = logits.masked_fill(torch.isin(torch.arange(50), torch.tensor(suppressed)), -1e9)
    log_probs = torch.log_softmax(logits, -1)
    want_lp = log_probs.gather(-1, targets[:, None]).squeeze(-1)
    want_ent = -(log_probs.exp() * log_probs).sum(-1)
    want = torch.autograd.grad((want_lp * weights_lp).sum() + (want_ent * weights_ent).sum(),
                               [hidden, *head.parameters()])
    got_lp, got_ent = token_logprobs.token_logprobs(hidden, head, targets, 0.7, suppressed)
    got = torch.autograd.grad((got_lp * weights_lp).sum() + (got_ent * weights_ent).sum(),
                              [hidden, *head.parameters()])
    torch.testing.assert_close(got_lp, want_lp)
    torch.testing.assert_close(got_ent, want_ent)
    for mine, theirs in zip(got, want, strict=True):
        torch.testing.assert_close(mine, theirs, rtol=1e-5, atol=1e-6)
