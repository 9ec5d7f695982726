"""ViGoRL for VISTA: grounded-reasoning judges, the ``search_coordinate`` zoom tool, MCTS over
thought steps (``vista mcts search``) and its linearisation into SFT chains (``vista mcts build``).

Import-light: nothing below loads until a judge, tool, model or command is used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import vista_rl

if TYPE_CHECKING:
    import click

_SINGLE_CHECK = {"reference": "left", "correct": "<think> The cup (12, 40) is left of the plate (80, 41). </think>\n"
                                                  "<answer> left </answer>",
                 "wrong": ["<think> no points here </think><answer> left </answer>", "<answer> left </answer>",
                           "<think> The cup (12, 40). </think><answer> right </answer>"]}
_BOX_CHECK = {"reference": [10, 10, 50, 50], "correct": "<think> The button (30, 30). </think>\n<answer> (30, 30) </answer>",
              "wrong": ["<think> The button (30, 30). </think>\n<answer> (80, 80) </answer>",
                        "<answer> (30, 30) </answer>"]}
_CALL = '<tool_call>\n{{"name": "search_coordinate", "arguments": {{"coordinate": [{x}, {y}]}}}}\n</tool_call>'
_OBS = "<observation>\nHere is the crop of the image centered on the coordinate:\n</observation>"
_MULTI_CORRECT = "".join(f"<think> look at ({x}, {y}) </think>{_CALL.format(x=x, y=y)}{_OBS}"
                         for x, y in ((10, 10), (60, 10), (10, 60), (60, 60))) + "<think> done </think><answer> left </answer>"
_MULTI_CHECK = {"reference": "left", "correct": _MULTI_CORRECT,
                "wrong": ["<think> a </think><answer> left </answer>",
                          _MULTI_CORRECT.replace("<answer> left", "<answer> right"),
                          "<answer> left </answer>"]}


@vista_rl.hookimpl
def register_judges(register: vista_rl.RegisterJudge) -> None:
    register("vigorl/grounded-string-match", "vista_plugin_vigorl.rewards:GroundedSingleTurnJudge",
             description="ViGoRL single turn: 0.5*acc + 0.5*format*coordinate, string-match answer",
             check_args=_SINGLE_CHECK)
    register("vigorl/grounded-point-in-box",
             lambda **config: _make("GroundedSingleTurnJudge", mode="point_in_box", **config),
             description="ViGoRL single turn: 0.5*acc + 0.5*format*coordinate, point-in-box answer",
             check_args=_BOX_CHECK)
    register("vigorl/multiturn-string-match", "vista_plugin_vigorl.rewards:GroundedMultiTurnJudge",
             description="ViGoRL multi turn: 0.6*acc + 0.4*format (grammar, +0.2 per extra unique point)",
             check_args=_MULTI_CHECK)
    register("vigorl/multiturn-point-in-box",
             lambda **config: _make("GroundedMultiTurnJudge", mode="point_in_box", **config),
             description="ViGoRL multi turn: 0.6*acc + 0.4*format, point-in-box answer",
             check_args={"reference": [0, 0, 100, 100], "correct": _MULTI_CORRECT.replace("left", "(50, 50)"),
                         "wrong": [_MULTI_CORRECT.replace("left", "(150, 50)"), "<answer> (50, 50) </answer>"]})


def _make(name: str, **config: Any) -> Any:
    from vista_plugin_vigorl import rewards

    return getattr(rewards, name)(**config)


@vista_rl.hookimpl
def register_tools(register: vista_rl.RegisterTool) -> None:
    register("search_coordinate", "vista_plugin_vigorl.search_tool:SearchCoordinateTool",
             description="ViGoRL zoom: fixed-size crop around a point of the original image, optional red dot")


@vista_rl.hookimpl
def register_models(register: vista_rl.RegisterModel) -> None:
    register("vigorl/noisy-teacher", "vista_plugin_vigorl.mcts.toy:NoisyTeacher",
             description="Scripted noisy MCTS teacher for the colour-grid problems (tests and demos, not a model)")


@vista_rl.hookimpl
def register_commands(cli: click.Group) -> None:
    from vista_plugin_vigorl.cli import mcts_group

    cli.add_command(mcts_group)
