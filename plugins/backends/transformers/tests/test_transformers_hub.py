"""Resolving a model spec before loading (issue 13 item 7): a path-like typo fails at once, a hub
id honours offline mode, and an unreachable hub fails within a short timeout, never after minutes
of retries.  The unreachable hub is a real closed port on 127.0.0.1."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import pytest
from vista_plugin_transformers.backend import TransformersBackend
from vista_plugin_transformers.hub import resolve_pretrained

from vista_rl.model_paths import ModelPathError


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_a_path_like_spec_that_does_not_exist_fails_at_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "runs").mkdir()
    for spec in ("runs/tiny-typo", "./tiny-typo", str(tmp_path / "nope"), "a/b/c"):
        with pytest.raises(ModelPathError, match="does not exist"):
            TransformersBackend(path=spec)


def test_an_existing_directory_is_used_as_it_is(tiny_model_dir: Path) -> None:
    assert resolve_pretrained(str(tiny_model_dir)) == str(tiny_model_dir)


def test_offline_a_hub_id_must_be_in_the_cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ModelPathError, match="not in the local Hugging Face cache"):
        resolve_pretrained("someorg/no-such-model")


def test_an_unreachable_hub_fails_fast_with_what_to_do(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from huggingface_hub import constants

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(constants, "ENDPOINT", f"http://127.0.0.1:{_closed_port()}")
    monkeypatch.setenv("VISTA_HUB_TIMEOUT_S", "3")
    monkeypatch.chdir(tmp_path)
    started = time.monotonic()
    with pytest.raises(ModelPathError, match="could not be reached") as caught:
        TransformersBackend(path="someorg/no-such-model")
    assert "HF_HUB_OFFLINE=1" in str(caught.value)
    assert time.monotonic() - started < 60  # no retry loop (the original took 148 s)
