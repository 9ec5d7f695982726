"""Conversations for tests of per-episode caches: what follows each reply, a tool result with an
image, two images or text alone, so every kind of appended block is exercised.  Shared by the
transformers and local plugins' tests, which check their caches against a full re-prefill."""

from __future__ import annotations

from PIL import Image

from vista_rl import Message


def next_message(seed: int, turn: int) -> Message:
    """What follows reply ``turn``: a tool result with an image, two images, or text alone."""
    colour = (turn * 30 % 256, seed * 50 % 256, 120)
    if turn % 3 == 0:
        return Message("tool", "<tool_response>\nzoom: here\n<image>\n</tool_response>",
                       [Image.new("L", (84, 56), (turn * 20 + seed * 9) % 256)])
    if turn % 3 == 1:
        return Message("user", "Two views: <image> and <image>.",
                       [Image.new("RGB", (56, 84), colour), Image.new("RGB", (56, 56), colour)])
    return Message("user", f"Turn {turn}: no picture this time.")
