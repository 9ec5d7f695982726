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


def test_serve_warns_on_a_non_loopback_bind_without_a_token(tiny_model_dir: Path) -> None:
    import os
    import subprocess
    import sys

    from vista_plugin_transformers.server import free_port, wait_for_health

    port = free_port("0.0.0.0")
    command = [sys.executable, "-c", "from vista_rl.cli.main import main; main()", "serve", str(tiny_model_dir),
               "--host", "0.0.0.0", "--port", str(port), "--device", "cpu"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               env={**os.environ, "OMP_NUM_THREADS": "1"})
    try:
        wait_for_health(f"http://127.0.0.1:{port}", process, timeout_s=120)
    finally:
        process.terminate()
        output = process.communicate(timeout=30)[0].decode()
    assert "warning: serving on 0.0.0.0 without --token" in output
