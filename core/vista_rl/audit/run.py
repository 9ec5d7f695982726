"""``audit_rewards``: play every adversary against one env, on both paths, and judge the rewards.

The order: the oracle plays each seed through ``env.step`` (the step path's bar, and what the
adversaries learn from it: :mod:`vista_rl.audit.probe`), then through the rollout engine (the engine
path's bar); then each adversary plays each seed on each path.  Every episode is caught on its own,
so an env that raises on one reply costs that episode, reported, and the audit goes on.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any

import vista_rl
from vista_rl.audit.adversaries import Adversary, SeedTask, all_adversaries
from vista_rl.audit.episodes import (
    PATHS,
    Episode,
    PathName,
    ScriptedPolicy,
    audit_engine,
    engine_episode,
    step_episode,
)
from vista_rl.audit.probe import OracleRun, answer_format, oracle_run, seed_task
from vista_rl.audit.report import AuditReport, judge_row
from vista_rl.config import RolloutSection
from vista_rl.env import Env

#: Called after every episode with the number of episodes done and the total.
OnEpisode = Callable[[int, int], None]


def _make(env_id: str, config: Mapping[str, Any]) -> Env:
    return vista_rl.make_env(env_id, **dict(config))


def _oracle_step_runs(make: Callable[[], Env], seeds: Sequence[int], max_turns: int) -> list[OracleRun]:
    runs: list[OracleRun] = []
    for seed in seeds:
        try:
            env = make()
        except Exception as exc:  # noqa: BLE001 - reported per seed
            runs.append(OracleRun(seed, error=f"making the env raised {type(exc).__name__}: {exc}"))
            continue
        try:
            runs.append(oracle_run(env, seed, max_turns))
        finally:
            with contextlib.suppress(Exception):  # closing is best effort
                env.close()
    return runs


def _tasks(make: Callable[[], Env], runs: Sequence[OracleRun], notes: list[str]) -> dict[int, SeedTask]:
    """The seed tasks the adversaries play, for every seed whose env could be made and reset."""
    answers = [answer for run in runs if (answer := _answer_of(run))]
    tasks: dict[int, SeedTask] = {}
    for run in runs:
        others = [answer for answer in answers if answer != _answer_of(run)]
        try:
            tasks[run.seed] = seed_task(make, run, others)
        except Exception as exc:  # noqa: BLE001 - a seed the env cannot even reset is reported
            notes.append(f"seed {run.seed}: could not prepare the adversaries ({type(exc).__name__}: {exc})")
    return tasks


def _answer_of(run: OracleRun) -> str:
    return answer_format(run.replies)[0]


def audit_rewards(
    env_id: str,
    env_config: Mapping[str, Any] | None = None,
    *,
    rollout: RolloutSection | None = None,
    seeds: Sequence[int] = (0, 1, 2),
    adversaries: Sequence[Adversary] | None = None,
    paths: Sequence[PathName] = PATHS,
    run_seed: int = 0,
    on_episode: OnEpisode | None = None,
) -> AuditReport:
    """Audit the rewards of ``env_id`` made with ``env_config``: every adversary (default: all) on
    every seed, through ``env.step`` and through the rollout engine with ``rollout`` (the run
    config's rollout section; its ``max_turns`` bounds both paths).  Never raises for what an env
    does; bad arguments (an unknown path) are a ``ValueError``."""
    config = dict(env_config or {})
    settings = rollout or RolloutSection()
    chosen = list(all_adversaries() if adversaries is None else adversaries)
    unknown = [path for path in paths if path not in PATHS]
    if unknown:
        raise ValueError(f"unknown path {unknown[0]!r}; paths are {', '.join(PATHS)}")
    make = partial(_make, env_id, config)
    report = AuditReport(env_id, config, list(seeds), list(paths), {}, [], settings.max_turns)
    step_oracle = _oracle_step_runs(make, seeds, settings.max_turns)
    tasks = _tasks(make, step_oracle, report.notes)
    offers_tools = any(task.tools for task in tasks.values())
    playing = [adv for adv in chosen if offers_tools or not adv.needs_tools]
    unplayed = [adv.name for adv in chosen if adv not in playing]
    report.skipped = [f"not played, the env offers no tools: {', '.join(unplayed)}"] if unplayed else []
    total = len(tasks) * len(paths) * (len(playing) + 1)
    done = 0

    def tick() -> None:
        nonlocal done
        done += 1
        if on_episode is not None:
            on_episode(done, total)

    if "step" in paths:
        report.oracle["step"] = {run.seed: Episode("oracle", "step", run.seed, run.reward, run.success,
                                                   len(run.replies), run.error)
                                 for run in step_oracle if run.seed in tasks}
        for _ in tasks:
            tick()
    episodes: dict[tuple[str, PathName], list[Episode]] = {}
    if "step" in paths:
        for adversary in playing:
            for task in tasks.values():
                episode = step_episode(make, adversary.name, task, adversary.play, settings.max_turns)
                episodes.setdefault((adversary.name, "step"), []).append(episode)
                tick()
    if "engine" in paths:
        _engine_path(env_id, config, settings, run_seed, tasks, playing, report, episodes, tick)
    hedge_seeds = {seed: not task.actions and task.plausible_decoys for seed, task in tasks.items()}
    for adversary in playing:
        for path in paths:
            report.rows.append(judge_row(adversary, path, episodes.get((adversary.name, path), []),
                                         report.oracle.get(path, {}), hedge_seeds))
    _note_oracle(report)
    return report


def _engine_path(env_id: str, config: dict[str, Any], settings: RolloutSection, run_seed: int,
                 tasks: Mapping[int, SeedTask], playing: Sequence[Adversary], report: AuditReport,
                 episodes: dict[tuple[str, PathName], list[Episode]], tick: Callable[[], None]) -> None:
    """The oracle, then every adversary, through the rollout engine."""
    oracle_backend = ScriptedPolicy(oracle=True)
    with audit_engine(oracle_backend, settings, run_seed) as engine:
        report.oracle["engine"] = {}
        for seed, task in tasks.items():
            report.oracle["engine"][seed] = engine_episode(engine, oracle_backend, env_id, config, "oracle", task, None)
            tick()
    backend = ScriptedPolicy()
    with audit_engine(backend, settings, run_seed) as engine:
        for adversary in playing:
            for task in tasks.values():
                episode = engine_episode(engine, backend, env_id, config, adversary.name, task, adversary.play)
                episodes.setdefault((adversary.name, "engine"), []).append(episode)
                tick()


def _note_oracle(report: AuditReport) -> None:
    for path, runs in report.oracle.items():
        failed = sorted(seed for seed, episode in runs.items() if not episode.success or episode.error)
        if failed:
            report.notes.append(f"{path} path: the oracle did not solve seed(s) {', '.join(map(str, failed))}; "
                                "no hole can be judged there")
        if runs and not report.judged_seeds(path):
            report.notes.append(f"{path} path: the oracle solved no seed, so nothing was judged (raise "
                                "rollout.max_turns, or give the env an oracle)")
