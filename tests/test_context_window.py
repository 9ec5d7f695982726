"""The context window has one rule, ``vista_rl.rollout.window_start``: the rollout's prompts
(``window``) keep exactly the turns it names, so SFT examples cut with it (the local engine's
``sft_data.examples_from_turns``, verl's ``sft.episode_rows``) hold the contexts RL shows."""

from __future__ import annotations

import pytest

from vista_rl import Message
from vista_rl.rollout import window, window_start


def history(turns: int) -> list[Message]:
    """``turns`` exchanges, then the current observation."""
    out: list[Message] = []
    for turn in range(turns):
        out += [Message("user", f"obs {turn}"), Message("assistant", f"reply {turn}")]
    return out + [Message("user", f"obs {turns}")]


@pytest.mark.parametrize("window_size", [None, 0, 1, 2, 5])
@pytest.mark.parametrize("turn", range(7))
def test_the_prompt_shows_the_turns_window_start_names(turn: int, window_size: int | None) -> None:
    shown = window(history(turn), window_size)
    first = window_start(turn, window_size)
    assert [message.content for message in shown if message.role == "user"] == [
        f"obs {index}" for index in range(first, turn + 1)]
    assert shown[-1].content == f"obs {turn}" and len(shown) == 2 * (turn - first) + 1


def test_window_start_values_and_bad_input() -> None:
    assert [window_start(turn, 2) for turn in range(5)] == [0, 0, 0, 1, 2]
    assert [window_start(turn, 0) for turn in range(3)] == [0, 1, 2]
    assert window_start(9, None) == 0
    with pytest.raises(ValueError, match="window_size -1 is negative"):
        window_start(3, -1)
    with pytest.raises(ValueError, match="turn -1"):
        window_start(-1, 2)
