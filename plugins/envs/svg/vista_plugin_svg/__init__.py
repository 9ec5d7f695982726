"""VAGEN's SVG reconstruction env for VISTA: a target image in, SVG code out, the render fed back.

Import-light: cairosvg, NumPy scoring and any vision encoder load only when the env is made.
"""

from __future__ import annotations

import vista_rl


@vista_rl.hookimpl
def register_envs(register: vista_rl.RegisterEnv) -> None:
    register(
        "svg/reconstruct-v0",
        "vista_plugin_svg.env:SvgReconstructEnv",
        description="Write SVG that reproduces a target image; multi-turn with the render fed back "
                    "(seeded synthetic targets or svg-icons-simple records)",
    )


@vista_rl.hookimpl
def register_datasets(register: vista_rl.RegisterDataset) -> None:
    register("svg-icons-simple", "vista_plugin_svg.records:load_svg_icons",
             description="starvector/svg-icons-simple release (Filename, Svg) from local parquet/json/jsonl files")
