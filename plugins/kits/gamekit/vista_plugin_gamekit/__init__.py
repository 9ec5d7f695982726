"""The kit VAGEN-style grid games share: prompt formats, multi-action turns, relation states, tile
sprites with a repaint-only-what-changed frame cache, shortest plans read off a distance table, and
expert trajectories.  Any env plugin can build on it; Sokoban, FrozenLake and the gymnasium toy-text
adapters do.  A library, not a plugin: importing it registers nothing.
"""

from vista_plugin_gamekit.expert import expert_trajectory, generate_expert_trajectories
from vista_plugin_gamekit.formats import PROMPT_FORMATS, FormatSpec, PromptFormat, format_spec
from vista_plugin_gamekit.planning import greedy_plan
from vista_plugin_gamekit.relations import describe, relation, relations
from vista_plugin_gamekit.sprites import TileFrame, compose, paint
from vista_plugin_gamekit.textgame import ActionResult, GameConfig, RenderMode, TextGameEnv

__all__ = [
    "PROMPT_FORMATS", "ActionResult", "FormatSpec", "GameConfig", "PromptFormat", "RenderMode", "TextGameEnv",
    "TileFrame", "compose", "describe", "expert_trajectory", "format_spec", "generate_expert_trajectories", "greedy_plan", "paint", "relation", "relations",
]
