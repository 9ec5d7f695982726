"""Plugin discovery, isolation of broken plugins and the environment switches."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import run_vista
from vista_rl.errors import PluginLoadError, UnknownItemError
from vista_rl.plugins import PluginHost

GOOD = """
import vista_rl

@vista_rl.hookimpl
def register_envs(register):
    register("goodpkg/echo-v0", "vista_plugin_oddshape.env:OddColourEnv", description="good")
    register("goodpkg/echo-v1", "vista_plugin_oddshape.env:OddColourEnv", description="good v1")
"""
FAILS_ON_IMPORT = """
raise RuntimeError("boom at import")
"""
RAISES_IN_HOOK = """
import vista_rl

@vista_rl.hookimpl
def register_envs(register):
    register("raiser/first-v0", "x:y")
    raise ValueError("boom in hook")
"""
DUPLICATE = """
import vista_rl

@vista_rl.hookimpl
def register_envs(register):
    register("goodpkg/echo-v0", "x:y")
"""
SIDE_EFFECT = """
import os, pathlib
pathlib.Path(os.environ["SIDE_EFFECT_FILE"]).write_text("imported")
import vista_rl

@vista_rl.hookimpl
def register_judges(register):
    register("side/judge", "vista_rl.judges:ExactMatchJudge")
"""


def test_discovers_installed_distribution(install_plugin, fresh_host: PluginHost):
    install_plugin("vista-plugin-goodpkg", GOOD, version="2.0.1")
    spec = fresh_host.spec("envs", "goodpkg/echo-v0")
    assert (spec.distribution, spec.version, spec.plugin) == ("vista-plugin-goodpkg", "2.0.1", "vista_plugin_goodpkg")
    assert spec.target == "vista_plugin_oddshape.env:OddColourEnv"  # still a lazy string until made
    env = fresh_host.make("envs", "goodpkg/echo-v0", grid=2)
    assert env.config.grid == 2


def test_unversioned_id_picks_newest(install_plugin, fresh_host: PluginHost):
    install_plugin("vista-plugin-goodpkg", GOOD)
    assert fresh_host.spec("envs", "goodpkg/echo").id == "goodpkg/echo-v1"
    assert fresh_host.spec("envs", "echo").id == "goodpkg/echo-v1"


def test_broken_plugins_are_isolated(install_plugin, fresh_host: PluginHost, capsys):
    install_plugin("vista-plugin-goodpkg", GOOD)
    install_plugin("vista-plugin-importfail", FAILS_ON_IMPORT, version="0.0.9")
    install_plugin("vista-plugin-raiser", RAISES_IN_HOOK, version="3.1.4")
    ids = fresh_host.registry("envs").ids()
    assert "goodpkg/echo-v0" in ids
    assert "raiser/first-v0" in ids  # registered before the hook raised: nothing is lost
    infos = {info.distribution: info for info in fresh_host.plugins()}
    assert any("boom at import" in e and "failed to import" in e for e in infos["vista-plugin-importfail"].errors)
    assert any("boom in hook" in e for e in infos["vista-plugin-raiser"].errors)
    assert infos["vista-plugin-goodpkg"].errors == []
    warnings = capsys.readouterr().err
    assert "vista-plugin-importfail 0.0.9" in warnings and "vista-plugin-raiser 3.1.4" in warnings


def test_strict_mode_reraises(install_plugin, fresh_host: PluginHost, monkeypatch):
    install_plugin("vista-plugin-importfail", FAILS_ON_IMPORT)
    monkeypatch.setenv("VISTA_STRICT_PLUGINS", "1")
    with pytest.raises(PluginLoadError, match="vista-plugin-importfail.*boom at import"):
        fresh_host.load()


def test_strict_mode_reraises_hook_errors(install_plugin, fresh_host: PluginHost, monkeypatch):
    install_plugin("vista-plugin-raiser", RAISES_IN_HOOK)
    monkeypatch.setenv("VISTA_STRICT_PLUGINS", "1")
    with pytest.raises(PluginLoadError, match="boom in hook"):
        fresh_host.registry("envs")


def test_duplicate_id_names_both_plugins(install_plugin, fresh_host: PluginHost, monkeypatch):
    install_plugin("vista-plugin-goodpkg", GOOD)
    install_plugin("vista-plugin-dupe", DUPLICATE, version="9.9")
    fresh_host.registry("envs")
    errors = [e for info in fresh_host.plugins() for e in info.errors]
    assert any("vista-plugin-goodpkg" in e and "vista-plugin-dupe" in e for e in errors), errors
    # entry points load in name order; the first registration wins and stays usable
    assert fresh_host.spec("envs", "goodpkg/echo-v0").distribution == "vista-plugin-dupe"
    assert fresh_host.spec("envs", "goodpkg/echo-v1").distribution == "vista-plugin-goodpkg"


def test_unknown_id_suggests_close_matches_and_lists_plugins(install_plugin, fresh_host: PluginHost):
    install_plugin("vista-plugin-goodpkg", GOOD)
    with pytest.raises(UnknownItemError) as info:
        fresh_host.make("envs", "goodpkg/ecko-v0")
    message = str(info.value)
    assert "goodpkg/echo-v0" in message and "vista-plugin-goodpkg 1.2.3" in message


def test_load_only_and_disable_switches(install_plugin, fresh_host: PluginHost, monkeypatch):
    install_plugin("vista-plugin-goodpkg", GOOD)
    install_plugin("vista-plugin-raiser", RAISES_IN_HOOK)
    monkeypatch.setenv("VISTA_LOAD_PLUGINS", "vista_plugin_goodpkg")
    names = {info.name for info in fresh_host.plugins()}
    assert "vista_plugin_goodpkg" in names and "vista_plugin_raiser" not in names
    assert "oddshape" not in names
    monkeypatch.delenv("VISTA_LOAD_PLUGINS")
    monkeypatch.setenv("VISTA_DISABLE_PLUGINS", "vista_plugin_raiser,oddshape")
    other = PluginHost()
    names = {info.name for info in other.plugins()}
    assert "vista_plugin_goodpkg" in names and "vista_plugin_raiser" not in names and "oddshape" not in names


def test_trace_prints_hook_calls(install_plugin, fresh_host: PluginHost, monkeypatch, capsys):
    install_plugin("vista-plugin-goodpkg", GOOD)
    monkeypatch.setenv("VISTA_TRACE_PLUGINS", "1")
    fresh_host.registry("envs")
    err = capsys.readouterr().err
    assert "register_envs -> vista_plugin_goodpkg" in err and "goodpkg/echo-v0" in err


def test_loading_is_idempotent(install_plugin, fresh_host: PluginHost):
    install_plugin("vista-plugin-goodpkg", GOOD)
    fresh_host.load()
    fresh_host.load()
    assert fresh_host.registry("envs").ids().count("goodpkg/echo-v0") == 1
    assert len([p for p in fresh_host.plugins() if p.name == "vista_plugin_goodpkg"]) == 1


def test_import_vista_runs_no_plugin_code(install_plugin, tmp_path):
    site = install_plugin("vista-plugin-side", SIDE_EFFECT)
    marker = tmp_path / "marker.txt"
    code = ("import sys, vista_rl; "
            "assert not any(m.startswith('vista_plugin') for m in sys.modules), sorted(sys.modules); "
            "print('clean')")
    env = {"PYTHONPATH": str(site), "SIDE_EFFECT_FILE": str(marker), "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    assert not marker.exists()
    # ...and the first registry query does run it
    code = "import vista_rl; vista_rl.make_judge('side/judge'); print('ok')"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    assert marker.read_text() == "imported"


def test_temporary_plugin_fixture(vista_plugin):
    import vista_rl

    class Plugin:
        @vista_rl.hookimpl
        def register_judges(self, register):
            register("temp/always-one", "vista_rl.judges:ExactMatchJudge")

    vista_plugin(Plugin(), name="temp-plugin")
    assert vista_rl.make_judge("temp/always-one").score("Cat.", "cat").score == 1.0


def test_temporary_plugin_is_gone_after_the_test():
    import vista_rl

    with pytest.raises(UnknownItemError):
        vista_rl.make_judge("temp/always-one")


# ------------------------------------------------------------------------------------- the CLI
def test_cli_lists_broken_plugins_and_keeps_working(install_plugin):
    install_plugin("vista-plugin-goodpkg", GOOD)
    site = install_plugin("vista-plugin-importfail", FAILS_ON_IMPORT, version="0.0.9")
    listing = run_vista("plugins", "--json", site=site)
    assert listing.returncode == 0, listing.stderr
    plugins = {p["distribution"]: p for p in json.loads(listing.stdout)}
    assert plugins["vista-plugin-importfail"]["errors"] and "boom at import" in plugins["vista-plugin-importfail"]["errors"][0]
    assert plugins["vista-plugin-goodpkg"]["items"]["envs"] == ["goodpkg/echo-v0", "goodpkg/echo-v1"]
    envs = run_vista("envs", site=site)
    assert envs.returncode == 0 and "goodpkg/echo-v0" in envs.stdout and "boom at import" in envs.stdout
    strict = run_vista("envs", site=site, env={"VISTA_STRICT_PLUGINS": "1"})
    assert strict.returncode != 0 and "boom at import" in strict.stderr


def test_cli_plugins_json_lists_the_example_plugin():
    listing = run_vista("plugins", "--json")
    assert listing.returncode == 0, listing.stderr
    plugins = {p["distribution"]: p for p in json.loads(listing.stdout)}
    oddshape = plugins["vista-plugin-oddshape"]
    assert oddshape["version"] == "0.1.0"
    assert "oddshape/odd-colour-v0" in oddshape["items"]["envs"]
    assert "register_envs" in oddshape["hooks"]


def test_cli_version_lists_plugins():
    done = run_vista("--version")
    assert done.returncode == 0
    assert done.stdout.startswith("vista-rl 0.1.0") and "vista-plugin-oddshape 0.1.0" in done.stdout


@pytest.mark.parametrize("kind", ["envs", "tools", "judges", "estimators", "models", "datasets", "engines"])
def test_cli_kind_listing_json(kind):
    done = run_vista(kind, "--json")
    assert done.returncode == 0, done.stderr
    items = json.loads(done.stdout)
    assert isinstance(items, list)
    for item in items:
        assert {"id", "distribution", "version", "target"} <= set(item)


def test_routed_ids_and_positional_only_make(vista_plugin):
    import vista_rl

    def make_proxy(target: str, kind: str = "k", item_id: str = "i") -> dict:
        return {"target": target, "kind": kind, "item_id": item_id}

    class Plugin:
        @vista_rl.hookimpl
        def register_envs(self, register):
            register("proxy/*", make_proxy, route_argument="target")

    vista_plugin(Plugin())
    made = vista_rl.host().make("envs", "proxy/sokoban/sokoban-v0", kind="x", item_id="y")
    assert made == {"target": "sokoban/sokoban-v0", "kind": "x", "item_id": "y"}
    with pytest.raises(UnknownItemError):
        vista_rl.host().make("envs", "proxy/")
