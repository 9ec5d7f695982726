"""Plugin discovery, isolation of broken plugins and the environment switches."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import vista_rl
from tests.conftest import run_vista, write_distribution
from vista_rl._plugins import PluginHost, PluginInfo
from vista_rl._providers import CORE_DISTRIBUTION, FIRST_PARTY_DISTRIBUTIONS
from vista_rl.errors import ConfigError, DuplicateItemError, PluginLoadError, UnknownItemError

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


def test_duplicate_id_between_third_parties_is_ambiguous_whatever_the_load_order(install_plugin, fresh_host):
    """Neither provider is first-party or pinned: VISTA refuses to guess (load order decides nothing)."""
    install_plugin("vista-plugin-goodpkg", GOOD)
    install_plugin("vista-plugin-dupe", DUPLICATE, version="9.9")
    with pytest.raises(DuplicateItemError) as raised:
        fresh_host.spec("envs", "goodpkg/echo-v0")
    message = str(raised.value)
    assert "vista-plugin-goodpkg 1.2.3" in message and "vista-plugin-dupe 9.9" in message
    assert "VISTA_PREFER=goodpkg/echo-v0=vista-plugin-dupe" in message
    infos = {info.distribution: info for info in fresh_host.plugins()}
    for dist in ("vista-plugin-goodpkg", "vista-plugin-dupe"):
        assert any("goodpkg/echo-v0" in e and "vista-plugin-dupe" in e and "vista-plugin-goodpkg" in e
                   for e in infos[dist].errors), infos[dist].errors
    assert fresh_host.spec("envs", "goodpkg/echo-v1").distribution == "vista-plugin-goodpkg"  # the rest works
    assert "goodpkg/echo-v0" in {spec.id for spec in fresh_host.registry("envs")}  # listed, with both providers


@pytest.mark.parametrize(("pin", "winner"), [
    ("goodpkg/echo-v0=vista-plugin-dupe", "vista-plugin-dupe"),
    ("goodpkg=vista_plugin_goodpkg", "vista-plugin-goodpkg"),  # a namespace pin; names compare canonically
])
def test_prefer_pins_the_provider_of_a_duplicate_id(install_plugin, fresh_host, monkeypatch, pin, winner):
    install_plugin("vista-plugin-goodpkg", GOOD)
    install_plugin("vista-plugin-dupe", DUPLICATE, version="9.9")
    monkeypatch.setenv("VISTA_PREFER", pin)
    assert fresh_host.spec("envs", "goodpkg/echo-v0").distribution == winner
    loser = next(info for info in fresh_host.plugins() if info.distribution not in (winner, "vista-rl")
                 and info.distribution in ("vista-plugin-goodpkg", "vista-plugin-dupe"))
    # the user chose: a warning for the other provider, not an error (strict mode stays quiet)
    assert any("pinned" in w and f"VISTA_PREFER=goodpkg/echo-v0={loser.distribution}" in w for w in loser.warnings)
    assert not loser.errors


def test_prefer_from_the_plugins_config_file(install_plugin, fresh_host, monkeypatch, tmp_path):
    install_plugin("vista-plugin-goodpkg", GOOD)
    install_plugin("vista-plugin-dupe", DUPLICATE, version="9.9")
    (tmp_path / "cfg").mkdir()
    (tmp_path / "cfg" / "plugins.toml").write_text('[prefer]\n"goodpkg/echo-v0" = "vista-plugin-dupe"\n')
    monkeypatch.setenv("VISTA_CONFIG_DIR", str(tmp_path / "cfg"))
    assert fresh_host.spec("envs", "goodpkg/echo-v0").distribution == "vista-plugin-dupe"
    monkeypatch.setenv("VISTA_PREFER", "goodpkg/echo-v0=vista-plugin-goodpkg")  # the variable overrides the file
    other = PluginHost()
    assert other.spec("envs", "goodpkg/echo-v0").distribution == "vista-plugin-goodpkg"


def test_malformed_prefer_is_a_clear_error(fresh_host, monkeypatch):
    monkeypatch.setenv("VISTA_PREFER", "sokoban")
    with pytest.raises(ConfigError, match="not ID=DISTRIBUTION"):
        fresh_host.load()


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


def test_trace_uses_pluggy_tracing(install_plugin, fresh_host: PluginHost, monkeypatch, capsys):
    install_plugin("vista-plugin-goodpkg", GOOD)
    monkeypatch.setenv("VISTA_TRACE_PLUGINS", "1")
    fresh_host.registry("envs")
    err = capsys.readouterr().err
    # pluggy's hook tracer prints the call with its arguments (our register names the plugin) ...
    assert "vista: trace:   register_envs [hook]" in err
    assert "register: <register envs for vista-plugin-goodpkg:vista_plugin_goodpkg>" in err
    assert "finish register_envs --> [] [hook]" in err
    # ... and every registered item goes to the same pluggy tracer, under its own tag
    assert "envs: goodpkg/echo-v0 -> vista_plugin_oddshape.env:OddColourEnv from " \
           "vista-plugin-goodpkg:vista_plugin_goodpkg [vista]" in err
    monkeypatch.delenv("VISTA_TRACE_PLUGINS")
    quiet = PluginHost()
    quiet.registry("envs")
    assert "trace" not in capsys.readouterr().err


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


LEGACY = """
import pluggy

hookimpl = pluggy.HookimplMarker("vista")  # how plugins marked hooks before the rename to vista_rl

@hookimpl
def register_judges(register):
    register("legacy/judge", "vista_rl.judges:ExactMatchJudge", description="old group")
"""


def test_legacy_entry_point_group_still_loads_with_a_warning(install_plugin, fresh_host: PluginHost, capsys):
    install_plugin("vista-plugin-legacy", LEGACY, group="vista")
    spec = fresh_host.spec("judges", "legacy/judge")
    assert spec.distribution == "vista-plugin-legacy"
    err = capsys.readouterr().err
    assert "old group 'vista'" in err and "entry-points.vista_rl" in err


def test_a_distribution_in_both_groups_loads_once(plugin_site, fresh_host: PluginHost):
    write_distribution(plugin_site, "vista-plugin-dual", "1.0", "dual", "vista_plugin_dual", GOOD)
    info_dir = plugin_site / "vista_plugin_dual-1.0.dist-info"
    (info_dir / "entry_points.txt").write_text("[vista_rl]\ndual = vista_plugin_dual\n\n"
                                               "[vista]\ndual = vista_plugin_dual\n")
    assert fresh_host.spec("envs", "goodpkg/echo-v0").distribution == "vista-plugin-dual"
    assert [info.key for info in fresh_host.plugins() if info.name == "dual"] == ["vista-plugin-dual:dual"]


def test_a_legacy_group_plugin_of_another_distribution_does_not_shadow_or_vanish(install_plugin, fresh_host):
    install_plugin("vista-plugin-dual-old", LEGACY, group="vista", entry_name="dual")
    install_plugin("vista-plugin-dual-new", GOOD, entry_name="dual")
    assert fresh_host.spec("envs", "goodpkg/echo-v0").distribution == "vista-plugin-dual-new"
    assert fresh_host.spec("judges", "legacy/judge").distribution == "vista-plugin-dual-old"
    duals = {info.distribution: info for info in fresh_host.plugins() if info.name == "dual"}
    assert set(duals) == {"vista-plugin-dual-old", "vista-plugin-dual-new"}
    assert any("vista-plugin-dual-new" in w for w in duals["vista-plugin-dual-old"].warnings)


@pytest.mark.parametrize(("requires", "warns"), [
    (("vista-rl>=0.1,<0.2",), False),
    (("vista-rl>=9.0",), True),
    (("vista-rl<0.1",), True),
    (("numpy>=1", "vista-rl[train]>=0.1"), False),
    ((), False),
])
def test_core_range_mismatch_is_a_warning(install_plugin, fresh_host: PluginHost, requires, warns, capsys):
    install_plugin("vista-plugin-ranged", GOOD, requires=requires)
    info = next(info for info in fresh_host.plugins() if info.distribution == "vista-plugin-ranged")
    assert bool(info.warnings) is warns
    assert not info.errors
    assert ("declares vista-rl" in capsys.readouterr().err) is warns
    assert fresh_host.spec("envs", "goodpkg/echo-v0").distribution == "vista-plugin-ranged"  # still usable


# ------------------------------------------------------------- hook calls go through pluggy
def _order_plugin(log: list[str], tag: str, **opts: bool) -> object:
    class Plugin:
        @vista_rl.hookimpl(**opts)
        def register_judges(self, register):
            log.append(tag)

    return Plugin()


def test_tryfirst_and_trylast_order_the_plugins(fresh_host: PluginHost):
    fresh_host.load()
    log: list[str] = []
    # pluggy calls later registrations first, so register the tryfirst one first and the trylast one
    # last: only honoured markers can put them at the ends
    fresh_host.register_object(_order_plugin(log, "first", tryfirst=True), PluginInfo("first", "d-first", "0", "m"))
    fresh_host.register_object(_order_plugin(log, "plain"), PluginInfo("plain", "d-plain", "0", "m"))
    fresh_host.register_object(_order_plugin(log, "last", trylast=True), PluginInfo("last", "d-last", "0", "m"))
    log.clear()
    fresh_host.registry("judges")
    assert log == ["first", "plain", "last"]


def test_a_hook_wrapper_sees_every_plugins_call_and_its_error(fresh_host: PluginHost):
    fresh_host.load()
    seen: list[tuple[str, str | None]] = []

    class Wrapper:
        @vista_rl.hookimpl(wrapper=True)
        def register_judges(self, register):
            try:
                result = yield
            except Exception as exc:
                seen.append((repr(register), type(exc).__name__))
                raise
            seen.append((repr(register), None))
            return result

    class Broken:
        @vista_rl.hookimpl
        def register_judges(self, register):
            register("broken/first", "vista_rl.judges:ExactMatchJudge")
            raise RuntimeError("boom in judges")

    fresh_host.register_object(Wrapper(), PluginInfo("wrapper", "d-wrapper", "0", "m"))
    fresh_host.register_object(Broken(), PluginInfo("broken", "d-broken", "0", "m"))
    judges = fresh_host.registry("judges")
    assert ("<register judges for d-broken:broken>", "RuntimeError") in seen
    assert ("<register judges for vista-rl:vista.judges>", None) in seen  # the built-in plugin, wrapped too
    assert "exact" in judges and "broken/first" in judges  # the failure stayed with its plugin
    broken = next(info for info in fresh_host.plugins() if info.key == "d-broken:broken")
    assert broken.errors == ["raised in register_judges: RuntimeError: boom in judges"]


def test_hookcall_monitoring_sees_each_plugin_alone(fresh_host: PluginHost):
    fresh_host.load()
    calls: list[list[str]] = []
    fresh_host.pm.add_hookcall_monitoring(
        lambda name, impls, kwargs: calls.append([impl.plugin_name for impl in impls]) if name == "register_envs"
        else None,
        lambda outcome, name, impls, kwargs: None,
    )
    fresh_host.registry("envs")
    assert calls and all(len(impls) == 1 for impls in calls)
    assert ["vista-plugin-sokoban:sokoban"] in calls


# ----------------------------------------------------------------- plugin hijack (issue 13)
NAME_SQUATTER = """
import vista_rl

@vista_rl.hookimpl
def register_envs(register):
    register("squat/env-v0", "vista_plugin_oddshape.env:OddColourEnv")
"""
ID_THIEF = """
import vista_rl

@vista_rl.hookimpl
def register_envs(register):
    register("sokoban/sokoban-v0", "vista_plugin_oddshape.env:OddColourEnv", description="not sokoban")
"""


def test_a_clashing_entry_point_name_does_not_replace_the_real_plugin(install_plugin, fresh_host, capsys):
    """Attack: another distribution declares entry point ``sokoban``; it used to replace
    vista-plugin-sokoban silently, and the sokoban envs vanished."""
    install_plugin("sokoban-squatter", NAME_SQUATTER, entry_name="sokoban", module="sokoban_squatter")
    envs = fresh_host.registry("envs")
    assert fresh_host.spec("envs", "sokoban/sokoban-v0").distribution == "vista-plugin-sokoban"
    assert "squat/env-v0" in envs  # both are loaded, each under its own identity
    sokobans = {info.key: info for info in fresh_host.plugins() if info.name == "sokoban"}
    assert set(sokobans) == {"vista-plugin-sokoban:sokoban", "sokoban-squatter:sokoban"}
    squatter, real = sokobans["sokoban-squatter:sokoban"], sokobans["vista-plugin-sokoban:sokoban"]
    assert any("vista-plugin-sokoban" in w and "VISTA_DISABLE_PLUGINS=sokoban-squatter:sokoban" in w
               for w in squatter.warnings), squatter.warnings
    assert any("sokoban-squatter" in w for w in real.warnings)  # reported with both names
    assert not any("VISTA_DISABLE_PLUGINS" in w for w in real.warnings)  # no advice to disable the real one
    assert "sokoban-squatter" in capsys.readouterr().err


def test_disabling_by_distribution_removes_only_the_squatter(install_plugin, fresh_host, monkeypatch):
    install_plugin("sokoban-squatter", NAME_SQUATTER, entry_name="sokoban", module="sokoban_squatter")
    monkeypatch.setenv("VISTA_DISABLE_PLUGINS", "sokoban-squatter:sokoban")
    keys = {info.key for info in fresh_host.plugins()}
    assert "vista-plugin-sokoban:sokoban" in keys and "sokoban-squatter:sokoban" not in keys


@pytest.mark.parametrize("entry_name", ["aaa-dupenv", "zzz-dupenv"])
def test_a_duplicate_id_never_wins_by_load_order(install_plugin, fresh_host, entry_name):
    """Attack: entry point ``aaa-dupenv`` registers ``sokoban/sokoban-v0`` and won the id by
    alphabetical load order; the warning then told the user to disable the *real* plugin."""
    install_plugin("dupenv", ID_THIEF, entry_name=entry_name, module="dupenv_module")
    spec = fresh_host.spec("envs", "sokoban/sokoban-v0")
    assert (spec.distribution, spec.target) == ("vista-plugin-sokoban", "vista_plugin_sokoban.env:SokobanEnv")
    infos = {info.key: info for info in fresh_host.plugins()}
    thief, real = infos[f"dupenv:{entry_name}"], infos["vista-plugin-sokoban:sokoban"]
    assert real.errors == []
    [error] = thief.errors
    assert "vista-plugin-sokoban" in error and "dupenv" in error  # both named
    assert f"VISTA_DISABLE_PLUGINS=dupenv:{entry_name}" in error  # the advice names the newcomer ...
    assert "VISTA_DISABLE_PLUGINS=sokoban" not in error and "VISTA_DISABLE_PLUGINS=vista-plugin" not in error


def test_a_user_can_pin_the_newcomer_on_purpose(install_plugin, fresh_host, monkeypatch):
    install_plugin("dupenv", ID_THIEF, entry_name="aaa-dupenv", module="dupenv_module")
    monkeypatch.setenv("VISTA_PREFER", "sokoban=dupenv")
    monkeypatch.setenv("VISTA_STRICT_PLUGINS", "1")  # a deliberate pin is no plugin error
    assert fresh_host.spec("envs", "sokoban/sokoban-v0").distribution == "dupenv"
    assert fresh_host.spec("envs", "sokoban/sokoban-easy-v0").distribution == "vista-plugin-sokoban"


def test_first_party_list_matches_the_repository():
    """A first-party plugin missing from the list would lose its ids to any squatter's tie."""
    from pathlib import Path

    import tomllib

    root = Path(__file__).resolve().parents[1]
    names = {tomllib.loads(path.read_text())["project"]["name"] for path in root.glob("plugins/*/*/pyproject.toml")}
    assert names | {CORE_DISTRIBUTION} == set(FIRST_PARTY_DISTRIBUTIONS)


def test_strict_mode_errors_are_one_line_and_debug_adds_the_traceback(install_plugin):
    site = install_plugin("vista-plugin-importfail", FAILS_ON_IMPORT, version="0.0.9")
    strict = run_vista("envs", site=site, env={"VISTA_STRICT_PLUGINS": "1"})
    assert strict.returncode == 2
    lines = [line for line in strict.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, strict.stderr
    assert lines[0].startswith("Error: vista-plugin-importfail 0.0.9 (plugin 'vista_plugin_importfail') "
                               "failed to import: RuntimeError: boom at import")
    assert "--debug" in lines[0]
    debug = run_vista("--debug", "envs", site=site, env={"VISTA_STRICT_PLUGINS": "1"})
    assert debug.returncode == 2
    assert "Traceback (most recent call last)" in debug.stderr and 'raise RuntimeError("boom at import")' in debug.stderr


def test_cli_shows_hijack_reports_with_both_names(install_plugin):
    install_plugin("sokoban-squatter", NAME_SQUATTER, entry_name="sokoban", module="sokoban_squatter")
    install_plugin("vista-plugin-goodpkg", GOOD)
    site = install_plugin("vista-plugin-dupe", DUPLICATE, version="9.9")
    listing = run_vista("plugins", "--json", site=site)
    assert listing.returncode == 0, listing.stderr
    keys = {p["key"]: p for p in json.loads(listing.stdout)}
    assert {"vista-plugin-sokoban:sokoban", "sokoban-squatter:sokoban"} <= set(keys)
    assert keys["vista-plugin-sokoban:sokoban"]["first_party"] and not keys["sokoban-squatter:sokoban"]["first_party"]
    envs = run_vista("envs", site=site)
    assert envs.returncode == 0, envs.stderr
    text = " ".join(envs.stdout.split())  # rich wraps long lines
    assert "(or [prefer] in plugins.toml)" in text  # printed literally, not eaten as rich markup


def test_strict_mode_makes_a_hijack_attempt_an_error(install_plugin, fresh_host, monkeypatch):
    install_plugin("dupenv", ID_THIEF, entry_name="aaa-dupenv", module="dupenv_module")
    monkeypatch.setenv("VISTA_STRICT_PLUGINS", "1")
    with pytest.raises(PluginLoadError, match=r"^dupenv 1\.2\.3 \(plugin 'aaa-dupenv'\) duplicate id: envs id "
                                              r"'sokoban/sokoban-v0' is also registered by vista-plugin-sokoban"):
        fresh_host.registry("envs")


def test_an_unhashable_plugin_object_works_and_spoils_nothing(fresh_host: PluginHost):
    """pluggy accepts any object as a plugin, but its subset caller keeps plugins in a set."""
    from types import SimpleNamespace

    fresh_host.load()
    plugin = SimpleNamespace(register_judges=vista_rl.hookimpl(
        lambda register: register("ns/judge", "vista_rl.judges:ExactMatchJudge")))
    fresh_host.register_object(plugin, PluginInfo("ns", "d-ns", "0", "m"))
    judges = fresh_host.registry("judges")
    assert "ns/judge" in judges and "exact" in judges
    assert [info.errors for info in fresh_host.plugins() if info.errors] == []
    fresh_host.unregister("ns")
    assert "ns/judge" not in fresh_host.registry("judges")


# ------------------------------------------------- plugin identity, completed (issue 22, items 5 and 6)
VERSION_THIEF = """
import vista_rl

@vista_rl.hookimpl
def register_envs(register):
    register("sokoban/sokoban-v1", "vista_plugin_oddshape.env:OddColourEnv", description="a newer sokoban?")
"""


def test_an_unversioned_id_resolves_among_one_providers_versions(install_plugin, fresh_host):
    """Attack: a distribution registering ``sokoban/sokoban-v1`` took ``sokoban/sokoban`` (the newest
    version won, whoever provided it), with no warning."""
    install_plugin("sokoban-next", VERSION_THIEF, module="sokoban_next")
    spec = fresh_host.spec("envs", "sokoban/sokoban")
    assert (spec.id, spec.distribution) == ("sokoban/sokoban-v0", "vista-plugin-sokoban")
    assert fresh_host.spec("envs", "sokoban/sokoban-v1").distribution == "sokoban-next"  # asked for by full id
    infos = {info.key: info for info in fresh_host.plugins()}
    [error] = infos["sokoban-next:sokoban_next"].errors
    assert "vista-plugin-sokoban" in error and "sokoban-next" in error and "sokoban/sokoban" in error
    assert infos["vista-plugin-sokoban:sokoban"].errors == []


def test_an_unversioned_id_split_between_third_parties_is_refused_naming_both(install_plugin, fresh_host):
    install_plugin("vista-plugin-goodpkg", GOOD)
    install_plugin("goodpkg-next", GOOD.replace('"goodpkg/echo-v0"', '"goodpkg/echo-v7"')
                   .replace('"goodpkg/echo-v1"', '"goodpkg/echo-v8"'), module="goodpkg_next")
    with pytest.raises(DuplicateItemError, match=r"goodpkg-next .*vista-plugin-goodpkg|vista-plugin-goodpkg .*goodpkg-next"):
        fresh_host.spec("envs", "goodpkg/echo")
    assert fresh_host.spec("envs", "goodpkg/echo-v8").distribution == "goodpkg-next"


def test_a_pin_chooses_whose_versions_an_unversioned_id_means(install_plugin, fresh_host, monkeypatch):
    install_plugin("sokoban-next", VERSION_THIEF, module="sokoban_next")
    monkeypatch.setenv("VISTA_PREFER", "sokoban/sokoban=sokoban-next")
    assert fresh_host.spec("envs", "sokoban/sokoban").id == "sokoban/sokoban-v1"


def test_strict_mode_refuses_a_version_clash(install_plugin, fresh_host, monkeypatch):
    install_plugin("sokoban-next", VERSION_THIEF, module="sokoban_next")
    monkeypatch.setenv("VISTA_STRICT_PLUGINS", "1")
    with pytest.raises(PluginLoadError, match="sokoban-next .*version clash.*vista-plugin-sokoban"):
        fresh_host.registry("envs")


COMMAND_THIEF = """
import click
import vista_rl

@click.command("{name}")
def thief():
    click.echo("hijacked")

@vista_rl.hookimpl
def register_commands(cli):
    cli.add_command(thief)
"""


@pytest.mark.parametrize("name", ["eval", "tool-server"])
def test_a_second_distribution_cannot_replace_a_command(install_plugin, name):
    """Attack: a distribution whose ``register_commands`` adds ``eval`` or ``tool-server`` replaced
    ours (load order decided) and strict mode said nothing."""
    site = install_plugin("cmd-thief", COMMAND_THIEF.replace("{name}", name), module="cmd_thief")
    result = run_vista(name, "--help", site=site)
    assert result.returncode == 0, result.stderr
    assert "hijacked" not in result.stdout and "Usage: vista " + name in result.stdout
    warning = " ".join(result.stderr.split())
    assert f"`vista {name}`" in warning and "cmd-thief" in warning
    assert ("vista-rl" if name == "eval" else "vista-plugin-toolserve") in warning
    strict = run_vista(name, "--help", site=site, env={"VISTA_STRICT_PLUGINS": "1"})
    assert strict.returncode == 2 and "command clash" in strict.stderr and "cmd-thief" in strict.stderr


def test_the_datasets_plugin_still_extends_an_existing_data_group():
    result = run_vista("data", "--help")
    assert result.returncode == 0, result.stderr
    assert "convert" in result.stdout and "command clash" not in result.stderr


def test_a_command_guard_keeps_the_first_third_party_and_reports_both():
    import click

    from vista_rl._commands import CommandGuard, Owner

    group = click.Group("vista")
    guard = CommandGuard(group)
    first, second = click.Command("hello"), click.Command("hello")
    owner_a = Owner("a-dist 1 (plugin 'a')", "a-dist", "a-dist:a", False)
    owner_b = Owner("b-dist 2 (plugin 'b')", "b-dist", "b-dist:b", False)
    reports: list[str] = []
    snapshot = guard.before()
    group.add_command(first)
    guard.after(snapshot, owner_a, lambda clash: reports.append(clash.message()))
    snapshot = guard.before()
    group.add_command(second)
    guard.after(snapshot, owner_b, lambda clash: reports.append(clash.message()))
    assert group.commands["hello"] is first
    [message] = reports
    assert "a-dist" in message and "b-dist" in message and "VISTA_DISABLE_PLUGINS=b-dist:b" in message
