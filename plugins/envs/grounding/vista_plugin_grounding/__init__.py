"""ViGoRL's grounding tasks: SAT-style spatial reasoning, ScreenSpot-style GUI grounding and web
actions, plus adapters for the SAT-2, BLINK, ScreenSpot (v1/v2/Pro) and V*Bench release formats."""

from __future__ import annotations

import vista_rl


@vista_rl.hookimpl
def register_envs(register: vista_rl.RegisterEnv) -> None:
    register("grounding/spatial-v0", "vista_plugin_grounding.spatial:SpatialEnv",
             description="SAT-style spatial relations (left/right, above/below, closest, larger, perspective); "
                         "answer the option text after a <think> citing (x, y); 0.5 acc + 0.5 format*coordinate")
    register("grounding/gui-v0", "vista_plugin_grounding.gui:GuiGroundingEnv",
             description="ScreenSpot-style GUI grounding on a synthetic app window: answer (x, y), point-in-box; "
                         "zoom with crop_zoom (configurable tools)")
    register("grounding/zoom-spot-v0", "vista_plugin_grounding.spot:SpotZoomEnv",
             description="CPU-sized grounded zoom: find the frame, cite it as (x, y), search_coordinate there, "
                         "read the dot's colour (unreadable in the view); ViGoRL multi-turn reward")
    register("grounding/screenspot-v0", "vista_plugin_grounding.gui:ScreenSpotEnv",
             description="GUI grounding over ScreenSpot v1/v2/Pro records (dataset=screenspot_v2|screenspot_pro)")
    register("grounding/web-action-v0", "vista_plugin_grounding.web:WebActionEnv",
             description="Web actions on a synthetic shop page with set-of-marks ids: answer click [id]")


@vista_rl.hookimpl
def register_judges(register: vista_rl.RegisterJudge) -> None:
    register("grounding/click", "vista_plugin_grounding.web:ClickActionJudge",
             description="web action match: 'click [id]' with the reference id")


@vista_rl.hookimpl
def register_datasets(register: vista_rl.RegisterDataset) -> None:
    register("sat2", "vista_plugin_grounding.adapters:load_sat",
             description="SAT (array/SAT) release: parquet/JSON rows {image_bytes, question, answers, correct_answer, "
                         "question_type}")
    register("blink", "vista_plugin_grounding.adapters:load_blink",
             description="BLINK release: {subtask}/{split}-*.parquet rows {image_1..4, question, choices, answer '(A)'}")
    register("screenspot_v2", "vista_plugin_grounding.adapters:load_screenspot",
             description="ScreenSpot v1/v2: screenspot_{desktop,mobile,web}[_v2].json (bbox x,y,w,h) + images")
    register("screenspot_pro", "vista_plugin_grounding.adapters:load_screenspot_pro",
             description="ScreenSpot-Pro: annotations/*.json (bbox x1,y1,x2,y2) + images/")
    register("vstar_bench", "vista_plugin_grounding.adapters:load_vstar",
             description="V*Bench: {direct_attributes,relative_position}/*.json + image; options[0] is right")
