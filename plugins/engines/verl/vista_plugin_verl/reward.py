"""vista judges as verl reward functions (``reward.custom_reward_function``).

verl calls ``compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs)``;
point ``reward.custom_reward_function.path`` at this file and ``name`` at ``compute_score``, and
put the judge id in ``reward.custom_reward_function.reward_kwargs.judge`` (default ``exact``).  For
env rollouts the agent loop already sets ``reward_score`` (the sum of turn rewards), so verl skips
the reward function; this path is for single-turn QA data scored by a judge.
"""

from __future__ import annotations

from typing import Any

import vista_rl
from vista_rl import parse_response

_JUDGES: dict[str, Any] = {}


def _judge(judge_id: str) -> Any:
    if judge_id not in _JUDGES:  # judges are stateless; one per process and id
        _JUDGES[judge_id] = vista_rl.make_judge(judge_id)
    return _JUDGES[judge_id]


def compute_score(data_source: str, solution_str: str, ground_truth: Any, extra_info: dict[str, Any] | None = None,
                  judge: str = "exact", use_answer_tag: bool = True, **kwargs: Any) -> dict[str, Any]:
    """Score the ``<answer>`` of ``solution_str`` (or the whole text) with a vista judge."""
    prediction: Any = solution_str
    if use_answer_tag:
        parsed = parse_response(solution_str)
        prediction = parsed.answer if parsed.answer is not None else solution_str
    try:
        result = _judge(judge).score(prediction, ground_truth)
        score, details = float(result.score), dict(result.details)
    except Exception as exc:  # noqa: BLE001 - a judge failure scores 0 and is reported, never raised
        score, details = 0.0, {"judge_error": f"{type(exc).__name__}: {exc}"}
    out: dict[str, Any] = {"score": score, "judge": judge}
    out.update({k: v for k, v in details.items() if isinstance(v, (int, float, str, bool))})
    return out
