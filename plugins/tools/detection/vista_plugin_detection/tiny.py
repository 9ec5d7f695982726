"""Tiny, randomly initialised zero-shot detectors of real transformers architectures, made offline.

Like ``vista_rl_sdk.tiny_models`` does for Qwen2.5-VL: the directory written here (config,
safetensors, tokenizer, image processor) loads with ``AutoProcessor`` and
``AutoModelForZeroShotObjectDetection`` exactly as ``IDEA-Research/grounding-dino-tiny`` or
``google/owlv2-base-patch16-ensemble`` do, so tests run the code a real checkpoint runs.  The
detections are random; the shapes, thresholds, NMS and plumbing are real.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

DetectorArchitecture = Literal["grounding_dino", "owlv2"]
ARCHITECTURES: tuple[str, ...] = ("grounding_dino", "owlv2")

#: Words the tiny tokenizers know as whole tokens (anything else becomes [UNK] / characters).
WORDS: tuple[str, ...] = (
    "a", "the", "all", "objects", "object", "red", "green", "blue", "yellow", "black", "white", "car",
    "bicycle", "person", "cat", "dog", "bar", "bars", "chart", "circle", "square", "triangle", "shape",
    "line", "text", "label", "sign", "button", "icon", "window", "table", "number",
)


def _grounding_dino(path: Path, seed: int) -> None:
    import torch
    from transformers import (
        BertConfig,
        BertTokenizer,
        GroundingDinoConfig,
        GroundingDinoForObjectDetection,
        GroundingDinoImageProcessor,
        GroundingDinoProcessor,
        SwinConfig,
    )

    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".", ",", *WORDS]
    vocab_file = path / "vocab.txt"
    vocab_file.write_text("\n".join(vocab) + "\n", encoding="utf-8")
    tokenizer = BertTokenizer(str(vocab_file), do_lower_case=True, model_max_length=64)
    processor = GroundingDinoProcessor(
        image_processor=GroundingDinoImageProcessor(size={"shortest_edge": 128, "longest_edge": 192}),
        tokenizer=tokenizer)
    backbone = SwinConfig(embed_dim=16, depths=[1, 1, 1, 1], num_heads=[1, 1, 1, 1], window_size=4, image_size=64)
    backbone.out_features = ["stage2", "stage3", "stage4"]  # the property (the dataclass field is _out_features)
    config = GroundingDinoConfig(
        backbone_config=backbone,
        text_config=BertConfig(vocab_size=len(vocab), hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                               intermediate_size=64, max_position_embeddings=64),
        num_queries=32, encoder_layers=1, decoder_layers=2, encoder_ffn_dim=64, decoder_ffn_dim=64, d_model=32,
        encoder_attention_heads=2, decoder_attention_heads=2, encoder_n_points=2, decoder_n_points=2,
        max_text_len=64)
    torch.manual_seed(seed)
    GroundingDinoForObjectDetection(config).eval().save_pretrained(path)
    processor.save_pretrained(path)


def _owlv2(path: Path, seed: int) -> None:
    import torch
    from transformers import (
        CLIPTokenizer,
        Owlv2Config,
        Owlv2ForObjectDetection,
        Owlv2ImageProcessor,
        Owlv2Processor,
    )

    # CLIP's BPE with no merges: whole known words are tokens, anything else splits into letters.
    vocab: dict[str, int] = {}
    for char in sorted(set("".join(WORDS)) | set("abcdefghijklmnopqrstuvwxyz0123456789.,")):
        vocab.setdefault(char, len(vocab))
        vocab.setdefault(char + "</w>", len(vocab))
    for word in WORDS:
        vocab.setdefault(word + "</w>", len(vocab))
    for special in ("<|startoftext|>", "<|endoftext|>"):
        vocab[special] = len(vocab)
    (path / "vocab.json").write_text(json.dumps(vocab), encoding="utf-8")
    (path / "merges.txt").write_text("#version: 0.2\n", encoding="utf-8")
    tokenizer = CLIPTokenizer(vocab=str(path / "vocab.json"), merges=str(path / "merges.txt"), model_max_length=16)
    processor = Owlv2Processor(image_processor=Owlv2ImageProcessor(size={"height": 64, "width": 64}),
                               tokenizer=tokenizer)
    end = vocab["<|endoftext|>"]
    config = Owlv2Config(
        text_config={"vocab_size": len(vocab), "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1,
                     "num_attention_heads": 2, "max_position_embeddings": 16,
                     "bos_token_id": vocab["<|startoftext|>"], "eos_token_id": end, "pad_token_id": end},
        vision_config={"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1, "num_attention_heads": 2,
                       "image_size": 64, "patch_size": 16},
        projection_dim=32)
    torch.manual_seed(seed)
    Owlv2ForObjectDetection(config).eval().save_pretrained(path)
    processor.save_pretrained(path)


def init_tiny_detector(path: str | Path, architecture: DetectorArchitecture = "grounding_dino", seed: int = 0) -> Path:
    """Write a tiny random detector of ``architecture`` to ``path`` (created) and return the path.
    The same seed gives the same weights."""
    if architecture not in ARCHITECTURES:
        raise ValueError(f"unknown detector architecture {architecture!r}; choose one of {', '.join(ARCHITECTURES)}")
    target = Path(path)
    target.mkdir(parents=True, exist_ok=True)
    (_grounding_dino if architecture == "grounding_dino" else _owlv2)(target, seed)
    return target
