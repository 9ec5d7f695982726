"""``vista check-env ID [--sheet FILE.png]`` (vista-rl-sdk): the conformance check on an installed env,
and a contact sheet of what the model sees (issue 39: a maze drawn into the top-left corner of an
oversized black image passed every check; only looking showed it)."""

from __future__ import annotations

from pathlib import Path

import pytest
from PIL import Image

import vista_rl
from tests.cli_testkit import run_vista
from tests.test_sdk_checks import CorneredMaze, GoodEnv, RaisesOnGarbage
from vista_rl_sdk.contact_sheet import BACKGROUND, FRAME, GAP, LABEL_HEIGHT, TILE


class CheckPlugin:
    @vista_rl.hookimpl
    def register_envs(self, register: vista_rl.RegisterEnv) -> None:
        register("check/cornered-v0", CorneredMaze, description="maze in a corner")
        register("check/good-v0", GoodEnv, description="fine", check_args={"config": {}})
        register("check/broken-v0", RaisesOnGarbage, description="raises on garbage")


@pytest.fixture(autouse=True)
def check_envs(vista_plugin):
    vista_plugin(CheckPlugin(), name="check")



def test_sheet_shows_the_oversized_black_canvas(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sheet = tmp_path / "out" / "sheet.png"
    code, text = run_vista(capsys, "check-env", "check/cornered-v0", "--sheet", str(sheet), "--no-cross-process")
    assert code == 0, text
    assert f"Contact sheet of seeds 0-2: {sheet}" in text
    assert "WARN" in text and "top-left 64x64 pixels" in text  # check_env's warning, printed
    image = Image.open(sheet).convert("RGB")
    cell_height = TILE + LABEL_HEIGHT + 2 * GAP
    assert image.height == 3 * cell_height + GAP  # one row per seed
    for row, seed in enumerate(range(3)):
        expected, _ = CorneredMaze().reset(seed=seed)
        left, top = GAP, GAP + row * cell_height + LABEL_HEIGHT
        tile = image.crop((left, top, left + TILE, top + TILE))
        # the 256x256 observation is shown at its size: the 64x64 scene top-left, black elsewhere
        assert tile.tobytes() == expected.images[0].tobytes()
        assert image.getpixel((left - 1, top - 1)) == FRAME  # framed, so the black border reads as image
        assert image.getpixel((left - 3, top + TILE // 2)) == BACKGROUND


def test_passing_env_lists_its_checks(capsys: pytest.CaptureFixture[str]) -> None:
    code, text = run_vista(capsys, "check-env", "check/good-v0", "--no-cross-process", "--seeds", "2")
    assert code == 0, text
    assert "check_env check/good-v0 (vista-test-plugin 0.0.0), config {}" in text
    assert "ok    the oracle action steps without error" in text
    assert "WARN" not in text and "check/good-v0 passed" in text


def test_installed_env_with_its_registered_check_args(capsys: pytest.CaptureFixture[str]) -> None:
    """A real installed plugin, the fresh-process determinism check included."""
    code, text = run_vista(capsys, "check-env", "oddshape/odd-colour-v0", "--seeds", "2")
    assert code == 0, text
    assert "ok    reset is deterministic across processes" in text


def test_failing_env_exits_1_naming_each_problem(capsys: pytest.CaptureFixture[str]) -> None:
    code, text = run_vista(capsys, "check-env", "check/broken-v0", "--no-cross-process")
    assert code == 1
    assert "FAIL  step raised on garbage" in text and "ok    " in text
    assert "check/broken-v0 failed" in text


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["check/goood-v0"], "check/good-v0"),  # an unknown id suggests the close one
        (["check/good-v0", "--config", "{nope"], "--config"),
        (["check/good-v0", "--config", "[1]"], "JSON object"),
        (["check/good-v0", "--seeds", "0"], "--seeds"),
    ],
)
def test_bad_input_is_a_clear_error(args: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, text = run_vista(capsys, "check-env", *args)
    assert code != 0 and message in text, text
