"""Record sources as remote clients see them: which fields are server-only, how client records'
images are resolved, and that inline images are checked in pixels before they are decoded."""

from __future__ import annotations

import base64
import io
import struct
import zlib
from pathlib import Path
from typing import Any

import pytest
from PIL import Image
from vista_plugin_vqa.records import load_images

import vista_rl
from vista_rl import TaskRecord, config_fields

RECORD_ENVS = ["vqa/short-answer-v0", "vqa/multiple-choice-v0", "grounding/screenspot-v0"]


def _data_uri(image: Image.Image) -> str:
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode()


def _png_header_claiming(width: int, height: int) -> bytes:
    """A valid PNG signature, IHDR chunk for a huge RGBA image and IEND, and no pixel data at all."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 6, 0, 0, 0)) + chunk(
        b"IEND", b"")


def _config_class(env_id: str) -> Any:
    return config_fields.config_class_of(vista_rl.host().spec("envs", env_id).load())


@pytest.mark.parametrize("env_id", RECORD_ENVS)
@pytest.mark.parametrize("key", ["records_path", "dataset_config"])
def test_record_files_and_factory_arguments_are_server_only(env_id: str, key: str) -> None:
    config_class = _config_class(env_id)
    assert config_class is not None, f"{env_id} must declare its config class"
    with pytest.raises(config_fields.ClientConfigRefused) as caught:
        config_fields.check_client_config(config_class, {key: None})
    assert caught.value.status == 403 and caught.value.key == key


@pytest.mark.parametrize("env_id", RECORD_ENVS)
def test_client_record_paths_resolve_inside_the_root_only(env_id: str, tmp_path: Path) -> None:
    Image.new("RGB", (8, 8), "red").save(tmp_path / "a.png")
    record = {"id": "q1", "dataset": "d", "question": "a/b?", "answer": [1, 2, 3, 4], "images": ["a.png"]}
    checked = config_fields.check_client_config(_config_class(env_id), {"records": [record]}, records_root=tmp_path)
    assert checked["records"][0]["images"] == [str((tmp_path / "a.png").resolve())]
    assert checked["records"][0]["question"] == "a/b?"  # record text is data, not a path
    with pytest.raises(config_fields.ClientConfigRefused) as caught:
        config_fields.check_client_config(_config_class(env_id), {"records": [{**record, "images": ["/etc/hosts"]}]},
                                          records_root=tmp_path)
    assert caught.value.status == 422 and "'q1'" in caught.value.message and "absolute" in caught.value.message


def test_load_images_reads_inline_data_uris() -> None:
    record = TaskRecord(id="x", dataset="d", question="q", images=[_data_uri(Image.new("RGB", (5, 3), (1, 2, 3)))])
    (image,) = load_images(record)
    assert image.size == (5, 3) and image.getpixel((0, 0)) == (1, 2, 3)


def test_a_pixel_bomb_header_is_refused_before_decoding(tmp_path: Path) -> None:
    # 81 M pixels: under Pillow's own bomb guard (89 M), 324 MB of RGBA if it were decoded
    header = _png_header_claiming(9_000, 9_000)
    inline = "data:image/png;base64," + base64.b64encode(header).decode()
    (tmp_path / "bomb.png").write_bytes(header)
    for ref in (inline, str(tmp_path / "bomb.png")):
        with pytest.raises(ValueError, match="9000x9000 image is over the limit"):  # refused from the header
            load_images(TaskRecord(id="b", dataset="d", question="q", images=[ref]))
    with pytest.raises(config_fields.ClientConfigRefused) as caught:  # the server refuses it too
        config_fields.resolve_record_image(inline, None, "record r")
    assert "inline image" in caught.value.message


def test_a_record_env_runs_on_inline_images() -> None:
    records = [{"id": "c1", "dataset": "client", "question": "What colour?", "answer": "red",
                "images": [_data_uri(Image.new("RGB", (16, 16), (255, 0, 0)))]}]
    env = vista_rl.make_env("vqa/short-answer-v0", records=records, prompt_format="no_think")
    observation, info = env.reset(seed=0)
    assert info["record_id"] == "c1" and observation.images[0].getpixel((8, 8)) == (255, 0, 0)
    assert env.step("<answer>red</answer>").reward == 1.0
