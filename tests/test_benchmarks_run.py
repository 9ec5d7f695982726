"""Every script under ``benchmarks/`` runs at a tiny size and prints the JSON it promises (issue 28).

Why: benchmarks are not imported by any test, so one that crashes (``benchmarks/envs.py`` did, on a
renamed attribute) goes unnoticed until someone quotes its numbers.  Each script found by the glob
(new ones included) runs in a subprocess with its ``--tiny`` flag; its stdout must be one JSON
object.  Scripts that compare against an anchor must also say which anchor they used and carry the
versions of both sides; an anchor that needs what this machine lacks (TRL's or verl's venv, a VAGEN
checkout) is reported as ``skipped: ...``, never silently replaced.  ``fuzz_adversarial.py`` has its
own test and ``bounded_servers.py`` exists to run at full size (see ``OWN_TEST``); scripts without ``--tiny`` run with the arguments below (or none).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
#: scripts not run here, and why
OWN_TEST = {
    "fuzz_adversarial.py": "tests/test_fuzz_adversarial.py runs the fuzzer at a small size",
    "bounded_servers.py": "measures issue 22's limits at their real sizes by design (60 MB bodies, 32 images of "
                          "4096x4096: minutes and GBs); tests/test_fuzz_adversarial.py sends the same kinds of input small",
}
#: arguments for scripts that have no --tiny flag (owned by other changes); default: none
ARGS = {"rollout.py": ["--quick"]}
#: scripts whose JSON names an anchor and the versions of both sides
STAMPED = {"envs.py", "estimators.py", "train.py", "data_convert.py", "env_server.py", "eval_model_workers.py",
           "model_backends.py", "navigation_env.py", "python_sandbox.py", "svg_env.py", "tool_service.py",
           "viewer.py", "vigorl_mcts.py", "worldmodel_rewards.py"}
SCRIPTS = sorted(p.name for p in BENCHMARKS.glob("*.py") if not p.name.startswith("_") and p.name not in OWN_TEST)


def run_tiny(name: str, *extra: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    source = (BENCHMARKS / name).read_text()
    args = ["--tiny"] if '"--tiny"' in source else ARGS.get(name, [])
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false",
           "VISTA_TRL_PYTHON": os.environ.get("VISTA_TRL_PYTHON", "/nonexistent/trl/python")}
    return subprocess.run([sys.executable, str(BENCHMARKS / name), *args, *extra], capture_output=True, text=True,
                          timeout=timeout, cwd=BENCHMARKS.parent, env=env)


def parse(done: subprocess.CompletedProcess[str]) -> dict:
    out = done.stdout.strip()
    start = out.find("{")
    assert start >= 0, f"no JSON on stdout; stderr tail:\n{done.stderr[-2000:]}"
    return json.loads(out[start:])


@pytest.mark.slow
@pytest.mark.parametrize("name", SCRIPTS)
def test_benchmark_runs_tiny(name: str) -> None:
    done = run_tiny(name)
    assert done.returncode == 0, f"{name} exited {done.returncode}:\n{done.stderr[-3000:]}"
    report = parse(done)
    assert isinstance(report, dict) and report
    if name in STAMPED:
        assert isinstance(report["anchor"], str | dict) and report["anchor"], report.get("anchor")
        assert report["versions"]["ours"].get("vista-rl"), report["versions"]
        assert "anchor" in report["versions"]
        assert {"date", "cores", "load_1min", "quiet"} <= set(report["machine"])


def test_every_benchmark_is_covered() -> None:
    """A new script is picked up by the glob; a stamped name that no longer exists is a stale list."""
    names = {p.name for p in BENCHMARKS.glob("*.py")}
    assert names >= STAMPED, STAMPED - names
    assert {"envs.py", "estimators.py", "train.py"} <= set(SCRIPTS)


@pytest.mark.slow
def test_envs_pairs_are_labelled_and_interleaved() -> None:
    report = parse(run_tiny("envs.py", "--no-install"))
    lake = report["frozenlake_4x4"]
    # the two FrozenLake resets do different work, and each says which
    assert "new map" in lake["reset_new_map_per_seed"]["work"]
    assert "kept map" in lake["reset_kept_map"]["work"]
    for case in ("reset_new_map_per_seed", "reset_kept_map", "step_render"):
        pair = lake[case]
        assert pair["anchor"] == "gymnasium"
        assert pair["ours"]["n"] == pair["anchor_timing"]["n"] > 0
        assert pair["ours"]["min_ms"] <= pair["ours"]["median_ms"] <= pair["ours"]["max_ms"]
        assert pair["anchor_over_ours"] == round(pair["anchor_timing"]["median_ms"] / pair["ours"]["median_ms"], 2)
    assert report["versions"]["anchor"]["gymnasium"]
    sokoban = report["anchor"]["sokoban"]
    assert sokoban == "gym-sokoban" or sokoban.startswith("skipped:")


@pytest.mark.slow
def test_envs_missing_vagen_fails_instead_of_swapping(tmp_path: Path) -> None:
    """Given --vagen, a checkout that does not import is an error, not a quiet gym-sokoban run."""
    done = run_tiny("envs.py", "--vagen", str(tmp_path / "no-vagen-here"))
    assert done.returncode != 0
    report = parse(done)
    assert report["status"] == "failed" and "no fallback" in report["reason"]
    assert "sokoban_6x6_1box" not in report
