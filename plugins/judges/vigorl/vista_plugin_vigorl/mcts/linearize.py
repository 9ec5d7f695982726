"""Trees -> reasoning chains, in ViGoRL's exact text format (``build_reasoning_chains_from_mcts.py``).

At every node, rollouts split into correct (reward >= 1) and wrong.  Each wrong x correct pair
gives ``<think>\\n{wrong steps}\\nWait, this seems off. Let's try something else.\\n{correct
steps}\\n</think>\\n<answer> {answer} </answer>``; each correct rollout also stands alone as
``<think>\\n{steps}\\n</think>\\n<answer> {answer} </answer>``; then the same for every child of a
non-terminal node.  Steps lose their tags and are joined with single spaces; a leading ``<image>``
line is dropped; the wrong rollout's answer is not kept.

ViGoRL de-duplicates with ``set()`` (random order); here duplicates are dropped keeping the first,
so the same tree always gives the same chains in the same order, and the cap samples with a seed.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

BACKTRACK = "Wait, this seems off. Let's try something else."
_TAGS = ("<think>", "</think>", "<answer>", "</answer>")


def process_text_chain(chain: Sequence[str]) -> tuple[str, str]:
    """``(steps joined by spaces, final answer)`` from a rollout's ``ephemeral_texts``."""
    texts = list(chain)
    if texts and (texts[0].startswith("<image>") or texts[0].endswith("<image>")):
        texts = texts[1:]
    if not texts:
        return "", ""
    answer = texts[-1].replace("<answer>", "").replace("</answer>", "").strip()
    cleaned = []
    for line in texts[:-1]:
        for tag in _TAGS:
            line = line.replace(tag, "")
        cleaned.append(line.strip())
    return " ".join(cleaned), answer


def chains_from_node(node: dict[str, Any], backtrack: str = BACKTRACK) -> list[str]:
    """All chains from this node and (unless terminal) its descendants, in tree order."""
    correct: list[dict[str, Any]] = []
    wrong: list[dict[str, Any]] = []
    for rollout in node.get("rollouts", []):
        (correct if float(rollout.get("reward", 0.0)) >= 1.0 else wrong).append(rollout)
    chains: list[str] = []
    for bad in wrong:
        wrong_text, _ = process_text_chain(bad.get("ephemeral_texts", []))
        wrong_text += f"\n{backtrack}"
        for good in correct:
            good_text, answer = process_text_chain(good.get("ephemeral_texts", []))
            chains.append(f"<think>\n{wrong_text}\n{good_text}\n</think>\n<answer> {answer} </answer>")
    for good in correct:
        good_text, answer = process_text_chain(good.get("ephemeral_texts", []))
        chains.append(f"<think>\n{good_text}\n</think>\n<answer> {answer} </answer>")
    if not node.get("is_terminal", False):
        for child in node.get("children", []):
            chains.extend(chains_from_node(child, backtrack))
    return chains


def sample_chains(tree: dict[str, Any], max_chains: int = 10_000, seed: int = 0) -> list[str]:
    """De-duplicated chains of one sample's tree, at most ``max_chains`` (a seeded random subset,
    kept in tree order)."""
    unique = list(dict.fromkeys(chains_from_node(tree)))
    if len(unique) > max_chains:
        keep = set(random.Random(seed).sample(range(len(unique)), max_chains))
        unique = [chain for index, chain in enumerate(unique) if index in keep]
    return unique
