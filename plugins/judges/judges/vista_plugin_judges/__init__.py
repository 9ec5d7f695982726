"""Rule judges for visual QA.  Import-light: each judge's module loads only when the judge is made
(``math`` pulls in sympy through math-verify, which costs a second)."""

from __future__ import annotations

import vista_rl


@vista_rl.hookimpl
def register_judges(register: vista_rl.RegisterJudge) -> None:
    register("relaxed_numeric", "vista_plugin_judges.numeric:RelaxedNumericJudge",
             description="ChartQA relaxed accuracy: numbers within a relative tolerance (5%), else exact")
    register("multiple_choice", "vista_plugin_judges.choice:MultipleChoiceJudge",
             description="Multiple choice: the option letter, index or text picks the right option")
    register("math", "vista_plugin_judges.math_judge:MathJudge",
             description="Mathematical equivalence with math-verify (LaTeX, fractions, expressions)")
    register("vqa_accuracy", "vista_plugin_judges.vqa_accuracy:VQAAccuracyJudge",
             description="VQA accuracy: min(#humans who gave the answer / 3, 1), averaged over leave-one-out "
                         "subsets, with the VQA answer normalisation (VQA v2, VizWiz, A-OKVQA direct)")
    register("anls", "vista_plugin_judges.anls:ANLSJudge",
             description="ANLS (DocVQA): 1 - normalised edit distance to the closest answer, 0 beyond 0.5")
    register("set_match", "vista_plugin_judges.set_match:SetMatchJudge",
             description="Unordered list answers: the same items in any order (MapQA's region lists)")
    register("iou", "vista_plugin_judges.boxes:IoUJudge",
             description="Box IoU against a reference box (thresholded or continuous)")
    register("point_in_box", "vista_plugin_judges.boxes:PointInBoxJudge",
             description="1 if a predicted (x, y) point falls inside the reference box")
