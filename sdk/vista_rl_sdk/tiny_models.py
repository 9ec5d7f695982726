"""Tiny, randomly initialised vision-language models of real architectures, made offline.

No weights can be downloaded in CI, yet every backend and training path must run the code a real
checkpoint runs.  ``init_tiny_model`` therefore writes a complete Hugging Face model directory (config,
safetensors weights, a byte-level BPE tokenizer trained here on a fixed corpus, a Qwen-style chat
template and the image/video processors) that ``AutoProcessor`` + ``AutoModelForImageTextToText`` and
vLLM load exactly as they would load ``Qwen/Qwen2.5-VL-3B-Instruct``.  Everything is a function of the
arguments: the same ``seed`` gives the same weights and the same tokenizer, byte for byte.

Two families: ``arch="qwen2_5_vl"`` (the default) and ``arch="internvl"``, a transformers-native
``InternVLForConditionalGeneration`` (InternViT-style tower, pixel shuffle, Qwen2 language model) with
``InternVLProcessor``, laid out like an ``OpenGVLab/InternVL3-*-hf`` checkpoint.

Needs the ``models`` extra (``pip install "vista-rl-sdk[models]"``: transformers, tokenizers) and, for
the Qwen2.5-VL processors, torchvision (see ``scripts/setup.d/torchvision.sh`` for CPU torch).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

#: Qwen2's special tokens, in the order their ids are assigned (0, 1, 2, ...).
QWEN_SPECIAL_TOKENS: tuple[str, ...] = (
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|image_pad|>",
    "<|video_pad|>",
)

#: Response-format tags the envs and parsers use; single tokens (like Qwen's ``<tool_call>``), so a
#: tiny random model can emit a well-formed tag with one sampled token.
FORMAT_TAGS: tuple[str, ...] = (
    "<think>", "</think>", "<answer>", "</answer>", "<tool_call>", "</tool_call>",
    "<tool_response>", "</tool_response>", "<observation>", "</observation>",
    "<prediction>", "</prediction>", "<image>",
)

#: Qwen2's pre-tokenisation pattern: words, single digits, punctuation runs, whitespace.
QWEN_SPLIT_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)

DEFAULT_SYSTEM_PROMPT = "You are a helpful assistant."

def chat_template(image_markup: str, video_markup: str) -> str:
    """A Qwen2-style ``<|im_start|>`` chat template in which an image part becomes ``image_markup``
    and a video part ``video_markup`` where it stands (the only thing the families differ in)."""
    return (
        "{% for message in messages %}"
        "{% if loop.first and message['role'] != 'system' %}"
        "<|im_start|>system\n" + DEFAULT_SYSTEM_PROMPT + "<|im_end|>\n"
        "{% endif %}"
        "<|im_start|>{{ message['role'] }}\n"
        "{% if message['content'] is string %}"
        "{{ message['content'] }}"
        "{% else %}"
        "{% for part in message['content'] %}"
        "{% if part['type'] == 'image' or part['type'] == 'image_url' or 'image' in part %}"
        + image_markup +
        "{% elif part['type'] == 'video' or 'video' in part %}"
        + video_markup +
        "{% elif 'text' in part %}"
        "{{ part['text'] }}"
        "{% endif %}"
        "{% endfor %}"
        "{% endif %}"
        "<|im_end|>\n"
        "{% endfor %}"
        "{% if add_generation_prompt %}"
        "<|im_start|>assistant\n"
        "{% endif %}"
    )


#: A Qwen2.5-VL style chat template.  Messages carry a string or a list of content parts
#: (``{"type": "text", "text": ...}``, ``{"type": "image"}`` / ``image_url``, ``{"type": "video"}``);
#: each image becomes ``<|vision_start|><|image_pad|><|vision_end|>`` where it stands.
QWEN_CHAT_TEMPLATE = chat_template("<|vision_start|><|image_pad|><|vision_end|>",
                                   "<|vision_start|><|video_pad|><|vision_end|>")

#: InternVL's image tokens (the transformers-native ``InternVLProcessor`` names): each image tile is
#: ``<img>`` + ``image_seq_length`` x ``<IMG_CONTEXT>`` + ``</img>``; ``<video>`` marks a video.
INTERNVL_SPECIAL_TOKENS: tuple[str, ...] = ("<img>", "</img>", "<IMG_CONTEXT>", "<video>")

#: An InternVL3-style chat template (Qwen2 ``<|im_start|>`` turns, as InternVL3's Qwen2.5 language
#: model uses).  An image part becomes ``<IMG_CONTEXT>`` where it stands, which the processor expands
#: (no ``\n`` after it, unlike InternVL's own templates: so the text matches the local engine's
#: rendering of an observation, placeholder for placeholder).
INTERNVL_CHAT_TEMPLATE = chat_template("<IMG_CONTEXT>", "<video>")

#: Architectures ``init_tiny_model`` can build (``--family`` of ``vista model init-tiny``).
ARCHITECTURES: tuple[str, ...] = ("qwen2_5_vl", "internvl")


def training_corpus() -> list[str]:
    """The fixed corpus the tiny tokenizer is trained on: the words, tags, actions and number forms
    VISTA's envs, tools and parsers produce, so that typical prompts tokenize into few tokens."""
    actions = ["Up", "Down", "Left", "Right", "up", "down", "left", "right", "push", "move", "stay"]
    words = ["the", "a", "an", "is", "are", "of", "to", "in", "on", "at", "and", "or", "not", "what", "which", "where", "how", "many", "shape", "colour", "color", "cell", "grid", "box", "target", "player", "wall", "hole", "goal", "frozen", "lake", "sokoban", "chart", "bar", "value", "answer", "question", "image", "picture", "object", "left", "right", "top", "bottom", "red", "green", "blue", "yellow", "black", "white", "circle", "square", "triangle", "think", "step", "action", "actions", "reward", "done", "success", "format", "valid", "invalid", "feedback", "retry", "crop", "zoom", "region", "point", "click", "select", "option", "choice", "number", "count", "total", "area", "angle", "length", "You", "are", "a", "helpful", "assistant", ".", "Answer", "with", "one", "word", "Look", "at", "the"]
    corpus: list[str] = []
    for index, word in enumerate(words):
        corpus.append(f"{word} {words[(index * 7 + 3) % len(words)]} {words[(index * 13 + 5) % len(words)]}")
    for index in range(120):
        first, second = actions[index % len(actions)], actions[(index * 5 + 2) % len(actions)]
        corpus.append(f"<think>I should move {first.lower()} then {second.lower()}.</think>"
                      f"<answer>{first}, {second}</answer>")
        corpus.append(f"<answer>{index}</answer> <answer>{index / 4:.2f}</answer> ({index % 17}, {index % 23})")
        call = {"name": "crop", "arguments": {"x": index % 112, "y": (index * 3) % 112, "size": 16 + index % 48}}
        corpus.append(f"<tool_call>{json.dumps(call)}</tool_call>")
        corpus.append(f"<observation>The player is at ({index % 6}, {index % 5}).</observation>"
                      f"<prediction>box at ({index % 4}, {index % 3})</prediction>")
    corpus.append("0 1 2 3 4 5 6 7 8 9 10 100 1000 -1 0.5 3.14 50% A B C D E (A) (B) (C) (D) yes no")
    corpus.append("! \" # $ % & ' ( ) * + , - . / : ; < = > ? @ [ \\ ] ^ _ ` { | } ~ \n\t")
    return corpus


def _train_tokenizer(vocab_size: int, special_tokens: tuple[str, ...] = QWEN_SPECIAL_TOKENS) -> Any:
    """A byte-level BPE (Qwen2's pre-tokenizer and decoder) trained on ``training_corpus``;
    ``special_tokens`` get ids 0, 1, 2, ... in order."""
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE(unk_token=None, fuse_unk=False, byte_fallback=False))
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN_SPLIT_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=2,
        show_progress=False,
        special_tokens=[AddedToken(token, special=True, normalized=False) for token in special_tokens],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tokenizer.train_from_iterator(training_corpus(), trainer=trainer)
    tokenizer.add_tokens([AddedToken(tag, special=False, normalized=False) for tag in FORMAT_TAGS])
    return tokenizer


def build_tokenizer(vocab_size: int = 1024) -> Any:
    """The tiny tokenizer as a transformers ``PreTrainedTokenizerFast`` with Qwen's special tokens
    (eos ``<|im_end|>``, pad ``<|endoftext|>``) and the Qwen-style chat template."""
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast(
        tokenizer_object=_train_tokenizer(vocab_size),
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        bos_token=None,
        unk_token=None,
        padding_side="left",
        model_max_length=4096,
        chat_template=QWEN_CHAT_TEMPLATE,
        extra_special_tokens={"image_token": "<|image_pad|>", "video_token": "<|video_pad|>",
                              "vision_start_token": "<|vision_start|>",
                              "vision_end_token": "<|vision_end|>"},
    )


def build_internvl_tokenizer(vocab_size: int = 1024) -> Any:
    """The tiny tokenizer for InternVL: the same BPE with Qwen2's chat tokens (InternVL3's language
    model is Qwen2.5) and InternVL's image tokens, named as ``InternVLProcessor`` reads them
    (``start_image_token``, ``end_image_token``, ``context_image_token``, ``video_token``)."""
    from transformers import PreTrainedTokenizerFast

    specials = QWEN_SPECIAL_TOKENS[:3] + INTERNVL_SPECIAL_TOKENS
    return PreTrainedTokenizerFast(
        tokenizer_object=_train_tokenizer(vocab_size, specials),
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        bos_token=None,
        unk_token=None,
        padding_side="left",
        model_max_length=4096,
        chat_template=INTERNVL_CHAT_TEMPLATE,
        extra_special_tokens={"start_image_token": "<img>", "end_image_token": "</img>",
                              "context_image_token": "<IMG_CONTEXT>", "video_token": "<video>"},
    )


def build_processor(tokenizer: Any, min_pixels: int = 56 * 56) -> Any:
    """``Qwen2_5_VLProcessor`` with small image limits (56x56 to 224x224 pixels: a 112x112 image is
    64 patches and 16 ``<|image_pad|>`` tokens) and the video processor the class insists on.

    ``min_pixels=28 * 28`` lets a 28x28 image stay 28x28: four patches merged into one vision token,
    the whole picture in one embedding (the main job's FrozenLake shows its 4x4 map that way)."""
    from transformers import Qwen2_5_VLProcessor, Qwen2VLImageProcessor, Qwen2VLVideoProcessor

    if min_pixels < 28 * 28:
        raise ValueError("min_pixels must be at least 28 * 28 (one merged vision token)")
    pixels = {"shortest_edge": min_pixels, "longest_edge": 224 * 224}
    return Qwen2_5_VLProcessor(
        image_processor=Qwen2VLImageProcessor(size=dict(pixels)),
        video_processor=Qwen2VLVideoProcessor(size=dict(pixels)),
        tokenizer=tokenizer,
        chat_template=QWEN_CHAT_TEMPLATE,
    )


def tiny_qwen2_5_vl_config(tokenizer: Any, text: dict[str, Any] | None = None,
                           vision: dict[str, Any] | None = None) -> Any:
    """A ~0.7 M-parameter ``Qwen2_5_VLConfig`` whose token ids match ``tokenizer``; ``text`` and
    ``vision`` override entries of the text and vision configs (e.g. ``{"num_hidden_layers": 4}``)."""
    from transformers import Qwen2_5_VLConfig

    ids = {token: tokenizer.convert_tokens_to_ids(token) for token in QWEN_SPECIAL_TOKENS}
    text_config = {
        "vocab_size": len(tokenizer),
        "hidden_size": 128,
        "intermediate_size": 256,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "max_position_embeddings": 4096,
        "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [4, 6, 6]},
        "bos_token_id": ids["<|endoftext|>"],
        "eos_token_id": ids["<|im_end|>"],
        "pad_token_id": ids["<|endoftext|>"],
        "tie_word_embeddings": False,
    }
    vision_config = {
        "depth": 2,
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_heads": 4,
        "patch_size": 14,
        "spatial_merge_size": 2,
        "temporal_patch_size": 2,
        "window_size": 56,
        "out_hidden_size": 128,
        "fullatt_block_indexes": [1],
    }
    text_config.update(text or {})
    vision_config.update(vision or {})
    return Qwen2_5_VLConfig(
        text_config=text_config,
        vision_config=vision_config,
        image_token_id=ids["<|image_pad|>"],
        video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"],
        vision_end_token_id=ids["<|vision_end|>"],
        tie_word_embeddings=False,
    )


#: The tiny InternVL's vision input: one 28x28 tile of 14x14 patches (2x2 = 4 patches), pixel-shuffled
#: at ``downsample_ratio`` 0.5 into one token per tile.
INTERNVL_TILE = 28
INTERNVL_PATCH = 14


def build_internvl_processor(tokenizer: Any, tile: int = INTERNVL_TILE, max_tiles: int = 1) -> Any:
    """``InternVLProcessor`` with a ``GotOcr2ImageProcessor`` resizing each image to one
    ``tile`` x ``tile`` tile (``max_tiles`` > 1 turns on InternVL's dynamic tiling: up to that many
    tiles plus a thumbnail) and ``image_seq_length`` matching the tiny vision tower."""
    from transformers import GotOcr2ImageProcessor, InternVLProcessor, InternVLVideoProcessor

    size = {"height": tile, "width": tile}
    image_processor = GotOcr2ImageProcessor(size=dict(size), crop_to_patches=max_tiles > 1,
                                            min_patches=1, max_patches=max_tiles)
    return InternVLProcessor(
        image_processor=image_processor,
        tokenizer=tokenizer,
        video_processor=InternVLVideoProcessor(size=dict(size)),
        image_seq_length=(tile // INTERNVL_PATCH) ** 2 // 4,
        chat_template=INTERNVL_CHAT_TEMPLATE,
    )


def tiny_internvl_config(tokenizer: Any, text: dict[str, Any] | None = None,
                         vision: dict[str, Any] | None = None, tile: int = INTERNVL_TILE) -> Any:
    """A tiny ``InternVLConfig`` (InternViT-style vision tower + Qwen2 language model) whose token
    ids match ``tokenizer``; ``text`` and ``vision`` override entries of the sub-configs."""
    from transformers import InternVLConfig

    ids = {token: tokenizer.convert_tokens_to_ids(token) for token in ("<|endoftext|>", "<|im_end|>", "<IMG_CONTEXT>")}
    text_config = {
        "model_type": "qwen2",
        "vocab_size": len(tokenizer),
        "hidden_size": 128,
        "intermediate_size": 256,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "max_position_embeddings": 4096,
        "bos_token_id": ids["<|endoftext|>"],
        "eos_token_id": ids["<|im_end|>"],
        "pad_token_id": ids["<|endoftext|>"],
        "tie_word_embeddings": False,
    }
    vision_config = {
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "image_size": [tile, tile],
        "patch_size": [INTERNVL_PATCH, INTERNVL_PATCH],
    }
    text_config.update(text or {})
    vision_config.update(vision or {})
    return InternVLConfig(
        text_config=text_config,
        vision_config=vision_config,
        image_token_id=ids["<IMG_CONTEXT>"],
        image_seq_length=(tile // INTERNVL_PATCH) ** 2 // 4,
        downsample_ratio=0.5,
        tie_word_embeddings=False,
    )


def init_tiny_model(out_dir: str | Path, arch: str = "qwen2_5_vl", seed: int = 0, *, min_pixels: int = 56 * 56,
                    text: dict[str, Any] | None = None, vision: dict[str, Any] | None = None) -> Path:
    """Write a tiny randomly initialised model of architecture ``arch`` to ``out_dir`` and return it.

    The directory holds what a hub checkpoint holds (``config.json``, ``generation_config.json``,
    ``model.safetensors``, tokenizer files, ``chat_template.jinja``, processor configs), so it loads
    with ``AutoProcessor.from_pretrained`` + ``AutoModelForImageTextToText.from_pretrained`` and with
    ``vllm.LLM(model=out_dir)``.  Same ``seed``, same files.  ``min_pixels`` goes to the image
    processor (:func:`build_processor`, Qwen2.5-VL only); ``text`` and ``vision`` reshape the model
    (:func:`tiny_qwen2_5_vl_config`, :func:`tiny_internvl_config`).
    """
    if arch not in ARCHITECTURES:
        raise ValueError(f"unknown tiny-model architecture {arch!r}; choose one of {', '.join(ARCHITECTURES)}")
    import torch
    from transformers import (
        GenerationConfig,
        InternVLForConditionalGeneration,
        Qwen2_5_VLForConditionalGeneration,
    )

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if arch == "internvl":
        if min_pixels != 56 * 56:
            raise ValueError("min_pixels applies to Qwen2.5-VL only; the tiny InternVL uses fixed 28x28 tiles")
        tokenizer = build_internvl_tokenizer()
        config = tiny_internvl_config(tokenizer, text, vision)
        model_class: Any = InternVLForConditionalGeneration
        processor = build_internvl_processor(tokenizer)
    else:
        tokenizer = build_tokenizer()
        config = tiny_qwen2_5_vl_config(tokenizer, text, vision)
        model_class = Qwen2_5_VLForConditionalGeneration
        processor = build_processor(tokenizer, min_pixels)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = model_class(config).float().eval()
    model.generation_config = GenerationConfig(
        bos_token_id=config.text_config.bos_token_id,
        eos_token_id=config.text_config.eos_token_id,
        pad_token_id=config.text_config.pad_token_id,
    )
    model.save_pretrained(out)
    processor.save_pretrained(out)
    recipe: dict[str, Any] = {"arch": arch, "seed": seed, "parameters": sum(p.numel() for p in model.parameters())}
    shape = {"min_pixels": min_pixels if min_pixels != 56 * 56 else None, "text": text, "vision": vision}
    recipe.update({key: value for key, value in shape.items() if value})  # defaults leave the file as it was
    (out / "vista_tiny_model.json").write_text(json.dumps(recipe, indent=2) + "\n")
    return out


def iter_model_files(model_dir: str | Path) -> Iterator[Path]:
    """The files of a model directory in a stable order (for checksums and comparisons)."""
    root = Path(model_dir)
    yield from sorted(path for path in root.rglob("*") if path.is_file())


def default_cache_dir() -> Path:
    """``$VISTA_CACHE/vista-tiny`` when set, else ``.cache/vista-tiny`` under the current directory."""
    base = os.environ.get("VISTA_CACHE")
    return (Path(base) if base else Path.cwd() / ".cache") / "vista-tiny"


def _recipe_digest(arch: str) -> str:
    """Changes whenever the recipe (this file) or the transformers version does, so stale cached
    models are never reused."""
    import transformers

    digest = hashlib.sha256(Path(__file__).read_bytes())
    digest.update(f"{arch}:{transformers.__version__}".encode())
    return digest.hexdigest()[:12]


def cached_tiny_model(arch: str = "qwen2_5_vl", seed: int = 0, cache_dir: str | Path | None = None) -> Path:
    """``init_tiny_model`` once per (arch, seed, recipe): later calls, and other processes, reuse the
    directory.  Built in a temporary sibling and renamed into place, so concurrent test runs never
    see a half-written model."""
    root = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    target = root / f"{arch}-seed{seed}-{_recipe_digest(arch)}"
    if (target / "vista_tiny_model.json").exists():
        return target
    root.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=root))
    try:
        init_tiny_model(scratch, arch=arch, seed=seed)
        try:
            scratch.rename(target)
        except OSError:
            if not (target / "vista_tiny_model.json").exists():
                raise
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return target
