"""The local engine built whole (issue 34, items 2 and 3) on the tiny real Qwen2.5-VL and real envs:
``run()`` hands every collaborator to one ``TrainingSession`` and creates no attribute of its own; the
RL step samples with the settings it is given; old scores are an ``OldScores`` whose absent fields are
``None``; and every line a step writes to ``metrics.jsonl`` is the typed record it declares."""

from __future__ import annotations

import dataclasses
import io
import json
import typing
from pathlib import Path

import pytest
import torch

pytest.importorskip("transformers")

from rich.console import Console  # noqa: E402
from vista_plugin_local.ppo_update import OldScores, score_episodes  # noqa: E402
from vista_plugin_local.rl_step import RLStep, step_sampling  # noqa: E402
from vista_plugin_local.rollouts import TrainingRollouts  # noqa: E402
from vista_plugin_local.session import new_optimization  # noqa: E402
from vista_plugin_local.step_metrics import SftStepMetrics, StepMetrics  # noqa: E402
from vista_plugin_local.trainer import LocalEngine, build_policy  # noqa: E402

from tests.engine_helpers import FROZENLAKE, run_config  # noqa: E402
from vista_rl import SamplingParams, VistaError  # noqa: E402


def _quiet() -> Console:
    return Console(file=io.StringIO())


def _declared(record: type) -> tuple[list[str], frozenset[str]]:
    """A TypedDict's keys in declaration order and its required keys."""
    return list(typing.get_type_hints(record)), record.__required_keys__  # type: ignore[attr-defined]


def test_run_builds_one_session_and_creates_no_attribute(tmp_path: Path, tiny_model_dir: Path) -> None:
    """PPO with a value head and a KL reference, SFT then RL: the engine's attributes are the same
    before and after ``run()``; the policy lives in the session; every metrics line is its record,
    keys in the declared order (so the order ``metrics.jsonl`` has always had)."""
    env = {"id": FROZENLAKE["id"], "config": {**FROZENLAKE["config"], "step_penalty": -0.1}}
    run = run_config(tiny_model_dir, tmp_path / "run", env=env, max_turns=2, overrides=(
        "algorithm.estimator=bilevel_gae", "algorithm.kl_coef=0.1", "sft.steps=1", "trainer.steps=1",
        "eval.after_sft=false"))
    engine = LocalEngine(run, console=_quiet())
    with pytest.raises(VistaError, match="no policy before run"):
        _ = engine.policy
    assert engine.session is None and engine.last_batch is None
    before = set(vars(engine))
    engine.run()
    assert set(vars(engine)) == before
    session = engine.session
    assert session is not None and engine.policy is session.policy and engine.last_batch is session.last_batch
    assert session.policy.value_head is not None and session.state.stage == "done"

    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    by_stage = {row["stage"]: row for row in rows}
    for stage, record in (("rl", StepMetrics), ("sft", SftStepMetrics)):
        order, required = _declared(record)
        row = by_stage[stage]
        assert required <= set(row) <= set(order), (stage, set(row) ^ set(order))
        assert list(row) == [key for key in order if key in row], stage
    assert {"value_loss", "kl", "advantage_mean"} <= set(by_stage["rl"])


def test_the_rl_step_samples_with_the_settings_it_is_given(tmp_path: Path, tiny_model_dir: Path) -> None:
    """The run says 8 new tokens; the step is given 2: no response is longer than 2 tokens, and the
    engine's own settings are not what the step used."""
    run = run_config(tiny_model_dir, tmp_path / "run", overrides=(
        "rollout.sampling.max_tokens=8", "rollout.sampling.stop=[]", "trainer.steps=1", "sft.steps=0"))
    engine = LocalEngine(run, console=_quiet())
    policy = build_policy(run, engine.config, torch.device("cpu"))
    short = SamplingParams(**{**run.rollout.sampling.model_dump(), "max_tokens": 2}, n=1, seed=run.seed)
    assert step_sampling(run, 0).max_tokens == 8
    with TrainingRollouts.open(policy, run) as rollouts:
        optimization = new_optimization(policy, run.trainer, run.trainer.lr, 1, 0, "constant")
        step = RLStep(run, policy, rollouts, optimization, value_coef=0.5, run_dir=tmp_path, console=_quiet())
        result = step(0, 0, short)
    generated = [turn.response for sample in result.batch.samples for turn in sample.trajectory.turns]
    assert generated and all(len(policy.encoder.tokenizer(text)["input_ids"]) <= 2 for text in generated)
    assert result.metrics["trained_episodes"] == run.trainer.seeds_per_step * run.rollout.group_size


def test_old_scores_name_what_was_scored(tmp_path: Path, tiny_model_dir: Path) -> None:
    """Without a reference or a value head only log-probs exist, the rest is ``None``; the record is
    frozen, so no stage can add a field that a later one would take for a flag."""
    run = run_config(tiny_model_dir, tmp_path / "run", overrides=("sft.steps=0", "trainer.steps=1"))
    engine = LocalEngine(run, console=_quiet())
    policy = build_policy(run, engine.config, torch.device("cpu"))
    with TrainingRollouts.open(policy, run) as rollouts:
        optimization = new_optimization(policy, run.trainer, run.trainer.lr, 1, 0, "constant")
        step = RLStep(run, policy, rollouts, optimization, value_coef=0.5, run_dir=tmp_path, console=_quiet())
        samples = step(0, 0, step_sampling(run, 0)).batch.samples
    old = score_episodes(policy, samples, 1.0, reference=False, micro_batch_size=2)
    assert isinstance(old, OldScores) and old.ref_logprobs is None and old.values is None
    assert old.logprobs is not None
    assert old.logprobs.shape == (len(samples), max(len(sample.tokens) for sample in samples))
    with pytest.raises(dataclasses.FrozenInstanceError):
        old.values = old.logprobs  # type: ignore[misc]
    assert OldScores() == OldScores(None, None, None)
