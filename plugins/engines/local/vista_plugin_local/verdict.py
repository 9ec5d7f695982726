"""The one verdict of the learning jobs (issue 38): does RL beat everything that could explain its
success without RL?

Why one function: the main job (``vista_plugin_local.main_job``), the tool job
(``scripts/demo_tools.py``) and the grounded job (``scripts/demo_grounded.py``) each used to judge
their own way (greedy here, sampled there, SFT at wherever it stopped).  The rule, for every job:

- on **sampled** success, RL's lower 95% bound must lie above the upper bound of
  - the **teacher** (the scripted policy whose episodes SFT imitated),
  - **every SFT row** (SFT at its configured steps and at 2x and 4x those: the best of them is the
    SFT row that counts, and beating every one is beating the best),
  - the **blind** baseline (the best policy that never looks or never zooms, chosen on training seeds),
  - the **ablation** (RL with its images blanked or its tool disabled);
- a kind of rival that has no row fails the verdict (a harness that forgot a row cannot pass);
- optionally the ablation must also cost RL at least ``min_ablation_drop`` (the main job's 0.2);
- several seeds pass only if every seed passes (:func:`seeds_verdict`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from vista_rl.baselines import Check, Verdict, beats
from vista_rl.rollout import Estimate

RivalKind = Literal["teacher", "sft", "blind", "ablation"]
#: Every kind must have at least one row with an estimate.
RIVAL_KINDS: tuple[RivalKind, ...] = ("teacher", "sft", "blind", "ablation")


@dataclass(frozen=True)
class Rival:
    """One row RL must beat: its kind (what it rules out), its label in the table, its sampled success
    (``None``: not measured, which fails the verdict)."""

    kind: RivalKind
    name: str
    estimate: Estimate | None


def estimate_of(record: Mapping[str, Any] | None) -> Estimate | None:
    """An :class:`Estimate` from its ``to_dict`` form (``value``, ``ci95_low``, ``ci95_high``, ``n``)."""
    if record is None:
        return None
    return Estimate(float(record["value"]), float(record["ci95_low"]), float(record["ci95_high"]),
                    int(record.get("n", 0)))


def best_rival(rivals: Sequence[Rival]) -> Rival | None:
    """The strongest measured row (highest success, then highest upper bound): the SFT row that counts."""
    measured = [rival for rival in rivals if rival.estimate is not None]
    if not measured:
        return None
    return max(measured, key=lambda rival: (rival.estimate.value, rival.estimate.high))  # type: ignore[union-attr]


def job_verdict(rl: Estimate | None, rivals: Sequence[Rival], min_ablation_drop: float = 0.0) -> Verdict:
    """The rule of the module docstring, one :class:`Check` per rival (named ``rl_beats_<kind>``;
    the SFT rows as one check against the best of them, failing if RL is within any SFT row's CI)."""
    checks: list[Check] = []
    for kind in RIVAL_KINDS:
        rows = [rival for rival in rivals if rival.kind == kind]
        measured = [rival for rival in rows if rival.estimate is not None]
        name = f"rl_beats_{kind}"
        if rl is None or not measured or len(measured) < len(rows):
            missing = ", ".join(rival.name for rival in rows if rival.estimate is None) or f"no {kind} row"
            checks.append(Check(name, False, f"cannot judge RL against the {kind}: "
                                f"{'no RL row' if rl is None else 'not measured: ' + missing}"))
            continue
        losers = [rival for rival in measured if not beats(rl, rival.estimate)]  # type: ignore[arg-type]
        shown = losers[0] if losers else best_rival(measured)
        assert shown is not None and shown.estimate is not None
        others = f" (and {len(losers) - 1} more {kind} rows)" if len(losers) > 1 else ""
        verb = "does not beat" if losers else ">"
        checks.append(Check(name, not losers, f"RL {rl} {verb} {shown.name} {shown.estimate} beyond both CIs{others}"))
    if min_ablation_drop > 0 and rl is not None:
        for rival in rivals:
            if rival.kind == "ablation" and rival.estimate is not None:
                drop = rl.value - rival.estimate.value
                checks.append(Check("ablation_costs", drop >= min_ablation_drop - 1e-9,  # float sums
                                    f"{rival.name} costs RL {drop:+.3f} success (needs >= {min_ablation_drop:.2f})"))
    return Verdict(tuple(checks))


@dataclass(frozen=True)
class SeedsVerdict:
    """A multi-seed verdict: it passes only if there is a seed and every seed passed."""

    per_seed: Mapping[int, bool]

    @property
    def passed_count(self) -> int:
        return sum(1 for ok in self.per_seed.values() if ok)

    @property
    def passed(self) -> bool:
        return bool(self.per_seed) and all(self.per_seed.values())

    def line(self) -> str:
        failed = [str(seed) for seed, ok in self.per_seed.items() if not ok]
        status = "PASS" if self.passed else "FAIL"
        detail = f"; failed at seed {', '.join(failed)}" if failed else ""
        return f"VERDICT over seeds: {status} ({self.passed_count}/{len(self.per_seed)} seeds passed{detail})"


def seeds_verdict(per_seed: Mapping[int, Verdict | bool]) -> SeedsVerdict:
    """Combine per-seed verdicts (a :class:`Verdict` or its ``passed`` flag, e.g. read back from JSON)."""
    return SeedsVerdict({seed: (v.passed if isinstance(v, Verdict) else bool(v)) for seed, v in per_seed.items()})
