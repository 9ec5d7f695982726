"""V*-style visual search with multi-turn zoom (ViGoRL)."""

from __future__ import annotations

import vista_rl


@vista_rl.hookimpl
def register_envs(register: vista_rl.RegisterEnv) -> None:
    register("visual_search/zoom-v0", "vista_plugin_visual_search.env:VisualSearchEnv",
             description="Find a small target in a 1536x1536 scene shown at low resolution; zoom with crop_zoom")
    register("visual_search/zoom-small-v0", "vista_plugin_visual_search.small:SmallZoomEnv",
             description="Read the colour of a dot invisible in a 112x112 view (exactly: it averages to grey); "
                         "zoom with crop_zoom at the coordinate the question names. Small enough for a tiny VLM")
