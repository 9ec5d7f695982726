"""The local engine as a plugin: found through its entry point like any third-party one, first-party
for provider ties, and a real dry run through the CLI with the tiny Qwen2.5-VL."""

from __future__ import annotations

from pathlib import Path

import yaml

import vista_rl
from vista_rl.cli import main


def test_the_engine_and_families_come_from_this_distribution() -> None:
    by_kind = {kind: {spec.id: spec for spec in vista_rl.host().registry(kind)} for kind in ("engines", "families")}
    assert by_kind["engines"]["local"].target == "vista_plugin_local.trainer:LocalEngine"
    assert set(by_kind["families"]) >= {"qwen2-vl", "internvl"}
    plugin = next(p for p in vista_rl.get_plugins() if p.module == "vista_plugin_local")
    assert plugin.distribution == "vista-plugin-local" and not plugin.builtin and plugin.first_party
    assert not plugin.errors
    assert plugin.items["engines"] == ["local"]
    assert sorted(plugin.items["families"]) == ["internvl", "qwen2-vl"]


def test_loading_the_plugin_imports_no_torch() -> None:
    """Listing engines must stay fast: the hooks name targets, the modules load on make."""
    import subprocess
    import sys

    code = ("import sys, vista_rl; vista_rl.host().registry('engines').ids(); "
            "import vista_plugin_local; print(sorted(m for m in ('torch', 'transformers') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.strip() == "[]"


def test_dry_run_through_the_cli(tmp_path: Path, tiny_model_dir: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    config = tmp_path / "run.yaml"
    config.write_text(yaml.safe_dump({
        "env": {"id": "oddshape/odd-colour-v0", "config": {"grid": 2}},
        "model": {"path": str(tiny_model_dir)},
        "output_dir": str(tmp_path / "run"),
        "engine_config": {"local": {"device": "cpu"}},
    }))
    main(["train", str(config), "--dry-run"])
    assert "nothing was trained" in capsys.readouterr().out
    assert not (tmp_path / "run").exists()
