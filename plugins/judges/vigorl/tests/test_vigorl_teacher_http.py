"""The teacher can be any registered backend: here the ``openai`` backend talking real HTTP on
127.0.0.1 to an OpenAI-compatible server (``vista_plugin_transformers.server``) that wraps the
scripted noisy teacher, so images travel as base64 data URLs and back, as with a vLLM teacher."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("vista_plugin_openai")

from tests_helpers_vigorl import run, write_tasks  # noqa: E402
from vista_plugin_transformers.server import BackgroundServer, create_app  # noqa: E402
from vista_plugin_vigorl.mcts.toy import NoisyTeacher  # noqa: E402


def test_search_with_an_openai_compatible_teacher(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tasks = write_tasks(tmp_path, 3)
    trees = tmp_path / "trees.jsonl"
    teacher = NoisyTeacher(noise=0.0)
    with BackgroundServer(create_app(teacher, "noisy-teacher", batch_window_ms=5.0)) as server:
        code = run(["mcts", "search", str(tasks), "--out", str(trees), "--model", "openai",
                    "-M", f"base_url={server.url}/v1", "-M", "model=noisy-teacher", "-M", "logprobs=false",
                    "--set", "n_simulations=3", "--set", "max_depth=4", "--workers", "2"])
    assert code == 0, capsys.readouterr().err
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["searched"] == 3 and summary["failed"] == 0
    assert teacher.calls > 0
    rows = [json.loads(line) for line in trees.read_text().splitlines()]
    # the teacher read the pixels it was sent: some thought reports the square's true colour
    texts = json.dumps([row["tree"] for row in rows])
    assert any(f"shows a {row['true_answer']} square" in texts for row in rows)
