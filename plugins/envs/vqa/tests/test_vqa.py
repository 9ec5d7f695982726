from types import SimpleNamespace

import pytest
from vista_plugin_datasets import testing

import vista_rl
from vista_rl import ToolContext, parse_response
from vista_rl_sdk import check_env

MC, SHORT = "vqa/multiple-choice-v0", "vqa/short-answer-v0"


@pytest.fixture(scope="module")
def roots(tmp_path_factory):
    base = tmp_path_factory.mktemp("vqa-data")
    aokvqa_root, coco = testing.write_aokvqa(base / "aokvqa")
    return {
        "scienceqa": {"root": str(testing.write_scienceqa(base / "sqa"))},
        "geometry3k": {"root": str(testing.write_geometry3k(base / "g3k"))},
        "aokvqa": {"root": str(aokvqa_root), "coco_dir": str(coco)},
        "aokvqa-direct": {"root": str(aokvqa_root), "coco_dir": str(coco), "mode": "direct"},
        "chartqa": {"root": str(testing.write_chartqa(base / "chartqa"))},
    }


@pytest.mark.parametrize(("env_id", "dataset", "extra"), [
    (MC, "scienceqa", {}), (MC, "geometry3k", {"tools": ["crop_bbox"]}), (MC, "aokvqa", {"answer_attempts": 2}),
    (SHORT, "aokvqa-direct", {}), (SHORT, "chartqa", {"prompt_format": "no_think"}), (SHORT, "geometry3k", {}),
])
def test_conformance(roots, env_id, dataset, extra):
    name = dataset.split("-")[0]
    check_env(env_id, {"dataset": name, "dataset_config": roots[dataset], **extra})


def test_a_fractional_seed_is_an_error_not_another_problem(roots):
    env = vista_rl.make_env(MC, dataset="geometry3k", dataset_config=roots["geometry3k"])
    with pytest.raises(ValueError, match="seed must be a whole number, got 1.5"):
        env.reset(seed=1.5)  # int(1.5) used to pick problem 1 without a word
    assert env.reset(seed=1.0)[1] == env.reset(seed=1)[1]


def test_multiple_choice_oracle_and_judging(roots):
    env = vista_rl.make_env(MC, dataset="geometry3k", dataset_config=roots["geometry3k"])
    observation, info = env.reset(seed=0)
    assert observation.text.count("<image>") == 1 and "B. 6" in observation.text and info["answer"] == "B"
    assert env.step("<think>x = 6</think><answer>B</answer>").info["success"]
    env.reset(seed=1)
    result = env.step("<think>right angle</think><answer>90</answer>")  # option text also counts
    assert result.info["success"] and result.reward == 1.0 and result.terminated


def test_short_answer_uses_the_task_type_judge(roots):
    env = vista_rl.make_env(SHORT, dataset="chartqa", dataset_config=roots["chartqa"])
    env.reset(seed=0)  # "37.5", numeric -> relaxed_numeric
    assert env.step("<think>t</think><answer>38</answer>").info["success"]
    env.reset(seed=1)  # "Japan"
    assert env.step("<think>t</think><answer>japan</answer>").info["success"]
    env.reset(seed=2)  # "1,250"
    assert env.step("<think>t</think><answer>1250</answer>").info["success"]
    direct = vista_rl.make_env(SHORT, dataset="aokvqa", dataset_config=roots["aokvqa-direct"])
    direct.reset(seed=0)  # direct answers: 9 x "cigarette", 1 x "smoke" -> VQA accuracy
    minority = direct.step("<think>t</think><answer>smoke</answer>")
    assert not minority.info["success"] and minority.reward == pytest.approx(0.3)  # partial credit
    direct.reset(seed=0)
    assert direct.step("<think>t</think><answer>Cigarette.</answer>").info["success"]


@pytest.mark.parametrize(("mode", "expected"), [("first", 0.0), ("decayed", 0.5), ("last", 1.0)])
def test_answer_attempt_feedback_and_reward_modes(roots, mode, expected):
    env = vista_rl.make_env(SHORT, dataset="chartqa", dataset_config=roots["chartqa"], answer_attempts=3,
                         reward_mode=mode, decay=0.5)
    env.reset(seed=0)  # reference 37.5
    wrong = env.step("<think>t</think><answer>20</answer>")
    assert not wrong.done and wrong.reward == 0.0 and wrong.info["attempts_left"] == 2
    assert "incorrect" in wrong.observation.text and "too low" in wrong.observation.text
    assert "2 attempts left" in wrong.observation.text and "37.5" not in wrong.observation.text
    right = env.step("<think>t</think><answer>37.5</answer>")
    assert right.terminated and right.info["success"] and right.info["attempts_used"] == 2
    assert right.reward == pytest.approx(expected)
    assert not right.info["first_attempt_correct"]


def test_out_of_attempts_ends_the_episode(roots):
    env = vista_rl.make_env(MC, dataset="scienceqa", dataset_config=roots["scienceqa"], answer_attempts=2)
    env.reset(seed=0)  # answer B
    assert not env.step("<think>t</think><answer>A</answer>").done
    last = env.step("<think>t</think><answer>C</answer>")
    assert last.terminated and not last.info["success"] and last.reward == 0.0 and "B" in last.observation.text


def test_old_max_attempts_key_still_works_with_a_warning(roots):
    """``max_attempts`` was renamed ``answer_attempts`` (the engine's ``rollout.reflection_attempts`` is a
    different mechanism); the old key works until 0.2 and says so, and both at once are refused."""
    with pytest.warns(FutureWarning, match="max_attempts is deprecated.*answer_attempts"):
        env = vista_rl.make_env(MC, dataset="scienceqa", dataset_config=roots["scienceqa"], max_attempts=2)
    assert env.config.answer_attempts == 2
    env.reset(seed=0)
    assert env.step("<think>t</think><answer>A</answer>").info["attempts_left"] == 1
    with pytest.raises(Exception, match="give only answer_attempts"):
        vista_rl.make_env(MC, dataset="scienceqa", dataset_config=roots["scienceqa"], max_attempts=2,
                          answer_attempts=3)


def test_malformed_responses_are_feedback_and_turns_are_capped(roots):
    env = vista_rl.make_env(MC, dataset="scienceqa", dataset_config=roots["scienceqa"], max_turns=2)
    env.reset(seed=0)
    first = env.step("I think it's B")
    assert not first.done and not first.info["format_ok"] and "answer now" in first.observation.text
    second = env.step("<answer>")
    assert second.truncated and not second.info["success"]


def test_end_to_end_episode_with_a_tool_call_run_by_the_driver(roots):
    """Scripted policy: crop the image with crop_bbox (run through vista_rl.make_tool, as the rollout
    engine does), then answer."""
    env = vista_rl.make_env(MC, dataset="geometry3k", dataset_config=roots["geometry3k"], tools=["crop_bbox"])
    assert env.tools == ("crop_bbox",)
    observation, _ = env.reset(seed=0)
    images = list(observation.images)
    call_text = '<think>Zoom on the label.</think><tool_call>{"name": "crop_bbox", "arguments": {"bbox": [0, 0, 80, 60]}}</tool_call>'
    step = env.step(call_text)
    assert not step.done and step.info["action_valid"] and step.info["awaiting_tool_result"]
    for call in parse_response(call_text).tool_calls:
        result = vista_rl.make_tool(call.name)(call.arguments, ToolContext(images=images, metadata=env.tool_context_metadata()))
        assert not result.error and len(result.images) == 1
        images.extend(result.images)
    final = env.step("<think>The crop shows x = 6.</think><answer>B</answer>")
    assert final.info["success"] and final.reward == 1.0 and final.info["tool_calls_total"] == 1


def test_env_can_execute_tools_itself(roots):
    env = vista_rl.make_env(MC, dataset="geometry3k", dataset_config=roots["geometry3k"], tools=["crop_bbox"],
                         execute_tools=True)
    env.reset(seed=0)
    step = env.step('<tool_call>{"name": "crop_bbox", "arguments": {"bbox": [0, 0, 80, 60]}}</tool_call>'
                    '<think>look</think>')
    assert len(step.observation.images) == 1 and "Crop of image 0" in step.observation.text
    unknown = env.step('<think>t</think><tool_call>{"name": "python", "arguments": {"code": "1"}}</tool_call>')
    assert not unknown.info["action_valid"] and "Unknown tool" in unknown.observation.text


class _CrashingTool(vista_rl.Tool):
    """A tool whose ``__call__`` raises past ``Tool.__call__``'s own guard."""

    name = "vqatest/crash"
    description = "Crashes."

    def __call__(self, arguments, context=None):
        raise OSError("tool backend down")

    def run(self, arguments, context):
        raise AssertionError("not reached")


def test_env_run_tools_are_guarded_like_the_engines(roots, vista_plugin):
    """execute_tools runs through vista_rl.rollout.execute_tool_calls: a crash is an error text."""
    vista_plugin(SimpleNamespace(register_tools=vista_rl.hookimpl(
        lambda register: register("vqatest/crash", _CrashingTool))))
    env = vista_rl.make_env(MC, dataset="geometry3k", dataset_config=roots["geometry3k"],
                            tools=["vqatest/crash"], execute_tools=True)
    env.reset(seed=0)
    step = env.step('<think>t</think><tool_call>{"name": "vqatest/crash", "arguments": {}}</tool_call>')
    assert not step.done and "error" not in step.info
    assert "vqatest/crash: Error: vqatest/crash failed: OSError: tool backend down" in step.observation.text


def test_bad_config_names_the_key(roots):
    with pytest.raises(Exception, match="answer_attempts"):
        vista_rl.make_env(MC, dataset="scienceqa", dataset_config=roots["scienceqa"], answer_attempts=0)
    with pytest.raises(Exception, match="exactly one"):
        vista_rl.make_env(MC)


def test_the_retry_docs_example_is_valid_config():
    """docs/reflection.md's YAML sets both mechanisms with their new keys; both parse without warnings."""
    import warnings
    from pathlib import Path

    import yaml
    from vista_plugin_vqa.attempts import AnswerAttemptsConfig

    from vista_rl.config import RolloutSection

    page = Path(__file__).resolve().parents[4] / "docs" / "reflection.md"
    block = page.read_text().split("```yaml\n", 1)[1].split("```", 1)[0]
    example = yaml.safe_load(block)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        rollout = RolloutSection(**example["rollout"])
        attempts = AnswerAttemptsConfig(**example["env"]["config"])
    assert rollout.reflection and rollout.reflection_attempts == 3
    assert attempts.answer_attempts == 3 and attempts.reward_mode == "decayed"


def test_records_env_serves_a_mixed_release_per_record(tmp_path):
    """vqa/records-v0: options and multiple_choice where a record has options, the record's own
    free-form judge elsewhere (a float at the release's stated precision)."""
    root = str(testing.write_mathvista(tmp_path / "mathvista"))
    check_env("vqa/records-v0", {"dataset": "mathvista", "dataset_config": {"root": root}})
    records = list(vista_rl.make_dataset("mathvista", root=root))
    kinds = {record.task_type for record in records}
    assert "multiple_choice" in kinds and kinds - {"multiple_choice"}
    env = vista_rl.make_env("vqa/records-v0", dataset="mathvista", dataset_config={"root": root})
    for seed, record in enumerate(records):
        observation, _ = env.reset(seed=seed)
        assert ("Options:" in observation.text) == (record.task_type == "multiple_choice")
    precise = [dict(id="p", dataset="d", question="Length?", answer="1.45", task_type="math",
                    metadata={"answer_type": "float", "precision": 2})]
    env = vista_rl.make_env("vqa/records-v0", records=precise, prompt_format="no_think")
    for answer, right in (("1.45", True), ("1.449", True), ("1.46", False), ("1.5", False)):
        env.reset(seed=0)
        assert env.step(f"<answer>{answer}</answer>").info["success"] is right, answer
