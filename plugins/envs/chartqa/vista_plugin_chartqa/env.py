"""Chart QA envs on the shared QA base (tool turns, answer attempts, relaxed-accuracy judging)."""

from __future__ import annotations

from typing import Any

from pydantic import Field
from vista_plugin_vqa.base import Problem, QAEnvConfig, ToolQAEnv
from vista_plugin_vqa.env import RecordEnvConfig, ShortAnswerVQAEnv

import vista_rl
from vista_plugin_chartqa.generator import CHART_TYPES, QUESTION_TYPES, ChartType, generate

CHART_INSTRUCTIONS = ("Read the chart. Numbers are judged with a 5% tolerance (years exactly); give just "
                      "the number, category name or word asked for.")


class ChartJudging(ToolQAEnv):
    """ChartQA relaxed accuracy with the env's configured ``tolerance``."""

    def judge(self, name: str) -> Any:
        if name == "relaxed_numeric" and name not in self._judges:
            self._judges[name] = vista_rl.make_judge(name, tolerance=self.config.tolerance)  # type: ignore[attr-defined]
        return super().judge(name)


class SyntheticChartConfig(QAEnvConfig):
    tools: list[str] = Field(default_factory=lambda: ["ocr", "crop_bbox", "python"])
    chart_types: list[ChartType] = Field(default_factory=lambda: list(CHART_TYPES))
    question_types: list[str] | None = Field(None, description=f"subset of {', '.join(QUESTION_TYPES)}")
    width: int = Field(640, ge=320, le=1600)
    height: int = Field(480, ge=240, le=1200)
    tolerance: float = Field(0.05, ge=0.0, le=1.0)


class SyntheticChartEnv(ChartJudging):
    """A fresh chart per seed; the answer is computed from the chart's table."""

    config_class = SyntheticChartConfig
    config: SyntheticChartConfig

    def task_instructions(self) -> str:
        return CHART_INSTRUCTIONS

    def make_problem(self, seed: int) -> Problem:
        sample = generate(seed, tuple(self.config.chart_types),
                          tuple(self.config.question_types) if self.config.question_types else None,
                          (self.config.width, self.config.height))
        question = sample.question
        info: dict[str, Any] = {"chart_type": sample.chart_type, "question_type": question.kind,
                                "table": {"categories": sample.table.categories, "series": sample.table.series},
                                "oracle_reasoning": question.reasoning}
        return Problem(question.question, [sample.image], question.answer, "relaxed_numeric",
                       oracle_answer=question.answer, info=info)


class ChartRecordsConfig(RecordEnvConfig):
    tolerance: float = Field(0.05, ge=0.0, le=1.0)


class ChartRecordsEnv(ChartJudging, ShortAnswerVQAEnv):
    """ChartQA records (``dataset="chartqa"`` + ``dataset_config={"root": ...}``, or any record
    source), always judged with ChartQA's relaxed accuracy."""

    config_class = ChartRecordsConfig
    config: ChartRecordsConfig

    def task_instructions(self) -> str:
        return CHART_INSTRUCTIONS

    def make_problem(self, seed: int) -> Problem:
        problem = super().make_problem(seed)
        problem.judge = "relaxed_numeric"
        return problem
