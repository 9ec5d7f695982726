"""The plugin's commands, through the real ``vista`` CLI group."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from vista_rl.cli import build_cli


def test_init_tiny_writes_a_loadable_model(tmp_path: Path) -> None:
    result = CliRunner().invoke(build_cli(), ["model", "init-tiny", str(tmp_path / "m"), "--seed", "2"])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "m" / "model.safetensors").exists()
    assert '"seed": 2' in (tmp_path / "m" / "vista_tiny_model.json").read_text()


def test_serve_is_listed_with_its_options() -> None:
    result = CliRunner().invoke(build_cli(), ["serve", "--help"])
    assert result.exit_code == 0
    assert "--batch-window-ms" in result.output and "--port" in result.output
