"""Visual-QA envs over task records.  ``vista_plugin_vqa.base`` is also the shared base (tool turns,
answer attempts) of the chart-QA and visual-search envs."""

from __future__ import annotations

import vista_rl


@vista_rl.hookimpl
def register_envs(register: vista_rl.RegisterEnv) -> None:
    register("vqa/records-v0", "vista_plugin_vqa.env:PerRecordVQAEnv",
             description="VQA over task records that mix kinds (MathVista, TabMWP, IconQA): options and the "
                         "multiple_choice judge per multiple-choice record, free-form judging for the rest")
    register("vqa/multiple-choice-v0", "vista_plugin_vqa.env:MultipleChoiceVQAEnv",
             description="Multiple-choice VQA over task records (ScienceQA, Geometry3K, A-OKVQA); records without options are refused")
    register("vqa/short-answer-v0", "vista_plugin_vqa.env:ShortAnswerVQAEnv",
             description="Short-answer VQA over task records; options never shown; judge by record")
