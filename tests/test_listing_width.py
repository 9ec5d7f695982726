"""``vista plugins`` and ``vista envs|tools|judges`` read at 80 columns (issue 39: at 80 columns every
column folded, ids and distribution names broke mid-word, e.g. ``chartqa/record`` / ``s-v0``)."""

from __future__ import annotations

import re

import pytest
from click.testing import CliRunner

import vista_rl
from vista_rl.cli.main import build_cli

#: One of the long real ids: at 80 columns the old table folded it into three pieces.
LONG_ID = "count-objects/count-circles-v0"


class ErrPlugin:
    @vista_rl.hookimpl
    def register_envs(self, register: vista_rl.RegisterEnv) -> None:
        register("widthtest/a-long-environment-name-v0", "tests.test_sdk_checks:GoodEnv",
                 description="An env whose description is long enough that it has to wrap over several "
                             "lines of the description column, between words.")


def listing(monkeypatch: pytest.MonkeyPatch, columns: int, *args: str) -> str:
    monkeypatch.setenv("COLUMNS", str(columns))
    result = CliRunner().invoke(build_cli(), list(args))
    assert result.exit_code == 0, result.output
    return result.output


def test_plugins_table_fits_80_columns_and_keeps_names_whole(monkeypatch: pytest.MonkeyPatch, vista_plugin) -> None:
    name = vista_plugin(ErrPlugin(), name="widthtest", distribution="vista-plugin-widthtest")
    message = "a load problem reported by a test, long enough to be wider than any column of the table"
    vista_rl.host().report_error(f"vista-plugin-widthtest:{name}", message)
    text = listing(monkeypatch, 80, "plugins")
    assert max(len(line) for line in text.splitlines()) <= 80
    plugins = [info for info in vista_rl.host().plugins() if not info.builtin]
    assert len(plugins) > 10
    for info in plugins:
        assert info.name in text and info.distribution in text, info.distribution
        for ids in info.items.values():
            for item_id in ids:
                assert re.search(rf"(^|[\s,:]){re.escape(item_id)}($|[\s,])", text, re.M), item_id
    # a problem is one whole line under the table, not a narrow column
    assert f"plugin widthtest (vista-plugin-widthtest 0.0.0): {message}" in " ".join(text.split())
    assert "1 error(s), listed below" in text


@pytest.mark.parametrize("kind", ["envs", "tools", "judges"])
def test_item_tables_fit_80_columns_and_keep_ids_whole(kind: str, monkeypatch: pytest.MonkeyPatch,
                                                       vista_plugin) -> None:
    vista_plugin(ErrPlugin(), name="widthtest", distribution="vista-plugin-widthtest")
    text = listing(monkeypatch, 80, kind)
    assert max(len(line) for line in text.splitlines()) <= 80
    specs = list(vista_rl.host().registry(kind))
    assert specs
    for spec in specs:
        assert re.search(rf"│ {re.escape(spec.id)} ", text), spec.id  # whole, in the id column
        assert f"from {spec.distribution} {spec.version}" in text
    if kind == "envs":
        assert LONG_ID in text and "widthtest/a-long-environment-name-v0" in text
        assert "tests.test_sdk_checks:GoodEnv" not in text  # the target only where there is room


def test_wide_terminal_adds_the_target_column(monkeypatch: pytest.MonkeyPatch, vista_plugin) -> None:
    vista_plugin(ErrPlugin(), name="widthtest", distribution="vista-plugin-widthtest")
    text = listing(monkeypatch, 160, "envs")
    assert "target" in text and "tests.test_sdk_checks:GoodEnv" in text
    assert max(len(line) for line in text.splitlines()) <= 160
