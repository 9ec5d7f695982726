"""InternVL as the second family of the transformers plugin: ``vista model init-tiny --family internvl``,
the backend (batched generation with images), ``vista eval`` and ``vista serve`` over real HTTP, all
on a tiny random ``InternVLForConditionalGeneration``."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner
from PIL import Image
from vista_plugin_transformers.backend import TransformersBackend
from vista_plugin_transformers.server import BackgroundServer, create_app

from vista_rl import Message, SamplingParams, image_to_data_url
from vista_rl.cli import build_cli, main
from vista_rl.store import RunReader


@pytest.fixture(scope="module")
def internvl(tiny_internvl_dir: Path) -> TransformersBackend:
    return TransformersBackend(path=str(tiny_internvl_dir), device="cpu")


def _chat(colour: str, images: int = 1) -> list[Message]:
    slots = " ".join("<image>" for _ in range(images))
    return [Message("system", "Answer with a colour."),
            Message("user", f"{slots} Which colour?", [Image.new("RGB", (48, 30), colour) for _ in range(images)])]


def test_init_tiny_family_internvl_writes_a_loadable_model(tmp_path: Path) -> None:
    result = CliRunner().invoke(build_cli(), ["model", "init-tiny", "--family", "internvl", str(tmp_path / "m")])
    assert result.exit_code == 0, result.output
    config = json.loads((tmp_path / "m" / "config.json").read_text())
    assert config["model_type"] == "internvl" and config["architectures"] == ["InternVLForConditionalGeneration"]
    assert json.loads((tmp_path / "m" / "vista_tiny_model.json").read_text())["arch"] == "internvl"
    bad = CliRunner().invoke(build_cli(), ["model", "init-tiny", "--family", "llava", str(tmp_path / "x")])
    assert bad.exit_code != 0 and "qwen2_5_vl, internvl" in bad.output


def test_batched_greedy_equals_one_at_a_time(internvl: TransformersBackend) -> None:
    chats = [_chat("red"), _chat("blue", images=2), _chat("green")]
    params = SamplingParams(temperature=0.0, max_tokens=6)
    batched = [out[0] for out in internvl.generate(chats, params)]
    alone = [internvl.generate([chat], params)[0][0] for chat in chats]
    assert [g.token_ids for g in batched] == [g.token_ids for g in alone]
    context = internvl.tokenizer.convert_tokens_to_ids("<IMG_CONTEXT>")
    assert [g.prompt_token_ids.count(context) for g in batched] == [1, 2, 1]  # one 28x28 tile = 1 token
    assert all(len(g.logprobs) == len(g.token_ids) > 0 for g in batched)


def test_vista_eval_runs_one_episode(tmp_path: Path, tiny_internvl_dir: Path,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run"
    try:
        main(["eval", "--env", "oddshape/odd-colour-v0", "--model", f"transformers:{tiny_internvl_dir}",
              "--episodes", "1", "--max-tokens", "8", "--out", str(out), "--no-html"])
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    text = capsys.readouterr()
    assert code == 0, text.out + text.err
    (trajectory,) = list(RunReader(out))
    assert trajectory.failure is None and trajectory.num_turns >= 1
    assert trajectory.token_view is not None and len(trajectory.token_view.image_refs) == 1  # the grid image
    assert trajectory.turns[0].response  # the random model's text reached the env (and its parser)
    assert json.loads((out / "metrics.json").read_text())["episodes"] == 1


@pytest.fixture(scope="module")
def server(internvl: TransformersBackend) -> Iterator[BackgroundServer]:
    with BackgroundServer(create_app(internvl, "tiny-internvl", batch_window_ms=20.0)) as running:
        yield running


def test_serve_answers_image_chats_as_the_backend_does(server: BackgroundServer, internvl: TransformersBackend) -> None:
    url = image_to_data_url(Image.new("RGB", (48, 30), "red"))
    payload = {"model": "tiny-internvl", "temperature": 0.0, "max_tokens": 6, "return_token_ids": True,
               "messages": [{"role": "system", "content": "Answer with a colour."},
                            {"role": "user", "content": [{"type": "image_url", "image_url": {"url": url}},
                                                         {"type": "text", "text": " Which colour?"}]}]}
    response = httpx.post(f"{server.url}/v1/chat/completions", json=payload, timeout=60)
    assert response.status_code == 200, response.text
    choice = response.json()["choices"][0]
    direct = internvl.generate([_chat("red")], SamplingParams(temperature=0.0, max_tokens=6))[0][0]
    assert choice["token_ids"] == direct.token_ids and choice["message"]["content"] == direct.text
    # InternVL's image tokens are the model's own: as text they are refused, not fed to the model
    raw = {**payload, "messages": [{"role": "user", "content": "<IMG_CONTEXT> hi"}]}
    assert httpx.post(f"{server.url}/v1/chat/completions", json=raw, timeout=60).status_code == 400
