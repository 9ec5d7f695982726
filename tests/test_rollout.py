"""The multi-turn rollout engine: batching, tools, failures, timeouts, reflection, context windows."""

from __future__ import annotations

import threading

import pytest

import vista_rl
from tests.rollout_testkit import RELEASE, CharTokenBackend, RolloutTestPlugin
from vista_rl.config import RolloutSection
from vista_rl.model import Generation, ModelBackend
from vista_rl.rollout import EpisodeSpec, RolloutEngine, episode_specs
from vista_rl.rollout.workers import CallPool

COUNTER = "test/counter-v0"


@pytest.fixture(autouse=True)
def test_envs(vista_plugin):
    vista_plugin(RolloutTestPlugin())
    RELEASE.clear()
    yield
    RELEASE.set()


def run(backend, specs, **settings):
    with RolloutEngine(backend, RolloutSection(**settings)) as engine:
        return engine.run(specs), engine


def test_counter_env_needs_three_turns_and_one_model_call_per_turn():
    backend = CharTokenBackend(oracle=True)
    trajectories, engine = run(backend, episode_specs(COUNTER, range(4), group_size=2))
    assert backend.calls == [8, 8, 8]
    assert len(trajectories) == 8
    assert sorted(t.metadata["group_id"] for t in trajectories).count(f"{COUNTER}:0") == 2
    for trajectory in trajectories:
        assert trajectory.success and trajectory.failure is None
        assert [turn.observation.splitlines()[-1] for turn in trajectory.turns] == [
            "Counter at 0.", "Counter at 1.", "Counter at 2."]
        assert all(len(turn.images) == 1 for turn in trajectory.turns)
        assert trajectory.total_reward == pytest.approx(0.1 + 0.1 + 1.0)
        assert trajectory.metadata["stop_reason"] == "done"
    assert engine.timings.env_steps == 24 and engine.timings.episodes == 8


def test_batch_size_caps_live_episodes_and_refills_as_episodes_finish():
    backend = CharTokenBackend(oracle=True)
    specs = [EpisodeSpec(COUNTER, seed, env_config={"target": 1 + seed % 3}) for seed in range(7)]
    with RolloutEngine(backend, RolloutSection(batch_size=3)) as engine:
        finished = [t.metadata["episode_index"] for t in engine.stream(specs)]
    assert max(backend.calls) == 3 and sum(backend.calls) == sum(1 + seed % 3 for seed in range(7))
    assert sorted(finished) == list(range(7)) and finished != list(range(7))  # yielded as they finish
    trajectories, _ = run(CharTokenBackend(oracle=True), specs, batch_size=3)
    assert [t.seed for t in trajectories] == list(range(7)) and all(t.success for t in trajectories)


def test_scripted_backend_gets_the_oracle_of_each_live_env():
    backend = vista_rl.make_model("scripted", path="oracle")
    trajectories, _ = run(backend, episode_specs("oddshape/odd-colour-v0", range(6)))
    assert all(t.success and t.num_turns == 1 for t in trajectories)
    assert all(t.token_view is None and "token_view_error" not in t.metadata for t in trajectories)


def test_an_env_that_raises_ends_only_its_episode():
    specs = [EpisodeSpec(COUNTER, 0), EpisodeSpec(COUNTER, 1, env_config={"raise_on_step": 2}),
             EpisodeSpec(COUNTER, 2)]
    trajectories, _ = run(CharTokenBackend(oracle=True), specs)
    broken = [t for t in trajectories if t.seed == 1][0]
    assert "RuntimeError: counter env broke on step 2" in broken.failure
    assert broken.metadata["stop_reason"] == "env_error" and broken.num_turns == 2 and not broken.success
    assert all(t.success and t.failure is None for t in trajectories if t.seed != 1)


def test_an_env_that_hangs_times_out_and_the_batch_goes_on():
    specs = [EpisodeSpec(COUNTER, 0, env_config={"sleep_on_step": 60}), EpisodeSpec(COUNTER, 1)]
    trajectories, _ = run(CharTokenBackend(oracle=True), specs, env_timeout_s=0.2)
    hung = [t for t in trajectories if t.seed == 0][0]
    assert hung.failure == "env.step() timed out after 0.2s" and hung.metadata["stop_reason"] == "env_timeout"
    assert not RELEASE.is_set()  # the run finished while the env was still stuck
    assert [t for t in trajectories if t.seed == 1][0].success


def test_env_that_cannot_be_made_is_recorded():
    specs = [EpisodeSpec(COUNTER, 0, env_config={"no_such_option": 1}), EpisodeSpec(COUNTER, 1)]
    trajectories, _ = run(CharTokenBackend(oracle=True), specs)
    assert "starting env test/counter-v0" in trajectories[0].failure and trajectories[0].num_turns == 0
    assert trajectories[1].success


def test_tool_calls_run_with_all_images_and_feed_results_back():
    call = '<tool_call>{"name": "zoom", "arguments": {"factor": 3}}</tool_call>'
    backend = CharTokenBackend([call] + ["<answer>inc</answer>"] * 3)
    trajectories, engine = run(backend, [EpisodeSpec("test/tool-counter-v0", 2)])
    trajectory = trajectories[0]
    assert trajectory.success and trajectory.num_turns == 4
    assert '"name": "zoom"' in trajectory.system_prompt and '"name": "hang"' in trajectory.system_prompt
    record = trajectory.turns[0].tool_calls[0]
    assert (record.name, record.arguments, record.num_images, record.error) == ("zoom", {"factor": 3}, 1, False)
    assert record.result_text == "zoomed x3 (1 images seen)"
    fed_back = trajectory.turns[1]
    assert fed_back.observation.startswith("<tool_response>\nzoom: zoomed x3") and "<image>" in fed_back.observation
    assert fed_back.images[0].size == (48, 48)
    assert trajectory.turns[0].reward == 0 and engine.timings.tool_calls == 1


def test_a_tool_that_hangs_ends_its_episode():
    hang = '<tool_call>{"name": "hang", "arguments": {}}</tool_call>'
    backend = CharTokenBackend([hang, "<answer>inc</answer>"])
    specs = [EpisodeSpec("test/tool-counter-v0", 0), EpisodeSpec(COUNTER, 1)]
    trajectories, _ = run(backend, specs, tool_timeout_s=0.2)
    hung = [t for t in trajectories if t.env_id == "test/tool-counter-v0"][0]
    assert hung.failure == "tool hang timed out after 0.2s" and hung.metadata["stop_reason"] == "tool_timeout"
    assert not RELEASE.is_set()
    assert [t for t in trajectories if t.env_id == COUNTER][0].success


@pytest.mark.parametrize("response", [
    "", "<tool_call>{not json</tool_call>", '<tool_call>{"name": "nope", "arguments": {}}</tool_call>',
    '<tool_call>{"name": "zoom", "arguments": {"factor": "big"}}</tool_call>', "<image> <image>",
    "x" * 100_000, "<answer>inc", "\x00\udcff</answer><think>",
])
def test_model_output_of_any_shape_is_recorded_not_raised(response):
    backend = CharTokenBackend([response])
    trajectories, _ = run(backend, episode_specs("test/tool-counter-v0", [0]) + episode_specs(COUNTER, [1]),
                          max_turns=2)
    for trajectory in trajectories:
        assert trajectory.failure is None and trajectory.num_turns == 2
        assert trajectory.turns[0].response == response
    tool_turn = [t for t in trajectories if t.env_id == "test/tool-counter-v0"][0].turns[0]
    if "<tool_call>" in response:
        assert tool_turn.tool_calls and tool_turn.tool_calls[0].error
        assert tool_turn.tool_calls[0].result_text.startswith("Error:")


class _Broken(ModelBackend):
    def __init__(self, mode: str) -> None:
        self.mode = mode

    def generate(self, chats, params):
        if self.mode == "raise":
            raise ConnectionError("server returned 500")
        if self.mode == "short":
            return [[Generation("<answer>inc</answer>")]]
        return [[12345] for _ in chats]


@pytest.mark.parametrize("mode", ["raise", "short", "junk"])
def test_a_misbehaving_backend_is_recorded(mode):
    trajectories, _ = run(_Broken(mode), episode_specs(COUNTER, range(3)), max_turns=2)
    assert len(trajectories) == 3
    if mode == "raise":
        assert all(t.failure == "model backend raised ConnectionError: server returned 500" for t in trajectories)
    elif mode == "short":
        by_seed = {t.seed: t for t in trajectories}
        assert by_seed[0].failure is None and by_seed[0].num_turns == 2
        assert all("no generation for chat" in by_seed[seed].failure for seed in (1, 2))
    else:
        assert all(t.turns[0].response == "12345" and t.failure is None for t in trajectories)


def test_reflection_retries_a_wrong_final_answer():
    backend = CharTokenBackend(["<answer>9</answer>", "<answer>2</answer>"])
    trajectories, _ = run(backend, [EpisodeSpec("test/guess-v0", 2)], reflection=True, reflection_attempts=3)
    trajectory = trajectories[0]
    assert trajectory.success and trajectory.num_turns == 2
    assert trajectory.metadata["attempts"] == 2 and trajectory.metadata["first_attempt_success"] is False
    retry = trajectory.turns[1].observation
    assert retry.startswith("9 is not it. You have 2 attempts left.") and "Guess a number" in retry
    assert [turn.reward for turn in trajectory.turns] == [0.0, 1.0]


def test_reflection_stops_after_reflection_attempts_and_is_off_by_default():
    wrong = CharTokenBackend(["<answer>9</answer>"])
    trajectories, _ = run(wrong, [EpisodeSpec("test/guess-v0", 2)], reflection=True, reflection_attempts=3)
    assert trajectories[0].num_turns == 3 and not trajectories[0].success
    assert "This is your last attempt." in trajectories[0].turns[2].observation
    trajectories, _ = run(CharTokenBackend(["<answer>9</answer>"]), [EpisodeSpec("test/guess-v0", 2)])
    assert trajectories[0].num_turns == 1 and trajectories[0].metadata["attempts"] == 1


def test_window_keeps_only_the_last_turns_in_context():
    backend = CharTokenBackend(oracle=True)
    run(backend, [EpisodeSpec(COUNTER, 0, env_config={"target": 4})], window_size=1)
    last_chat = backend.chats[0]
    assert [m.role for m in last_chat] == ["system", "user", "assistant", "user"]
    assert last_chat[-1].content.endswith("Counter at 3.")
    full = CharTokenBackend(oracle=True)
    run(full, [EpisodeSpec(COUNTER, 0, env_config={"target": 4})])
    assert len(full.chats[0]) == 1 + 7


def test_max_turns_and_token_budget_stop_episodes():
    trajectories, _ = run(CharTokenBackend(oracle=True), [EpisodeSpec(COUNTER, 0, env_config={"target": 9})],
                          max_turns=2)
    assert trajectories[0].num_turns == 2 and trajectories[0].metadata["stop_reason"] == "max_turns"
    trajectories, _ = run(CharTokenBackend(oracle=True), [EpisodeSpec(COUNTER, 0, env_config={"target": 9})],
                          max_context_tokens=150)
    assert trajectories[0].metadata["stop_reason"] == "token_budget"
    assert trajectories[0].metadata["context_tokens"] >= 150 and trajectories[0].num_turns < 9


def test_ordered_stream_follows_input_order():
    specs = [EpisodeSpec(COUNTER, seed, env_config={"target": 3 - seed}) for seed in range(3)]
    with RolloutEngine(CharTokenBackend(oracle=True)) as engine:
        assert [t.seed for t in engine.stream(specs, ordered=True)] == [0, 1, 2]


def test_call_pool_replaces_a_hung_worker():
    pool = CallPool(1)
    gate = threading.Event()
    hung = pool.run(gate.wait, 30, timeout=0.05)
    assert hung.timed_out and not hung.ok
    assert pool.run(lambda: 41 + 1, timeout=5).value == 42  # the replacement worker took over
    failed = pool.run(lambda: 1 / 0, timeout=5)
    assert isinstance(failed.error, ZeroDivisionError) and "ZeroDivisionError" in failed.describe("x", 5)
    gate.set()
    pool.close()


def test_a_forever_hung_env_does_not_keep_the_process_alive(tmp_path):
    """Pool threads are daemons: the program ends even though an env thread never returns."""
    import subprocess
    import sys
    import textwrap
    from pathlib import Path

    script = textwrap.dedent(f"""
        import sys, threading
        sys.path.insert(0, {str(Path(__file__).parent.parent)!r})
        import vista_rl
        from vista_rl._plugins import PluginInfo
        from vista_rl.config import RolloutSection
        from vista_rl.rollout import RolloutEngine, EpisodeSpec
        from tests.rollout_testkit import CounterEnv, CharTokenBackend

        class Stuck(CounterEnv):
            def step(self, action):
                threading.Event().wait()

        class Plugin:
            @vista_rl.hookimpl
            def register_envs(self, register):
                register("test/stuck-v0", Stuck)

        vista_rl.host().load()
        vista_rl.host().register_object(Plugin(), PluginInfo("stuck", "stuck", "0", "stuck"))
        with RolloutEngine(CharTokenBackend(oracle=True), RolloutSection(env_timeout_s=0.2)) as engine:
            (trajectory,) = engine.run([EpisodeSpec("test/stuck-v0", 0)])
        print(trajectory.failure)
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "env.step() timed out after 0.2s"


class TwoAnswerEnv(vista_rl.Env):
    """An env with its own ``answer_attempts`` (as the VQA envs have): a wrong answer gets feedback
    and the same episode goes on; the final info says how the first answer went."""

    def reset(self, seed=None):
        self.answers = 0
        return vista_rl.Observation("Say 1."), {}

    def step(self, action):
        self.answers += 1
        correct = vista_rl.parse_response(action).answer == "1"
        if not correct and self.answers < 2:
            return vista_rl.StepResult(vista_rl.Observation("Wrong, once more."), 0.0, False, False,
                                       {"format_ok": True, "attempt": self.answers})
        return vista_rl.StepResult(vista_rl.Observation("Done."), float(correct), True, False,
                                   {"success": correct, "first_attempt_correct": correct and self.answers == 1})


class TwoAnswerPlugin:
    @vista_rl.hookimpl
    def register_envs(self, register):
        register("test/two-answers-v0", TwoAnswerEnv)


def test_first_attempt_success_agrees_with_the_envs_own_attempts(vista_plugin):
    """Bug: with an env's ``answer_attempts``, first_attempt_success_rate said 1.000 while every
    episode's info said first_attempt_correct False (the engine took the final success)."""
    from vista_rl.rollout import RolloutMetrics

    vista_plugin(TwoAnswerPlugin())
    backend = vista_rl.make_model("scripted", responses=["<answer>2</answer>", "<answer>1</answer>"], per_turn=True)
    trajectories, _ = run(backend, episode_specs("test/two-answers-v0", range(3)))
    metrics = RolloutMetrics()
    for trajectory in trajectories:
        assert trajectory.success and trajectory.turns[-1].info["first_attempt_correct"] is False
        assert trajectory.metadata["first_attempt_success"] is False
        metrics.add(trajectory)
    summary = metrics.summary()
    assert summary["success_rate"]["value"] == 1.0 and summary["first_attempt_success_rate"]["value"] == 0.0
    right_away = vista_rl.make_model("scripted", responses=["<answer>1</answer>"], per_turn=True)
    trajectories, _ = run(right_away, episode_specs("test/two-answers-v0", range(2)))
    assert all(t.metadata["first_attempt_success"] is True for t in trajectories)
