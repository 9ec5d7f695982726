"""Monte-Carlo tree search over thought steps (ViGoRL's warm-start data generator).

Each simulation: **Select** down the tree by UCB (``value + c·sqrt(ln(N_parent+1)/(N_child+1))``)
to a leaf; a terminal leaf is judged (once) and backed up; otherwise **Expand** it with
``num_children_per_expand`` single thoughts sampled from the teacher (forced to answer at
``max_depth``; children that reuse a coordinate of their path are skipped); then for every new child
run ``n_rollouts_per_node`` ephemeral **rollouts** (continuations kept with the node, not in the
tree, at most ``rollout_max_steps`` steps, the last one forced to answer) judged **0/1** by any
registered judge; **Backprop** each outcome as a running mean along the path.  No value model.

The teacher is any :class:`vista_rl.ModelBackend` (transformers, vLLM, an OpenAI-compatible server,
the scripted noisy teacher in tests), the judge any :class:`vista_rl.Judge`.
"""

from __future__ import annotations

import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from PIL import Image
from pydantic import BaseModel, ConfigDict, Field
from vista_plugin_vigorl.mcts.steps import read_step, thought_chat
from vista_plugin_vigorl.mcts.tree import Rollout, TreeNode

from vista_rl import Judge, ModelBackend, SamplingParams


class MctsSettings(BaseModel):
    """Search settings.  The field defaults are ViGoRL's ``MonteCarloTreeSearch`` defaults;
    :meth:`vigorl_run` gives the settings its data-generation script used."""

    model_config = ConfigDict(extra="forbid")

    n_simulations: int = Field(10, ge=1)
    c_puct: float = Field(1.4, ge=0.0)
    max_depth: int = Field(5, ge=1, description="thought steps; the step at this depth must answer")
    rollout_max_steps: int = Field(5, ge=1)
    n_rollouts_per_node: int = Field(2, ge=1)
    num_children_per_expand: int = Field(3, ge=1)
    avoid_repeat_coords: bool = True
    rollout_no_thinking: bool = Field(False, description="rollouts answer at once instead of thinking on")
    first_rollout_no_sample: bool = Field(False, description="each node's first rollout is greedy")
    temperature: float = Field(1.0, ge=0.0)
    top_p: float = Field(1.0, gt=0.0, le=1.0)
    max_new_tokens: int = Field(512, ge=1)
    thought_number_prompt: bool = Field(True, description="add the one-step-per-response instructions")

    @classmethod
    def vigorl_run(cls, **overrides: Any) -> MctsSettings:
        """``run_mcts_qwen72b.sh``: depth 10, 8 simulations, c 2.0, 2 rollouts, 3 children, T=1."""
        values: dict[str, Any] = {"max_depth": 10, "n_simulations": 8, "c_puct": 2.0, "n_rollouts_per_node": 2,
                                  "num_children_per_expand": 3, "temperature": 1.0, "top_p": 1.0,
                                  "max_new_tokens": 512}
        values.update(overrides)
        return cls(**values)


@dataclass
class Problem:
    """One question to search: its images (as the teacher sees them) and the answer to judge against."""

    id: str
    question: str
    images: list[Image.Image]
    true_answer: Any
    system_prompt: str


@dataclass
class SearchStats:
    teacher_calls: int = 0
    replies: int = 0
    malformed: int = 0
    repeated_coords: int = 0
    judge_errors: int = 0
    leaf_backups: int = 0  # backups of terminal leaves and dead ends (not rollouts)
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class SearchResult:
    root: TreeNode
    stats: SearchStats = field(default_factory=SearchStats)

    def correct_rollouts(self) -> int:
        def count(node: TreeNode) -> int:
            return sum(r.reward >= 1.0 for r in node.rollouts) + sum(count(c) for c in node.children)
        return count(self.root)


def outcome(judge: Judge, answer: str | None, reference: Any) -> float:
    """ViGoRL's 0/1 outcome: 1 when the judge gives its full score."""
    if answer is None:
        return 0.0
    result = judge.score(answer, reference)
    return 1.0 if result.score >= getattr(judge, "max_score", 1.0) - 1e-9 else 0.0


@dataclass
class _Walk:
    """A rollout in progress."""

    node: TreeNode
    greedy: bool
    thoughts: list[str] = field(default_factory=list)
    steps: int = 0


class ThoughtSearch:
    """MCTS for one problem at a time; ``seed`` makes the teacher's sampling seeds reproducible."""

    def __init__(self, teacher: ModelBackend, judge: Judge, settings: MctsSettings | None = None,
                 seed: int = 0) -> None:
        self.teacher = teacher
        self.judge = judge
        self.settings = settings or MctsSettings()
        self.seed = seed

    # -- teacher -----------------------------------------------------------------------------
    def _generate(self, problem: Problem, stats: SearchStats, rng: random.Random,
                  requests: Sequence[tuple[list[str], bool]], n: int, greedy: bool = False) -> list[list[str]]:
        """Replies for each ``(previous thoughts, force_final)``; a chat the backend failed on gets
        empty replies (malformed), so one bad chat never ends the search."""
        if not requests:
            return []
        s = self.settings
        chats = [thought_chat(problem.system_prompt, problem.question, problem.images, previous, force,
                              s.thought_number_prompt) for previous, force in requests]
        params = SamplingParams(temperature=0.0 if greedy else s.temperature, top_p=s.top_p,
                                max_tokens=s.max_new_tokens, n=n, seed=rng.randrange(2**31))
        outputs = self.teacher.generate(chats, params)
        stats.teacher_calls += 1
        replies: list[list[str]] = []
        for output in outputs:
            texts = [] if isinstance(output, BaseException) else [g.text for g in output]
            texts += [""] * (n - len(texts))
            stats.replies += n
            replies.append(texts[:n])
        return replies

    def _judge(self, answer: str | None, problem: Problem, stats: SearchStats) -> float:
        try:
            return outcome(self.judge, answer, problem.true_answer)
        except Exception:  # noqa: BLE001 - a judge failure scores 0 and is counted
            stats.judge_errors += 1
            return 0.0

    @staticmethod
    def _backprop(node: TreeNode, reward: float) -> None:
        for step in node.path():
            step.update_value(reward)

    # -- the four phases ---------------------------------------------------------------------
    def _select(self, root: TreeNode) -> TreeNode:
        node = root
        while node.children and not node.is_terminal:
            node = max(node.children, key=lambda child: child.ucb(self.settings.c_puct))
        return node

    def _expand(self, node: TreeNode, problem: Problem, stats: SearchStats, rng: random.Random) -> list[TreeNode]:
        force = node.depth + 1 >= self.settings.max_depth
        replies = self._generate(problem, stats, rng, [(node.thoughts(), force)],
                                 self.settings.num_children_per_expand)[0]
        children: list[TreeNode] = []
        for reply in replies:
            step = read_step(reply)
            if step.error or (force and not step.is_answer):
                stats.malformed += 1
                continue
            if (self.settings.avoid_repeat_coords and not step.is_answer
                    and any(point in node.used_coords for point in step.coordinates)):
                stats.repeated_coords += 1
                continue
            child = TreeNode(step.text, node.depth + 1, parent=node,
                             used_coords=node.used_coords + step.coordinates,
                             is_terminal=step.is_answer, answer=step.answer)
            node.children.append(child)
            children.append(child)
        return children

    def _rollouts(self, children: list[TreeNode], problem: Problem, stats: SearchStats,
                  rng: random.Random) -> None:
        walks: list[_Walk] = []
        for child in children:
            if child.is_terminal:
                child.reward = self._judge(child.answer, problem, stats)
                child.rollouts.append(Rollout(child.thoughts(), child.answer, child.reward))
                self._backprop(child, child.reward)
            else:
                walks += [_Walk(child, greedy=self.settings.first_rollout_no_sample and k == 0)
                          for k in range(self.settings.n_rollouts_per_node)]
        for walk, rollout in zip(walks, self._walk_each(walks, problem, stats, rng), strict=True):
            walk.node.rollouts.append(rollout)
            self._backprop(walk.node, rollout.reward)

    def _walk_each(self, walks: list[_Walk], problem: Problem, stats: SearchStats,
                   rng: random.Random) -> list[Rollout]:
        """Advance all walks in lock step (one batched teacher call per step and temperature);
        the rollouts come back in the order of ``walks``."""
        slots: dict[int, Rollout] = {}
        s = self.settings
        active = list(walks)
        while active:
            for walk in active:
                walk.steps += 1
            still: list[_Walk] = []
            for greedy in (True, False):
                group = [w for w in active if w.greedy == greedy]
                requests = [(w.node.thoughts() + w.thoughts,
                             s.rollout_no_thinking or w.steps >= s.rollout_max_steps) for w in group]
                replies = self._generate(problem, stats, rng, requests, 1, greedy=greedy)
                for walk, (_, forced), reply in zip(group, requests, replies, strict=True):
                    step = read_step(reply[0])
                    if step.is_answer or step.error or forced:
                        if step.error or not step.is_answer:
                            stats.malformed += 1
                        reward = self._judge(step.answer, problem, stats)
                        texts = walk.node.thoughts() + walk.thoughts + [
                            step.text if step.is_answer else "<answer>  </answer>"]
                        slots[id(walk)] = Rollout(texts, step.answer, reward)
                    else:
                        walk.thoughts.append(step.text)
                        still.append(walk)
            active = still
        return [slots[id(w)] for w in walks]

    # -- public ------------------------------------------------------------------------------
    def simulate(self, root: TreeNode, problem: Problem, stats: SearchStats, rng: random.Random) -> None:
        """One Select -> (judge terminal | Expand -> Rollouts) -> Backprop pass."""
        leaf = self._select(root)
        if leaf.is_terminal:
            if leaf.reward is None:
                leaf.reward = self._judge(leaf.answer, problem, stats)
            self._backprop(leaf, leaf.reward)
            stats.leaf_backups += 1
            return
        children = self._expand(leaf, problem, stats, rng)
        if not children:  # every reply was malformed or repeated a point: a dead end scoring 0
            leaf.is_terminal, leaf.reward = True, 0.0
            self._backprop(leaf, 0.0)
            stats.leaf_backups += 1
            return
        self._rollouts(children, problem, stats, rng)

    def search(self, problem: Problem) -> SearchResult:
        rng = random.Random(f"{self.seed}:{problem.id}")
        result = SearchResult(TreeNode())
        started = time.perf_counter()
        for _ in range(self.settings.n_simulations):
            self.simulate(result.root, problem, result.stats, rng)
        result.stats.seconds = time.perf_counter() - started
        return result

    def sample(self, problem: Problem, count: int = 1) -> list[Rollout]:
        """Sampling alone (the baseline search is measured against): ``count`` chains straight from
        the root, each up to ``max_depth`` steps, the last one forced to answer."""
        rng = random.Random(f"{self.seed}:{problem.id}:sample")
        root = TreeNode()
        walks = [_Walk(root, greedy=False) for _ in range(count)]
        limited = self.settings.model_copy(update={"rollout_max_steps": self.settings.max_depth})
        saved, self.settings = self.settings, limited
        try:
            return self._walk_each(walks, problem, SearchStats(), rng)
        finally:
            self.settings = saved
