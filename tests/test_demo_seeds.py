"""``scripts/demo_seeds.py`` (what ``scripts/demo.sh --seeds 0,1,2`` ends with): one table, a row per
seed, the count that passed, and a non-zero exit when any seed failed (issue 38)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("demo_seeds", ROOT / "scripts" / "demo_seeds.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def est(value: float) -> dict[str, float]:
    return {"value": value, "ci95_low": value - 0.05, "ci95_high": value + 0.05, "n": 200}


def summary(path: Path, seed: int, passed: bool, sft4: float) -> Path:
    path.mkdir(parents=True)
    judged = {"RL": est(0.8), "teacher: teacher 'x'": est(0.6), "sft: SFT 1x": est(0.5), "sft: SFT 2x": est(0.6),
              "sft: SFT 4x": est(sft4), "blind: blind": est(0.25), "ablation: RL, tool disabled": est(0.1)}
    (path / "job_summary.json").write_text(json.dumps({
        "job": "tools", "env": "e", "seed": seed, "teacher": "x", "judged": judged, "wall_s": 100.0,
        "verdict": {"passed": passed}}))
    return path


def test_one_row_per_seed_and_the_count(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    runs = [summary(tmp_path / "a", 0, True, 0.6), summary(tmp_path / "b", 1, False, 0.78),
            summary(tmp_path / "c", 2, True, 0.6), tmp_path / "broken"]
    code = _script().main([str(run) for run in runs])
    out = capsys.readouterr().out
    assert code == 1
    assert "2/4 seeds passed" in out and "failed at seed 1" in out
    rows = [line for line in out.splitlines() if line.strip().startswith(("0 ", "1 ", "2 "))]
    assert len(rows) == 3 and "0.780 [0.730, 0.830]" in rows[1]  # seed 1's best SFT row is its 4x
    assert "no job_summary.json" in out
    assert _script().main([str(tmp_path / "a"), str(tmp_path / "c")]) == 0


def test_demo_sh_refuses_a_malformed_seed_list() -> None:
    done = subprocess.run(["bash", str(ROOT / "scripts" / "demo.sh"), "--seeds", "0,x"], capture_output=True,
                          text=True, check=False)
    assert done.returncode == 2 and "comma-separated" in done.stderr


def test_a_main_job_run_takes_its_wall_time_from_demo_log(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The main job's summary has no ``wall_s`` (its harness starts after training); the table takes
    the total ``demo.sh`` logged for the run, and says ``-`` when there is none."""
    run = summary(tmp_path / "main", 1, False, 0.6)
    data = json.loads((run / "job_summary.json").read_text())
    del data["wall_s"]
    (run / "job_summary.json").write_text(json.dumps(data))

    def row() -> str:
        _script().main([str(run)])
        return next(line for line in capsys.readouterr().out.splitlines() if line.strip().startswith("1 "))

    assert row().rstrip().endswith("-")
    (run / "demo.log").write_text("VERDICT: FAIL\nwall time: training and its evals 150 s, report 152 s, total 302 s\n")
    assert row().rstrip().endswith("302")


def test_the_seeds_curves_are_drawn_from_each_runs_metrics(tmp_path: Path) -> None:
    """A panel per seed from the run's own ``metrics.jsonl``: SFT steps and steps without success are
    not RL points, every judged kind gets a band (the best SFT row's), and a run with no RL steps
    still gets its bands and RL's held-out point."""
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from vista_plugin_local.seed_curves import (
        draw_seed_panel,
        plot_seed_curves,
        rl_success_per_step,
        rollout_temperature,
        running_mean,
    )

    run = summary(tmp_path / "a", 0, True, 0.6)
    lines = [{"stage": "sft", "step": 1, "loss": 1.0}, {"stage": "rl", "step": 1, "success_rate": 0.25},
             {"stage": "rl", "step": 2, "success_rate": 0.75}, {"stage": "rl", "step": 3, "loss": 0.1}]
    (run / "metrics.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    assert rl_success_per_step(run) == [(1, 0.25), (2, 0.75)]
    assert running_mean([0.0, 1.0, 1.0, 0.0], window=2) == [0.0, 0.5, 1.0, 0.5]
    assert rollout_temperature(run) is None  # no config.yaml: the label says no temperature
    (run / "config.yaml").write_text("rollout:\n  sampling: {temperature: 0.7}\n")
    assert rollout_temperature(run) == 0.7
    bare = summary(tmp_path / "b", 1, False, 0.78)

    def labels(run_dir: Path) -> list[str]:
        figure, axis = plt.subplots()
        draw_seed_panel(axis, run_dir, json.loads((run_dir / "job_summary.json").read_text()))
        found = axis.get_legend_handles_labels()[1]
        plt.close(figure)
        return found

    # run a: SFT 2x and 4x tie at 0.6, and the verdict's rule keeps the first; run b: 4x is best (0.78)
    assert labels(run) == ["teacher 'x'", "SFT 2x", "blind", "RL, tool disabled", "RL, training success (T=0.7)",
                           "RL, mean of 10 steps", "RL, held-out"]
    assert labels(bare) == ["teacher 'x'", "SFT 4x", "blind", "RL, tool disabled", "RL, held-out"]
    assert _script().main([str(run), str(bare), "--plot", str(tmp_path / "seeds.png")]) == 1
    drawn = tmp_path / "seeds.png"
    assert drawn.stat().st_size > 10_000 and drawn.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert plot_seed_curves([], tmp_path / "none.png") is None and not (tmp_path / "none.png").exists()
