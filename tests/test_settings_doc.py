"""Every run-config setting has a description and a row in docs/settings.md (datasette's discipline
for its settings): a new field without ``Field(description=...)``, or a page not regenerated with
``python scripts/gen_settings.py``, fails here."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from pydantic import BaseModel, Field

REPO = Path(__file__).resolve().parents[1]


def _generator() -> ModuleType:
    if "gen_settings" not in sys.modules:
        spec = importlib.util.spec_from_file_location("gen_settings", REPO / "scripts" / "gen_settings.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules["gen_settings"] = module
        spec.loader.exec_module(module)
    return sys.modules["gen_settings"]


def test_every_setting_has_a_description() -> None:
    gen = _generator()
    rows = list(gen.settings(gen.run_config_model()))
    assert len(rows) > 60  # guards the walk: it reaches nested sections (rollout.sampling, trainer.train_seeds)
    missing = [row.key for row in rows if not row.description]
    assert not missing, f"run-config settings without Field(description=...): {missing}"


def test_settings_page_is_current() -> None:
    gen = _generator()
    page = (REPO / "docs" / "settings.md").read_text(encoding="utf-8")
    for row in gen.settings(gen.run_config_model()):
        assert f"| `{row.key}` |" in page, f"docs/settings.md lacks {row.key}: run python scripts/gen_settings.py"
    assert page == gen.render(gen.run_config_model()), "docs/settings.md is stale: run python scripts/gen_settings.py"
    assert "(settings.md)" in (REPO / "docs" / "index.md").read_text(encoding="utf-8")


def test_defaults_come_from_the_section_default() -> None:
    """``trainer.train_seeds`` is ``SeedRange(start=0, count=1000)``, not ``SeedRange()``'s 64."""
    gen = _generator()
    rows = {row.key: row for row in gen.settings(gen.run_config_model())}
    assert rows["trainer.train_seeds.count"].default == "1000"
    assert rows["eval.seeds.start"].default == "100000"
    assert rows["env.id"].default == "(required)"
    assert rows["rollout.sampling.max_tokens"].default == "128"  # the section's override of Sampling's 256
    assert rows["rollout.tools.<id>.use"].description


def test_an_undocumented_setting_is_reported() -> None:
    gen = _generator()

    class Inner(BaseModel):
        documented: int = Field(1, ge=0, description="has one")
        bare: str = "x"

    class Outer(BaseModel):
        inner: Inner = Field(default_factory=lambda: Inner(documented=5))
        mode: str | None = None

    rows = {row.key: row for row in gen.settings(Outer)}
    assert set(rows) == {"inner.documented", "inner.bare", "mode"}
    assert [key for key, row in rows.items() if not row.description] == ["inner.bare", "mode"]
    assert rows["inner.documented"].default == "5" and rows["inner.documented"].type == "int (>= 0)"
    assert rows["mode"].type == "str | null"
    page = gen.render(Outer)
    assert "| `inner.bare` | str | `\"x\"` |  |" in page
