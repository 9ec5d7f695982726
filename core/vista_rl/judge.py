"""The reward-judge contract: score a prediction (answer text or state) against a reference."""

from __future__ import annotations

import abc
from dataclasses import dataclass, field
from typing import Any, ClassVar


@dataclass
class JudgeResult:
    score: float
    details: dict[str, Any] = field(default_factory=dict)


class Judge(abc.ABC):
    """Base class of judges.  ``max_score`` is what a correct prediction earns."""

    name: ClassVar[str] = ""
    max_score: ClassVar[float] = 1.0

    @abc.abstractmethod
    def score(self, prediction: Any, reference: Any, **context: Any) -> JudgeResult:
        """Score ``prediction`` against ``reference``.  Must not raise on malformed predictions."""

    def __call__(self, prediction: Any, reference: Any, **context: Any) -> JudgeResult:
        return self.score(prediction, reference, **context)
