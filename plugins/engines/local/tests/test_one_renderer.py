"""One chat renderer: the local engine's RL prompts (``PolicyBackend``), its SFT data
(``tokens_from_turns``) and ``vista serve`` (the transformers backend's ``encode_chats``) turn the
same conversation (system, user with an image, an assistant reply, a tool result with an image,
env feedback) into byte-identical prompt token ids on a tiny real Qwen2.5-VL, and SFT shows a tool
result in the tool role it was seen in."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from PIL import Image

pytest.importorskip("transformers")
pytest.importorskip("vista_plugin_transformers")

from vista_plugin_local.policy import Policy, load_pretrained  # noqa: E402
from vista_plugin_local.policy_backend import PolicyBackend  # noqa: E402
from vista_plugin_local.sft_data import TurnPiece, record_pieces, tokens_from_turns  # noqa: E402
from vista_plugin_transformers.backend import TransformersBackend  # noqa: E402

from vista_rl import Message, ModelFamily, SamplingParams, Trajectory, Turn  # noqa: E402

SYSTEM = "Find the box. Answer with <answer>left</answer> or <answer>right</answer>."
PICTURE = Image.new("RGB", (56, 56), (200, 40, 90))
ZOOMED = Image.new("RGB", (28, 56), (10, 140, 90))
CALL = 'Let me zoom. <tool_call>{"name": "zoom", "arguments": {"x": 3, "y": 4}}</tool_call>'


def _conversation() -> list[Message]:
    return [Message("system", SYSTEM),
            Message("user", "Step 1: <image> Where is the box?", [PICTURE]),
            Message("assistant", CALL),
            Message("tool", "<tool_response>zoom: <image></tool_response>", [ZOOMED]),
            Message("assistant", "<answer>left</answer>"),
            Message("user", "Wrong: the box is not on the left. Try again.")]


def _pieces(chat: list[Message]) -> list[TurnPiece]:
    return [TurnPiece(chat[1].content, [PICTURE], CALL),
            TurnPiece(chat[3].content, [ZOOMED], "<answer>left</answer>", "tool"),
            TurnPiece(chat[5].content, [], "<answer>right</answer>")]


@pytest.fixture(scope="module")
def policy(tiny_model_dir: Path) -> Policy:
    model, processor = load_pretrained(str(tiny_model_dir))
    return Policy(model, processor, torch.device("cpu"))


def test_rl_sft_and_serve_prompts_are_byte_identical(policy: Policy, tiny_model_dir: Path) -> None:
    chat = _conversation()
    rl = PolicyBackend(policy).generate([chat], SamplingParams(temperature=0.0, max_tokens=2))[0][0]
    serve = TransformersBackend(path=str(tiny_model_dir), device="cpu").generate(
        [chat], SamplingParams(temperature=0.0, max_tokens=2))[0][0]
    sft = tokens_from_turns(SYSTEM, _pieces(chat), policy.encoder)
    assert rl.prompt_token_ids is not None and serve.prompt_token_ids is not None
    assert serve.prompt_token_ids == rl.prompt_token_ids
    # SFT's sequence is that prompt (minus the last generation header) plus the trained reply.
    header = policy.encoder.assistant_header
    assert rl.prompt_token_ids[-len(header):] == header
    assert sft.input_ids[:len(rl.prompt_token_ids)] == rl.prompt_token_ids
    image_pad = policy.encoder.image_token_id
    assert rl.encoded_images is not None and len(rl.encoded_images) == 2  # what its encoder built
    expected = sum(policy.encoder.vision_tokens(image) for image in rl.encoded_images)
    assert rl.prompt_token_ids.count(image_pad) == expected > 0
    # the loss covers exactly the three replies (each closed by <|im_end|>)
    trained = [token for token, mask in zip(sft.input_ids, sft.loss_mask, strict=True) if mask]
    replies = sum((policy.encoder.response_ids(piece.response) for piece in _pieces(chat)), [])
    assert trained == replies and len(sft.turn_ends) == 3


class _ToolRoleFamily(ModelFamily):
    """Qwen-VL's layout, with tool results in a role of their own."""

    def __init__(self, base: ModelFamily) -> None:
        self.base = base
        for name in ("name", "image_token", "vision_control_tokens", "optional_forbidden_tokens"):
            setattr(self, name, getattr(base, name))
        self.tool_role = "tool"

    def vision_span(self, count: int) -> str:
        return self.base.vision_span(count)

    def image_inputs(self, processor: Any, images: Any) -> list[Any]:
        return self.base.image_inputs(processor, images)

    def vision_tokens(self, processor: Any, image: Any) -> int:
        return self.base.vision_tokens(processor, image)


def test_sft_renders_each_observation_in_its_role(policy: Policy) -> None:
    from vista_plugin_local.chat_tokens import ChatEncoder

    encoder = ChatEncoder(policy.processor, family=_ToolRoleFamily(policy.encoder.family))
    chat = _conversation()
    sft = tokens_from_turns(SYSTEM, _pieces(chat), encoder)
    rendered = encoder.render(chat[:5], add_generation_prompt=False)
    assert sft.input_ids[:len(rendered)] == rendered.input_ids
    text = encoder.tokenizer.decode(sft.input_ids)
    assert "<|im_start|>tool\n<tool_response>" in text and text.count("<|im_start|>user\n") == 2


def test_the_store_keeps_the_observation_role(tmp_path: Path) -> None:
    turns = [Turn(observation="<image> where?", response=CALL, images=[PICTURE]),
             Turn(observation="<tool_response>3</tool_response>", response="<answer>left</answer>",
                  observation_role="tool")]
    record = Trajectory(env_id="demo", seed=0, system_prompt=SYSTEM, turns=turns).to_dict()
    assert [turn["observation_role"] for turn in record["turns"]] == ["user", "tool"]
    PICTURE.save(tmp_path / "pic.png")
    record["turns"][0]["image_refs"] = ["pic"]
    assert [piece.role for piece in record_pieces(record, tmp_path)] == ["user", "tool"]
    del record["turns"][1]["observation_role"]  # rows stored before the field existed
    assert record_pieces(record, tmp_path)[1].role == "user"


def test_internvl_rl_and_serve_prompts_are_byte_identical(tiny_internvl_dir: Path) -> None:
    """InternVL's template writes a bare ``<IMG_CONTEXT>`` that its processor wraps in ``<img>``
    ... ``</img>``: the served text still expands to the ids the local engine builds itself."""
    from vista_plugin_transformers.chat import encode_chats

    model, processor = load_pretrained(str(tiny_internvl_dir))
    chat = _conversation()
    rl = PolicyBackend(Policy(model, processor, torch.device("cpu"))).generate(
        [chat], SamplingParams(temperature=0.0, max_tokens=1))[0][0]
    assert encode_chats(processor, [chat])["input_ids"][0].tolist() == rl.prompt_token_ids
