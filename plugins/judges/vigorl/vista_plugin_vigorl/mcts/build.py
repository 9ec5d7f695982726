"""Trees file -> SFT task records (the trajectory JSONL that ``sft.source: jsonl`` trains on).

Each chain becomes one single-turn record: the system prompt, the question (with one ``<image>``
per image) as the observation, the chain as the response; images are referenced by path.  That is
the form ``vista_plugin_local.sft_data`` reads (``Trajectory.to_dict``'s fields), so ``vista train``
needs nothing new.  Also written, like ViGoRL: every chain in a text file with its separator.
"""

from __future__ import annotations

import json
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vista_plugin_vigorl.mcts.linearize import sample_chains
from vista_plugin_vigorl.mcts.runner import read_rows

from vista_rl import IMAGE_PLACEHOLDER

CHAIN_SEPARATOR = "\n\n----------------------\n\n----------------------\n\n"


@dataclass
class BuildSummary:
    samples: int = 0
    skipped: list[tuple[str, str]] = field(default_factory=list)
    root_value_positive: int = 0
    chains: int = 0

    def to_dict(self) -> dict[str, Any]:
        ratio = self.root_value_positive / self.samples if self.samples else 0.0
        return {"samples": self.samples, "skipped": len(self.skipped), "chains": self.chains,
                "root_value_positive": self.root_value_positive, "root_value_positive_ratio": round(ratio, 4)}


def question_observation(question: str, images: int) -> str:
    found = question.count(IMAGE_PLACEHOLDER)
    if found == images:
        return question
    if found:
        raise ValueError(f"question has {found} {IMAGE_PLACEHOLDER} placeholders for {images} images")
    return IMAGE_PLACEHOLDER * images + "\n" + question


def sft_record(row: dict[str, Any], chain: str, index: int, system_prompt: str | None) -> dict[str, Any]:
    images = [str(p) for p in row.get("image") or []]
    response = chain.replace("<image>", "").replace("</image>", "")  # as ViGoRL: no image tags in targets
    return {
        "task_id": f"{row['id']}#{index}",
        "system_prompt": system_prompt if system_prompt is not None else str(row.get("system_prompt") or ""),
        "initial_image_refs": images,
        "turns": [{"observation": question_observation(str(row.get("question", "")), len(images)),
                   "image_refs": images, "response": response}],
        "metadata": {"source": "vigorl-mcts", "sample_id": row["id"], "true_answer": row.get("true_answer"),
                     "root_value": row.get("root_value")},
    }


def latest_rows(trees: Path) -> dict[str, dict[str, Any]]:
    """The last row per id (a retried search replaces its failed row), in first-seen order."""
    rows: dict[str, dict[str, Any]] = {}
    for row in read_rows(trees):
        if "id" in row:
            rows[str(row["id"])] = row
    return rows


def build_records(trees: Path, out: Path, max_chains: int = 10_000, seed: int = 0,
                  system_prompt: str | None = None, chains_text: Path | None = None) -> BuildSummary:
    """Linearise every finished tree in ``trees`` into ``out`` (JSONL records for the SFT stage)."""
    summary = BuildSummary()
    all_chains: list[str] = []
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", encoding="utf-8") as handle:
        for sample_id, row in latest_rows(trees).items():
            if row.get("error") or not isinstance(row.get("tree"), dict):
                summary.skipped.append((sample_id, str(row.get("error") or "no tree")))
                continue
            try:
                chains = sample_chains(row["tree"], max_chains, seed ^ zlib.crc32(sample_id.encode()))
                records = [sft_record(row, chain, i, system_prompt) for i, chain in enumerate(chains)]
            except (ValueError, TypeError, KeyError, AttributeError) as exc:
                summary.skipped.append((sample_id, f"{type(exc).__name__}: {exc}"))
                continue
            summary.samples += 1
            summary.root_value_positive += int(float(row["tree"].get("value", 0.0)) > 0)
            for record in records:
                handle.write(json.dumps(record) + "\n")
            all_chains += chains
            summary.chains += len(chains)
    if chains_text is not None:
        chains_text.write_text("".join(chain + CHAIN_SEPARATOR for chain in all_chains), encoding="utf-8")
    return summary
