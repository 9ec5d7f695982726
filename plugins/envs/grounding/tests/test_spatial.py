import numpy as np
import pytest
from vista_plugin_grounding.spatial import QUESTION_TYPES, generate_item
from vista_plugin_scenekit.shapes import COLOURS

import vista_rl
from vista_rl_sdk import check_env

ENV = "grounding/spatial-v0"


@pytest.mark.parametrize("config", [{}, {"prompt_format": "no_think", "question_types": ["perspective"]}])
def test_conformance(config):
    check_env(ENV, config, seeds=(0, 1))


def test_items_are_seeded_and_objects_are_where_the_info_says():
    a, b = generate_item(11), generate_item(11)
    assert a.image.tobytes() == b.image.tobytes() and a.question == b.question
    pixels = np.asarray(a.image).astype(int)
    for obj in a.objects:
        colour = obj.name.split()[0]
        ys, xs = np.nonzero(np.abs(pixels - COLOURS[colour]).sum(axis=2) < 10)
        assert xs.min() >= obj.box[0] and xs.max() <= obj.box[2] and ys.min() >= obj.box[1] and ys.max() <= obj.box[3]


@pytest.mark.parametrize("kind", QUESTION_TYPES)
def test_answers_follow_the_geometry(kind):
    for seed in range(15):
        item = generate_item(seed, kinds=(kind,))
        answer = item.options[item.answer_index]
        a = item.involved[0]
        if kind == "left_right":
            assert (a.centre[0] < item.involved[1].centre[0]) == (answer == "left")
        elif kind == "above_below":
            assert (a.centre[1] < item.involved[1].centre[1]) == (answer == "above")
        elif kind == "closest":
            others = [o for o in item.objects if o is not a]
            nearest = min(others, key=lambda o: np.hypot(o.centre[0] - a.centre[0], o.centre[1] - a.centre[1]))
            assert answer == f"the {nearest.name}"
        elif kind == "larger":
            bigger = max(item.involved, key=lambda o: o.area)
            assert answer == f"the {bigger.name}"
        else:
            b, c = item.involved[1], item.involved[2]
            d, v = np.subtract(b.centre, a.centre), np.subtract(c.centre, a.centre)
            assert (d[0] * v[1] - d[1] * v[0] > 0) == (answer == "right")


def test_reward_is_half_accuracy_half_grounded_format():
    env = vista_rl.make_env(ENV)
    _, info = env.reset(seed=3)
    right = info["options"][info["answer"]]
    wrong = next(o for o in info["options"] if o != right)
    x, y = info["objects"][0]["centre"]
    cases = {
        f"<think>The {info['objects'][0]['name']} is at ({x}, {y}).</think><answer>{right}</answer>": 1.0,
        f"<think>I just know it.</think><answer>{right}</answer>": 0.5,
        f"<think>At ({x}, {y}) there is something.</think><answer>{wrong}</answer>": 0.5,
        f"<think>Hmm at (1.5, 2.5).</think><answer>{right}</answer>": 0.5,  # non-integer point: no coordinate
        f"<think>nothing</think><answer>{wrong}</answer>": 0.0,
    }
    for text, expected in cases.items():
        env.reset(seed=3)
        result = env.step(text)
        assert result.done and result.reward == pytest.approx(expected), (text, result.info)
    env.reset(seed=3)
    malformed = env.step(f"<answer>{right}</answer> trailing <think>")  # no think before the answer
    assert malformed.reward == 0.0 and not malformed.info["format_ok"]


def test_oracle_solves_every_question_type_with_grounded_points():
    env = vista_rl.make_env(ENV)
    for seed in range(20):
        env.reset(seed=seed)
        result = env.step(env.oracle_response())
        assert result.info["success"] and result.info["grounded"] and result.reward == pytest.approx(1.0)


def test_envs_judges_and_datasets_are_registered_by_this_plugin():
    host = vista_rl.host()
    for kind, ids in {"envs": ["grounding/spatial-v0", "grounding/gui-v0", "grounding/screenspot-v0",
                               "grounding/web-action-v0"],
                      "judges": ["grounding/click"],
                      "datasets": ["sat2", "blink", "screenspot_v2", "screenspot_pro", "vstar_bench"]}.items():
        for item in ids:
            assert host.spec(kind, item).distribution == "vista-plugin-grounding", (kind, item)
