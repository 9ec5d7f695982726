"""``vista audit rewards`` (issue 33, item 5): adversarial scripted policies against every env's reward.

Three parts: the audit over every registered env with its default config finds no hole; with the old
``observe_tool_turn`` rule restored (errored, over-budget and off-image zoom calls counted, the bonus
uncapped, as before commit a5b8bc0) it finds the zoom-spam hole, on the engine path, and exits 1;
and the audit's own rules (what is a hole, what is judged, an env that raises) on small envs made
for the purpose.
"""

from __future__ import annotations

import importlib.util
import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from PIL import Image

import vista_rl
from vista_rl import Observation, StepResult, ToolCallRecord
from vista_rl.audit import (
    EXIT_HOLE,
    EXIT_INCOMPLETE,
    EXIT_OK,
    Episode,
    adversaries_named,
    all_adversaries,
    audit_rewards,
)
from vista_rl.audit.adversaries import SeedTask
from vista_rl.audit.report import judge_row
from vista_rl.audit.tool_calls import ToolTemplate, points_inside, points_outside
from vista_rl.cli.main import build_cli
from vista_rl.config import RolloutSection

ROOT = Path(__file__).resolve().parents[1]
#: Wrapper ids the audit is not run on here, and why.
SKIPPED = {
    "ray": "starts a local Ray cluster (seconds, beyond this test's budget); the env it wraps is audited directly",
    "ray/*": "starts a local Ray cluster (seconds, beyond this test's budget); the envs it wraps are audited directly",
    "remote": "needs an env server; the server's /observe bounds have their own tests in plugins/servers/envserver",
    "remote/*": "needs an env server; the server's /observe bounds have their own tests in plugins/servers/envserver",
}
#: Where the fuzz benchmark's config cannot be judged: gymnasium's FrozenLake-v1 is slippery by default,
#: so its oracle solves no seed within the audit's turns; the same map on firm ice can be.
CONFIG_OVERRIDES: dict[str, dict[str, Any]] = {
    "gymnasium/make-v0": {"gym_id": "FrozenLake-v1", "gym_kwargs": {"is_slippery": False}},
}
#: Seeds per env: one keeps the whole sweep within the CI budget; the slippery lake's oracle slips
#: on seed 0 and solves seed 4.
SEEDS: dict[str, list[int]] = {"frozenlake/frozenlake-slippery-v0": [4]}
#: Holes the audit found in envs and judges outside its own scope, reported for a fix; strict, so
#: the mark must go when they are fixed.
KNOWN_HOLES: dict[str, str] = {}


def _fuzz_benchmark() -> Any:
    spec = importlib.util.spec_from_file_location("fuzz_adversarial", ROOT / "benchmarks" / "fuzz_adversarial.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def env_configs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The fuzz benchmark's configs for ids that need one (records written to a temp dir)."""
    return _fuzz_benchmark().env_configs(tmp_path_factory.mktemp("audit-data"), None)


def _env_ids() -> list[Any]:
    params = []
    for env_id in vista_rl.host().registry("envs").ids():
        marks = [pytest.mark.skip(reason=SKIPPED[env_id])] if env_id in SKIPPED else []
        if env_id in KNOWN_HOLES:
            marks.append(pytest.mark.xfail(reason=KNOWN_HOLES[env_id], strict=True))
        params.append(pytest.param(env_id, marks=marks, id=env_id))
    return params


@pytest.mark.parametrize("env_id", _env_ids())
def test_no_registered_env_has_a_reward_hole(env_id: str, env_configs: dict[str, Any]) -> None:
    """Every adversary, both paths, 10 turns an episode (room for spam, retries and the games' oracles;
    the games' own 100-step limit is a known hole, the xfail test below)."""
    make_id, config = env_configs.get(env_id) or (env_id, {})
    config = CONFIG_OVERRIDES.get(env_id, config)
    report = audit_rewards(make_id, config, rollout=RolloutSection(max_turns=10), seeds=SEEDS.get(env_id, [0]))
    described = [f"{f.adversary} ({f.path}, seed {f.seed}): {f.message}" for f in report.holes]
    assert not report.holes, described
    assert not report.errors, [f"{e.policy} ({e.path}): {e.error}" for e in report.errors]
    assert report.exit_code == EXIT_OK, report.notes
    assert {row.path for row in report.rows} == {"step", "engine"}


@pytest.mark.parametrize("env_id", ["frozenlake/frozenlake-v0", "sokoban/sokoban-v0", "navigation/navigation-v0"])
def test_the_games_format_reward_cannot_be_farmed_over_their_own_turn_limit(env_id: str) -> None:
    """VAGEN's per-turn format reward, uncapped, paid a policy that walks into a wall for the game's
    own 100-step limit 50 (FrozenLake), 40 (Sokoban), 15 (navigation) against ~11 for the oracle;
    ``format_reward_turns`` (5, VAGEN's horizon) bounds it."""
    env = vista_rl.make_env(env_id)
    limit = env.turn_limit()
    env.close()
    report = audit_rewards(env_id, rollout=RolloutSection(max_turns=limit), seeds=[0], paths=["step"],
                           adversaries=adversaries_named(["same-wrong-every-turn"]))
    assert not report.holes, [finding.message for finding in report.holes]


def test_the_cli_plays_the_turn_budget_of_a_run() -> None:
    """``rollout.max_turns`` when set, else the env's own limit (as ``vista eval`` and ``vista train``)."""
    args = ["grounding/zoom-spot-v0", "--seeds", "1", "--adversary", "empty", "--path", "step", "--json"]
    own = json.loads(_audit_cli(*args).stdout)
    assert own["max_turns"] == vista_rl.make_env("grounding/zoom-spot-v0").turn_limit()
    assert json.loads(_audit_cli(*args, "--set", "rollout.max_turns=2").stdout)["max_turns"] == 2


# ------------------------------------------------------------------ the old observe_tool_turn rule
def _old_observe_tool_turn(self: Any, response: str, calls: Sequence[ToolCallRecord]) -> None:
    """``ToolQAEnv.observe_tool_turn`` before a5b8bc0: every call of an offered tool with an argument
    object counted, errored or past the image budget."""
    from vista_rl import parse_response

    if self.done or self.problem is None:
        return
    self.responses.append(parse_response(response if isinstance(response, str) else str(response),
                                         self.response_format))
    for call in calls:
        if call.name in self.tools and isinstance(call.arguments, dict):
            self.tool_calls.append({"name": call.name, "arguments": call.arguments})
            self.image_budget_used += max(int(call.num_images), 0)


def _old_call_coordinates(self: Any) -> list[tuple[float, float]]:
    """``ToolQAEnv.call_coordinates`` before a5b8bc0: every coordinate, on the image or off it."""
    points: list[tuple[float, float]] = []
    for call in self.tool_calls:
        coordinate = (call.get("arguments") or {}).get("coordinate")
        if isinstance(coordinate, (list, tuple)) and len(coordinate) == 2:
            try:
                points.append((float(coordinate[0]), float(coordinate[1])))
            except (TypeError, ValueError):
                continue
    return points


def _old_format_bonus(unique_count: int, cap: int = 0, per_extra: float = 0.2) -> float:
    """The grounded format bonus before a5b8bc0: uncapped."""
    return 1.0 + per_extra * max(0, unique_count - 1)


def _audit_cli(*args: str) -> Any:
    return CliRunner().invoke(build_cli(), ["audit", "rewards", *args], env={"COLUMNS": "80"})


def test_the_audit_finds_the_zoom_spam_hole_of_the_old_observe_tool_turn(monkeypatch: pytest.MonkeyPatch) -> None:
    from vista_plugin_grounding import grounded
    from vista_plugin_vqa.base import ToolQAEnv

    args = ["grounding/zoom-spot-v0", "--seeds", "2", "--set", "env.config.grounding_reward=multi_turn"]
    now = _audit_cli(*args)
    assert now.exit_code == EXIT_OK, now.output

    monkeypatch.setattr(ToolQAEnv, "observe_tool_turn", _old_observe_tool_turn)
    monkeypatch.setattr(ToolQAEnv, "call_coordinates", _old_call_coordinates)
    monkeypatch.setattr(grounded, "format_bonus", _old_format_bonus)
    old = _audit_cli(*args)
    assert old.exit_code == EXIT_HOLE, old.output
    assert "HOLE zoom-spam-off-image (engine path" in " ".join(old.output.split())
    assert max(len(line) for line in old.output.splitlines()) <= 80

    report = json.loads(_audit_cli(*args, "--json").stdout)
    holes = {(hole["adversary"], hole["path"]) for hole in report["holes"]}
    assert ("zoom-spam-off-image", "engine") in holes
    assert all(path == "engine" for _, path in holes)  # env.step keeps the image budget: no hole there
    spam = next(hole for hole in report["holes"] if hole["adversary"] == "zoom-spam-off-image")
    assert spam["reward"] > 3 * spam["oracle_reward"]


# ------------------------------------------------------------------------- the audit's own rules
def _task(**changes: Any) -> SeedTask:
    values: dict[str, Any] = {"seed": 0, "right": "B", "decoys": ("A", "C", "D"), "options": ("A", "B", "C", "D"),
                              "reply_prefix": "<think>x</think><answer>", "reply_suffix": "</answer>",
                              "tools": ("crop_zoom",), "tool_template": ToolTemplate("crop_zoom", {"coordinate": [5, 5],
                                                                                                   "size": 64}),
                              "image_size": (100, 60)}
    values.update(changes)
    return SeedTask(**values)


def test_hedges_hide_the_right_answer_between_wrong_ones() -> None:
    """An env that reads one answer (the first or the last) must see a wrong one in every hedge."""
    task = _task()
    for adversary in all_adversaries():
        if not adversary.hedges:
            continue
        reply = adversary.play(task, 0)
        assert "B" in reply, adversary.name
        answers = [part for part in reply.replace("</answer>", "<answer>").split("<answer>")[1:] if part.strip()]
        for separator in (" or ", ", "):
            answers = [piece for part in answers for piece in part.split(separator)]
        assert answers[0].strip() != "B" and answers[-1].strip() != "B", (adversary.name, reply)


def test_spam_calls_land_where_they_say() -> None:
    inside, outside = points_inside((100, 60), 40), points_outside((100, 60), 40)
    assert len(set(inside)) == len(inside) and all(0 <= x < 100 and 0 <= y < 60 for x, y in inside)
    assert len(set(outside)) == 40 and not any(0 <= x < 100 and 0 <= y < 60 for x, y in outside)
    reply = adversaries_named(["zoom-spam-off-image"])[0].play(_task(), 0)
    calls = vista_rl.parse_response(reply).tool_calls
    assert len(calls) == 40 and all(call.error is None and (call.arguments or {}).get("size") == 64 for call in calls)
    assert adversaries_named(["zoom-spam-off-image"])[0].play(_task(), 1) == "<think>x</think><answer>A</answer>"


def _episode(reward: float, success: bool, seed: int = 0, error: str | None = None) -> Episode:
    return Episode("x", "step", seed, reward, success, 1, error)


def test_a_hole_is_the_oracles_reward_without_solving_on_a_seed_the_oracle_solved() -> None:
    plain, hedge = adversaries_named(["repeat-wrong"])[0], adversaries_named(["hedge-or"])[0]
    oracle = {0: _episode(1.0, True, 0), 1: _episode(1.0, False, 1)}
    answers = {0: True, 1: True}
    row = judge_row(plain, "step", [_episode(1.0, False, 0), _episode(2.0, False, 1)], oracle, answers)
    assert [hole.seed for hole in row.holes] == [0]  # seed 1: the oracle failed, nothing to reach
    assert not judge_row(plain, "step", [_episode(0.999, False, 0)], oracle, answers).holes
    accepted = judge_row(hedge, "step", [_episode(1.0, True, 0)], oracle, answers)
    assert accepted.holes and accepted.solved == 0  # a hedge the env accepted is no solve
    cheaper = judge_row(hedge, "step", [_episode(0.5, True, 0)], oracle, answers)
    assert not cheaper.holes and [w.kind for w in cheaper.warnings] == ["hedge_accepted"]
    game = judge_row(hedge, "step", [_episode(1.0, True, 0)], oracle, {0: False})
    assert not game.holes and game.solved == 1  # a game's success is the game's own verdict


class FarmEnv(vista_rl.Env):
    """One question ("what is 2+2?"); ``mode`` picks a reward rule: ``fair`` pays 1 for the right
    answer, ``any_of`` accepts any answer that names 4, ``per_word`` pays 0.01 a word, ``raises``
    raises on long replies."""

    def __init__(self, mode: str = "fair") -> None:
        self.mode = mode

    def reset(self, seed: int | None = None) -> tuple[Observation, dict[str, Any]]:
        return Observation("<image>What is 2+2?", [Image.new("RGB", (32, 32))]), {}

    def step(self, action: str) -> StepResult:
        answer = vista_rl.parse_response(action).answer or ""
        if self.mode == "raises" and len(action) > 10_000:
            raise RuntimeError("too long")
        named = re.split(r"\s*(?:,| or )\s*", answer.strip())
        right = "4" in named if self.mode == "any_of" else answer.strip() == "4"
        reward = min(len(action.split()) / 100, 5.0) if self.mode == "per_word" else float(right)
        return StepResult(Observation("done"), reward, True, False, {"success": right})

    def oracle_response(self) -> str:
        return "<answer>4</answer>"


class FarmPlugin:
    @vista_rl.hookimpl
    def register_envs(self, register: vista_rl.RegisterEnv) -> None:
        register("audittest/farm-v0", FarmEnv, description="an env with a configurable reward hole")


@pytest.mark.parametrize(("mode", "finder"), [("any_of", "hedge-or"), ("per_word", "long-reply")])
def test_the_audit_finds_holes_on_both_paths(mode: str, finder: str, vista_plugin: Any) -> None:
    vista_plugin(FarmPlugin(), name="audittest")
    fair = audit_rewards("audittest/farm-v0", {"mode": "fair"}, seeds=[0])
    assert fair.exit_code == EXIT_OK and not fair.warnings
    report = audit_rewards("audittest/farm-v0", {"mode": mode}, seeds=[0])
    assert report.exit_code == EXIT_HOLE
    assert {(hole.adversary, hole.path) for hole in report.holes} >= {(finder, "step"), (finder, "engine")}


def test_an_env_that_raises_is_reported_not_raised(vista_plugin: Any) -> None:
    vista_plugin(FarmPlugin(), name="audittest")
    report = audit_rewards("audittest/farm-v0", {"mode": "raises"}, seeds=[0, 1])
    failing = {(episode.policy, episode.path) for episode in report.errors}
    assert ("long-reply", "step") in failing and ("long-reply", "engine") in failing
    assert not report.holes and report.exit_code == EXIT_INCOMPLETE
    row = next(row for row in report.rows if row.adversary == "long-reply" and row.path == "engine")
    assert row.verdict == "error" and "too long" in (row.errors[0].error or "")
    assert next(row for row in report.rows if row.adversary == "empty").verdict == "ok"


def test_engine_reflection_is_played_and_a_late_right_answer_is_reported() -> None:
    """With ``rollout.reflection`` the engine resets the env after a wrong answer; the retry adversary's
    turns run on across tries, and its right third answer earns the oracle's reward: a warning (retries
    the reward does not discount), not a hole (it solved)."""
    rollout = RolloutSection(max_turns=4, reflection=True, reflection_attempts=3)
    report = audit_rewards("count-objects/count-objects-v0", seeds=[0], rollout=rollout,
                           adversaries=adversaries_named(["retry-then-right", "retry-wrong"]))
    rows = {(row.adversary, row.path): row for row in report.rows}
    late = rows[("retry-then-right", "engine")]
    assert late.solved == 1 and [w.kind for w in late.warnings] == ["late_answer_full_reward"]
    assert rows[("retry-then-right", "step")].solved == 0  # env.step: the first wrong answer ends it
    assert rows[("retry-wrong", "engine")].episodes[0].turns == 3 and not report.holes
    assert report.exit_code == EXIT_OK


def test_a_users_converted_records(tmp_path: Path) -> None:
    """``--set env.config.records_path=...``: a user's records, multiple choice and short answer."""
    rows = []
    for index, (question, answer, choices) in enumerate([("Which colour?", 1, ["red", "green", "blue"]),
                                                         ("How many dots?", "3", None)]):
        image = tmp_path / f"{index}.png"
        Image.new("RGB", (48, 40), (40 * index, 90, 30)).save(image)
        rows.append({"id": str(index), "dataset": "mine", "images": [str(image)], "question": question, "answer": answer,
                     "choices": choices, "task_type": "multiple_choice" if choices else "short_answer"})
    records = tmp_path / "records.jsonl"
    records.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    result = _audit_cli("vqa/records-v0", "--seeds", "2", "--set", f"env.config.records_path={records}",
                        "--set", "env.config.tools=[crop_zoom]", "--json")
    assert result.exit_code == EXIT_OK, result.output
    report = json.loads(result.stdout)
    assert report["env_config"]["records_path"] == str(records)
    assert report["oracle"]["engine"]["judged_seeds"] == [0, 1]
    assert any(row["adversary"] == "zoom-spam-one-turn" for row in report["adversaries"])


def test_the_cli_refuses_an_unknown_adversary_and_lists_them() -> None:
    bad = _audit_cli("oddshape/odd-colour-v0", "--adversary", "nope")
    assert bad.exit_code == 2 and "no adversary 'nope'" in bad.output
    listed = _audit_cli("--list")
    assert listed.exit_code == 0 and all(adversary.name in listed.output for adversary in all_adversaries())
    typo = _audit_cli("vqa/records-v0", "--set", "env.config.records_path=/nonexistent/records.jsonl")
    assert typo.exit_code == 1 and "could not create env vqa/records-v0" in typo.output
