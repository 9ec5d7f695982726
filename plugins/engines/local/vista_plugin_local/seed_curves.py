"""The picture of a multi-seed demo (issue 38): one panel per seed, RL's training success per step
against the held-out levels the verdict judged it by.

Why a picture: when a job fails its verdict, the question is *how*: whether RL never moved, climbed to
the teacher and stopped, or climbed past it but not beyond the CIs.  The table gives one number per
row; the curve shows where RL went and the bands show what it had to clear.  Each panel draws

- RL's training success per step (``metrics.jsonl``, rollouts at the run's training temperature) and
  its running mean over ``SMOOTH`` steps;
- RL's held-out sampled success (the verdict's number, with its 95% CI) at the last step;
- a band per judged row (teacher, the best SFT row, the blind baseline, the ablation): its held-out
  sampled success and 95% CI, flat across the steps because each is one model or one policy.

matplotlib is optional (as for ``reward_success.png``): without it nothing is drawn.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from vista_plugin_local.metrics import STEP_METRICS_FILE, read_jsonl
from vista_plugin_local.verdict import RIVAL_KINDS, Rival, RivalKind, best_rival, estimate_of

SMOOTH = 10
#: the colour of each rival kind's band (the verdict's kinds, in its order).
BAND_COLOURS: dict[RivalKind, str] = dict(zip(RIVAL_KINDS, ("tab:red", "tab:green", "tab:grey", "tab:purple"),
                                              strict=True))


def best_row(judged: Mapping[str, Any], kind: RivalKind) -> tuple[str, dict[str, Any] | None]:
    """The strongest of a summary's judged rows of one kind (``"KIND: name"`` keys), chosen by the
    verdict's own rule (:func:`~vista_plugin_local.verdict.best_rival`); ``(name, None)`` if none was measured."""
    rivals = [Rival(kind, name, estimate_of(record)) for name, record in judged.items() if name.startswith(f"{kind}: ")]
    best = best_rival(rivals)
    if best is None:
        return (rivals[0].name if rivals else kind), None
    return best.name, judged[best.name]


def rl_success_per_step(run_dir: Path) -> list[tuple[int, float]]:
    """``(step, training success)`` of the run's RL steps, in order; steps without the metric are skipped."""
    return [(int(row["step"]), float(row["success_rate"])) for row in read_jsonl(run_dir / STEP_METRICS_FILE)
            if row.get("stage") == "rl" and isinstance(row.get("success_rate"), (int, float))]


def running_mean(values: list[float], window: int = SMOOTH) -> list[float]:
    """The mean of each value and up to ``window - 1`` before it (shorter at the start, never padded)."""
    return [sum(values[max(0, i + 1 - window):i + 1]) / (i + 1 - max(0, i + 1 - window)) for i in range(len(values))]


def rollout_temperature(run_dir: Path) -> float | None:
    """The temperature the run's RL rollouts sampled at (its ``config.yaml``), which the training
    curve was measured at; the held-out sampled rows use the harness's own (1.0)."""
    import yaml

    try:
        config = yaml.safe_load((run_dir / "config.yaml").read_text(encoding="utf-8")) or {}
        return float(config["rollout"]["sampling"]["temperature"])
    except (OSError, yaml.YAMLError, KeyError, TypeError, ValueError):
        return None


def plot_seed_curves(runs: list[tuple[Path, dict[str, Any]]], path: Path) -> Path | None:
    """Draw one panel per ``(run_dir, job_summary)`` into ``path``; ``None`` without matplotlib or runs."""
    if not runs:
        return None
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    figure, axes = plt.subplots(1, len(runs), figsize=(max(6.5, 4.2 * len(runs)), 4.0), squeeze=False, sharey=True)
    for axis, (run_dir, summary) in zip(axes[0], runs, strict=True):
        draw_seed_panel(axis, run_dir, summary)
    axes[0][0].set_ylabel("success")
    first = runs[0][1]
    figure.suptitle(f"{first.get('job', '')} job on {first.get('env', '?')}, teacher '{first.get('teacher', '?')}'\n"
                    "RL training success per step against the held-out rows (sampled, 95% CIs)", fontsize=9)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return path


def draw_seed_panel(axis: Any, run_dir: Path, summary: dict[str, Any]) -> None:
    """One seed's panel on a matplotlib ``axis`` (see the module docstring); rows not measured get no band."""
    judged = summary.get("judged") or {}
    curve = rl_success_per_step(run_dir)
    last = curve[-1][0] if curve else 1
    for kind, colour in BAND_COLOURS.items():
        name, record = best_row(judged, kind)
        if record is None:
            continue
        axis.axhspan(record["ci95_low"], record["ci95_high"], color=colour, alpha=0.15, lw=0)
        axis.axhline(record["value"], color=colour, lw=1, ls="--", label=name.split(": ", 1)[-1])
    if curve:
        steps, success = zip(*curve, strict=True)
        temperature = rollout_temperature(run_dir)
        at = f" (T={temperature:g})" if temperature is not None else ""
        axis.plot(steps, success, color="tab:blue", lw=0.6, alpha=0.4, label=f"RL, training success{at}")
        axis.plot(steps, running_mean(list(success)), color="tab:blue", lw=1.5, label=f"RL, mean of {SMOOTH} steps")
    rl = judged.get("RL")
    if rl is not None:
        axis.errorbar([last], [rl["value"]], yerr=[[rl["value"] - rl["ci95_low"]], [rl["ci95_high"] - rl["value"]]],
                      fmt="o", color="tab:blue", capsize=3, label="RL, held-out")
    verdict = "PASS" if (summary.get("verdict") or {}).get("passed") else "FAIL"
    axis.set_title(f"seed {summary.get('seed', '?')}: {verdict}", fontsize=9)
    axis.set_xlabel("RL step")
    axis.set_ylim(-0.02, 1.02)
    axis.legend(loc="best", fontsize=6, framealpha=0.7)
