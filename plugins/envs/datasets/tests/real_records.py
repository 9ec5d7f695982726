"""Shared checks for the real-record fixtures under ``fixtures/real/<dataset>/``.

Every adapter is tested on records copied from its dataset's own release (see each fixture's
README for the source and licence).  Two things must hold on every record, whatever the dataset:

- the env's own oracle answer earns the maximum reward, through the env that ``vista data convert``
  names for the record (so what a user runs is what is checked, not a judge called by hand);
- each wrong answer (another option, a nearby number, another word) earns less than the maximum.

The env is driven exactly as ``vista eval`` drives it: ``reset(seed)``, then one ``<answer>`` step.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import vista_rl
from vista_rl import TaskRecord

REAL = Path(__file__).parent / "fixtures" / "real"
LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
_NUMBER = re.compile(r"^-?\d+(?:\.\d+)?$")


def fixture(name: str) -> Path:
    """The folder of one dataset's real records; it must exist and carry a README."""
    root = REAL / name
    assert root.is_dir(), f"missing real-record fixture {root}"
    assert (root / "README.md").is_file(), f"{root} needs a README naming its source and licence"
    return root


def answer_step(env: vista_rl.Env, seed: int, answer: str) -> tuple[float, dict[str, Any]]:
    """Reset to ``seed`` and answer at once; returns the step's reward and info."""
    env.reset(seed=seed)
    result = env.step(f"<answer>{answer}</answer>")
    return result.reward, result.info


def oracle_answer(env: vista_rl.Env, seed: int) -> str:
    """The answer the env's scripted oracle gives for ``seed`` (the text inside its ``<answer>``)."""
    env.reset(seed=seed)
    response = env.oracle_response()  # type: ignore[attr-defined]
    assert response, f"the env has no oracle answer for seed {seed}"
    found = re.search(r"<answer>(.*?)</answer>", response, re.S)
    assert found, f"oracle response without <answer>: {response!r}"
    return found.group(1)


def nearby_numbers(value: float) -> list[str]:
    """Numbers a careless model might write: off by one, 10% off, sign flipped (never equal)."""
    candidates = {value + 1, value - 1, value * 1.1 if value else 0.5, -value if value else 2.0}
    return [_number_text(c) for c in sorted(candidates) if not math.isclose(c, value)]


def _number_text(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:.4g}"


def default_wrong_answers(record: TaskRecord) -> list[str]:
    """Other options (as letters and as text) for multiple choice; nearby numbers for numbers;
    a different word otherwise."""
    if record.task_type == "multiple_choice" and record.choices:
        right = {str(record.answer).strip().lower()}
        wrong: list[str] = []
        for index, choice in enumerate(record.choices):
            if choice.strip().lower() in right or LETTERS[index].lower() in right:
                continue
            wrong += [LETTERS[index], choice]
        return wrong
    answers = record.answer if isinstance(record.answer, list) else [record.answer]
    text = str(answers[0]).strip().replace(",", "")
    if _NUMBER.match(text):
        return nearby_numbers(float(text))
    return ["zebra crossing" if text.lower() != "zebra crossing" else "giraffe"]


def check_records_score_right(
    records: Sequence[TaskRecord],
    env_id: str,
    wrong_answers: Callable[[TaskRecord], Iterable[str]] = default_wrong_answers,
    env_config: dict[str, Any] | None = None,
    max_reward: float = 1.0,
) -> int:
    """Assert the oracle scores ``max_reward`` and every wrong answer less, on every record.

    Returns how many wrong answers were checked (so a test can assert it checked some)."""
    rows = [record.model_dump() for record in records]
    env = vista_rl.make_env(env_id, records=rows, prompt_format="no_think", **(env_config or {}))
    checked = 0
    failures: list[str] = []
    try:
        for seed, record in enumerate(records):
            answer = oracle_answer(env, seed)
            reward, info = answer_step(env, seed, answer)
            if not math.isclose(reward, max_reward):
                failures.append(f"{record.id}: oracle {answer!r} scored {reward} ({info.get('judge_details')})")
            for wrong in wrong_answers(record):
                reward, info = answer_step(env, seed, wrong)
                checked += 1
                if reward >= max_reward:
                    failures.append(f"{record.id}: wrong {wrong!r} scored {reward} (right: {record.answer!r})")
    finally:
        env.close()
    assert not failures, "\n".join(failures)
    return checked
