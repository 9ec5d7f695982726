"""``compare.html``: two eval runs side by side, because people would rather look than read.

Success and reward curves (running means over the episodes in seed order, and the mean reward per
seed) are drawn as inline SVG, so the page needs no network and no plotting library.  Per seed, the
runs are compared on success rate first and mean reward second; the page counts the seeds each run
wins and links every seed to its episodes in each run's ``trajectories.html``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vista_rl.errors import VistaError
from vista_rl.store.html import environment, metric_rows, relative_url
from vista_rl.store.layout import HTML_FILE
from vista_rl.store.reader import RunReader

REWARD_TOLERANCE = 1e-9
"""Mean rewards closer than this count as equal (a tie) on a seed whose success rates are equal."""


@dataclass
class Episode:
    """What the comparison keeps of one trajectory (records stream; only these stay in memory)."""

    index: int
    seed: Any
    sample_index: int
    success: bool
    reward: float


@dataclass
class RunData:
    label: str
    run_dir: Path
    env_id: str
    episodes: list[Episode]
    metrics: dict[str, Any] = field(default_factory=dict)

    @property
    def success_rate(self) -> float:
        return _rate(self.episodes) if self.episodes else math.nan

    @property
    def mean_reward(self) -> float:
        return _mean(self.episodes) if self.episodes else math.nan

    def ordered(self) -> list[Episode]:
        """Episodes in seed order (then sample), so both runs' curves walk the seeds alike."""
        return sorted(self.episodes, key=lambda e: (_seed_key(e.seed), e.sample_index, e.index))

    def by_seed(self) -> dict[Any, list[Episode]]:
        groups: dict[Any, list[Episode]] = {}
        for episode in self.episodes:
            groups.setdefault(episode.seed, []).append(episode)
        return groups


def _seed_key(seed: Any) -> tuple[int, Any]:
    """Integer seeds in numeric order, anything else (None, strings) after them as text."""
    return (0, seed) if isinstance(seed, int) else (1, str(seed))


def load_run(run_dir: str | Path, label: str) -> RunData:
    reader = RunReader(run_dir)
    episodes = [Episode(index=index, seed=record.get("seed"), sample_index=int(record.get("sample_index") or 0),
                        success=bool(record.get("success")) and not record.get("failure"),
                        reward=float(record.get("total_reward") or 0.0))
                for index, record in enumerate(reader.records())]
    if not episodes:
        raise VistaError(f"{reader.run_dir} holds no readable trajectories to compare")
    env = reader.config().get("env")
    env_id = str(env.get("id", "?")) if isinstance(env, dict) else "?"
    return RunData(label=label, run_dir=reader.run_dir, env_id=env_id, episodes=episodes, metrics=reader.metrics())


@dataclass
class SeedResult:
    """One seed in both runs; ``result`` is from run A's side: ``win``, ``loss`` or ``tie``, or
    ``only A`` / ``only B`` when one run never played the seed."""

    seed: Any
    result: str
    a: list[Episode]
    b: list[Episode]

    @property
    def a_success(self) -> float | None:
        return _rate(self.a) if self.a else None

    @property
    def b_success(self) -> float | None:
        return _rate(self.b) if self.b else None

    @property
    def a_reward(self) -> float | None:
        return _mean(self.a) if self.a else None

    @property
    def b_reward(self) -> float | None:
        return _mean(self.b) if self.b else None


def _rate(episodes: Sequence[Episode]) -> float:
    return sum(e.success for e in episodes) / len(episodes)


def _mean(episodes: Sequence[Episode]) -> float:
    return sum(e.reward for e in episodes) / len(episodes)


def seed_results(a: RunData, b: RunData) -> list[SeedResult]:
    """Per seed: A wins with a higher success rate, or an equal one and a higher mean reward."""
    groups_a, groups_b = a.by_seed(), b.by_seed()
    out = []
    for seed in sorted(set(groups_a) | set(groups_b), key=_seed_key):
        ep_a, ep_b = groups_a.get(seed, []), groups_b.get(seed, [])
        row = SeedResult(seed=seed, result="tie", a=ep_a, b=ep_b)
        if not ep_b:
            row.result = "only A"
        elif not ep_a:
            row.result = "only B"
        else:
            rate_a, rate_b = _rate(ep_a), _rate(ep_b)
            reward_a, reward_b = _mean(ep_a), _mean(ep_b)
            if rate_a != rate_b:
                row.result = "win" if rate_a > rate_b else "loss"
            elif abs(reward_a - reward_b) > REWARD_TOLERANCE:
                row.result = "win" if reward_a > reward_b else "loss"
        out.append(row)
    return out


def running_mean(values: Sequence[float]) -> list[float]:
    total, out = 0.0, []
    for count, value in enumerate(values, start=1):
        total += value
        out.append(total / count)
    return out


@dataclass
class Series:
    label: str
    css: str
    values: list[float]


CHART_WIDTH, CHART_HEIGHT = 560, 240
_LEFT, _RIGHT, _TOP, _BOTTOM = 52, 12, 14, 34


def line_chart(title: str, x_label: str, series: Sequence[Series], y_range: tuple[float, float] | None = None,
               x_values: Sequence[Any] | None = None) -> dict[str, Any]:
    """Coordinates for an SVG line chart (the template draws it): every series against the index
    1..n, or against ``x_values`` (shared categories, e.g. seeds) when given.  NaN breaks a line."""
    length = max((len(s.values) for s in series), default=0)
    finite = [v for s in series for v in s.values if math.isfinite(v)]
    low, high = y_range if y_range is not None else (min(finite, default=0.0), max(finite, default=1.0))
    if high - low < 1e-12:
        low, high = low - 0.5, high + 0.5
    inner_w, inner_h = CHART_WIDTH - _LEFT - _RIGHT, CHART_HEIGHT - _TOP - _BOTTOM

    def x_at(i: int) -> float:
        return _LEFT + (inner_w * i / (length - 1) if length > 1 else inner_w / 2)

    def y_at(v: float) -> float:
        return _TOP + inner_h * (1 - (v - low) / (high - low))

    lines = []
    for s in series:
        segments: list[list[str]] = [[]]
        for i, value in enumerate(s.values):
            if math.isfinite(value):
                segments[-1].append(f"{x_at(i):.1f},{y_at(value):.1f}")
            elif segments[-1]:
                segments.append([])
        points = [" ".join(segment) for segment in segments if segment]
        dots = [{"x": f"{x_at(i):.1f}", "y": f"{y_at(v):.1f}", "value": f"{v:.3g}"}
                for i, v in enumerate(s.values) if math.isfinite(v)] if length <= 60 else []
        final = next((v for v in reversed(s.values) if math.isfinite(v)), math.nan)
        lines.append({"label": s.label, "css": s.css, "polylines": points, "dots": dots, "final": final,
                      "count": len(s.values)})
    y_ticks = [{"y": f"{y_at(low + (high - low) * k / 4):.1f}", "text": f"{low + (high - low) * k / 4:.3g}"}
               for k in range(5)]
    labels = [str(x) for x in x_values] if x_values is not None else [str(i + 1) for i in range(length)]
    step = max(1, math.ceil(length / 10))
    x_ticks = [{"x": f"{x_at(i):.1f}", "text": labels[i]} for i in range(0, length, step)] if labels else []
    return {"title": title, "x_label": x_label, "width": CHART_WIDTH, "height": CHART_HEIGHT, "lines": lines,
            "y_ticks": y_ticks, "x_ticks": x_ticks, "left": _LEFT, "right": CHART_WIDTH - _RIGHT, "top": _TOP,
            "bottom": CHART_HEIGHT - _BOTTOM}


def _charts(a: RunData, b: RunData, seeds: list[SeedResult]) -> list[dict[str, Any]]:
    ordered = {run.label: run.ordered() for run in (a, b)}
    success = [Series(run.label, css, running_mean([float(e.success) for e in ordered[run.label]]))
               for run, css in ((a, "run-a"), (b, "run-b"))]
    reward = [Series(run.label, css, running_mean([e.reward for e in ordered[run.label]]))
              for run, css in ((a, "run-a"), (b, "run-b"))]
    per_seed = [Series(a.label, "run-a", [math.nan if r.a_reward is None else r.a_reward for r in seeds]),
                Series(b.label, "run-b", [math.nan if r.b_reward is None else r.b_reward for r in seeds])]
    return [
        line_chart("success rate (running mean over episodes in seed order)", "episode", success, (0.0, 1.0)),
        line_chart("mean reward (running mean over episodes in seed order)", "episode", reward),
        line_chart("mean reward per seed", "seed", per_seed, x_values=[r.seed for r in seeds]),
    ]


def _episode_links(run: RunData, episodes: list[Episode], page: Path) -> list[dict[str, Any]]:
    viewer = run.run_dir / HTML_FILE
    base = relative_url(viewer, page) if viewer.exists() else None
    return [{"href": f"{base}#ep-{e.index}" if base else None, "index": e.index, "success": e.success}
            for e in episodes]


RESULTS = ("win", "loss", "tie", "only A", "only B")


@dataclass
class Comparison:
    """What :func:`write_compare` wrote: the page and the per-seed tally (from A's side)."""

    path: Path
    tally: dict[str, int]
    a: RunData
    b: RunData


def write_compare(run_a: str | Path, run_b: str | Path, out: str | Path) -> Comparison:
    """Render the comparison of two eval run directories into ``out`` (one self-contained file)."""
    a, b = load_run(run_a, "A"), load_run(run_b, "B")
    page = Path(out)
    page.parent.mkdir(parents=True, exist_ok=True)
    seeds = seed_results(a, b)
    tally = {kind: sum(1 for r in seeds if r.result == kind) for kind in RESULTS}
    rows = [{"seed": r.seed, "result": r.result, "a_success": r.a_success, "b_success": r.b_success,
             "a_reward": r.a_reward, "b_reward": r.b_reward, "a_links": _episode_links(a, r.a, page),
             "b_links": _episode_links(b, r.b, page)} for r in seeds]
    runs = [{"label": run.label, "css": css, "path": str(run.run_dir), "name": run.run_dir.name, "env_id": run.env_id,
             "episodes": len(run.episodes), "success_rate": run.success_rate, "mean_reward": run.mean_reward,
             "metrics": metric_rows(run.metrics)}
            for run, css in ((a, "run-a"), (b, "run-b"))]
    html = environment().get_template("compare.html.j2").render(
        title=f"VISTA compare: {a.run_dir.name} (A) vs {b.run_dir.name} (B)", runs=runs,
        charts=_charts(a, b, seeds), rows=rows, tally=tally)
    page.write_text(html, encoding="utf-8")
    return Comparison(path=page, tally=tally, a=a, b=b)
