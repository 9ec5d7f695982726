"""Moving an env's tool to a service from the run config (``rollout.tools``), through the real
rollout engine: the env still asks for ``crop_zoom``; the run makes ``http/crop_zoom`` instead."""

from __future__ import annotations

import pytest
from vista_plugin_toolserve.proxy import ServedTool
from vista_plugin_toolserve.services import close_all

import vista_rl
from vista_rl import ConfigError
from vista_rl.config import RolloutSection, RunConfig, validate_config
from vista_rl.rollout import EpisodeSpec, RolloutEngine

ENV = "visual_search/zoom-small-v0"
CALL = '<tool_call>{"name": "crop_zoom", "arguments": {"coordinate": [20, 20]}}</tool_call>'


def run(settings: RolloutSection) -> tuple[RolloutEngine, list]:
    backend = vista_rl.make_model("scripted", responses=[CALL, "<answer>red</answer>"], per_turn=True)
    engine = RolloutEngine(backend, settings, seed=0)
    return engine, engine.run([EpisodeSpec(ENV, seed) for seed in range(3)])


def test_the_served_tool_replaces_the_local_one_from_config() -> None:
    settings = RolloutSection(max_turns=3, batch_size=3, tools={"crop_zoom": {"use": "http/crop_zoom"}})
    try:
        engine, served_runs = run(settings)
        assert isinstance(engine._tool_cache["crop_zoom"], ServedTool)
        _, local_runs = run(RolloutSection(max_turns=3, batch_size=3))
        for served, local in zip(served_runs, local_runs, strict=True):
            served_call = served.turns[0].tool_calls[0]
            local_call = local.turns[0].tool_calls[0]
            assert not served_call.error and served_call.result_text == local_call.result_text
            assert served_call.num_images == local_call.num_images == 1
    finally:
        close_all()


def test_override_section_rejects_typos() -> None:
    with pytest.raises(ConfigError, match="rollout.tools.crop_zoom.uze"):
        validate_config(RunConfig, {"env": {"id": ENV}, "rollout": {"tools": {"crop_zoom": {"uze": "http/x"}}}})
    data = {"env": {"id": ENV}, "rollout": {"tools": {"crop_zoom": {"use": "ray/crop_zoom", "config": {"replicas": 2}}}}}
    config = validate_config(RunConfig, data)
    assert config.rollout.tools["crop_zoom"].config == {"replicas": 2}


def test_verl_dataset_rows_carry_the_tool_overrides() -> None:
    """The verl engine ships ``rollout`` settings to its agent-loop workers in each dataset row."""
    import json

    dataset = pytest.importorskip("vista_plugin_verl.dataset")
    rollout = RolloutSection(tools={"crop_zoom": {"use": "ray/crop_zoom", "config": {"replicas": 2}}})
    (row,) = dataset.env_rows(ENV, {}, [7], "train", rollout)
    back = RolloutSection(**json.loads(row["extra_info"]["rollout"]))
    assert back.tools == rollout.tools
