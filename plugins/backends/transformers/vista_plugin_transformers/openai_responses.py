"""OpenAI response shapes for ``vista serve``: chat and legacy completion choices, their logprobs,
and the server-sent-event chunks the official client's streaming reads.

Replayed streams: a stream that asks for logprobs or token ids (or on a backend without live
tokens) replays the finished generation: each token becomes one chunk whose text is that token's
share of the final text, with its logprobs.  The pieces are cut from the final text itself, so the
streamed text always equals the non-streamed text, even where a token holds half a UTF-8
character or a stop string cut the text.  Other streams send tokens as they are sampled
(:mod:`vista_plugin_transformers.live_stream`), with the same guarantee.

Logprobs of ``-inf`` (tokens outside the top-p nucleus) are sent as ``-9999.0``, as vLLM does:
JSON has no infinity, and the official client would fail to parse ``-Infinity``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from vista_rl import Generation

#: what -inf (and NaN) logprobs become on the wire (vLLM's choice)
FLOOR_LOGPROB = -9999.0


def wire_logprob(value: float) -> float:
    return value if math.isfinite(value) else FLOOR_LOGPROB


def _gpt2_byte_decoder() -> dict[str, int]:
    """GPT-2's byte-level alphabet (printable stand-ins for the 256 bytes), reversed: byte-level
    BPE tokenizers (Qwen, Llama 3, GPT-2) spell each token with it, so a token holding half a UTF-8
    character still gives its exact bytes."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    codes = list(printable)
    shift = 0
    for byte in range(256):
        if byte not in printable:
            printable.append(byte)
            codes.append(256 + shift)
            shift += 1
    return {chr(code): byte for byte, code in zip(printable, codes, strict=True)}


class IncrementalDecoder:
    """Text from token ids one token at a time (incremental detokenization, as vLLM does): only the
    tokens since the last complete character are decoded, so the cost is linear (decoding every
    prefix took 10.8 s for 4096 tokens).  A token that ends mid-character adds nothing until the
    character completes.  ``tokenizer`` is a transformers tokenizer; special tokens add nothing."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        self.ids: list[int] = []
        self.text = ""
        self._prefix_offset = self._read_offset = 0

    def add(self, token_id: int) -> str:
        """The text ``token_id`` completes (often empty), also appended to :attr:`text`."""
        self.ids.append(int(token_id))
        before = str(self.tokenizer.decode(self.ids[self._prefix_offset:self._read_offset], skip_special_tokens=True))
        after = str(self.tokenizer.decode(self.ids[self._prefix_offset:], skip_special_tokens=True))
        if len(after) < len(before) or after.endswith("\ufffd"):  # mid-character: wait for the rest
            return ""
        # also when nothing was added (a special token): the window moves on, so a long run of
        # special tokens is not decoded again at every step (quadratic, on a live stream's event loop)
        new = after[len(before):]
        self.text += new
        self._prefix_offset, self._read_offset = self._read_offset, len(self.ids)
        return new


class TokenTexts:
    """A tokenizer's view of token ids for logprobs: each token's text, its exact bytes, and how a
    completion's text splits into per-token pieces.  ``tokenizer=None`` (a backend without one)
    names tokens by their ids."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        self._texts: dict[int, str] = {}
        decoder = getattr(getattr(tokenizer, "backend_tokenizer", None), "decoder", None)
        self._byte_decoder = _gpt2_byte_decoder() if type(decoder).__name__ == "ByteLevel" else None
        self._special = set(getattr(tokenizer, "all_special_ids", None) or [])

    def text(self, token_id: int) -> str:
        if token_id not in self._texts:
            self._texts[token_id] = str(self.tokenizer.decode([token_id])) if self.tokenizer is not None else str(token_id)
        return self._texts[token_id]

    def bytes(self, token_id: int) -> list[int]:
        if self._byte_decoder is not None:
            spelled = self.tokenizer.convert_ids_to_tokens(token_id)
            if (isinstance(spelled, str) and spelled and token_id not in self._special
                    and all(char in self._byte_decoder for char in spelled)):
                return [self._byte_decoder[char] for char in spelled]
        return list(self.text(token_id).encode("utf-8"))

    def pieces(self, token_ids: Sequence[int], text: str) -> list[str]:
        """Per token, the text it adds; the pieces join to ``text`` exactly.  A token whose prefix
        ends mid-character adds nothing until the character completes."""
        if not token_ids:
            return [text] if text else []
        if self.tokenizer is None:  # no way to split: the whole text on the first token
            return [text] + [""] * (len(token_ids) - 1)
        decoder = IncrementalDecoder(self.tokenizer)
        ends: list[int] = []
        for token_id in token_ids:
            decoder.add(token_id)
            ends.append(min(len(decoder.text), len(text)))
        ends[-1] = len(text)
        return [text[start:end] for start, end in zip([0, *ends[:-1]], ends, strict=True)]

    def chat_entry(self, token_id: int, logprob: float, top: Sequence[tuple[int, float]] = ()) -> dict[str, Any]:
        """One entry of a chat choice's ``logprobs.content``."""
        return {"token": self.text(token_id), "logprob": wire_logprob(logprob), "bytes": self.bytes(token_id),
                "top_logprobs": [{"token": self.text(alt), "logprob": wire_logprob(value), "bytes": self.bytes(alt)}
                                 for alt, value in top]}


def _tops(generation: Generation) -> list[list[tuple[int, float]]]:
    tops = generation.metadata.get("top_logprobs") or []
    return [list(map(tuple, step)) for step in tops]  # type: ignore[misc]


def chat_logprob_entries(generation: Generation, texts: TokenTexts) -> list[dict[str, Any]]:
    tops = _tops(generation)
    return [texts.chat_entry(token_id, logprob, tops[step] if step < len(tops) else ())
            for step, (token_id, logprob) in enumerate(zip(generation.token_ids, generation.logprobs or [],
                                                           strict=False))]


def chat_choice(index: int, generation: Generation, texts: TokenTexts, *, logprobs: bool,
                token_ids: bool) -> dict[str, Any]:
    choice: dict[str, Any] = {"index": index, "message": {"role": "assistant", "content": generation.text},
                              "finish_reason": generation.finish_reason, "logprobs": None}
    if logprobs and generation.logprobs is not None:
        choice["logprobs"] = {"content": chat_logprob_entries(generation, texts)}
    if token_ids:
        choice["token_ids"] = list(generation.token_ids)
    return choice


def legacy_logprobs(generation: Generation, texts: TokenTexts, text_offset: int) -> dict[str, Any]:
    """A legacy completion choice's ``logprobs``: ``tokens``, ``token_logprobs``, ``top_logprobs``
    (per token a dict of the most likely tokens, the sampled one always included, so up to
    ``logprobs + 1`` entries, as OpenAI documents) and ``text_offset`` (each token's character
    offset, counted from the start of the prompt)."""
    tops = _tops(generation)
    tokens, token_logprobs, top_logprobs, offsets = [], [], [], []
    offset = text_offset
    pieces = texts.pieces(generation.token_ids, generation.text)
    for step, (token_id, logprob) in enumerate(zip(generation.token_ids, generation.logprobs or [], strict=False)):
        tokens.append(texts.text(token_id))
        token_logprobs.append(wire_logprob(logprob))
        alternatives = {texts.text(alt): wire_logprob(value) for alt, value in (tops[step] if step < len(tops) else ())}
        alternatives.setdefault(texts.text(token_id), wire_logprob(logprob))
        top_logprobs.append(alternatives)
        offsets.append(offset)
        offset += len(pieces[step]) if step < len(pieces) else 0
    return {"tokens": tokens, "token_logprobs": token_logprobs, "top_logprobs": top_logprobs, "text_offset": offsets}


def completion_choice(index: int, generation: Generation, texts: TokenTexts, *, logprobs: bool,
                      prompt_chars: int, token_ids: bool) -> dict[str, Any]:
    choice: dict[str, Any] = {"index": index, "text": generation.text, "finish_reason": generation.finish_reason,
                              "logprobs": None}
    if logprobs and generation.logprobs is not None:
        choice["logprobs"] = legacy_logprobs(generation, texts, prompt_chars)
    if token_ids:
        choice["token_ids"] = list(generation.token_ids)
    return choice


def usage(prompt_tokens: int, completion_tokens: int) -> dict[str, int]:
    return {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens}


@dataclass
class StreamHeader:
    """What every chunk of one streamed response repeats."""

    id: str
    object: str  # "chat.completion.chunk" or "text_completion"
    created: int
    model: str
    include_usage: bool


def sse(payload: dict[str, Any] | str) -> str:
    """One server-sent event: ``data: <json>`` and a blank line."""
    data = payload if isinstance(payload, str) else json.dumps(payload, ensure_ascii=False, allow_nan=False)
    return f"data: {data}\n\n"


def stream_chunk(header: StreamHeader, choices: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    """One chunk of a streamed response (``usage: null`` on each when the usage comes last)."""
    chunk: dict[str, Any] = {"id": header.id, "object": header.object, "created": header.created,
                             "model": header.model, "choices": choices, **extra}
    if header.include_usage:
        chunk["usage"] = None
    return chunk


def opening_choices(count: int) -> list[dict[str, Any]]:
    """A chat stream's first chunk: the assistant role for each choice."""
    return [{"index": index, "delta": {"role": "assistant", "content": ""}, "logprobs": None, "finish_reason": None}
            for index in range(count)]


def text_choice(index: int, text: str, chat: bool, finish_reason: str | None = None) -> dict[str, Any]:
    """One choice of a stream chunk carrying ``text`` (a chat ``delta`` or a completion ``text``)."""
    choice: dict[str, Any] = {"index": index, "logprobs": None, "finish_reason": finish_reason}
    if chat:
        choice["delta"] = {"content": text} if text or finish_reason is None else {}
    else:
        choice["text"] = text
    return choice


def stream_end(header: StreamHeader, finish_reasons: Sequence[str], total_usage: dict[str, int],
               **first: Any) -> Iterator[str]:
    """A stream's last events: each choice's ``finish_reason``, the usage chunk when asked, ``[DONE]``."""
    chat = header.object == "chat.completion.chunk"
    closing = [text_choice(index, "", chat, reason) for index, reason in enumerate(finish_reasons)]
    yield sse(stream_chunk(header, closing, **first))
    if header.include_usage:
        yield sse({"id": header.id, "object": header.object, "created": header.created, "model": header.model,
                   "choices": [], "usage": total_usage})
    yield sse("[DONE]")


def request_usage(per_prompt: Sequence[Sequence[Generation]]) -> dict[str, int]:
    """A request's usage: each prompt's tokens once, every generation's tokens."""
    return usage(sum(len(generations[0].prompt_token_ids or []) for generations in per_prompt if generations),
                 sum(len(generation.token_ids) for generations in per_prompt for generation in generations))


def stream_events(header: StreamHeader, choices: Sequence[tuple[Generation, Any]], texts: TokenTexts, *,
                  logprobs: bool, token_ids: bool, total_usage: dict[str, int],
                  first_extra: dict[str, Any] | None = None) -> Iterator[str]:
    """The events of one streamed response, choices interleaved token by token: for a chat, a
    first chunk per choice with the assistant role, then one chunk per token, then one with the
    choice's ``finish_reason``; the usage chunk (``choices: []``) when asked; ``data: [DONE]``.
    ``choices`` pairs each generation with what its logprobs need (the prompt's length in
    characters for a legacy completion, unused for a chat)."""
    chat = header.object == "chat.completion.chunk"
    plans = []
    for generation, prompt_chars in choices:
        pieces = texts.pieces(generation.token_ids, generation.text)
        if chat:
            entries = chat_logprob_entries(generation, texts) if logprobs and generation.logprobs is not None else None
        else:
            entries = None
            if logprobs and generation.logprobs is not None:
                legacy = legacy_logprobs(generation, texts, prompt_chars)
                entries = [{key: [values[step]] for key, values in legacy.items()} for step in range(len(legacy["tokens"]))]
        plans.append((generation, pieces, entries))
    first = dict(first_extra or {})
    if chat:
        yield sse(stream_chunk(header, opening_choices(len(plans)), **first))
        first = {}
    for step in range(max((len(pieces) for _, pieces, _ in plans), default=0)):
        step_choices = []
        for index, (generation, pieces, entries) in enumerate(plans):
            if step >= len(pieces):
                continue
            entry = entries[step] if entries is not None and step < len(entries) else None
            choice: dict[str, Any] = {"index": index, "logprobs": None, "finish_reason": None}
            if chat:
                choice["delta"] = {"content": pieces[step]}
                choice["logprobs"] = {"content": [entry]} if entry is not None else None
            else:
                choice["text"] = pieces[step]
                choice["logprobs"] = entry
            if token_ids and step < len(generation.token_ids):
                choice["token_ids"] = [generation.token_ids[step]]
            step_choices.append(choice)
        yield sse(stream_chunk(header, step_choices, **first))
        first = {}
    yield from stream_end(header, [generation.finish_reason for generation, _, _ in plans], total_usage, **first)
