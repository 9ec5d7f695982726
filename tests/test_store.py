"""The trajectory store: JSONL written as episodes finish, PNGs by content hash, run metadata, reader,
HTML viewer, and a crash that leaves every completed line valid."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from tests.rollout_testkit import CharTokenBackend, RolloutTestPlugin
from vista_rl.config import RunConfig
from vista_rl.errors import VistaError
from vista_rl.rollout import EpisodeSpec, RolloutEngine, RolloutMetrics, episode_specs
from vista_rl.store import RunExistsError, RunReader, RunWriter, image_hash
from vista_rl.trajectory import Trajectory, Turn

COUNTER = "test/counter-v0"


@pytest.fixture(autouse=True)
def test_envs(vista_plugin):
    vista_plugin(RolloutTestPlugin())


def _write_run(run_dir: Path, specs, backend=None) -> list[dict]:
    config = RunConfig(env={"id": COUNTER}, output_dir=str(run_dir))
    written = []
    with RunWriter(run_dir, config) as writer, RolloutEngine(backend or CharTokenBackend(oracle=True)) as engine:
        metrics = RolloutMetrics()
        for trajectory in engine.stream(specs):
            writer.write(trajectory)
            metrics.add(trajectory)
            written.append(trajectory.to_dict())
        writer.write_metrics(metrics.summary())
    return written


def test_round_trip_with_deduplicated_images(tmp_path):
    written = _write_run(tmp_path, episode_specs(COUNTER, range(3), group_size=2))
    reader = RunReader(tmp_path)
    read = [trajectory.to_dict() for trajectory in reader]
    assert read == written and len(reader) == 6
    refs = {ref for record in read for turn in record["turns"] for ref in turn["image_refs"]}
    refs |= {ref for record in read for ref in record["initial_image_refs"]}
    # 3 seeds' first images + the "counter at 1" and "counter at 2" images shared by every episode
    assert len(refs) == 5 and {p.stem for p in (tmp_path / "images").glob("*.png")} == refs
    first = read[0]["turns"][0]
    assert first["image_refs"] == read[0]["initial_image_refs"]
    assert read[0]["token_view"]["image_refs"] == [turn["image_refs"][0] for turn in read[0]["turns"]]
    image = reader.image(first["image_refs"][0])
    assert image.size == (16, 16) and image_hash(image) == first["image_refs"][0]
    assert reader.metrics()["success_rate"]["value"] == 1.0
    assert reader.config()["env"]["id"] == COUNTER
    versions = reader.versions()
    assert versions["vista-rl"] and any(p["distribution"] == "vista-plugin-oddshape" for p in versions["plugins"])


def test_every_line_is_strict_json_whatever_info_holds(tmp_path):
    trajectory = Trajectory("x", 1, turns=[Turn("obs", "resp", info={"nan": float("nan"), "set": {1},
                                                                    "obj": object(), "path": Path("/a")})])
    with RunWriter(tmp_path, html=False) as writer:
        writer.write(trajectory)
    line = (tmp_path / "trajectories.jsonl").read_text().strip()
    record = json.loads(line, parse_constant=lambda name: pytest.fail(f"non-standard JSON constant {name}"))
    assert record["turns"][0]["info"]["nan"] is None and record["turns"][0]["info"]["set"] == [1]


def test_reader_skips_a_torn_last_line_and_rejects_other_dirs(tmp_path):
    _write_run(tmp_path, episode_specs(COUNTER, range(2)))
    with open(tmp_path / "trajectories.jsonl", "a") as handle:
        handle.write('{"env_id": "test/counter-v0", "tu')
    reader = RunReader(tmp_path)
    assert len(list(reader)) == 2 and reader.skipped_lines == 1
    with pytest.raises(VistaError, match="not a VISTA run directory"):
        RunReader(tmp_path / "images")


def test_a_crash_mid_run_leaves_every_completed_line_valid(tmp_path):
    """A real process killed (os._exit from an env thread) in the middle of a run.  The writer
    writes off the rollout's thread, so the episodes still queued at the instant of the crash are
    lost (as the ones still running are); the crash comes a moment after the others finished, as
    in a real run where the model's forward gives the writer the time it needs."""
    script = textwrap.dedent(f"""
        import os, sys, time
        sys.path.insert(0, {str(Path(__file__).parent.parent)!r})
        import vista_rl
        from vista_rl._plugins import PluginInfo
        from vista_rl.rollout import RolloutEngine, EpisodeSpec
        from vista_rl.config import RolloutSection
        from vista_rl.store import RunWriter
        from tests.rollout_testkit import CounterEnv, CharTokenBackend

        class Crashing(CounterEnv):
            def step(self, action):
                if self.crash:
                    time.sleep(1.0)
                    os._exit(3)
                return super().step(action)
            def reset(self, seed=None):
                self.crash = seed == 6
                return super().reset(seed)

        class Plugin:
            @vista_rl.hookimpl
            def register_envs(self, register):
                register("test/crashing-v0", Crashing)

        vista_rl.host().load()
        vista_rl.host().register_object(Plugin(), PluginInfo("crash", "crash", "0", "crash"))
        specs = [EpisodeSpec("test/crashing-v0", seed, env_config={{"target": 1 + seed % 2}}) for seed in range(9)]
        with RunWriter({str(tmp_path)!r}, html=False) as writer:
            with RolloutEngine(CharTokenBackend(oracle=True), RolloutSection(batch_size=2)) as engine:
                for trajectory in engine.stream(specs):
                    writer.write(trajectory)
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert result.returncode == 3, result.stderr
    lines = (tmp_path / "trajectories.jsonl").read_text().splitlines()
    seeds = [json.loads(line)["seed"] for line in lines]  # every line parses
    assert 6 not in seeds and 0 in seeds and len(seeds) >= 4
    refs = {ref for line in lines for turn in json.loads(line)["turns"] for ref in turn["image_refs"]}
    assert all((tmp_path / "images" / f"{ref}.png").exists() for ref in refs)
    assert not list((tmp_path / "images").glob("*.tmp"))


def test_html_viewer_is_self_contained_with_relative_images(tmp_path):
    call = '<tool_call>{"name": "zoom", "arguments": {}}</tool_call>'
    backend = CharTokenBackend([call, "<script>alert(1)</script><answer>inc</answer>"])
    _write_run(tmp_path, [EpisodeSpec("test/tool-counter-v0", 0, env_config={"target": 1}),
                          EpisodeSpec(COUNTER, 1, env_config={"raise_on_step": 1})], backend=backend)
    page = (tmp_path / "trajectories.html").read_text()
    sources = [part.split('"')[0] for part in page.split('src="')[1:]]
    assert sources and all(src.startswith("images/") and (tmp_path / src).exists() for src in sources)
    assert "<script>alert(1)</script>" not in page and "&lt;script&gt;alert(1)" in page
    assert "counter env broke on step 1" in page and "zoomed x2" in page
    assert "http://" not in page and "https://" not in page and str(tmp_path) not in page
    assert 'class="ep success' in page and 'class="ep error' in page


def test_config_yaml_is_the_resolved_config(tmp_path):
    config = RunConfig(env={"id": COUNTER, "config": {"target": 2}}, rollout={"max_turns": 4})
    RunWriter(tmp_path, config).close()
    data = yaml.safe_load((tmp_path / "config.yaml").read_text())
    assert RunConfig.model_validate(data) == config


def test_writer_refuses_a_used_run_dir_and_resume_repairs_a_cut_line(tmp_path):
    # issue 13 item 4: appending after a cut last line glued the next record onto the fragment
    _write_run(tmp_path, episode_specs(COUNTER, range(2)))
    with pytest.raises(RunExistsError, match="already holds trajectories"):
        RunWriter(tmp_path, html=False)
    path = tmp_path / "trajectories.jsonl"
    with open(path, "a") as handle:
        handle.write('{"env_id": "test/counter-v0", "tu')
    with RunWriter(tmp_path, html=False, resume=True) as writer:
        assert writer.repaired_bytes == len('{"env_id": "test/counter-v0", "tu')
        assert writer.recorded == {(COUNTER, 0, 0), (COUNTER, 1, 0)}
        writer.write(Trajectory(COUNTER, 2))
    reader = RunReader(tmp_path)
    assert [t.seed for t in reader] == [0, 1, 2] and reader.skipped_lines == 0


def test_image_hash_is_computed_once_per_image_and_follows_a_resize(tmp_path, monkeypatch):
    from PIL import Image

    from vista_rl.store import images as store_images

    image = Image.new("RGB", (8, 8), (10, 20, 30))
    calls = []
    real = store_images.hashlib.sha256
    monkeypatch.setattr(store_images.hashlib, "sha256", lambda: calls.append(1) or real())
    first = image_hash(image)
    assert image_hash(image) == first and len(calls) == 1  # the second call used the cached digest
    assert image_hash(image.copy()) == first and len(calls) == 2  # a copy is hashed on its own
    image.thumbnail((4, 4))  # in place: the size changed, so the cached digest is stale
    assert image_hash(image) == image_hash(Image.new("RGB", (4, 4), (10, 20, 30))) != first


def test_the_fast_line_is_the_record_to_dict_gives(tmp_path):
    from dataclasses import dataclass

    from vista_rl.store.writer import to_json_line, trajectory_line
    from vista_rl.trajectory import TokenView, ToolCallRecord

    @dataclass
    class Box:
        x: int
        tags: tuple

    view = TokenView(input_ids=[1, 2, 3], loss_mask=[0, 1, 1], turn_ends=[2], turn_rewards=[1.0],
                     logprobs=[0.0, -0.5, float("nan")], image_refs=["a"], alignment=["exact"])
    trajectory = Trajectory("x", 3, turns=[Turn("obs", "Up\ud800", reward=1.0, image_refs=["a"],
                                                tool_calls=[ToolCallRecord("zoom", {"k": (1, 2)}, "ok", 1)],
                                                info={"box": Box(1, ("a",)), 7: {"inf": float("inf")}})],
                            metadata={"path": Path("/a"), "set": {2}}, token_view=view, turn_views=[view])
    fast = json.loads(trajectory_line(trajectory))
    assert fast == json.loads(to_json_line(trajectory.to_dict()))
    assert fast["turns"][0]["info"]["box"] == {"x": 1, "tags": ["a"]} and fast["token_view"]["logprobs"][2] is None
    odd_key = Trajectory("x", 4, metadata={(1, 2): "tuple key"})  # json.dumps refuses it: the old path
    assert json.loads(trajectory_line(odd_key))["metadata"] == {"(1, 2)": "tuple key"}


def test_a_failed_image_write_is_raised_and_no_later_line_names_a_missing_image(tmp_path):
    from PIL import Image

    from vista_rl.store.writer import RunWriteError

    good = Image.new("RGB", (4, 4), (1, 2, 3))
    bad = Image.new("CMYK", (4, 4))  # PNG cannot store CMYK: save_image raises on the writer thread
    writer = RunWriter(tmp_path, html=False)
    writer.write(Trajectory(COUNTER, 0, initial_images=[good]))
    writer.flush()
    assert len((tmp_path / "trajectories.jsonl").read_text().splitlines()) == 1  # on disk before close
    writer.write(Trajectory(COUNTER, 1, initial_images=[bad]))
    with pytest.raises(RunWriteError, match="CMYK"):
        writer.flush()
    writer.write(Trajectory(COUNTER, 2, initial_images=[good]))  # accepted, never written
    writer.close()
    seeds = [json.loads(line)["seed"] for line in (tmp_path / "trajectories.jsonl").read_text().splitlines()]
    assert seeds == [0]
    assert not writer._thread.is_alive()


def test_images_written_ahead_by_the_rollout_give_the_same_run(tmp_path):
    """``RolloutEngine.stream(image_sink=writer.write_images)`` (what ``vista eval`` does) hands the
    writer each turn's images before the model call; the run directory must be the one a run without
    it writes: the same lines, the same PNGs, and every image its lines name is on disk."""
    specs = list(episode_specs(COUNTER, range(3), group_size=2))
    plain = _write_run(tmp_path / "plain", specs)
    config = RunConfig(env={"id": COUNTER}, output_dir=str(tmp_path / "ahead"))
    handed: list[str] = []
    ahead = []
    images_dir = tmp_path / "ahead" / "images"
    with RunWriter(tmp_path / "ahead", config) as writer, RolloutEngine(CharTokenBackend(oracle=True)) as engine:

        def sink(images):
            handed.extend(image_hash(image) for image in images)
            writer.write_images(images)

        for trajectory in engine.stream(specs, image_sink=sink):
            writer.flush()  # what the sink queued is on disk before the trajectory itself is written
            shown = [image for turn in trajectory.turns for image in turn.images]
            assert shown and all((images_dir / f"{image_hash(image)}.png").is_file() for image in shown)
            writer.write(trajectory)
            ahead.append(trajectory.to_dict())
    assert ahead == plain
    named = {ref for record in RunReader(tmp_path / "ahead") for turn in record.turns for ref in turn.image_refs}
    assert set(handed) == named and len(handed) > len(named)  # each turn's images, repeats included
    assert {p.name for p in (tmp_path / "ahead" / "images").glob("*.png")} == \
        {p.name for p in (tmp_path / "plain" / "images").glob("*.png")}


def test_images_written_ahead_write_no_line(tmp_path):
    """Images queued with ``write_images`` reach disk on ``flush`` (each distinct one once), with no
    trajectory line."""
    from PIL import Image

    images = [Image.new("RGB", (8, 8), colour) for colour in ("red", "blue", "red")]
    with RunWriter(tmp_path) as writer:
        writer.write_images(images)
        writer.flush()
        assert {p.stem for p in (tmp_path / "images").glob("*.png")} == {image_hash(image) for image in images}
        assert (tmp_path / "trajectories.jsonl").read_bytes() == b""
