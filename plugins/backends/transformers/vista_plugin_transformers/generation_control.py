"""Stopping and watching one ``model.generate`` call from outside, between decode steps.

Why: a server batches many clients' requests into one ``generate`` call.  When a client goes
away, its rows must stop costing decode steps (six abandoned ``n=16, max_tokens=512`` streams
once held the generate thread for a minute), and a streaming client wants each token as it is
sampled, not a replay of the finished generation.  transformers offers two hooks that run between
decode steps without touching the model: a stopping criterion (``__call__(input_ids, scores)``
returning a per-row ``bool`` tensor; a row marked done gets padding from then on, and ``generate``
returns as soon as every row is done) and a streamer (``put(tokens)`` with each step's new token
of every row, after one first ``put`` of the prompt ids).  Neither takes a batch-size limit when
used directly (``TextStreamer`` refuses batches, the ``BaseStreamer`` protocol does not).

A caller describes what it wants with a :class:`GenerationControl` (rows are numbered over the
whole backend call: prompt index x ``n`` + sample index); the backend wraps it per ``generate``
call with :class:`ControlledRows`.  transformers is imported lazily, as everywhere in this package.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from vista_rl import Generation


class GenerationControl(Protocol):
    """What a caller of ``TransformersBackend.generate(..., control=...)`` supplies.

    Both methods are called on the thread running ``generate``, once per row per decode step, so
    they must be cheap and thread-safe (reading a ``threading.Event`` is both)."""

    def cancelled(self, row: int) -> bool:
        """Whether row ``row`` is no longer wanted (its client went away)."""

    def on_tokens(self, tokens: dict[int, int]) -> None:
        """One decode step's new token for each row still running: ``{row: token id}``."""


def cancelled_generation() -> Generation:
    """What a row that was never generated (all its rows cancelled before the call) returns."""
    return Generation(text="", token_ids=[], logprobs=[], finish_reason="abort", metadata={"cancelled": True})


class ControlledRows:
    """One ``generate`` call's view of a :class:`GenerationControl`: rows ``start`` to
    ``start + count`` of the caller's numbering are rows ``0..count`` of this call (rows past
    ``count``, such as the static cache's padding rows, are not the caller's)."""

    def __init__(self, control: GenerationControl, start: int, count: int) -> None:
        self.control = control
        self.start = start
        self.count = count

    def all_cancelled(self) -> bool:
        """Every row cancelled: the call need not run at all (not even its prefill)."""
        return all(self.control.cancelled(self.start + row) for row in range(self.count))

    def generate_kwargs(self, eos_ids: Sequence[int]) -> dict[str, Any]:
        """The ``stopping_criteria`` and ``streamer`` arguments of ``model.generate``."""
        from transformers import StoppingCriteriaList

        return {"stopping_criteria": StoppingCriteriaList([CancelledRows(self)]),
                "streamer": RowStreamer(self, eos_ids)}


class CancelledRows:
    """A stopping criterion: a row is done once its caller cancelled it.  ``generate`` checks it
    after every decode step and returns when every row is done, so cancelling all rows frees the
    generate thread within one step."""

    def __init__(self, rows: ControlledRows) -> None:
        self.rows = rows
        self._none: Any = None

    def __call__(self, input_ids: Any, scores: Any, **_kwargs: Any) -> Any:
        import torch

        flags = [self.rows.control.cancelled(self.rows.start + row) for row in range(self.rows.count)]
        batch = int(input_ids.shape[0])
        if not any(flags):
            if self._none is None or self._none.shape[0] != batch:
                self._none = torch.zeros(batch, dtype=torch.bool, device=input_ids.device)
            return self._none
        done = torch.zeros(batch, dtype=torch.bool)
        done[:len(flags)] = torch.tensor(flags, dtype=torch.bool)
        return done.to(input_ids.device)


class RowStreamer:
    """A transformers streamer that hands each decode step's tokens to the caller, per row, until
    the row ends (EOS) or is cancelled; the first ``put`` (the prompt ids, 2-D) is skipped.  Tokens
    after a stop string still arrive (padding, usually a special token): the caller's text
    hold-back covers them (see :mod:`vista_plugin_transformers.live_stream`)."""

    def __init__(self, rows: ControlledRows, eos_ids: Sequence[int]) -> None:
        self.rows = rows
        self.eos_ids = set(eos_ids)
        self.ended = [False] * rows.count

    def put(self, value: Any) -> None:
        if value.dim() != 1:  # the prompt, put once before the first step
            return
        step: dict[int, int] = {}
        for row, token in enumerate(value.tolist()[:self.rows.count]):
            if self.ended[row]:
                continue
            if self.rows.control.cancelled(self.rows.start + row):
                self.ended[row] = True
                continue
            step[self.rows.start + row] = int(token)
            self.ended[row] = token in self.eos_ids
        if step:
            self.rows.control.on_tokens(step)

    def end(self) -> None:
        """Nothing to flush: every token was handed over when it was put."""
