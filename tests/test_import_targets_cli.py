"""``vista train`` and run configs that name code (issue 33, item 4), through the real CLI entry point:
``--dry-run`` lists every import target (field path -> target), a run warns once for a target outside
the installed VISTA plugins, and ``--strict`` or ``VISTA_STRICT_PLUGINS=1`` refuses it with exit 2
before the target's module is imported (it would leave a mark) and before a run directory exists."""

from __future__ import annotations

import sys
import uuid
from pathlib import Path

import pytest
import yaml

from vista_rl.cli.main import main
from vista_rl.import_targets import ImportTargetWarning

pytest.importorskip("transformers")


def _run(argv: list[str]) -> int:
    try:
        main(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    return 0


class Setup:
    def __init__(self, tmp_path: Path, model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.module = f"outside_encoder_{uuid.uuid4().hex[:8]}"
        self.mark = tmp_path / "imported.mark"
        (tmp_path / f"{self.module}.py").write_text(
            f"from pathlib import Path\nPath({str(self.mark)!r}).write_text('imported')\n"
            "class Encoder:\n    def embed(self, images):\n        return [[1.0] for _ in images]\n"
            "def make_encoder() -> Encoder:\n    return Encoder()\n")
        monkeypatch.syspath_prepend(str(tmp_path))
        monkeypatch.delenv("VISTA_STRICT_PLUGINS", raising=False)
        self.run_dir = tmp_path / "run"
        self.config = tmp_path / "train.yaml"
        self.config.write_text(yaml.safe_dump({
            "output_dir": str(self.run_dir),
            "env": {"id": "svg/reconstruct-v0", "config": {"image_size": 56, "embedding_weight": 1.0,
                                                           "encoder": self.target}},
            "model": {"path": str(model_dir)},
            "rollout": {"max_turns": 1, "group_size": 2, "sampling": {"max_tokens": 4}},
            "trainer": {"steps": 1, "seeds_per_step": 2, "train_seeds": {"start": 0, "count": 20}},
            "eval": {"seeds": {"start": 1000, "count": 2}},
        }))

    @property
    def target(self) -> str:
        return f"{self.module}:make_encoder"

    def untouched(self) -> bool:
        return self.module not in sys.modules and not self.mark.exists() and not self.run_dir.exists()


@pytest.fixture
def setup(tmp_path: Path, tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Setup:
    return Setup(tmp_path, tiny_model_dir, monkeypatch)


def test_dry_run_lists_every_import_target_and_warns_for_code_outside_the_plugins(
        setup: Setup, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.warns(ImportTargetWarning, match=f"env.config.encoder imports '{setup.target}'"):
        assert _run(["train", str(setup.config), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert (f"import targets (config fields that name code to import):\n"
            f"  env.config.encoder -> {setup.target} (outside the installed VISTA plugins)") in out
    assert "nothing was trained" in out
    assert setup.untouched()
    # code of an installed plugin is listed with its owner, and no warning
    inside = "vista_plugin_svg.encoders:tiny_random_dinov2"
    assert _run(["train", str(setup.config), "--dry-run", "--set", f"env.config.encoder={inside}"]) == 0
    assert f"  env.config.encoder -> {inside} (vista-plugin-svg)" in capsys.readouterr().out
    assert _run(["train", str(setup.config), "--dry-run", "--set", "env.config.encoder=tiny-random"]) == 0
    assert "import targets (config fields that name code to import): none" in capsys.readouterr().out


@pytest.mark.parametrize("how", ["flag", "env-var"])
@pytest.mark.parametrize("dry_run", [False, True])
def test_strict_refuses_before_anything_is_imported(setup: Setup, how: str, dry_run: bool,
                                                    capsys: pytest.CaptureFixture[str],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    argv = ["train", str(setup.config), *(["--dry-run"] if dry_run else [])]
    if how == "flag":
        argv.append("--strict")
    else:
        monkeypatch.setenv("VISTA_STRICT_PLUGINS", "1")
    assert _run(argv) == 2
    err = capsys.readouterr().err
    assert "names code outside the installed VISTA plugins" in err
    assert f"env.config.encoder names '{setup.target}'" in err
    assert setup.untouched()


def test_strict_lets_a_config_of_plugin_code_through(setup: Setup, capsys: pytest.CaptureFixture[str]) -> None:
    assert _run(["train", str(setup.config), "--dry-run", "--strict", "--set", "env.config.encoder=tiny-random"]) == 0
    assert "nothing was trained" in capsys.readouterr().out


@pytest.mark.parametrize("how", ["flag", "env-var"])
def test_eval_strict_refuses_before_anything_is_imported(setup: Setup, how: str, capsys: pytest.CaptureFixture[str],
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    out = setup.run_dir.parent / "eval"
    argv = ["eval", str(setup.config), "--model", "scripted:oracle", "--episodes", "1", "--out", str(out)]
    if how == "flag":
        argv.append("--strict")
    else:
        monkeypatch.setenv("VISTA_STRICT_PLUGINS", "1")
    assert _run(argv) == 2
    assert f"env.config.encoder names '{setup.target}'" in capsys.readouterr().err
    assert setup.untouched() and not out.exists()


def test_eval_warns_naming_the_field_and_runs(setup: Setup) -> None:
    out = setup.run_dir.parent / "eval"
    with pytest.warns(ImportTargetWarning, match=f"env.config.encoder imports '{setup.target}'"):
        assert _run(["eval", str(setup.config), "--model", "scripted:oracle", "--episodes", "1",
                     "--out", str(out)]) == 0
    assert setup.mark.exists(), "without --strict the run does use the encoder it was given"
