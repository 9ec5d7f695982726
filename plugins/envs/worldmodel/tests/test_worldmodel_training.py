"""A few local-engine training steps of examples/frozenlake_worldmodel.yaml (grounding_worldmodeling,
state rewards on, bi-level GAE) with the tiny random Qwen2.5-VL: the grounding and world-modeling
rewards of each turn reach the advantage estimator on that turn's last trained token.

A random tiny model never writes the three think parts, and only format-valid turns are scored, so
the test first fits the model to the oracle's responses on one seed (SFT on that seed, greedy
rollouts on the same seed; held-out seeds stay disjoint): a few RL steps then see format-valid turns
with real judge scores.  (80 SFT steps at lr 5e-3 bring the loss under 0.01 per token; ~4 min on a
loaded 2-core machine.)"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import vista_rl
from vista_rl import AdvantageBatch, AdvantageOutput
from vista_rl.config import RunConfig, load_config

pytest.importorskip("transformers")

EXAMPLE = Path(__file__).resolve().parents[4] / "examples" / "frozenlake_worldmodel.yaml"
SEED = 7


class RecordingEstimator:
    """A test plugin: the example's bi-level GAE, keeping every batch it is given."""

    def __init__(self) -> None:
        self.batches: list[AdvantageBatch] = []

    @vista_rl.hookimpl
    def register_advantage_estimators(self, register: Any) -> None:
        def recording_bilevel_gae(batch: AdvantageBatch, **params: Any) -> AdvantageOutput:
            self.batches.append(batch)
            return vista_rl.make_estimator("bilevel_gae", **params)(batch)

        register("test/recording-bilevel-gae", recording_bilevel_gae, description="bilevel_gae, recorded")


def _run(model_dir: Path, out: Path, use_state_reward: bool) -> RunConfig:
    return load_config(RunConfig, EXAMPLE, overrides=[
        f"model.path={model_dir}", f"output_dir={out}", f"env.config.use_state_reward={use_state_reward}",
        "algorithm.estimator=test/recording-bilevel-gae", "algorithm.critic=true",
        "env.config.config.min_solution_steps=2", "env.config.config.max_solution_steps=2",
        "rollout.max_turns=2", "rollout.group_size=2", "rollout.batch_size=2",
        "rollout.sampling.temperature=0.0",
        f"sft.seeds.start={SEED}", "sft.seeds.count=1", "sft.steps=80", "sft.batch_size=1", "sft.lr=0.005",
        f"trainer.train_seeds.start={SEED}", "trainer.train_seeds.count=1", "trainer.seeds_per_step=1",
        "trainer.steps=2", "trainer.micro_batch_size=2", "trainer.checkpoint_every=0",
        "algorithm.mini_batches=1", "eval.seeds.count=1", "eval.at_start=false", "eval.after_sft=false",
    ])


@pytest.mark.slow
def test_state_rewards_reach_the_estimator_per_turn(tmp_path: Path, tiny_model_dir: Path,
                                                    vista_plugin: Any) -> None:
    recorder = RecordingEstimator()
    vista_plugin(recorder)
    batches: list[Any] = []
    engine: Any = None

    def keep(stage: str, step: int) -> None:
        if stage == "rl":
            batches.append(engine.last_batch)

    engine = vista_rl.make_engine("local", run=_run(tiny_model_dir, tmp_path / "run", True))
    engine.step_hook = keep
    engine.run()
    seen = recorder.batches
    assert len(seen) == len(batches) == 2
    scored = 0
    for batch, adv in zip(batches, seen, strict=True):
        for row, sample in enumerate(batch.samples):
            ends = adv.turn_ends[row].nonzero().flatten().tolist()
            turns = sample.trajectory.turns
            assert len(ends) == len(turns)
            # nothing else carries reward: the row's rewards are exactly the turns' rewards
            assert float(adv.token_rewards[row].sum()) == pytest.approx(sum(t.reward for t in turns), abs=1e-4)
            for position, turn in zip(ends, turns, strict=True):
                # The turn's reward, state reward included, sits on that turn's last trained token.
                assert float(adv.token_rewards[row, position]) == pytest.approx(turn.reward, abs=1e-5)
                state = turn.info["state_reward"]
                assert state == pytest.approx(turn.info["grounding_reward"] + turn.info["worldmodeling_reward"])
                if turn.info["format_ok"]:
                    scored += state > 0
                else:
                    assert state == 0.0
    print(f"turns with a state reward: {scored}; responses: "
          f"{[t.response[:80] for b in batches for s in b.samples for t in s.trajectory.turns]}")
    assert scored > 0, "no format-valid turn earned a state reward (did SFT fit the oracle?)"


def test_the_ablation_is_one_flag(tmp_path: Path, tiny_model_dir: Path) -> None:
    """Both arms of the ablation are the example with one override; on the same oracle turns they
    differ by exactly the state reward, and both log the same metric keys."""
    arms = {flag: _run(tiny_model_dir, tmp_path / str(flag), flag) for flag in (True, False)}
    on, off = (arms[flag].model_dump() for flag in (True, False))
    assert on["env"]["config"].pop("use_state_reward") is True
    assert off["env"]["config"].pop("use_state_reward") is False
    on.pop("output_dir"), off.pop("output_dir")
    assert on == off
    results = {}
    for flag, run in arms.items():
        env = vista_rl.make_env(run.env.id, **run.env.config)
        env.reset(seed=SEED)
        results[flag] = env.step(env.oracle_response() or "")
    assert set(results[True].info) == set(results[False].info)
    assert results[True].info["state_reward"] > 0 and results[False].info["state_reward"] == 0
    assert results[True].reward == pytest.approx(results[False].reward + results[True].info["state_reward"])
