"""The detector in a real rollout: an env offers ``detection/grounding-dino``, the run configures it
(``rollout.tools``: the tiny checkpoint), a scripted policy calls it, the result reaches the model."""

from __future__ import annotations

import json
from pathlib import Path

from vista_plugin_detection.grounding import GroundingTool

import vista_rl
from vista_rl.config import RolloutSection
from vista_rl.rollout import EpisodeSpec, RolloutEngine

ENV = "visual_search/zoom-small-v0"
CALL = {"name": "grounding_dino", "arguments": {"caption": "red dot . blue dot", "box_threshold": 0.0, "draw": True}}


def test_configured_detector_runs_inside_episodes(tiny_grounding_dino: Path) -> None:
    settings = RolloutSection(max_turns=3, batch_size=4, tools={
        "detection/grounding-dino": {"config": {"model": str(tiny_grounding_dino), "device": "cpu"}}})
    replies = [f"<tool_call>{json.dumps(CALL)}</tool_call>", "<answer>red</answer>"]
    backend = vista_rl.make_model("scripted", responses=replies, per_turn=True)
    with RolloutEngine(backend, settings, seed=0) as engine:
        trajectories = engine.run([EpisodeSpec(ENV, seed, env_config={"tools": ["crop_zoom", "detection/grounding-dino"]})
                                   for seed in range(4)])
        tool = engine._tool_cache["detection/grounding-dino"]
    assert isinstance(tool, GroundingTool) and tool.detector.model_name == str(tiny_grounding_dino)
    for trajectory in trajectories:
        (call,) = trajectory.turns[0].tool_calls
        assert call.name == "grounding_dino" and not call.error, call.result_text
        payload = json.loads(call.result_text.split("\n")[1])
        assert payload["num_detections"] > 0 and payload["size"] == [112, 112]
        assert call.num_images == 1  # draw=true: the boxes come back as an image the model sees
    assert tool.batcher.stats.items == 4 and tool.batcher.stats.batches <= 4
