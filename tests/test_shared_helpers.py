"""The single shared helpers that replaced hand-written copies: JSON ``default=``, the
``module:attr`` resolver and the observation fingerprint."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from pydantic import BaseModel

from vista_rl._jsonable import json_default
from vista_rl._registry import is_import_path, resolve_import_path
from vista_rl.observation import Observation, observation_fingerprint


class _Point(BaseModel):
    x: int


class _BrokenToList:
    def tolist(self) -> list[int]:
        raise RuntimeError("no")

    def __str__(self) -> str:
        return "broken"


def test_json_default_turns_odd_values_into_plain_json() -> None:
    record = {"arr": np.arange(3), "scalar": np.float32(0.5), "model": _Point(x=2), "set": {7},
              "path": Path("/tmp/x"), "broken": _BrokenToList()}
    assert json.loads(json.dumps(record, default=json_default)) == {
        "arr": [0, 1, 2], "scalar": 0.5, "model": {"x": 2}, "set": [7], "path": "/tmp/x", "broken": "broken"}


def test_resolve_import_path() -> None:
    assert resolve_import_path("vista_rl.observation:Observation.segments") is Observation.segments
    with pytest.raises(AttributeError):
        resolve_import_path("vista_rl.observation:NoSuchThing")
    with pytest.raises(ModuleNotFoundError):
        resolve_import_path("vista_rl.no_such_module:X")


@pytest.mark.parametrize(("text", "expected"), [
    ("pkg.mod:Env", True), ("sokoban", False), ("gymnasium/FrozenLake-v1", False), ("a/b:c", False)])
def test_is_import_path(text: str, expected: bool) -> None:
    assert is_import_path(text) is expected


def test_observation_fingerprint_sees_text_pixels_and_mode() -> None:
    red = Image.new("RGB", (2, 2), "red")
    base = observation_fingerprint(Observation("a <image>", [red]))
    assert observation_fingerprint(Observation("a <image>", [red.copy()])) == base
    assert observation_fingerprint(Observation("b <image>", [red])) != base
    assert observation_fingerprint(Observation("a <image>", [Image.new("RGB", (2, 2), "blue")])) != base
    assert observation_fingerprint(Observation("a <image>", [red.convert("RGBA")])) != base
