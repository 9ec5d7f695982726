"""Linearisation keeps ViGoRL's chain format byte for byte (hand-written fixture), de-duplicates, caps."""

from __future__ import annotations

import json
from pathlib import Path

from vista_plugin_vigorl.mcts.build import CHAIN_SEPARATOR, build_records
from vista_plugin_vigorl.mcts.linearize import chains_from_node, process_text_chain, sample_chains

FIXTURES = Path(__file__).parent / "fixtures"


def fixture_row() -> dict:
    rows = [json.loads(line) for line in (FIXTURES / "trees.jsonl").read_text().splitlines()]
    return next(row for row in rows if row["id"] == "mug-1")


def test_process_text_chain_drops_tags_and_the_image_line() -> None:
    steps, answer = process_text_chain(["<image>\nWhat?", "<think> a (1, 2) </think>", "<think>b</think>",
                                        "<answer>  up </answer>"])
    assert (steps, answer) == ("a (1, 2) b", "up")
    assert process_text_chain([]) == ("", "")


def test_chains_match_the_reference_format_byte_for_byte(tmp_path: Path) -> None:
    expected = json.loads((FIXTURES / "expected_chains.json").read_text(encoding="utf-8"))
    assert sample_chains(fixture_row()["tree"]) == expected
    # the same tree through `build`: one SFT record per chain, and the chains text file
    out, text = tmp_path / "sft.jsonl", tmp_path / "chains.txt"
    summary = build_records(FIXTURES / "trees.jsonl", out, chains_text=text)
    assert summary.to_dict()["chains"] == 4 and summary.samples == 1
    assert summary.skipped == [("broken-2", "RuntimeError: teacher down")]
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["turns"][0]["response"] for r in records] == expected
    assert text.read_bytes() == "".join(chain + CHAIN_SEPARATOR for chain in expected).encode()
    first = records[0]
    assert first["system_prompt"] == "Reason with (x, y) points."
    assert first["turns"][0]["observation"] == "<image>\nWhich side of the lamp is the mug on? Options: left, right."
    assert first["turns"][0]["image_refs"] == ["mug.png"]


def test_duplicates_dropped_and_terminal_children_not_entered() -> None:
    raw = chains_from_node(fixture_row()["tree"])
    assert len(raw) == 5 and len(set(raw)) == 4  # child 2 repeats child 1's correct chain
    assert not any("never" in chain for chain in raw)  # below a terminal node


def test_cap_is_a_seeded_subset_in_tree_order() -> None:
    tree = fixture_row()["tree"]
    full = sample_chains(tree)
    two = sample_chains(tree, max_chains=2, seed=3)
    assert len(two) == 2 and two == sample_chains(tree, max_chains=2, seed=3)
    assert [full.index(c) for c in two] == sorted(full.index(c) for c in two)
