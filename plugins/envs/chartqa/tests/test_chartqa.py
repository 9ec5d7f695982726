import json
import random
import re
import shutil

import pytest
from vista_plugin_chartqa.generator import generate, make_question, random_table
from vista_plugin_datasets import testing

import vista_rl
from vista_rl import ToolContext, parse_response
from vista_rl_sdk import check_env

SYNTHETIC, RECORDS = "chartqa/synthetic-v0", "chartqa/records-v0"


def expected_from_table(table, question) -> str:
    """An independent recomputation of each question type from the table."""
    text = question.question
    series = next((name for name in table.series if f" {name} value" in text or f"the {name} value" in text),
                  next(iter(table.series)))
    values = table.series[series]
    mentioned = sorted((c for c in table.categories if re.search(rf"\b{re.escape(c)}\b", text)), key=text.index)
    if question.kind == "value":
        return str(table.value(series, mentioned[0]))
    if question.kind in ("max", "min"):
        pick = max(values) if question.kind == "max" else min(values)
        return table.categories[values.index(pick)]
    if question.kind == "difference":
        return str(abs(table.value(series, mentioned[0]) - table.value(series, mentioned[1])))
    if question.kind == "ratio":
        return f"{table.value(series, mentioned[0]) / table.value(series, mentioned[1]):.2f}"  # asked rounded
    if question.kind == "average":
        return f"{sum(values) / len(values):.2f}"
    if question.kind == "trend":
        return "increase" if values[-1] > values[0] else "decrease"
    if question.kind == "share":
        return f"{100 * table.value(series, mentioned[0]) / sum(values):.1f}"  # as the pie labels show it
    if question.kind == "compare":
        names = [n for n in table.series if n in text.split(":")[1]]
        return max(names, key=lambda n: table.value(n, mentioned[0]))
    raise AssertionError(question.kind)


def test_generated_answers_agree_with_the_table():
    judge = vista_rl.make_judge("relaxed_numeric", tolerance=0.005)
    kinds = set()
    for seed in range(300):
        rng = random.Random(seed)
        chart_type = rng.choice(["bar", "grouped_bar", "line", "pie"])
        table = random_table(rng, chart_type)
        question = make_question(rng, table, chart_type)
        kinds.add(question.kind)
        expected = expected_from_table(table, question)
        assert judge(question.answer, expected).score == 1.0, (seed, question, expected)
    assert kinds == {"value", "max", "min", "difference", "ratio", "average", "trend", "compare", "share"}


def test_generation_is_seeded():
    a, b, c = generate(11), generate(11), generate(12)
    assert a.image.tobytes() == b.image.tobytes() and a.question == b.question
    assert a.image.tobytes() != c.image.tobytes()


@pytest.mark.parametrize("config", [{}, {"chart_types": ["pie"], "prompt_format": "no_think"},
                                    {"answer_attempts": 3, "reward_mode": "decayed"}])
def test_synthetic_conformance(config):
    check_env(SYNTHETIC, config, seeds=(0, 1))


def test_records_conformance_and_judging(tmp_path):
    root = str(testing.write_chartqa(tmp_path))
    check_env(RECORDS, {"dataset": "chartqa", "dataset_config": {"root": root}}, seeds=(0, 1))
    env = vista_rl.make_env(RECORDS, dataset="chartqa", dataset_config={"root": root})
    env.reset(seed=0)  # label 37.5
    assert env.step("<think>t</think><answer>36</answer>").info["success"]  # 4% off
    env.reset(seed=0)
    assert not env.step("<think>t</think><answer>35</answer>").info["success"]  # 6.7% off


def test_oracle_solves_synthetic_episodes():
    env = vista_rl.make_env(SYNTHETIC)
    for seed in range(6):
        env.reset(seed=seed)
        result = env.step(env.oracle_response())
        assert result.info["success"] and result.reward == 1.0, (seed, result.info)


def _value_near(words, category):
    label = next(w for w in words if w["text"] == category)
    centre = (label["box"][0] + label["box"][2]) / 2
    numbers = [w for w in words if re.fullmatch(r"\d+(\.\d+)?", w["text"]) and w["box"][3] < label["box"][1]]
    best = min(numbers, key=lambda w: abs((w["box"][0] + w["box"][2]) / 2 - centre))
    return float(best["text"])


@pytest.mark.skipif(shutil.which("tesseract") is None, reason="needs Tesseract")
def test_end_to_end_episode_reads_the_chart_with_ocr_and_computes_with_python():
    """Scripted policy: OCR the chart, find the two bars' value labels, compute the difference with the
    python tool, answer.  Tools run through vista_rl.make_tool as the rollout engine runs them."""
    env = vista_rl.make_env(SYNTHETIC, chart_types=["bar"], question_types=["difference"])
    observation, info = env.reset(seed=5)
    images = list(observation.images)
    context = ToolContext(images=images, metadata=env.tool_context_metadata())
    a, b = [c for c in info["table"]["categories"] if c in observation.text]

    ocr_call = '<think>Read all labels.</think><tool_call>{"name": "ocr", "arguments": {"image": 0}}</tool_call>'
    step = env.step(ocr_call)
    assert step.info["tool_calls"][0]["name"] == "ocr" and not step.done
    call = parse_response(ocr_call).tool_calls[0]
    words = vista_rl.make_tool(call.name)(call.arguments, context).metadata["words"]
    va, vb = _value_near(words, a), _value_near(words, b)

    code = f"print(round(abs({va} - {vb}), 2))"
    python_call = f'<think>{a} is {va}, {b} is {vb}.</think><tool_call>{json.dumps({"name": "python", "arguments": {"code": code}})}</tool_call>'
    step = env.step(python_call)
    assert not step.done and step.info["action_valid"]
    call = parse_response(python_call).tool_calls[0]
    result = vista_rl.make_tool(call.name)(call.arguments, context)
    computed = result.text.split("stdout:\n")[1].split()[0]

    final = env.step(f"<think>The difference is {computed}.</think><answer>{computed}</answer>")
    assert final.info["success"], (final.info, computed, info["answer"])
    assert final.reward == 1.0 and final.info["tool_calls_total"] == 2
