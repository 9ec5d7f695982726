"""InternVL as the local engine's second VLM family: the family registry picks it from the
checkpoint, the chat encoder expands images as ``InternVLProcessor`` does, and one SFT step and one
GRPO step train a tiny real ``InternVLForConditionalGeneration``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from PIL import Image
from vista_plugin_local.trainer import LocalEngine

from tests.engine_helpers import run_config
from vista_rl.errors import ConfigError

pytest.importorskip("transformers")


def test_the_family_comes_from_the_checkpoint(tiny_internvl_dir: Path, tiny_model_dir: Path) -> None:
    from vista_plugin_local.families import InternVLFamily, QwenVLFamily, family_for
    from vista_plugin_local.policy import Policy, load_pretrained

    model, processor = load_pretrained(str(tiny_internvl_dir))
    policy = Policy(model, processor, torch.device("cpu"))
    assert isinstance(policy.family, InternVLFamily)
    assert isinstance(family_for(model_type="qwen2_5_vl"), QwenVLFamily)
    assert isinstance(family_for(processor), InternVLFamily)  # no config at hand: by processor class
    with pytest.raises(ConfigError, match="register_model_families"):
        family_for(model_type="llava")
    # what the policy may never sample: InternVL's image tokens, not Qwen's
    forbidden = set(processor.tokenizer.convert_ids_to_tokens(policy.encoder.forbidden_ids))
    assert {"<IMG_CONTEXT>", "<img>", "</img>", "<|im_start|>"} <= forbidden
    assert "<|im_end|>" not in forbidden


def test_chat_encoder_expands_images_as_internvl_processor_does(tiny_internvl_dir: Path) -> None:
    from vista_plugin_local.chat_tokens import ChatEncoder
    from vista_plugin_local.policy import load_pretrained

    _model, processor = load_pretrained(str(tiny_internvl_dir))
    encoder = ChatEncoder(processor)
    images = [Image.new("RGB", (40, 64), "red"), Image.new("RGB", (28, 28), "blue")]
    text = "left <image> and right <image>: which is red?"
    ids, vision = encoder.message_segment("user", text, images)
    reference = processor(text=[f"<|im_start|>user\n{text.replace('<image>', '<IMG_CONTEXT>')}<|im_end|>\n"],
                          images=images, return_tensors="pt")
    assert ids == reference["input_ids"][0].tolist()
    assert torch.equal(torch.cat([v.pixel_values for v in vision]), reference["pixel_values"])
    assert [encoder.vision_tokens(v) for v in vision] == [processor.image_seq_length] * 2
    assert all(v.grid_thw is None for v in vision)


def test_one_sft_step_and_one_grpo_step_train_internvl(tmp_path: Path, tiny_internvl_dir: Path) -> None:
    run = run_config(tiny_internvl_dir, tmp_path / "ivl", overrides=(
        "sft.steps=1", "trainer.steps=1", "sft.lr=0.01", "trainer.lr=0.01", "eval.after_sft=false"))
    engine = LocalEngine(run)
    before = {k: v.clone() for k, v in engine._build_policy().model.state_dict().items()}
    engine.run()
    rows = [json.loads(line) for line in (tmp_path / "ivl" / "metrics.jsonl").read_text().splitlines()]
    stages = [row.get("stage") for row in rows]
    assert "sft" in stages and "rl" in stages, stages
    grpo = [row for row in rows if row.get("stage") == "rl"][-1]
    assert grpo["env_errors"] == 0 and grpo["trained_episodes"] == 4  # 2 seeds x group of 2, none dropped
    assert grpo["optimizer_steps"] >= 1
    assert engine.last_batch is not None and all(s.tokens.images for s in engine.last_batch.samples)
    after = engine.policy.model.state_dict()
    assert any(not torch.equal(after[k], before[k]) for k in before)


@pytest.mark.parametrize("model_fixture", ["tiny_model_dir", "tiny_internvl_dir"])
def test_sampled_logprobs_are_the_scored_logprobs(model_fixture: str, request: pytest.FixtureRequest) -> None:
    """What the update scores (right-padded batch, the family's vision tensors and positions) is what
    generation sampled from (left-padded), for both families: images of different sizes, prompts of
    different lengths in one batch."""
    from vista_plugin_local.chat_tokens import EpisodeTokens
    from vista_plugin_local.policy import Policy, load_pretrained

    model, processor = load_pretrained(str(request.getfixturevalue(model_fixture)))
    policy = Policy(model, processor, torch.device("cpu"))
    prefixes = []
    for index, (size, question) in enumerate([((40, 64), "which shape?"), ((56, 56), "is the odd one red or blue?")]):
        image = Image.new("RGB", size, (200, 40 * index, 90))
        ids, vision = policy.encoder.prompt_segment("Answer.", f"<image> {question}", [image])
        prefix = EpisodeTokens()
        prefix.extend(ids, trainable=False)
        prefix.images.extend(vision)
        prefixes.append(prefix)
    torch.manual_seed(0)
    samples = policy.sample(prefixes, max_new_tokens=6, temperature=1.0)
    full = []
    for prefix, (ids, _) in zip(prefixes, samples, strict=True):
        sequence = EpisodeTokens(list(prefix.input_ids), list(prefix.loss_mask), [], list(prefix.images))
        sequence.extend(ids, trainable=True)
        full.append(sequence)
    with torch.no_grad():
        scores = policy.score(policy.collate(full, left_pad=False), temperature=1.0)
    for row, (ids, logprobs) in enumerate(samples):
        start = len(prefixes[row])
        assert logprobs is not None and len(ids) > 0
        assert scores.logprobs[row, start:start + len(ids)].tolist() == pytest.approx(logprobs, abs=1e-3)
