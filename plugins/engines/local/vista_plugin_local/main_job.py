"""The main job's honest report: every model of a finished local-engine run, greedy and sampled,
beside the best blind baseline, a random policy and the final model with its images blanked, and the
verdict.

Run after ``vista train`` (``scripts/demo.sh`` does)::

    python -m vista_plugin_local.main_job RUN_DIR

It reads ``RUN_DIR/config.yaml`` and the trainer's held-out evals in ``RUN_DIR/results.json``
(reused where the decoding matches, so nothing is evaluated twice), evaluates what is missing on the
same held-out seeds, adds a ``main_job`` section to ``results.json``, prints the table and the
verdict line, and exits 1 when the verdict fails (2 when the run cannot be read).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import yaml
from rich.console import Console

import vista_rl
from vista_plugin_local.config import LocalEngineConfig, validate_engine_config
from vista_plugin_local.evaluate import HeldOutEval
from vista_plugin_local.job_rows import (
    SFT_MULTIPLES,
    teacher_name,
    teacher_success,
    train_sft_multiples,
    write_summary,
)
from vista_plugin_local.policy import Policy, load_pretrained, pick_device
from vista_plugin_local.policy_backend import PolicyBackend
from vista_plugin_local.verdict import Rival, job_verdict
from vista_rl import VistaError
from vista_rl.baselines import (
    BLANK_ENV_ID,
    BlindBaseline,
    Verdict,
    bare_action,
    best_blind_baseline,
    random_baseline,
)
from vista_rl.config import RunConfig, validate_config
from vista_rl.rollout import Estimate

GREEDY, SAMPLED = 0.0, 1.0
#: Trainer eval labels -> report rows (the order of the table).
STAGES = (("untrained", "untrained"), ("sft", "SFT 1x"), ("rl", "RL"))


def _estimate(record: dict[str, Any]) -> Estimate:
    return Estimate(record["value"], record["ci95_low"], record["ci95_high"], record["n"])


class MainJobReport:
    """Evaluates what the table needs for one run directory."""

    def __init__(self, run_dir: str | Path, console: Console | None = None, blind_train_seeds: int = 100,
                 blind_candidates: int = 40, decodings: tuple[str, ...] = ("greedy", "sampled"),
                 plateau: bool = True) -> None:
        self.run_dir = Path(run_dir)
        self.console = console or Console()
        if not (self.run_dir / "config.yaml").exists() or not (self.run_dir / "results.json").exists():
            raise VistaError(f"{self.run_dir} is not a finished run (needs config.yaml and results.json)")
        self.run = validate_config(RunConfig, yaml.safe_load((self.run_dir / "config.yaml").read_text()),
                                   str(self.run_dir / "config.yaml"))
        self.engine: LocalEngineConfig = validate_engine_config(self.run)
        self.results: dict[str, Any] = json.loads((self.run_dir / "results.json").read_text())
        self.blind_train_seeds = blind_train_seeds
        self.blind_candidates = blind_candidates
        unknown = set(decodings) - {"greedy", "sampled"}
        if unknown or not decodings:
            raise VistaError(f"decodings must be greedy and/or sampled, got {sorted(decodings)}")
        self.decodings = tuple(decodings)
        #: train and score SFT at 2x and 4x its steps (the verdict needs those rows)
        self.plateau = plateau
        self.device = pick_device(self.engine.local.device)

    # ------------------------------------------------------------------ pieces
    def _model_dir(self, stage: str) -> Path | None:
        if stage == "untrained":
            return Path(self.run.model.path) if self.run.model.path else None
        path = self.run_dir / "models" / ("sft" if stage == "sft" else "final")
        return path if (path / "config.json").exists() else None

    def _policy(self, path: Path) -> Policy:
        model, processor = load_pretrained(str(path))
        local = self.engine.local
        return Policy(model, processor, self.device, precision=local.precision, image_size=self.run.rollout.image_size,
                      static_decode=local.static_decode)

    def _evaluate(self, policy: Policy, temperature: float, label: str, blank: bool = False) -> Estimate:
        """One held-out evaluation, the trainer's own (:class:`HeldOutEval`)."""
        env = self.run.env
        started = time.perf_counter()
        with HeldOutEval(PolicyBackend(policy), self.run) as held_out:
            if blank:
                result = held_out(label, temperature, BLANK_ENV_ID, {"env": env.id, "config": env.config})
            else:
                result = held_out(label, temperature)
        self.console.print(f"  {label}: success {result.success} ({time.perf_counter() - started:.0f} s)")
        return result.success

    def blind_baseline(self) -> BlindBaseline | None:
        env = vista_rl.make_env(self.run.env.id, **self.run.env.config)
        actions = list(getattr(env, "action_names", ()) or ())
        env.close()
        if not actions:
            self.console.print(f"[yellow]{self.run.env.id} names no actions (action_names): no blind baseline[/yellow]")
            return None
        train = self.engine.trainer.train_seeds.seeds()[: self.blind_train_seeds]
        started = time.perf_counter()
        baseline = best_blind_baseline(self.run.env.id, self.run.env.config, actions, self.run.rollout.max_turns,
                                       train, self.engine.eval.seeds.seeds(), max_candidates=self.blind_candidates)
        self.console.print(f"  best blind sequence {', '.join(bare_action(a) for a in baseline.actions)}: "
                           f"train {baseline.train}, held-out {baseline.heldout} "
                           f"({baseline.candidates_scored} sequences scored, {time.perf_counter() - started:.0f} s)")
        return baseline

    def teacher_and_plateau_rows(self) -> dict[str, dict[str, Estimate]]:
        """The teacher SFT imitated (scripted: one estimate for both columns) and SFT at 2x and 4x its
        configured steps (issue 38: the verdict's SFT row is the best of 1x, 2x, 4x)."""
        started = time.perf_counter()
        teacher = teacher_success(self.run, self.engine.eval.seeds.seeds())
        self.console.print(f"  teacher '{teacher_name(self.run)}': held-out {teacher} "
                           f"({time.perf_counter() - started:.1f} s)")
        rows = {f"teacher '{teacher_name(self.run)}'": {"greedy": teacher, "sampled": teacher}}
        if not self.plateau or not self.run.sft.steps:
            return rows
        started = time.perf_counter()
        models = train_sft_multiples(self.run_dir, [k for k in SFT_MULTIPLES if k > 1], self.console)
        self.console.print(f"  SFT at 2x and 4x {self.run.sft.steps} steps: {time.perf_counter() - started:.0f} s")
        for multiple, path in models.items():
            policy = self._policy(path)
            name = f"SFT {multiple}x"
            rows[name] = {mode: self._evaluate(policy, temperature, f"{name} {mode}") for mode, temperature in self._modes()}
        return rows

    def random_baseline(self) -> Estimate | None:
        """``scripted:random`` on the held-out seeds with the run's turn cap: the floor any acting
        policy should clear (a row of the table, not part of the verdict)."""
        started = time.perf_counter()
        try:
            estimate = random_baseline(self.run.env.id, self.run.env.config, self.engine.eval.seeds.seeds(),
                                       self.run.rollout.max_turns, seed=self.run.seed)
        except ValueError as exc:
            self.console.print(f"[yellow]no random baseline: {exc}[/yellow]")
            return None
        self.console.print(f"  random actions: held-out {estimate} ({time.perf_counter() - started:.1f} s)")
        return estimate

    # ---------------------------------------------------------------------- run
    def build(self) -> dict[str, Any]:
        evals = self.results.get("evals", {})
        trained_at = self.engine.eval.temperature
        rows: dict[str, dict[str, Estimate]] = {}
        self.console.print("[bold]main job report[/bold]: greedy and sampled success on "
                           f"{self.engine.eval.seeds.count} held-out seeds, blind and random baselines, "
                           "images blanked")
        for stage, name in STAGES:
            path = self._model_dir(stage)
            if path is None:
                continue
            rows[name] = {}
            policy: Policy | None = None
            for mode, temperature in self._modes():
                if stage in evals and trained_at == temperature:
                    rows[name][mode] = _estimate(evals[stage]["success"])
                    continue
                policy = policy or self._policy(path)
                rows[name][mode] = self._evaluate(policy, temperature, f"{name} {mode}")
            if stage == "rl":
                policy = policy or self._policy(path)
                rows["RL, images blanked"] = {
                    mode: self._evaluate(policy, temperature, f"RL {mode}, images blanked", blank=True)
                    for mode, temperature in self._modes()}
        rows.update(self.teacher_and_plateau_rows())
        blind = self.blind_baseline()
        if blind is not None and blind.heldout is not None:
            rows["best blind sequence"] = {"greedy": blind.heldout, "sampled": blind.heldout}
        randomly = self.random_baseline()
        if randomly is not None:
            rows["random actions"] = {"greedy": randomly, "sampled": randomly}
        verdict = self.verdict(rows)
        report = {
            "decoding_for_verdict": self.verdict_mode,
            "rows": {name: {mode: est.to_dict() for mode, est in modes.items()} for name, modes in rows.items()},
            "blind": blind.to_dict() if blind is not None else None,
            "verdict": verdict.to_dict(),
        }
        self.results["main_job"] = report
        (self.run_dir / "results.json").write_text(json.dumps(self.results, indent=2))
        self.rows = rows
        rl, rivals = self.judged
        judged = {"RL": rl.to_dict() if rl else None,
                  **{f"{r.kind}: {r.name}": r.estimate.to_dict() if r.estimate else None for r in rivals}}
        write_summary(self.run_dir, "main", self.run, rows, verdict.to_dict(), {"judged": judged})
        return report

    def _modes(self) -> list[tuple[str, float]]:
        """Decodings to report; the verdict's own decoding is always among them."""
        wanted = set(self.decodings) | {self.verdict_mode}
        return [(mode, t) for mode, t in (("greedy", GREEDY), ("sampled", SAMPLED)) if mode in wanted]

    @property
    def verdict_mode(self) -> str:
        """The verdict is on sampled success (issue 38), whatever the trainer evaluated with."""
        return "sampled"

    def verdict(self, rows: dict[str, dict[str, Estimate]]) -> Verdict:
        """``vista_plugin_local.verdict.job_verdict`` on sampled success: RL beyond the teacher, SFT at
        1x/2x/4x, the best blind sequence and RL with its images blanked; blanking must also cost RL
        at least 0.2 (the main job's rule before issue 38, kept).  A missing row fails."""
        mode = self.verdict_mode

        def get(name: str) -> Estimate | None:
            return rows.get(name, {}).get(mode)

        teacher = next((name for name in rows if name.startswith("teacher")), "teacher")
        rivals = [Rival("teacher", teacher, get(teacher)),
                  *(Rival("sft", f"SFT {k}x", get(f"SFT {k}x")) for k in SFT_MULTIPLES),
                  Rival("blind", "best blind sequence", get("best blind sequence")),
                  Rival("ablation", "RL, images blanked", get("RL, images blanked"))]
        self.judged = (get("RL"), rivals)
        return job_verdict(get("RL"), rivals, min_ablation_drop=0.2)


def format_table(report: dict[str, Any], env_id: str, seeds: int) -> str:
    rows = report["rows"]
    width = max(len(name) for name in rows) if rows else 10

    def cell(record: dict[str, Any] | None) -> str:
        if record is None:
            return "(not evaluated)"
        return f"{record['value']:.3f} [{record['ci95_low']:.3f}, {record['ci95_high']:.3f}]"

    lines = [f"held-out success on {env_id} ({seeds} seeds never trained on), 95% CIs:",
             f"  {'':<{width}}  {'greedy':<22}  {'sampled (T=1)':<22}"]
    for name, modes in rows.items():
        lines.append(f"  {name:<{width}}  {cell(modes.get('greedy')):<22}  {cell(modes.get('sampled')):<22}")
    blind = report.get("blind")
    if blind:
        lines.append(f"  (best blind sequence: {', '.join(bare_action(a) for a in blind['actions'])}, chosen on "
                     f"training seeds out of {blind['candidates_scored']} scored)")
    lines.append(f"verdict on {report['decoding_for_verdict']} success: RL must beat the teacher, SFT at 1x/2x/4x "
                 "steps, the best blind sequence and RL with its images blanked beyond both 95% CIs, and "
                 "blanking the images must cost RL >= 0.2")
    lines.append(report["verdict"]["line"])
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m vista_plugin_local.main_job", description=__doc__.splitlines()[0])
    parser.add_argument("run_dir")
    parser.add_argument("--blind-train-seeds", type=int, default=100,
                        help="training seeds the blind sequence is chosen on (default 100)")
    parser.add_argument("--blind-candidates", type=int, default=40, help="sequences the blind search may score")
    parser.add_argument("--plateau", action=argparse.BooleanOptionalAction, default=True,
                        help="train and score SFT at 2x and 4x its steps (the verdict needs those rows)")
    parser.add_argument("--decodings", default="greedy,sampled",
                        help="comma-separated: greedy, sampled (the verdict's decoding is always included)")
    args = parser.parse_args(argv)
    console = Console()
    try:
        job = MainJobReport(args.run_dir, console, args.blind_train_seeds, args.blind_candidates,
                            tuple(part.strip() for part in args.decodings.split(",") if part.strip()),
                            plateau=args.plateau)
        report = job.build()
    except VistaError as exc:
        console.print(f"[red]error:[/red] {exc}")
        return 2
    print(format_table(report, job.run.env.id, job.engine.eval.seeds.count))
    return 0 if report["verdict"]["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
