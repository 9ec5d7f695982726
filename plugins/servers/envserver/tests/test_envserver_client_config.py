"""Client env config is data only (issue 22, items 1 and 2), over real HTTP on 127.0.0.1.

A client may not name code (``encoder: "os:abort"`` killed the server) or host files (a record's
``images: ["/etc/shadow"]`` returned pixels, or told the client the file exists), and the server
keeps serving after every refusal."""

from __future__ import annotations

import base64
import io
import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import pytest
from PIL import Image
from pydantic import BaseModel, ConfigDict
from vista_plugin_envserver.app import ServerSettings, create_app
from vista_plugin_envserver.client import EnvServerClient, EnvServerError
from vista_plugin_envserver.server import BackgroundServer

from vista_rl import Env, Observation, StepResult, config_fields

SVG = "svg/reconstruct-v0"
VQA = "vqa/short-answer-v0"
COLOUR = (200, 30, 60)


def _png(path: Path, colour: tuple[int, int, int] = COLOUR) -> Path:
    Image.new("RGB", (20, 12), colour).save(path)
    return path


def _record(image: str, record_id: str = "r1") -> dict[str, Any]:
    return {"id": record_id, "dataset": "client", "question": "What colour is 1/2 of it?", "answer": "red",
            "images": [image]}


def _refusal(client: EnvServerClient, env_id: str, config: dict[str, Any]) -> EnvServerError:
    with pytest.raises(EnvServerError) as caught:
        client.create(1, env_id=env_id, config=config)
    return caught.value


def _serving(client: EnvServerClient) -> bool:
    return client.health()["status"] == "ok"


@pytest.fixture(scope="module")
def host_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("client-config")
    root = base / "root"
    (root / "sub").mkdir(parents=True)
    outside = _png(base / "outside.png", (0, 0, 255))
    _png(root / "sub" / "inside.png")
    (root / "notes.txt").write_text("not an image")
    os.symlink(outside, root / "escape.png")
    records = base / "records.jsonl"
    records.write_text(json.dumps(_record("sub/inside.png")) + "\n")
    return {"root": root, "outside": outside, "records": records}


@pytest.fixture(scope="module")
def vqa_server(host_files: dict[str, Path]) -> Iterator[BackgroundServer]:
    settings = ServerSettings(env_ids=[VQA], records_root=str(host_files["root"]))
    with BackgroundServer(settings) as running:
        yield running


def test_import_target_is_refused_before_any_env_runs() -> None:
    """Issue 22 item 1: ``{"encoder": "os:abort"}`` was accepted and /step aborted the server."""
    with BackgroundServer(ServerSettings(env_ids=[SVG])) as server:
        client = EnvServerClient(server.url)
        for config in ({"encoder": "os:abort", "embedding_weight": 0.5}, {"encoder": None},
                       {"records_path": "/etc/passwd", "source": "records"}):
            refused = _refusal(client, SVG, config)
            key = next(iter(config))
            assert refused.status == 403 and repr(key) in refused.message, refused.message
        assert client.health()["sessions"]["open"] == 0  # nothing was built
        assert _serving(client)


def test_server_only_records_path_and_host_image_are_refused(host_files: dict[str, Path]) -> None:
    """Issue 22 item 2: a client unset the operator's records_path and read a host file's pixels."""
    settings = ServerSettings(env_ids=[VQA], env_config={VQA: {"records_path": str(host_files["records"])}})
    with BackgroundServer(settings) as server:
        client = EnvServerClient(server.url)
        refused = _refusal(client, VQA, {"records_path": None, "records": [_record(str(host_files["outside"]))]})
        assert refused.status == 403 and "'records_path'" in refused.message
        refused = _refusal(client, VQA, {"dataset_config": {"path": str(host_files["records"])}})
        assert refused.status == 403 and "'dataset_config'" in refused.message
        assert _serving(client)
        session = client.create(1, env_id=VQA)[0]  # the operator's own records still work
        assert not isinstance(client.reset([(session.id, 0)])[0], Exception)


def test_records_under_the_root_work_and_show_their_pixels(vqa_server: BackgroundServer) -> None:
    client = EnvServerClient(vqa_server.url)
    session = client.create(1, env_id=VQA, config={"records": [_record("sub/inside.png")]})[0]
    observation, info = client.reset([(session.id, 0)])[0]  # type: ignore[misc]
    assert info["record_id"] == "r1"
    assert observation.images[0].getpixel((3, 3)) == COLOUR


def test_inline_data_uri_images_work_without_a_root() -> None:
    buffer = io.BytesIO()
    Image.new("RGB", (9, 9), COLOUR).save(buffer, format="PNG")
    uri = "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode()
    with BackgroundServer(ServerSettings(env_ids=[VQA])) as server:
        client = EnvServerClient(server.url)
        session = client.create(1, env_id=VQA, config={"records": [_record(uri)]})[0]
        observation, _info = client.reset([(session.id, 0)])[0]  # type: ignore[misc]
        assert observation.images[0].getpixel((4, 4)) == COLOUR
        refused = _refusal(client, VQA, {"records": [_record("sub/inside.png")]})
        assert refused.status == 422 and "--records-root" in refused.message
        refused = _refusal(client, VQA, {"records": [_record("data:image/png;base64,bm90IGFuIGltYWdl")]})
        assert refused.status == 422 and "inline image" in refused.message


@pytest.mark.parametrize(("image", "words"), [
    ("/etc/shadow", "absolute"),
    ("C:\\Windows\\win.ini", "absolute"),
    ("sub/../../outside.png", "'..'"),
    ("escape.png", "symlink"),
])
def test_escapes_from_the_records_root_are_refused_naming_the_record(
        vqa_server: BackgroundServer, image: str, words: str) -> None:
    client = EnvServerClient(vqa_server.url)
    refused = _refusal(client, VQA, {"records": [_record("sub/inside.png", "fine"), _record(image, "bad-7")]})
    assert refused.status == 422 and words in refused.message and "'bad-7'" in refused.message
    assert "fine" not in refused.message
    assert _serving(client)


def test_missing_and_non_image_files_are_indistinguishable(vqa_server: BackgroundServer) -> None:
    """No existence oracle: a missing file and a file that is not an image get the same answer."""
    client = EnvServerClient(vqa_server.url)
    missing = _refusal(client, VQA, {"records": [_record("nothing-here.png")]})
    not_image = _refusal(client, VQA, {"records": [_record("notes.txt")]})
    assert missing.status == not_image.status == 422
    assert re.sub(r"'[^']*'", "X", missing.message) == re.sub(r"'[^']*'", "X", not_image.message)


def test_unmarked_strings_that_name_code_or_files_are_refused(vqa_server: BackgroundServer) -> None:
    """The default for fields nobody marked: import shapes, URLs and paths are not data."""
    client = EnvServerClient(vqa_server.url)
    for value in ("os:abort", "http://169.254.169.254/", "../secrets", "/etc/passwd", "~/.ssh/id_rsa"):
        refused = _refusal(client, VQA, {"tools": [value]})
        assert refused.status == 422 and "'tools[0]'" in refused.message, (value, refused.message)
    assert _serving(client)


class _Render(BaseModel):
    model_config = ConfigDict(extra="forbid")
    size: int = 8
    font_path: Annotated[str | None, config_fields.HostPath] = None


class _NestedConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    render: _Render = _Render()
    layers: list[_Render] = []


class _NestedEnv(Env):
    def __init__(self, **config: Any) -> None:
        self.config = _NestedConfig(**config)

    def reset(self, seed: int | None = None) -> tuple[Observation, dict[str, Any]]:
        return Observation(text="hi"), {"size": self.config.render.size}

    def step(self, action: str) -> StepResult:
        return StepResult(Observation(text="bye"), 0.0, True, False)


def test_a_marked_field_in_a_nested_model_is_refused() -> None:
    settings = ServerSettings(env_ids=["test/nested-v0"], config_classes={"test/nested-v0": _NestedConfig})
    app = create_app(settings, make_env=lambda _id, config: _NestedEnv(**config))
    with BackgroundServer(settings, app=app) as server:
        client = EnvServerClient(server.url)
        refused = _refusal(client, "test/nested-v0", {"render": {"size": 4, "font_path": "DejaVuSans.ttf"}})
        assert refused.status == 403 and "'render.font_path'" in refused.message
        refused = _refusal(client, "test/nested-v0", {"layers": [{"size": 2}, {"font_path": None}]})
        assert refused.status == 403 and "'layers[1].font_path'" in refused.message
        session = client.create(1, env_id="test/nested-v0", config={"render": {"size": 4}})[0]
        _observation, info = client.reset([(session.id, 0)])[0]  # type: ignore[misc]
        assert info["size"] == 4


def test_aliases_do_not_bypass_a_marker() -> None:
    from pydantic import AliasChoices, Field

    class Aliased(BaseModel):
        path: Annotated[str | None, config_fields.HostPath] = Field(None, validation_alias=AliasChoices("path", "file"))

    with pytest.raises(config_fields.ClientConfigRefused) as caught:
        config_fields.check_client_config(Aliased, {"file": "notes"})
    assert caught.value.status == 403 and caught.value.key == "file"


def test_a_refusal_quoting_a_lone_surrogate_is_still_a_4xx(vqa_server: BackgroundServer) -> None:
    """The refusal quotes the client's key; a lone surrogate in it made the error itself a 500
    (issue 22 fuzz)."""
    import httpx

    config = {"k\ud800": "x" * 300}  # a value past the 256-character limit: the refusal quotes its key
    body = json.dumps({"env_id": VQA, "config": config, "count": 1})
    response = httpx.post(f"{vqa_server.url}/sessions", content=body, headers={"content-type": "application/json"})
    assert 400 <= response.status_code < 500 and "\\ud800" in response.json()["error"]
    assert _serving(EnvServerClient(vqa_server.url))
