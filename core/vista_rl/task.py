"""The unified task record for visual-QA datasets: every adapter converts into this one shape, so
one env and one set of judges serve ChartQA, ScienceQA, Geometry3K, A-OKVQA and the rest."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

TaskType = Literal["short_answer", "multiple_choice", "numeric", "math", "grounding", "open"]


class TaskRecord(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str
    dataset: str
    images: list[str] = Field(default_factory=list, description="image file paths, in placeholder order")
    question: str
    answer: Any = None
    choices: list[str] | None = None
    task_type: TaskType = "short_answer"
    metadata: dict[str, Any] = Field(default_factory=dict)
