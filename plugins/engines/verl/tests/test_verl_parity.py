"""verl trains exactly the episodes ``RolloutEngine`` runs: the same scripted replies through both.

One side is :class:`~vista_rl.rollout.RolloutEngine` with a scripted ``ModelBackend`` that renders
each chat with the tiny Qwen2.5-VL processor's own chat template.  The other is verl's real agent-loop
machinery on CPU: an :class:`AgentLoopWorker` (what ``AgentLoopManager`` runs as a Ray actor) built
from the config ``vista train --engine verl`` composes, with the dataset row ``env_rows`` writes,
instantiating ``VistaAgentLoop`` through verl's registry and post-processing its output into verl's
batch (padding, masks, ``multi_modal_inputs``).  verl's rollout server cannot run here (vLLM's CPU
build conflicts with verl's transformers pin), so :class:`ScriptedServerStandIn` stands in for verl's
``LLMServerClient``: same ``generate`` signature, ``TokenOutput`` back, replaying scripted token ids.

Asserted equal per case: the token sequence (prompt ids and every later id), the response mask, the
images in placeholder order, per-turn rewards, turn records (observations, replies, tool calls with
results, images), tool-call counts, stop reasons and failures.  Cases: a tool env
(``visual_search/zoom-small-v0``) with reflection, an env crash, a tool timeout; ``window_size`` 0
and 2 cannot be one verl sequence, so the loop's refusal is asserted instead.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import os
import threading
from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

verl = pytest.importorskip("verl")
pytest.importorskip("torchvision")

from PIL import Image  # noqa: E402
from pydantic import BaseModel  # noqa: E402
from verl import DataProto  # noqa: E402
from verl.experimental.agent_loop.agent_loop import AgentLoopWorker  # noqa: E402
from verl.workers.rollout.replica import TokenOutput  # noqa: E402
from vista_plugin_verl import agent_loop  # noqa: E402
from vista_plugin_verl.agent_loop import VistaAgentLoop, end_token_ids, hf_messages, reply_text  # noqa: E402
from vista_plugin_verl.config import compose_overrides, compose_verl_config, engine_config  # noqa: E402
from vista_plugin_verl.dataset import env_rows  # noqa: E402

import vista_rl  # noqa: E402
from vista_rl import (  # noqa: E402
    Chat,
    Env,
    Generation,
    ModelBackend,
    Observation,
    SamplingParams,
    StepResult,
    Tool,
    ToolContext,
    ToolResult,
    Trajectory,
)
from vista_rl.config import RolloutSection, RunConfig  # noqa: E402
from vista_rl.rollout import EpisodeSpec, RolloutEngine  # noqa: E402

os.environ.setdefault("HF_HUB_OFFLINE", "1")
ZOOM_ENV = "visual_search/zoom-small-v0"
LOGPROB = -0.5


# ------------------------------------------------------------------------- the two sides
def scripted_ids(tokenizer: Any, text: str) -> list[int]:
    """What a server would sample for ``text``: its tokens and the end-of-turn token."""
    return [*tokenizer.encode(text, add_special_tokens=False), tokenizer.convert_tokens_to_ids("<|im_end|>")]


class ScriptedServerStandIn:
    """A STAND-IN for verl's ``LLMServerClient`` (no vLLM server runs in the verl test venv): the
    same ``generate`` interface, replaying ``script`` (token ids per call) and recording each call."""

    def __init__(self) -> None:
        self.script: list[list[int]] = []
        self.calls: list[dict[str, Any]] = []

    async def generate(self, request_id: str, *, prompt_ids: list[int], sampling_params: dict[str, Any],
                       image_data: list[Any] | None = None, **_kwargs: Any) -> TokenOutput:
        ids = self.script[len(self.calls)]
        self.calls.append({"prompt_ids": list(prompt_ids), "images": len(image_data or [])})
        step = len(self.calls)  # as LLMServerClient.generate tags each output (llm_server.py:160-162)
        return TokenOutput(token_ids=list(ids), log_probs=[LOGPROB] * len(ids), stop_reason="completed",
                           extra_fields={"global_steps": step, "min_global_steps": step, "max_global_steps": step})


class ScriptedProcessorBackend(ModelBackend):
    """``RolloutEngine``'s side: renders each chat with the processor's chat template (whole
    context, every turn, as a local backend does) and answers the scripted token ids."""

    def __init__(self, processor: Any, script: Sequence[list[int]]) -> None:
        self.processor = processor
        self.tokenizer = processor.tokenizer
        self.script = list(script)
        self.end_ids = end_token_ids(self.tokenizer)
        self.stop_token_ids = sorted(self.end_ids)
        self.turn = 0

    def generate(self, chats: Sequence[Chat], params: SamplingParams) -> list[list[Generation]]:
        out = []
        for chat in chats:
            messages = hf_messages(chat)
            images = [part["image"] for message in messages if isinstance(message["content"], list)
                      for part in message["content"] if part["type"] == "image"]
            text = self.processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
            prompt = self.processor(text=[text], images=images or None, return_tensors="pt")["input_ids"][0].tolist()
            ids = self.script[self.turn]
            self.turn += 1
            out.append([Generation(text=reply_text(self.tokenizer, ids, self.end_ids), token_ids=list(ids),
                                   logprobs=[LOGPROB] * len(ids), prompt_token_ids=prompt, finish_reason="stop")])
        return out


@pytest.fixture(scope="module")
def processor() -> Any:
    from transformers import AutoProcessor

    from vista_rl_sdk.tiny_models import cached_tiny_model

    return AutoProcessor.from_pretrained(cached_tiny_model())


@pytest.fixture(scope="module")
def worker(processor: Any, tmp_path_factory: pytest.TempPathFactory) -> SimpleNamespace:
    """verl's AgentLoopWorker, configured by the config the verl engine composes."""
    from vista_rl_sdk.tiny_models import cached_tiny_model

    run = RunConfig.model_validate({
        "engine": "verl", "output_dir": str(tmp_path_factory.mktemp("run")), "env": {"id": ZOOM_ENV},
        "model": {"path": str(cached_tiny_model())}, "rollout": {"max_turns": 4},
        "trainer": {"steps": 1, "seeds_per_step": 1, "micro_batch_size": 1, "train_seeds": {"start": 0, "count": 4}},
        "eval": {"seeds": {"start": 1000, "count": 2}},
        "engine_config": {"verl": {"cluster": {"n_gpus_per_node": 1}}}})
    config = compose_verl_config(compose_overrides(run, engine_config(run), "train.parquet", "val.parquet"))
    server = ScriptedServerStandIn()
    return SimpleNamespace(worker=AgentLoopWorker(config, server), server=server)


@pytest.fixture
def captured(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, Trajectory]]:
    """Each VistaAgentLoop output with its episode's trajectory (the loop lives inside the worker)."""
    seen: list[tuple[Any, Trajectory]] = []
    original = VistaAgentLoop._output

    def record(self: VistaAgentLoop, state: Any, trajectory: Trajectory) -> Any:
        output = original(self, state, trajectory)
        seen.append((output, trajectory))
        return output

    monkeypatch.setattr(VistaAgentLoop, "_output", record)
    return seen


def through_verl(worker: SimpleNamespace, script: list[list[int]], env_id: str, seed: int,
                 rollout: RolloutSection, max_turns: int) -> DataProto:
    """One sample through ``AgentLoopWorker.generate_sequences``, its row written by ``env_rows``."""
    worker.server.script, worker.server.calls = script, []
    (row,) = env_rows(env_id, {}, [seed], "train", rollout.model_copy(update={"max_turns": max_turns}))
    column = np.empty(1, dtype=object)
    column[0] = row["extra_info"]
    raw_prompt = np.empty(1, dtype=object)
    raw_prompt[0] = row["prompt"]
    batch = DataProto.from_dict(non_tensors={
        "agent_name": np.array([row["agent_name"]], dtype=object), "extra_info": column,
        "raw_prompt": raw_prompt, "index": np.array([0])}, meta_info={"validate": False, "global_steps": 1})
    return asyncio.run(worker.worker.generate_sequences(batch))


def through_the_engine(processor: Any, script: list[list[int]], env_id: str, seed: int,
                       rollout: RolloutSection) -> Trajectory:
    with RolloutEngine(ScriptedProcessorBackend(processor, script), rollout) as engine:
        (trajectory,) = engine.run([EpisodeSpec(env_id, seed)])
    return trajectory


def _turns(trajectory: Trajectory) -> list[dict[str, Any]]:
    return [{"observation": turn.observation, "response": turn.response, "reward": turn.reward,
             "images": [image.convert("RGB").tobytes() for image in turn.images], "error": turn.error,
             "tools": [(c.name, c.arguments, c.result_text, c.num_images, c.error) for c in turn.tool_calls]}
            for turn in trajectory.turns]


def assert_parity(processor: Any, batch: DataProto, verl_output: Any, verl_trajectory: Trajectory,
                  engine: Trajectory) -> None:
    view = engine.token_view
    assert view is not None, engine.metadata.get("token_view_error")
    # verl's padded batch, unpadded: the same ids and mask, prompt then response
    attention = batch.batch["attention_mask"][0].bool()
    assert batch.batch["input_ids"][0][attention].tolist() == view.input_ids
    prompt_width = batch.batch["prompts"].shape[1]
    prompt_len = int(attention[:prompt_width].sum())
    assert prompt_len == view.prompt_length
    assert batch.batch["prompts"][0][-prompt_len:].tolist() == view.input_ids[:view.prompt_length]
    response_len = int(attention[prompt_width:].sum())
    # a failed episode is left out of the update, as the local engine leaves it out: no token trained
    trained = [0] * (len(view.loss_mask) - view.prompt_length) if engine.failure else view.loss_mask[view.prompt_length:]
    assert batch.batch["response_mask"][0][:response_len].tolist() == trained
    assert verl_output.response_logprobs == view.logprobs[view.prompt_length:]
    # images in placeholder order; verl's multi_modal_inputs hold one grid per image
    images = verl_output.multi_modal_data.get("images", [])
    assert [im.tobytes() for im in images] == [im.convert("RGB").tobytes() for im in view.images]
    if images:
        assert len(batch.non_tensor_batch["multi_modal_inputs"][0]["image_grid_thw"]) == len(images)
    vision_start = processor.tokenizer.convert_tokens_to_ids("<|vision_start|>")
    assert view.input_ids.count(vision_start) == len(images)
    # per-turn rewards, tool calls, stop reason, failure
    fields = batch.non_tensor_batch
    assert list(fields["turn_scores"][0]) == [turn.reward for turn in engine.turns] == view.turn_rewards
    assert fields["vista_tool_calls"][0] == engine.metadata["tool_calls"]
    assert fields["vista_stop_reason"][0] == engine.metadata["stop_reason"]
    assert fields["vista_failure"][0] == engine.failure
    assert fields["vista_attempts"][0] == engine.metadata["attempts"]
    assert fields["vista_success"][0] == bool(engine.success)
    # the weight version the episode started and ended on (the v1 trainer's staleness tags need both)
    assert (fields["min_global_steps"][0], fields["max_global_steps"][0]) == (1, len(engine.turns))
    assert _turns(verl_trajectory) == _turns(engine)
    assert verl_trajectory.system_prompt == engine.system_prompt
    assert verl_trajectory.token_view is not None and verl_trajectory.token_view.input_ids == view.input_ids


def run_both(processor: Any, worker: SimpleNamespace, captured: list[Any], texts: list[str], env_id: str,
             seed: int, rollout: RolloutSection, max_turns: int) -> Trajectory:
    script = [scripted_ids(processor.tokenizer, text) for text in texts]
    rollout = rollout.model_copy(update={"max_turns": max_turns})
    engine = through_the_engine(processor, script, env_id, seed, rollout)
    batch = through_verl(worker, script, env_id, seed, rollout, max_turns)
    ((output, trajectory),) = captured
    assert_parity(processor, batch, output, trajectory, engine)
    # what verl's server was asked each turn is exactly the engine's sequence up to that turn
    view = engine.token_view
    assert view is not None and len(worker.server.calls) == len(view.turn_starts)
    vision_start = processor.tokenizer.convert_tokens_to_ids("<|vision_start|>")
    for call, start in zip(worker.server.calls, view.turn_starts, strict=True):
        assert call["prompt_ids"] == view.input_ids[:start]
        assert call["images"] == call["prompt_ids"].count(vision_start)
    return engine


# ------------------------------------------------------------------------------ the cases
@pytest.fixture
def zoom_env(vista_plugin: Any) -> str:
    """visual_search/zoom-small-v0 and its crop_zoom tool (entry points where installed, else here)."""
    try:
        vista_rl.host().spec("envs", ZOOM_ENV)
    except Exception:  # noqa: BLE001 - not installed in this venv: register the plugin modules
        for name in ("vista_plugin_judges", "vista_plugin_tools", "vista_plugin_visual_search"):
            vista_plugin(importlib.import_module(name))
    return ZOOM_ENV


def test_tool_env_with_reflection_matches_the_engine(processor, worker, captured, zoom_env) -> None:  # type: ignore[no-untyped-def]
    """Seed 3's dot is green at (28, 28): zoom, answer wrong (reflection resets), zoom, answer right."""
    zoom = '<tool_call>{"name": "crop_zoom", "arguments": {"coordinate": [28, 28]}}</tool_call>'
    engine = run_both(processor, worker, captured, [zoom, "<answer>red</answer>", zoom, "<answer>green</answer>"],
                      zoom_env, 3, RolloutSection(reflection=True, reflection_attempts=2), max_turns=4)
    assert engine.metadata["stop_reason"] == "done" and engine.metadata["attempts"] == 2 and engine.success
    assert engine.metadata["tool_calls"] == 2 and [t.reward for t in engine.turns][-1] > 0
    assert "crop_zoom" in engine.system_prompt  # the tool schemas are in the prompt verl trains on
    assert engine.turns[1].tool_calls == [] and engine.turns[0].tool_calls[0].num_images == 1


class Crashes(Env):
    """An image per step; the second step raises (an env bug)."""

    def reset(self, seed: int | None = None) -> tuple[Observation, dict[str, Any]]:
        self.steps = 0
        return Observation("<image> Which colour?", [Image.new("RGB", (56, 56), (9, 99, 199))]), {}

    def step(self, action: str) -> StepResult:
        self.steps += 1
        if self.steps == 2:
            raise RuntimeError("env exploded")
        return StepResult(Observation("Again: <image>", [Image.new("RGB", (56, 56), (200, 9, 9))]), 0.25, False,
                          False, {"success": False})

    def system_prompt(self) -> str:
        return "Name the colour."


def test_env_crash_matches_the_engine(processor, worker, captured, vista_plugin) -> None:  # type: ignore[no-untyped-def]
    vista_plugin(SimpleNamespace(register_envs=vista_rl.hookimpl(lambda register: register("parity/crash-v0", Crashes))))
    engine = run_both(processor, worker, captured, ["<answer>blue</answer>", "red"], "parity/crash-v0", 1,
                      RolloutSection(), max_turns=3)
    assert [turn.response for turn in engine.turns] == ["<answer>blue</answer>", "red"]
    assert engine.metadata["stop_reason"] == "env_error"
    assert engine.failure == "env.step() raised RuntimeError: env exploded"


class NoArgs(BaseModel):
    pass


RELEASE = threading.Event()


class Hangs(Tool):
    """A tool that hangs until the test releases it."""

    name = "hang"
    description = "Never answers in time."
    Arguments = NoArgs

    def run(self, arguments: Any, context: ToolContext) -> ToolResult:
        RELEASE.wait(10)
        return ToolResult("late")


class HangingToolEnv(Env):
    tools = ("parity/hang",)

    def reset(self, seed: int | None = None) -> tuple[Observation, dict[str, Any]]:
        return Observation("<image> Zoom first.", [Image.new("RGB", (56, 56), (1, 200, 1))]), {}

    def step(self, action: str) -> StepResult:
        return StepResult(Observation("done"), 1.0, True, False, {"success": True})


def test_tool_timeout_matches_the_engine(processor, worker, captured, vista_plugin) -> None:  # type: ignore[no-untyped-def]
    vista_plugin(SimpleNamespace(
        register_envs=vista_rl.hookimpl(lambda register: register("parity/hang-v0", HangingToolEnv)),
        register_tools=vista_rl.hookimpl(lambda register: register("parity/hang", Hangs))))
    RELEASE.clear()
    try:
        engine = run_both(processor, worker, captured, ['<tool_call>{"name": "hang", "arguments": {}}</tool_call>'],
                          "parity/hang-v0", 0, RolloutSection(tool_timeout_s=0.3), max_turns=3)
    finally:
        RELEASE.set()
    assert engine.metadata["stop_reason"] == "tool_timeout"
    assert engine.failure == "tool hang timed out after 0.3s"


def test_a_window_with_whole_episode_sequences_is_refused(worker) -> None:  # type: ignore[no-untyped-def]
    """window_size 2 with sequences auto (one sequence per episode): a concatenation the model never
    saw; the row fails loudly, naming the key, before any generation."""
    rollout = RolloutSection(window_size=2)
    (row,) = env_rows(ZOOM_ENV, {}, [0], "train", rollout)
    assert json.loads(row["extra_info"]["rollout"])["window_size"] == 2
    with pytest.raises(ValueError, match=r"rollout\.window_size") as refused:
        through_verl(worker, [], ZOOM_ENV, 0, rollout, 3)
    assert refused.value.args[0] == agent_loop.WINDOW_REFUSAL
    assert worker.server.calls == []


@pytest.mark.parametrize("rollout", [RolloutSection(window_size=0),
                                     RolloutSection(window_size=1, sequences="turn"),
                                     RolloutSection(sequences="turn", reflection=True, reflection_attempts=2)])
def test_per_turn_rows_are_the_engines_turn_views(processor, worker, zoom_env, monkeypatch,  # type: ignore[no-untyped-def]
                                                  rollout: RolloutSection) -> None:
    """Per-turn sequences: one AgentLoopOutput per turn, each exactly a local per-turn sample
    (``Trajectory.turn_views``: the windowed context the model answered, then its reply), with that
    turn's reward and index; verl's own post-processing turns each into a padded row."""
    rows: list[Any] = []
    original = worker.worker._agent_loop_postprocess

    async def record(output: Any, validate: bool, **kwargs: Any) -> Any:
        outputs = output if isinstance(output, list) else [output]
        rows.extend(outputs)
        for each in outputs:  # every row is one verl's post-processing accepts
            processed = await original(each, validate, **kwargs)
        return processed  # the legacy worker stacks one output per sample; the v1 worker takes the list

    monkeypatch.setattr(worker.worker, "_agent_loop_postprocess", record)
    zoom = '<tool_call>{"name": "crop_zoom", "arguments": {"coordinate": [28, 28]}}</tool_call>'
    texts = [zoom, "<answer>red</answer>", zoom, "<answer>green</answer>"]
    script = [scripted_ids(processor.tokenizer, text) for text in texts]
    rollout = rollout.model_copy(update={"max_turns": 4})
    engine = through_the_engine(processor, script, zoom_env, 3, rollout)
    through_verl(worker, script, zoom_env, 3, rollout, 4)
    views = engine.turn_views
    assert engine.failure is None and len(views) == len(rows) == engine.num_turns >= 2
    for index, (row, view) in enumerate(zip(rows, views, strict=True)):
        assert row.prompt_ids + row.response_ids == view.input_ids
        assert [0] * len(row.prompt_ids) + row.response_mask == view.loss_mask
        assert row.response_logprobs == view.logprobs[len(row.prompt_ids):]
        images = row.multi_modal_data.get("images", [])
        assert [im.tobytes() for im in images] == [im.convert("RGB").tobytes() for im in view.images]
        assert row.extra_fields["vista_turn"] == index and row.extra_fields["vista_turns"] == len(rows)
        assert row.extra_fields["vista_turn_reward"] == sum(view.turn_rewards) == engine.turns[index].reward
        assert row.extra_fields["vista_failure"] is None
        assert row.extra_fields["min_global_steps"] == row.extra_fields["max_global_steps"] == index + 1
    assert rows[-1].reward_score == sum(turn.reward for turn in engine.turns)
    if rollout.window_size == 0:  # the answer turn sees the zoom alone, not the view before it
        assert len(rows[1].multi_modal_data["images"]) == 1
    assert len({row.extra_fields["vista_state"] for row in rows}) == len(rows)


def test_a_failed_episodes_turn_rows_train_nothing(processor, worker, monkeypatch, vista_plugin) -> None:  # type: ignore[no-untyped-def]
    vista_plugin(SimpleNamespace(register_envs=vista_rl.hookimpl(lambda register: register("parity/crash-v0", Crashes))))
    rows: list[Any] = []
    original = worker.worker._agent_loop_postprocess

    async def record(output: Any, validate: bool, **kwargs: Any) -> Any:
        rows.extend(output)
        return await original(output[-1], validate, **kwargs)

    monkeypatch.setattr(worker.worker, "_agent_loop_postprocess", record)
    script = [scripted_ids(processor.tokenizer, text) for text in ["<answer>blue</answer>", "red"]]
    through_verl(worker, script, "parity/crash-v0", 1, RolloutSection(window_size=0), 3)
    assert len(rows) == 2 and all(set(row.response_mask) == {0} for row in rows)
    assert rows[0].extra_fields["vista_failure"] == "env.step() raised RuntimeError: env exploded"


def test_replies_keep_special_answer_tokens(processor) -> None:  # type: ignore[no-untyped-def]
    """Where ``<answer>`` is a special token the env still sees it (verl's own decode with
    ``skip_special_tokens=True`` would drop it); end-of-turn and pad tokens are dropped."""
    import copy

    tokenizer = copy.deepcopy(processor.tokenizer)
    tokenizer.add_special_tokens({"additional_special_tokens": ["<answer>", "</answer>"]})
    ids = scripted_ids(tokenizer, "<answer>blue</answer>")
    assert tokenizer.decode(ids, skip_special_tokens=True) == "blue"
    assert reply_text(tokenizer, ids, end_token_ids(tokenizer)) == "<answer>blue</answer>"


def test_rows_carry_every_rollout_key_the_driver_reads() -> None:
    """The dataset row is how the run's rollout settings reach verl's workers: what the episode
    driver reads comes back equal (describe_tools was missing before, so verl's prompt lacked the
    tool schemas)."""
    rollout = RolloutSection(describe_tools=False, env_timeout_s=7.0, tool_timeout_s=3.0, reflection=True,
                             reflection_attempts=3, tool_response_role="tool", max_turns=9, window_size=0,
                             max_context_tokens=900, sampling={"max_tokens": 17, "stop": ["</answer>"]},
                             image_size=56)
    (row,) = env_rows(ZOOM_ENV, {}, [0], "train", rollout)
    settings = agent_loop.settings_from_row(row["extra_info"])
    assert settings == rollout and "max_turns" not in row["extra_info"]


def test_each_reply_gets_the_runs_cap_and_stop_strings(processor, worker, zoom_env) -> None:  # type: ignore[no-untyped-def]
    """rollout.sampling.max_tokens and stop reach verl's server on every turn (vllm_async_server.py:602
    reads max_tokens from the request; stop goes to vLLM's SamplingParams), within the row's budget."""
    params: list[dict[str, Any]] = []
    original = ScriptedServerStandIn.generate

    async def recording(self: Any, request_id: str, **kwargs: Any) -> TokenOutput:
        params.append(dict(kwargs["sampling_params"]))
        return await original(self, request_id, **kwargs)

    rollout = RolloutSection(sampling={"max_tokens": 9, "stop": ["</answer>"]})
    zoom = '<tool_call>{"name": "crop_zoom", "arguments": {"coordinate": [28, 28]}}</tool_call>'
    script = [scripted_ids(processor.tokenizer, text) for text in [zoom, "<answer>green</answer>"]]
    try:
        ScriptedServerStandIn.generate = recording  # type: ignore[method-assign]
        through_verl(worker, script, zoom_env, 3, rollout, 2)
    finally:
        ScriptedServerStandIn.generate = original  # type: ignore[method-assign]
    assert len(params) == 2
    assert all(p["max_tokens"] == 9 and p["stop"] == ["</answer>"] for p in params)
    assert agent_loop.reply_params({"temperature": 1.0}, rollout, budget=4)["max_tokens"] == 4


def test_every_episode_is_recorded_for_the_run(processor, worker, zoom_env, monkeypatch, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The engine points VISTA_VERL_EPISODES at RUN_DIR/episodes.jsonl in every worker: one line per
    episode (its step, reward, success, turns), the per-step training reward of the local engine's metrics."""
    path = tmp_path / "episodes.jsonl"
    monkeypatch.setenv(agent_loop.EPISODES_ENV, str(path))
    zoom = '<tool_call>{"name": "crop_zoom", "arguments": {"coordinate": [28, 28]}}</tool_call>'
    script = [scripted_ids(processor.tokenizer, text) for text in [zoom, "<answer>green</answer>"]]
    through_verl(worker, script, zoom_env, 3, RolloutSection(), 2)
    (line,) = [json.loads(text) for text in path.read_text().splitlines()]
    assert line["split"] == "train" and line["seed"] == 3 and line["turns"] == 2 and line["success"] is True
    assert line["reward"] > 0 and line["global_steps"] == 1 and line["failure"] is None
