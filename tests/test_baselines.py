"""The main job's honesty checks: the blind-baseline search, the image-blanking wrapper, the verdict."""

from __future__ import annotations

import random
from typing import Any

import pytest
from PIL import Image

import vista_rl
from vista_rl import Env, Observation, StepResult
from vista_rl._stats import Estimate, proportion
from vista_rl.backends.scripted import ScriptedBackend
from vista_rl.baselines import (
    BLANK_ENV_ID,
    BlankImagesEnv,
    all_sequences,
    best_blind_baseline,
    main_job_verdict,
    play_sequence,
    search_blind_sequences,
)
from vista_rl.config import RolloutSection
from vista_rl.parsing import parse_response
from vista_rl.rollout.engine import RolloutEngine, episode_specs

CODES = {0: "LRL", 1: "LRL", 2: "LRL", 3: "RRL", 4: "LLL", 5: "RLR", 6: "LRR", 7: "LRL"}


class CodeEnv(Env):
    """A three-step lock: seed ``s`` opens with ``CODES[s % 8]`` (L/R, one per turn); a wrong step
    ends the episode.  Blind, ``L, R, L`` opens half the seeds and nothing else comes close."""

    def reset(self, seed: int | None = None) -> tuple[Observation, dict[str, Any]]:
        self.code, self.position = CODES[(seed or 0) % 8], 0
        colour = (40 * ((seed or 0) % 6), 90, 200)
        return Observation("<image>\nOpen the lock.", [Image.new("RGB", (24, 16), colour)]), {}

    def step(self, action: str) -> StepResult:
        answer = parse_response(action).answer
        if answer != self.code[self.position]:
            return StepResult(Observation("Wrong."), 0.0, True, False, {"success": False})
        self.position += 1
        done = self.position == len(self.code)
        return StepResult(Observation(f"{self.position} right so far. <image>", [Image.new("RGB", (24, 16), "red")]),
                          float(done), done, False, {"success": done})

    def oracle_response(self) -> str | None:
        return f"<answer>{self.code[self.position]}</answer>"


class CodePlugin:
    @vista_rl.hookimpl
    def register_envs(self, register: Any) -> None:
        register("test/code-v0", CodeEnv)


@pytest.fixture
def envs(vista_plugin: Any) -> None:
    vista_plugin(CodePlugin())


def brute_force(seeds: list[int]) -> dict[tuple[str, ...], int]:
    return {seq: sum(CODES[s % 8] == "".join(seq) for s in seeds) for seq in all_sequences("LR", 3)}


def test_per_turn_scripted_backend_plays_the_same_plan_in_every_episode(envs: None) -> None:
    backend = ScriptedBackend(responses=["<answer>L</answer>", "<answer>R</answer>", "<answer>L</answer>"],
                              per_turn=True)
    with RolloutEngine(backend, RolloutSection(max_turns=3, batch_size=8)) as engine:
        trajectories = engine.run(episode_specs("test/code-v0", range(16)))
    assert [t.success for t in trajectories] == [CODES[s % 8] == "LRL" for s in range(16)]
    opened = [t for t in trajectories if t.success]
    assert all([turn.response for turn in t.turns] == ["<answer>L</answer>", "<answer>R</answer>",
                                                       "<answer>L</answer>"] for t in opened)


def test_play_sequence_reports_success_and_episodes_still_running(envs: None) -> None:
    won, live = play_sequence("test/code-v0", {}, ["L", "R"], list(range(8)))
    assert won == [False] * 8  # three steps are needed
    assert live == [CODES[s][:2] == "LR" for s in range(8)]


@pytest.mark.parametrize("max_candidates", [64, 6])  # exhaustive (8 sequences), then pruned
def test_blind_search_finds_the_known_best_sequence(envs: None, max_candidates: int) -> None:
    seeds = list(range(40))
    ranked, exhaustive = search_blind_sequences("test/code-v0", {}, ["L", "R"], 3, seeds,
                                                max_candidates=max_candidates)
    assert exhaustive == (max_candidates >= 8)
    truth = brute_force(seeds)
    best = max(truth, key=lambda seq: truth[seq])
    assert ranked[0].actions == tuple(f"<answer>{a}</answer>" for a in best)
    assert ranked[0].successes == truth[best] == 20
    for score in ranked:  # every scored sequence carries its true count
        assert score.successes == truth[tuple(parse_response(r).answer or "" for r in score.actions)]
    if exhaustive:
        assert len(ranked) == 8


def test_best_blind_baseline_is_chosen_on_train_and_scored_on_heldout(envs: None) -> None:
    train, heldout = list(range(40)), list(range(1000, 1016))
    baseline = best_blind_baseline("test/code-v0", {}, ["L", "R"], 3, train, heldout)
    assert baseline.actions == ("<answer>L</answer>", "<answer>R</answer>", "<answer>L</answer>")
    expected = sum(CODES[s % 8] == "LRL" for s in heldout)
    assert baseline.heldout == proportion(expected, len(heldout))
    assert baseline.train.value == pytest.approx(0.5)
    with pytest.raises(ValueError, match="overlap"):
        best_blind_baseline("test/code-v0", {}, ["L", "R"], 3, train, [3, 2000])


def test_blank_images_env_blanks_every_image_and_keeps_the_text(envs: None) -> None:
    plain = vista_rl.make_env("test/code-v0")
    blank = vista_rl.make_env(BLANK_ENV_ID, env="test/code-v0", colour=(0, 0, 0))
    assert isinstance(blank, BlankImagesEnv)
    for seed in (1, 5):
        original, _ = plain.reset(seed=seed)
        blanked, _ = blank.reset(seed=seed)
        assert blanked.text == original.text
        assert [image.size for image in blanked.images] == [image.size for image in original.images] == [(24, 16)]
        assert all(image.getextrema() == ((0, 0), (0, 0), (0, 0)) for image in blanked.images)
        assert original.images[0].getextrema() != ((0, 0), (0, 0), (0, 0)) or seed == 0
        action = plain.oracle_response()
        assert blank.oracle_response() == action
        first, second = plain.step(action or ""), blank.step(action or "")
        assert second.observation.text == first.observation.text
        assert (second.reward, second.done, second.info) == (first.reward, first.done, first.info)
        assert [i.size for i in second.observation.images] == [i.size for i in first.observation.images]
        assert all(i.getcolors() == [(24 * 16, (0, 0, 0))] for i in second.observation.images)
    assert blank.system_prompt() == plain.system_prompt()


def test_blank_image_keeps_mode_and_size() -> None:
    from vista_rl.baselines import blank_image

    for mode in ("RGB", "L", "RGBA"):
        image = Image.new(mode, (7, 5), "white" if mode != "L" else 255)
        blank = blank_image(image, (10, 20, 30))
        assert (blank.mode, blank.size) == (mode, (7, 5))
        assert blank.getextrema() != image.getextrema()


def est(value: float, low: float, high: float) -> Estimate:
    return Estimate(value, low, high, 200)


@pytest.mark.parametrize(("rl", "sft", "blind", "blanked", "failed"), [
    (est(0.8, 0.74, 0.85), est(0.5, 0.43, 0.57), est(0.3, 0.24, 0.37), est(0.2, 0.15, 0.26), []),
    (est(0.8, 0.74, 0.85), est(0.7, 0.63, 0.76), est(0.3, 0.24, 0.37), est(0.2, 0.15, 0.26), ["rl_beats_sft"]),
    (est(0.8, 0.74, 0.85), est(0.5, 0.43, 0.57), est(0.7, 0.63, 0.76), est(0.2, 0.15, 0.26), ["rl_beats_blind"]),
    (est(0.8, 0.74, 0.85), est(0.5, 0.43, 0.57), est(0.3, 0.24, 0.37), est(0.65, 0.58, 0.71), ["images_matter"]),
    (est(0.27, 0.21, 0.34), est(0.135, 0.09, 0.19), est(0.425, 0.36, 0.49), est(0.27, 0.21, 0.34),
     ["rl_beats_blind", "images_matter"]),
])
def test_verdict(rl: Estimate, sft: Estimate, blind: Estimate, blanked: Estimate, failed: list[str]) -> None:
    verdict = main_job_verdict(rl, sft, blind, blanked)
    assert verdict.passed == (not failed)
    assert [c.name for c in verdict.checks if not c.passed] == failed
    assert verdict.line().startswith("VERDICT: PASS" if not failed else "VERDICT: FAIL")
    assert verdict.to_dict()["passed"] == verdict.passed


def test_verdict_drop_threshold_is_inclusive() -> None:
    rl, blanked = est(0.7, 0.63, 0.76), est(0.5, 0.43, 0.57)
    assert main_job_verdict(rl, est(0.1, 0.07, 0.15), est(0.1, 0.07, 0.15), blanked).passed
    assert not main_job_verdict(rl, est(0.1, 0.07, 0.15), est(0.1, 0.07, 0.15), blanked,
                                min_blanking_drop=0.21).passed


def test_random_seed_lists_are_fine(envs: None) -> None:
    seeds = random.Random(0).sample(range(10_000), 24)
    ranked, _ = search_blind_sequences("test/code-v0", {}, ["L", "R"], 3, seeds)
    truth = brute_force(seeds)
    assert ranked[0].successes == max(truth.values())


def test_main_job_report_refuses_a_directory_that_is_not_a_run(tmp_path: Any) -> None:
    from vista_plugin_local.main_job import main

    assert main([str(tmp_path)]) == 2


def test_main_job_table_shows_every_row_both_decodings_and_the_verdict() -> None:
    from vista_plugin_local.main_job import format_table

    rows = {name: {"greedy": est(v, v - 0.05, v + 0.05).to_dict(), "sampled": est(v, v - 0.05, v + 0.05).to_dict()}
            for name, v in (("untrained", 0.0), ("SFT", 0.3), ("RL", 0.7), ("RL, images blanked", 0.1),
                            ("best blind sequence", 0.12))}
    verdict = main_job_verdict(*(est(v, v - 0.05, v + 0.05) for v in (0.7, 0.3, 0.12, 0.1)))
    table = format_table({"rows": rows, "blind": {"actions": ["<answer>Up</answer>"] * 2, "candidates_scored": 9},
                          "decoding_for_verdict": "sampled", "verdict": verdict.to_dict()}, "frozenlake/x", 200)
    lines = table.splitlines()
    assert "greedy" in lines[1] and "sampled" in lines[1]
    for name in rows:
        assert any(line.strip().startswith(name) and line.count("[") == 2 for line in lines)
    assert "Up, Up" in table
    assert lines[-1] == verdict.line() and lines[-1].startswith("VERDICT: PASS")


def test_main_job_report_runs_on_a_real_trained_run(tmp_path: Any, tiny_model_dir: Any) -> None:
    """End to end on a tiny FrozenLake run: every row is evaluated (greedy and sampled), the blind
    search and the random policy (scripted:random) run, and the verdict lands in results.json with the exit code that matches it."""
    import json

    from vista_plugin_local.main_job import main

    import vista_rl
    from tests.engine_helpers import FROZENLAKE, run_config

    run = run_config(tiny_model_dir, tmp_path / "run", env=FROZENLAKE, max_turns=3,
                     overrides=("trainer.steps=1", "sft.steps=1", "eval.seeds.count=3"))
    vista_rl.make_engine("local", run=run).run()
    code = main([str(tmp_path / "run"), "--blind-train-seeds", "4", "--blind-candidates", "4"])
    report = json.loads((tmp_path / "run" / "results.json").read_text())["main_job"]
    rows = report["rows"]
    assert {"untrained", "SFT 1x", "SFT 2x", "SFT 4x", "teacher 'oracle'", "RL", "RL, images blanked",
            "best blind sequence", "random actions"} <= set(rows)  # issue 38: the teacher and SFT's plateau
    assert (tmp_path / "run" / "models" / "sft-4x" / "config.json").is_file()
    assert rows["teacher 'oracle'"]["sampled"]["value"] == 1.0
    assert all(set(modes) == {"greedy", "sampled"} for modes in rows.values())
    assert all(modes["greedy"]["n"] == 3 for name, modes in rows.items() if name != "best blind sequence")
    assert code == (0 if report["verdict"]["passed"] else 1)
    assert [check["name"] for check in report["verdict"]["checks"]][:4] == [
        "rl_beats_teacher", "rl_beats_sft", "rl_beats_blind", "rl_beats_ablation"]
    summary = json.loads((tmp_path / "run" / "job_summary.json").read_text())
    assert summary["job"] == "main" and set(summary["judged"]) >= {"RL", "sft: SFT 4x", "teacher: teacher 'oracle'"}
