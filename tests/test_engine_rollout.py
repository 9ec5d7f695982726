"""The local engine trains through the core rollout engine: tools, reflection, context windows,
timeouts, failing envs and tools, and remote envs behave in training as they do in evaluation.

Real parts throughout: the tiny random Qwen2.5-VL, the visual-search env with the real ``crop_zoom``
tool (ViGoRL-style zoom on the full-resolution scene), and a real env server on 127.0.0.1.  The
only test-made pieces are small envs and a tool that fail on purpose, registered for the test.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Any

import pytest
import torch
from PIL import Image
from vista_plugin_local.samples import TrainSample
from vista_plugin_local.trainer import FAILURES_FILE, LocalEngine

import vista_rl
from tests.engine_helpers import run_config
from tests.rollout_testkit import CounterEnv, GuessEnv
from vista_rl import Observation, StepResult
from vista_rl.store.images import save_image
from vista_rl.tool import ToolContext, ToolResult

pytest.importorskip("transformers")
vs_env = pytest.importorskip("vista_plugin_visual_search.env")
crop = pytest.importorskip("vista_plugin_tools.crop")

SEARCH = {"scene_size": 256, "display_size": 64, "distractors": 4, "tools": ["test/flaky-zoom"]}
ZOOM_CALL = '<tool_call>{"name": "crop_zoom", "arguments": {"coordinate": [20, 20]}}</tool_call>'


class ShortSearchEnv(vs_env.VisualSearchEnv):  # type: ignore[misc,name-defined]
    """visual_search/zoom-v0 with a one-line system prompt, so a tiny model learns the call fast."""

    def system_prompt(self) -> str:
        return "Zoom, then answer."


class FlakyZoomTool(crop.CropZoomTool):  # type: ignore[misc,name-defined]
    """The real crop_zoom, except that it crashes on odd seeds (a tool bug met during training)."""

    def __call__(self, arguments: Any, context: ToolContext) -> ToolResult:
        if int(context.metadata.get("seed") or 0) % 2:
            raise RuntimeError("zoom backend crashed")
        return super().__call__(arguments, context)  # type: ignore[no-any-return]


class BrokenCounterEnv(CounterEnv):
    """Seed 1 raises in step, seed 2 in reset, seed 3 hangs past the env timeout; others are fine."""

    def reset(self, seed: int | None = None) -> tuple[Observation, dict[str, Any]]:
        self.seed = seed
        if seed == 2:
            raise RuntimeError("reset exploded")
        return super().reset(seed)

    def step(self, action: str) -> StepResult:
        if self.seed == 1:
            raise RuntimeError("step exploded")
        if self.seed == 3:
            time.sleep(3.0)
        return super().step(action)


class EnginePlugin:
    @vista_rl.hookimpl
    def register_envs(self, register: Any) -> None:
        register("test/short-search-v0", ShortSearchEnv)
        register("test/broken-counter-v0", BrokenCounterEnv)
        register("test/counter-v0", CounterEnv)
        register("test/guess-v0", GuessEnv)

    @vista_rl.hookimpl
    def register_tools(self, register: Any) -> None:
        register("test/flaky-zoom", FlakyZoomTool)


@pytest.fixture
def plugin(vista_plugin: Any) -> None:
    vista_plugin(EnginePlugin())


def _sft_file(tmp_path: Path, seeds: range) -> Path:
    """SFT rows in the trajectory-store format: the first observation, answered with a zoom call."""
    (tmp_path / "images").mkdir()
    rows = []
    for seed in seeds:
        env = vista_rl.make_env("test/short-search-v0", **SEARCH)
        observation, _ = env.reset(seed=seed)
        ref = save_image(observation.images[0], tmp_path / "images")
        rows.append({"system_prompt": env.system_prompt(),
                     "turns": [{"observation": observation.text, "image_refs": [ref], "response": ZOOM_CALL}]})
    path = tmp_path / "sft.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def _spans(sample: TrainSample) -> list[tuple[int, int]]:
    view = sample.trajectory.token_view
    assert view is not None
    return [(start, end + 1) for start, end in zip(view.turn_starts, view.turn_ends, strict=True)]


def _rl_rows(run_dir: Path) -> list[dict[str, Any]]:
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]
    return [row for row in rows if row["stage"] == "rl"]


def test_tool_training_feeds_tool_results_to_the_model_and_masks_them(
        tmp_path: Path, tiny_model_dir: Path, plugin: None) -> None:
    """SFT teaches the tiny model to call crop_zoom; the RL steps then roll out through the core
    engine: the zoomed image reaches the next turn's prompt, the loss covers only sampled tokens, and
    the crashing tool on odd seeds gives the model an error result (the episode goes on)."""
    env = {"id": "test/short-search-v0", "config": SEARCH}
    run = run_config(tiny_model_dir, tmp_path / "run", env=env, max_turns=2, overrides=(
        "sft.source=jsonl", f"sft.path={_sft_file(tmp_path, range(2))}",
        "sft.steps=40", "sft.lr=0.005", "sft.batch_size=2",
        "engine_config.local.image_size=56", "trainer.train_seeds.count=2",
        "eval.after_sft=false", "eval.seeds.count=1",
        "rollout.describe_tools=false", "rollout.sampling.max_tokens=40", "rollout.sampling.temperature=0.2"))
    batches: list[Any] = []
    engine: LocalEngine

    def keep(stage: str, step: int) -> None:
        if stage == "rl":
            batches.append(engine.last_batch)

    engine = LocalEngine(run, step_hook=keep)
    engine.run()
    encoder = engine.policy.encoder
    samples = [sample for batch in batches for sample in batch.samples]
    dropped = [item for batch in batches for item in batch.dropped]
    zoomed = [s for s in samples if s.trajectory.turns[0].tool_calls
              and s.trajectory.turns[0].tool_calls[0].num_images == 1]
    assert zoomed, [s.trajectory.turns[0].response for s in samples]
    for sample in zoomed:
        trajectory, view, tokens = sample.trajectory, sample.trajectory.token_view, sample.tokens
        assert view is not None and trajectory.seed is not None and trajectory.seed % 2 == 0
        # (a) The tool result is what the model answered next: the zoom's text and image are the
        # next turn's observation, and the next prompt extended the conversation token for token.
        assert len(trajectory.turns) == 2 and "Zoomed view of image 0" in trajectory.turns[1].observation
        assert len(trajectory.turns[1].images) == 1 and trajectory.turns[1].images[0].size == (672, 672)
        assert view.alignment == ["exact"]
        (first_end, second_start) = (view.turn_ends[0] + 1, view.turn_starts[1])
        between = tokens.input_ids[first_end:second_start]
        assert "Zoomed view of image 0" in encoder.tokenizer.decode(between)
        crop_tokens = encoder.vision_tokens(tokens.images[1])
        assert between.count(encoder.image_token_id) == crop_tokens > 0
        # ... and the pixels the update scores are the processor's tensors of the zoomed image.
        expected = encoder.encode("<image>", [trajectory.turns[1].images[0]])[1][0]
        assert torch.equal(tokens.images[1].pixel_values, expected.pixel_values)
        # (b) The loss mask is one exactly on the sampled tokens, zero on prompt, tool and env tokens.
        spans = _spans(sample)
        on = [i for i, m in enumerate(tokens.loss_mask) if m]
        assert on == [i for start, end in spans for i in range(start, end)]
        assert all(tokens.loss_mask[i] == 0 for i in range(first_end, second_start))
        assert tokens.input_ids[spans[0][0]:spans[0][1]][-1] == encoder.im_end_id
        assert view.logprobs is not None and all(view.logprobs[i] <= 0 for i in on)
    # (c) The tool crashed on the odd seed: as in every engine (vista_rl.rollout.turn), the crash is
    # the tool's result the model reads next, the episode goes on and is trained on.
    crashed = [s for s in samples if s.trajectory.seed is not None and s.trajectory.seed % 2 == 1
               and s.trajectory.turns[0].tool_calls]
    assert crashed and not dropped
    for sample in crashed:
        record = sample.trajectory.turns[0].tool_calls[0]
        assert record.error and "zoom backend crashed" in record.result_text and sample.trajectory.failure is None
        assert "Error: crop_zoom failed: RuntimeError: zoom backend crashed" in sample.trajectory.turns[1].observation
    rows = _rl_rows(tmp_path / "run")
    assert len(rows) == 2 and all(row["optimizer_steps"] == 1 for row in rows)
    assert sum(row["env_errors"] for row in rows) == 0
    assert (tmp_path / "run" / "results.json").exists()


def test_crashing_and_hanging_envs_fail_their_episodes_not_the_run(
        tmp_path: Path, tiny_model_dir: Path, plugin: None) -> None:
    env = {"id": "test/broken-counter-v0", "config": {"target": 2}}
    run = run_config(tiny_model_dir, tmp_path / "run", env=env, max_turns=2, overrides=(
        "sft.steps=0", "trainer.steps=1", "trainer.seeds_per_step=4",
        "trainer.train_seeds.count=4", "eval.seeds.count=1",
        "rollout.env_timeout_s=0.5"))
    engine = LocalEngine(run)
    engine.run()
    batch = engine.last_batch
    assert batch is not None
    reasons = {t.seed: why for t, why in batch.dropped}
    assert set(reasons) == {1, 2, 3}
    assert "step exploded" in reasons[1] and "reset exploded" in reasons[2] and "timed out" in reasons[3]
    assert {s.trajectory.seed for s in batch.samples} == {0}
    (row,) = _rl_rows(tmp_path / "run")
    assert row["env_errors"] == 6 and row["trained_episodes"] == 2 and row["optimizer_steps"] == 1
    assert len((tmp_path / "run" / FAILURES_FILE).read_text().splitlines()) == 6


def test_training_with_reflection_retries_in_the_token_view(
        tmp_path: Path, tiny_model_dir: Path, plugin: None) -> None:
    """A wrong answer is retried (reflection); the retry's feedback is context, not trained."""
    run = run_config(tiny_model_dir, tmp_path / "run", env={"id": "test/guess-v0"}, max_turns=1, overrides=(
        "sft.steps=0", "trainer.steps=1", "eval.seeds.count=1",
        "rollout.reflection=true", "rollout.reflection_attempts=2"))
    engine = LocalEngine(run)
    engine.run()
    batch = engine.last_batch
    assert batch is not None and batch.samples and not batch.dropped
    retried = [s for s in batch.samples if s.trajectory.metadata["attempts"] == 2]
    assert retried  # a random model rarely guesses right twice in a row
    for sample in retried:
        view = sample.trajectory.token_view
        assert view is not None and len(view.turn_ends) == 2 and view.alignment == ["exact"]
        between = sample.tokens.input_ids[view.turn_ends[0] + 1:view.turn_starts[1]]
        assert "Try again from the start" in engine.policy.encoder.tokenizer.decode(between)
        assert not any(sample.tokens.loss_mask[view.turn_ends[0] + 1:view.turn_starts[1]])
    (row,) = _rl_rows(tmp_path / "run")
    assert row["optimizer_steps"] == 1 and row["turns_mean"] > 1


def test_training_with_a_context_window(tmp_path: Path, tiny_model_dir: Path, plugin: None) -> None:
    """With window_size=1 the third turn's prompt no longer holds the first turn; the token view is
    aligned on the previous generation and the step trains."""
    env = {"id": "test/counter-v0", "config": {"target": 5}}
    run = run_config(tiny_model_dir, tmp_path / "run", env=env, max_turns=3, overrides=(
        "sft.steps=0", "trainer.steps=1", "eval.seeds.count=1",
        "rollout.window_size=1"))
    engine = LocalEngine(run)
    engine.run()
    batch = engine.last_batch
    assert batch is not None and len(batch.samples) == 4 and not batch.dropped
    for sample in batch.samples:
        view = sample.trajectory.token_view
        assert view is not None and len(view.turn_ends) == 3
        assert view.alignment[0] == "exact" and view.alignment[1] == "aligned"
        assert len(sample.tokens.images) == 3  # one image per observation, none lost to the window
    (row,) = _rl_rows(tmp_path / "run")
    assert row["optimizer_steps"] == 1


def test_training_on_a_remote_env(tmp_path: Path, tiny_model_dir: Path) -> None:
    """``remote/<env id>``: the env runs in an env server over real HTTP; training is unchanged."""
    server_mod = pytest.importorskip("vista_plugin_envserver.server")
    app = pytest.importorskip("vista_plugin_envserver.app")
    env_id = "oddshape/odd-colour-v0"
    settings = app.ServerSettings(env_ids=[env_id], env_config={env_id: {"grid": 2, "cell_size": 28}})
    with server_mod.BackgroundServer(settings) as server:
        run = run_config(tiny_model_dir, tmp_path / "run", env={"id": f"remote/{env_id}", "config": {"url": server.url}},
                         overrides=("sft.steps=0", "trainer.steps=1",
                                    "eval.seeds.count=1"))
        engine = LocalEngine(run)
        engine.run()
    batch = engine.last_batch
    assert batch is not None and len(batch.samples) == 4 and not batch.dropped
    assert all(len(s.tokens.images) == 1 for s in batch.samples)
    assert isinstance(batch.samples[0].trajectory.turns[0].images[0], Image.Image)
    (row,) = _rl_rows(tmp_path / "run")
    assert row["optimizer_steps"] == 1


def test_training_one_sequence_per_turn(tmp_path: Path, tiny_model_dir: Path, plugin: None) -> None:
    """``window_size: 0``: every prompt is the system prompt and the current observation alone, so RL
    trains one sequence per turn (the exact prompt it answered, loss on its sampled tokens only) and
    SFT trains on per-turn oracle examples built the same way."""
    env = {"id": "test/counter-v0", "config": {"target": 3}}
    run = run_config(tiny_model_dir, tmp_path / "run", env=env, max_turns=3, overrides=(
        "sft.steps=1", "trainer.steps=1", "eval.seeds.count=1", "rollout.window_size=0"))
    engine = LocalEngine(run)
    engine.run()
    sft_examples = engine._sft_examples()
    assert len(sft_examples) == 4 * 3  # 4 oracle episodes of 3 turns, one example each
    assert all(len(example.images) == 1 and len(example.turn_ends) == 1 for example in sft_examples)
    batch = engine.last_batch
    assert batch is not None and batch.samples and not batch.dropped
    decode = engine.policy.encoder.tokenizer.decode
    episodes: dict[int, list[TrainSample]] = {}
    for sample in batch.samples:
        episodes.setdefault(id(sample.trajectory), []).append(sample)
    assert len(episodes) == 4
    for samples in episodes.values():
        trajectory = samples[0].trajectory
        assert [sample.turn_index for sample in samples] == list(range(trajectory.num_turns))
        for sample, turn, view in zip(samples, trajectory.turns, trajectory.turn_views, strict=True):
            assert len(sample.tokens.images) == 1
            prompt = decode(sample.tokens.input_ids[:view.prompt_length])
            assert turn.observation.replace("<image>", "").strip() in prompt
            assert prompt.count("Counter at") + prompt.count("Invalid") == 1  # no earlier turn in context
            assert sample.tokens.loss_mask == [0] * view.prompt_length + [1] * (len(view.input_ids) - view.prompt_length)
    (row,) = _rl_rows(tmp_path / "run")
    assert row["trained_episodes"] == 4 and row["trained_sequences"] == len(batch.samples)
    assert row["optimizer_steps"] == 1


def test_per_turn_advantages_broadcast_each_episodes_grpo_advantage() -> None:
    """GRPO over whole episodes (the group's returns normalised), then every trained token of every
    turn of an episode carries that episode's advantage over its number of turns; untrained tokens
    carry none."""
    from vista_plugin_local.advantages import make_estimator, per_turn_advantages
    from vista_plugin_local.chat_tokens import EpisodeTokens

    from vista_rl import Trajectory

    def episode(group: int, rewards: list[float]) -> list[TrainSample]:
        trajectory = Trajectory(env_id="x", seed=group)
        return [TrainSample(trajectory, EpisodeTokens([7] * 5, [0, 0, 1, 1, 0][:5], [3], []), group, [reward], turn)
                for turn, reward in enumerate(rewards)]

    samples = (episode(0, [0.0, 0.0, 1.0]) + episode(0, [0.0, 0.0]) + episode(1, [0.5]) + episode(1, [0.0, 0.0]))
    advantages = per_turn_advantages(make_estimator("grpo", {}), samples, width=6)
    assert advantages.shape == (len(samples), 6)
    returns = torch.tensor([1.0, 0.0, 0.5, 0.0])
    groups = torch.tensor([0, 0, 1, 1])
    per_episode = []
    for index in range(4):
        same = returns[groups == groups[index]]
        per_episode.append(float((returns[index] - same.mean()) / (same.std() + 1e-6)))
    owners = [0, 0, 0, 1, 1, 2, 3, 3]
    turns = [3, 2, 1, 2]
    for row, owner in enumerate(owners):
        value = per_episode[owner] / turns[owner]  # every episode weighs the same, whatever its length
        assert advantages[row, :5].tolist() == pytest.approx([0, 0, value, value, 0], abs=1e-4)
        assert advantages[row, 5] == 0


def test_per_turn_sequences_train_a_critic(tmp_path: Path, tiny_model_dir: Path, plugin: None) -> None:
    """GAE on per-turn sequences: the value head's values give each reply token its own credit over the
    episode's replies (vista_rl.algorithms.turn_credit.turn_token_advantages), and the value head learns
    the returns; turn_credit other than episode, or a value head GRPO would not use, is refused by name."""
    from vista_rl import ConfigError

    overrides = ("rollout.window_size=0", "algorithm.estimator=gae", "sft.steps=0", "trainer.steps=1",
                 "eval.seeds.count=1")
    run = run_config(tiny_model_dir, tmp_path / "run", env={"id": "test/counter-v0", "config": {"target": 3}},
                     max_turns=3, overrides=overrides)
    engine = LocalEngine(run)
    engine.validate()  # the preflight accepts it
    engine.run()
    batch = engine.last_batch
    assert batch is not None and len(batch.samples) > len({id(s.trajectory) for s in batch.samples})  # per turn
    (row,) = _rl_rows(tmp_path / "run")
    assert row["optimizer_steps"] == 1 and math.isfinite(row["value_loss"]) and row["value_loss"] > 0
    for refused, key in ((("algorithm.turn_credit=state",), "algorithm.turn_credit"),
                         (("algorithm.estimator=grpo", "algorithm.critic=true"), "algorithm.critic")):
        with pytest.raises(ConfigError, match=rf"{key}: "):
            run_config(tiny_model_dir, tmp_path / "other", env={"id": "test/counter-v0"},
                       overrides=(*overrides, *refused))
