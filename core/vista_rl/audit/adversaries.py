"""The adversaries of the reward audit: scripted policies that try to earn reward without solving.

Each adversary is a function from what the audit learnt about one seed (a :class:`SeedTask`: the
oracle's answer, answers the env judges wrong, the env's options or actions, its reply format, a
tool call it accepts, the image size) and the turn number to a reply.  None of them looks at the
observation: a reward one of them reaches without solving is a reward a policy can farm, and RL
optimises exactly that.

The families, as issue 33 lists them:

- hedged and repeated answers: the right answer between wrong ones ("D or R or D", every option at
  once, several formats at once), one wrong answer repeated;
- tool-call spam: many calls in one turn, many over turns, the same call again and again, calls off
  the image, calls that error;
- length: an empty reply, a very long one, one with no tags;
- format tricks: nested, unclosed and repeated ``<answer>`` parts, points spammed into ``<think>``;
- retries: a different wrong answer every turn (env-side answer attempts, engine reflection), and
  the right answer only after wrong ones.

A hedge puts the right answer neither first nor last, so an env that reads one answer (the first
or the last) judges a wrong one; only an env that accepts *any* of several answers is fooled, and
then its success is not a solve (``Adversary.hedges``).  Games (envs that declare ``action_names``)
take a reply as moves: there a success is always the game's own verdict.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from vista_rl.audit.tool_calls import ToolTemplate, errored_calls, points_inside, points_outside

#: Filler of the long replies: about 60,000 characters.
LONG_TEXT = "Let me look again at every part of the image. " * 1300
#: Calls in one spam turn: past the rollout engine's per-turn cap (8), so some come back as errors.
SPAM_CALLS = 40
#: Turns of tool calls before a spam adversary answers.
SPAM_TURNS = 3


@dataclass(frozen=True)
class SeedTask:
    """What an adversary may use about one seed: the audit learnt it from the env and its oracle.

    ``right`` is the oracle's answer (the text of its ``<answer>``); ``decoys`` are answers the env
    judged wrong on this seed (answer envs) or moves other than the oracle's first (games);
    ``options`` are the env's declared options or actions; ``reply_prefix``/``reply_suffix`` wrap an
    answer in the reply format the oracle used (its ``<think>`` included), so a wrong answer gets all
    the format credit the oracle's gets."""

    seed: int
    right: str
    decoys: tuple[str, ...]
    options: tuple[str, ...] = ()
    actions: bool = False
    reply_prefix: str = "<answer>"
    reply_suffix: str = "</answer>"
    tools: tuple[str, ...] = ()
    tool_template: ToolTemplate | None = None
    image_size: tuple[int, int] | None = None
    #: at least one decoy is a real answer (an option, another seed's answer, a shifted number), so a
    #: hedge names several answers rather than one answer among words that name none
    plausible_decoys: bool = False

    def reply(self, answer: str) -> str:
        """``answer`` in the env's reply format."""
        return f"{self.reply_prefix}{answer}{self.reply_suffix}"

    @property
    def decoy(self) -> str:
        return self.decoys[0] if self.decoys else "none of these"

    @property
    def other_decoy(self) -> str:
        return self.decoys[1] if len(self.decoys) > 1 else self.decoy

    def sandwich(self) -> list[str]:
        """Every option, with the right answer neither first nor last: what a hedge names."""
        rest = [option for option in self.options if option not in (self.right, self.decoy, self.other_decoy)]
        return [self.decoy, *rest, self.right, self.other_decoy]


Play = Callable[[SeedTask, int], str]


@dataclass(frozen=True)
class Adversary:
    """One scripted policy.  ``play(task, turn)`` is its reply on turn ``turn`` (0-based, counted
    over the whole episode, reflection tries included)."""

    name: str
    family: str
    description: str
    play: Play
    #: its replies name several answers: for an answer env, a success is a hedge accepted, not a solve
    hedges: bool = False
    #: it calls tools, so it runs only on envs that offer some
    needs_tools: bool = False
    #: it gives the right answer, after wrong ones or after spam: its success is a solve, and what it
    #: earns above the oracle (or, after a wrong first answer, as much) is reported as a warning
    answers_right: bool = False


# ----------------------------------------------------------------------------------- replies
def _spam_turn(task: SeedTask, calls: Sequence[str], points: Sequence[tuple[int, int]]) -> str:
    cited = ", ".join(f"({x}, {y})" for x, y in points[:12])
    think = f"<think>I look at {cited}.</think>" if "<think>" in task.reply_prefix else ""
    return think + "".join(calls)


def _size(task: SeedTask) -> tuple[int, int]:
    return task.image_size or (64, 64)


def _template(task: SeedTask) -> ToolTemplate:
    return task.tool_template or ToolTemplate(task.tools[0] if task.tools else "zoom", {"coordinate": [1, 1]})


def _spam_then(answer: Callable[[SeedTask], str], calls_for: Callable[[SeedTask, int], tuple[list[str], list]],
               turns: int) -> Play:
    """Tool calls for ``turns`` turns, then ``answer`` every turn after."""
    def play(task: SeedTask, turn: int) -> str:
        if turn >= turns:
            return task.reply(answer(task))
        calls, points = calls_for(task, turn)
        return _spam_turn(task, calls, points)
    return play


def _distinct_inside(task: SeedTask, turn: int) -> tuple[list[str], list]:
    points = points_inside(_size(task), SPAM_CALLS)
    return [_template(task).at(point) for point in points], points


def _per_turn_inside(task: SeedTask, turn: int) -> tuple[list[str], list]:
    points = points_inside(_size(task), 8 * SPAM_TURNS)[8 * turn: 8 * turn + 8]
    return [_template(task).at(point) for point in points], points


def _outside(task: SeedTask, turn: int) -> tuple[list[str], list]:
    points = points_outside(_size(task), SPAM_CALLS)
    return [_template(task).at(point) for point in points], points


def _same_call(task: SeedTask, turn: int) -> tuple[list[str], list]:
    point = points_inside(_size(task), 1)[0]
    return [_template(task).at(point)] * SPAM_CALLS, [point]


def _errored(task: SeedTask, turn: int) -> tuple[list[str], list]:
    points = points_inside(_size(task), 12)
    return errored_calls(_template(task), points), points


def _point_spam(task: SeedTask) -> str:
    width, height = _size(task)
    points = points_inside((width, height), 30) + points_outside((width, height), 10)
    cited = " ".join(f"({x}, {y})" for x, y in points)
    return f"<think>The object could be at {cited}.</think><answer>{task.decoy}</answer>"


def _retry_decoys(task: SeedTask, turn: int) -> str:
    pool = [decoy for decoy in task.decoys if decoy != task.right] or [task.decoy]
    return task.reply(pool[turn % len(pool)])


def _right_after_wrong(task: SeedTask, turn: int) -> str:
    pool = [decoy for decoy in task.decoys if decoy != task.right][:2] or [task.decoy]
    return task.reply(pool[turn] if turn < len(pool) else task.right)


def _multi_format(task: SeedTask) -> str:
    right = task.right
    return (task.reply(task.decoy) + f"\nAnswer: {right}\n\\boxed{{{right}}}\n**{right}**\n({right})\n"
            f"Final answer: {right}")


def _several_parts(task: SeedTask) -> str:
    return task.reply(f"{task.decoy}</answer><answer>{task.right}</answer><answer>{task.other_decoy}")


def _nested(task: SeedTask) -> str:
    return task.reply(f"{task.decoy}<answer>{task.right}</answer>{task.other_decoy}")


def _unclosed(task: SeedTask) -> str:
    return f"{task.reply_prefix}{task.decoy}"


# ----------------------------------------------------------------------------------- the list
def _answer_adversaries() -> list[Adversary]:
    return [
        Adversary("empty", "length", "an empty reply every turn", lambda task, turn: ""),
        Adversary("long-reply", "length", "about 60,000 characters of thinking, then a wrong answer",
                  lambda task, turn: f"<think>{LONG_TEXT}</think><answer>{task.decoy}</answer>"),
        Adversary("long-no-tags", "length", "about 60,000 characters with no tags",
                  lambda task, turn: LONG_TEXT),
        Adversary("repeat-wrong", "answers", "one wrong answer 40 times in a reply, the same reply every turn",
                  lambda task, turn: task.reply(task.decoy) * 40),
        Adversary("hedge-or", "answers", "'wrong or RIGHT or wrong' as the answer",
                  lambda task, turn: task.reply(f"{task.decoy} or {task.right} or {task.other_decoy}"), hedges=True),
        Adversary("every-option", "answers", "every option (or every move) at once in one answer",
                  lambda task, turn: task.reply(", ".join(task.sandwich())), hedges=True),
        Adversary("multi-format", "answers", "a wrong <answer>, the right one in five other formats",
                  lambda task, turn: _multi_format(task), hedges=True),
        Adversary("several-answer-tags", "format", "three <answer> parts: wrong, right, wrong",
                  lambda task, turn: _several_parts(task), hedges=True),
        Adversary("nested-answer", "format", "<answer>wrong<answer>RIGHT</answer>wrong</answer>",
                  lambda task, turn: _nested(task), hedges=True),
        Adversary("unclosed-answer", "format", "a wrong answer in an <answer> that is never closed",
                  lambda task, turn: _unclosed(task)),
        Adversary("point-spam-think", "format", "40 points cited in <think> (10 off the image), a wrong answer",
                  lambda task, turn: _point_spam(task)),
        Adversary("same-wrong-every-turn", "retries", "one wrong answer (or one move not the oracle's) every turn",
                  lambda task, turn: task.reply(task.decoy)),
        Adversary("retry-wrong", "retries", "a different wrong answer every turn and every retry",
                  _retry_decoys),
        Adversary("retry-then-right", "retries", "wrong answers first, the right one on the third try",
                  _right_after_wrong, answers_right=True),
    ]


def _tool_adversaries() -> list[Adversary]:
    def wrong(task: SeedTask) -> str:
        return task.decoy

    def right(task: SeedTask) -> str:
        return task.right

    return [
        Adversary("zoom-spam-one-turn", "tools", f"{SPAM_CALLS} calls at distinct in-image points in one turn, "
                  "then a wrong answer", _spam_then(wrong, _distinct_inside, 1), needs_tools=True),
        Adversary("zoom-spam-off-image", "tools", f"{SPAM_CALLS} calls at distinct off-image points in one turn, "
                  "then a wrong answer", _spam_then(wrong, _outside, 1), needs_tools=True),
        Adversary("zoom-spam-over-turns", "tools", f"8 calls at new in-image points on each of {SPAM_TURNS} turns, "
                  "then a wrong answer", _spam_then(wrong, _per_turn_inside, SPAM_TURNS), needs_tools=True),
        Adversary("same-call-repeated", "tools", f"one call {SPAM_CALLS} times a turn for {SPAM_TURNS} turns, "
                  "then a wrong answer", _spam_then(wrong, _same_call, SPAM_TURNS), needs_tools=True),
        Adversary("errored-calls", "tools", "12 calls that fail validation at distinct points, an unknown tool "
                  "and broken JSON, for 3 turns, then a wrong answer", _spam_then(wrong, _errored, SPAM_TURNS),
                  needs_tools=True),
        Adversary("zoom-spam-then-right", "tools", f"{SPAM_CALLS} calls at distinct in-image points, then the "
                  "right answer", _spam_then(right, _distinct_inside, 1), needs_tools=True, answers_right=True),
    ]


def all_adversaries() -> list[Adversary]:
    """Every adversary, in the order the report lists them."""
    return [*_answer_adversaries(), *_tool_adversaries()]


def adversaries_named(names: Sequence[str]) -> list[Adversary]:
    """The adversaries called ``names`` (all of them when empty); an unknown name is a ``ValueError``
    that lists the known ones."""
    known = {adversary.name: adversary for adversary in all_adversaries()}
    unknown = [name for name in names if name not in known]
    if unknown:
        raise ValueError(f"no adversary {unknown[0]!r}; known: {', '.join(known)}")
    return [known[name] for name in names] if names else list(known.values())
