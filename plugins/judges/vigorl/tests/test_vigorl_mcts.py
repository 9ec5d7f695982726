"""MCTS over thought steps with the scripted noisy teacher (a real ModelBackend) on colour-grid
problems with known answers."""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from vista_plugin_vigorl.mcts.search import MctsSettings, Problem, ThoughtSearch
from vista_plugin_vigorl.mcts.steps import FORCE_FINAL, read_step, thought_chat
from vista_plugin_vigorl.mcts.toy import QUESTION, NoisyTeacher, colour_grid
from vista_plugin_vigorl.mcts.tree import TreeNode

import vista_rl
from vista_rl import Chat, Generation, Judge, JudgeResult, ModelBackend, SamplingParams


def problem(seed: int) -> Problem:
    image, answer, _ = colour_grid(seed)
    return Problem(f"grid-{seed}", QUESTION, [image], answer, "Reason with (x, y) points.")


def nodes(node: TreeNode) -> Iterator[TreeNode]:
    yield node
    for child in node.children:
        yield from nodes(child)


def test_running_mean_and_ucb() -> None:
    parent = TreeNode()
    child = TreeNode(parent=parent)
    for reward in (1.0, 0.0, 0.0, 1.0):
        parent.update_value(reward)
    for reward in (1.0, 0.0):
        child.update_value(reward)
    assert (child.value, child.visit_count, parent.value) == (0.5, 2, 0.5)
    assert child.ucb(2.0) == pytest.approx(0.5 + 2.0 * math.sqrt(math.log(5) / 3))


def test_search_finds_correct_chains_more_often_than_sampling_alone() -> None:
    """Known answers: the teacher only answers reliably after looking at the square's cell, so
    outcomes depend on the path.  One sampled chain is right ~30% of the time; the search, which
    spends its budget where the rollouts succeed, finds a correct chain for almost every problem."""
    judge = vista_rl.make_judge("exact")
    search = ThoughtSearch(NoisyTeacher(), judge, MctsSettings.vigorl_run(n_simulations=4, max_depth=6), seed=1)
    problems = [problem(seed) for seed in range(30)]
    searched = sum(search.search(p).correct_rollouts() > 0 for p in problems)
    sampled = sum(search.sample(p, 1)[0].reward >= 1.0 for p in problems)
    assert searched >= 25 and sampled <= 15 and searched > sampled + 10, (searched, sampled)


def test_tree_respects_depth_repeats_and_values() -> None:
    settings = MctsSettings.vigorl_run(n_simulations=8, max_depth=3, rollout_max_steps=3)
    teacher = NoisyTeacher(repeat=0.5, guess_early=0.0, answer_when_seen=0.0)
    result = ThoughtSearch(teacher, vista_rl.make_judge("exact"), settings, seed=4).search(problem(7))
    all_nodes = list(nodes(result.root))
    assert len(all_nodes) > 4 and result.stats.repeated_coords > 0
    for node in all_nodes[1:]:
        assert node.depth <= settings.max_depth
        if node.depth == settings.max_depth:
            assert node.is_terminal and node.answer is not None  # forced answer at max depth
        path_points = [p for step in node.path()[1:-1] for p in read_step(step.thought_text).coordinates]
        assert not set(read_step(node.thought_text).coordinates) & set(path_points)  # no repeated point
        assert 0.0 <= node.value <= 1.0 and node.visit_count >= len(node.rollouts) >= 1
        for rollout in node.rollouts:
            assert rollout.ephemeral_texts[: node.depth] == node.thoughts()
            assert rollout.ephemeral_texts[-1].startswith("<answer>")
            assert len(rollout.ephemeral_texts) - node.depth <= settings.rollout_max_steps
    # every outcome was backed up to the root once: rollouts, plus re-visited terminal leaves
    assert result.root.visit_count == sum(len(n.rollouts) for n in all_nodes) + result.stats.leaf_backups


def test_trees_round_trip_and_searches_are_reproducible() -> None:
    settings = MctsSettings(n_simulations=3)
    judge = vista_rl.make_judge("exact")
    first = ThoughtSearch(NoisyTeacher(), judge, settings, seed=9).search(problem(2)).root.to_dict()
    again = ThoughtSearch(NoisyTeacher(), judge, settings, seed=9).search(problem(2)).root.to_dict()
    assert first == again
    assert TreeNode.from_dict(first).to_dict() == first


class NeverRight(Judge):
    name = "never"

    def score(self, prediction: Any, reference: Any, **context: Any) -> JudgeResult:
        return JudgeResult(0.0)


def test_the_judge_decides_the_outcomes() -> None:
    result = ThoughtSearch(NoisyTeacher(), NeverRight(), MctsSettings(n_simulations=3), seed=0).search(problem(1))
    assert result.correct_rollouts() == 0 and result.root.value == 0.0 and result.root.visit_count > 0


class FlakyTeacher(ModelBackend):
    """Every other chat fails (the exception in its place, as the backend contract allows); the
    others get malformed text or a real step from the noisy teacher."""

    def __init__(self) -> None:
        self.inner = NoisyTeacher()
        self.count = 0

    def generate(self, chats: Sequence[Chat], params: SamplingParams) -> list[Any]:
        out: list[Any] = []
        for chat, replies in zip(chats, self.inner.generate(chats, params), strict=True):
            self.count += 1
            if self.count % 2:
                out.append(RuntimeError("server hiccup"))
            else:
                out.append(replies if self.count % 3 else [Generation("no tags at all")] * params.n)
            del chat
        return out


def test_failing_and_malformed_teacher_replies_never_end_the_search() -> None:
    result = ThoughtSearch(FlakyTeacher(), vista_rl.make_judge("exact"), MctsSettings(n_simulations=5),
                           seed=0).search(problem(3))
    assert result.stats.malformed > 0 and result.root.visit_count >= 1


def test_a_teacher_that_never_follows_the_format_gives_a_dead_root() -> None:
    class Mute(ModelBackend):
        def generate(self, chats: Sequence[Chat], params: SamplingParams) -> list[list[Generation]]:
            return [[Generation("...")] * params.n for _ in chats]

    result = ThoughtSearch(Mute(), vista_rl.make_judge("exact"), MctsSettings(n_simulations=3)).search(problem(0))
    assert result.root.is_terminal and result.root.value == 0.0 and not result.root.children


def test_thought_chat_shape() -> None:
    image, _, _ = colour_grid(0)
    chat = thought_chat("sys", QUESTION, [image], ["<think> a (1, 2) </think>"], force_final=True)
    assert [m.role for m in chat] == ["system", "user", "assistant", "user"]
    assert chat[1].content.startswith("<image>\n") and chat[1].images == [image]
    assert chat[-1].content == FORCE_FINAL
    assert "ONE reasoning step" in chat[0].content
    first = thought_chat("sys", QUESTION, [image], [], force_final=False, thought_number_prompt=False)
    assert [m.role for m in first] == ["system", "user"] and first[0].content == "sys"
    assert read_step("<answer> B. left </answer>").answer == "left"
    assert read_step("<think></think>").error


class Recording(NoisyTeacher):
    def __init__(self) -> None:
        super().__init__()
        self.temperatures: list[float] = []

    def generate(self, chats: Sequence[Chat], params: SamplingParams) -> list[list[Generation]]:
        self.temperatures += [params.temperature] * len(chats)
        return super().generate(chats, params)


def test_rollout_switches() -> None:
    teacher = Recording()
    settings = MctsSettings(n_simulations=3, first_rollout_no_sample=True, rollout_no_thinking=True)
    result = ThoughtSearch(teacher, vista_rl.make_judge("exact"), settings).search(problem(5))
    assert 0.0 in teacher.temperatures and 1.0 in teacher.temperatures  # greedy first rollouts, sampled rest
    rollouts = [(node, r) for node in nodes(result.root) for r in node.rollouts]
    assert rollouts
    for node, rollout in rollouts:  # no thinking: the rollout answers straight away
        assert len(rollout.ephemeral_texts) == node.depth + (0 if node.is_terminal else 1)
