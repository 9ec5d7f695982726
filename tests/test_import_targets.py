"""Run configs name code: every ``ImportTarget`` field (the svg env's ``encoder: "pkg.mod:factory"``)
is something a local run imports and calls.  ``vista_rl.import_targets`` finds each one with its
dotted field path, tells code of the installed VISTA plugins from anything else, warns once for the
rest, and in strict mode (``--strict``, ``VISTA_STRICT_PLUGINS=1``) refuses before anything is
imported (issue 33, item 4).  The targets outside are real modules on ``sys.path`` whose import
would leave a mark, so "not imported" is checked, not assumed."""

from __future__ import annotations

import sys
import uuid
import warnings
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Annotated, Any

import pytest
from pydantic import BaseModel

import vista_rl
from vista_rl import config_fields
from vista_rl.config import RunConfig
from vista_rl.import_targets import (
    ImportTargetRefused,
    ImportTargetUse,
    ImportTargetWarning,
    check_import_targets,
    find_import_targets,
    import_path_of,
    import_targets_listing,
    strict_import_targets,
    vista_packages,
)

SVG = "svg/reconstruct-v0"


class OutsideModule(SimpleNamespace):
    name: str
    mark: Path

    @property
    def target(self) -> str:
        return f"{self.name}:make_encoder"

    def untouched(self) -> bool:
        return self.name not in sys.modules and not self.mark.exists()


@pytest.fixture
def outside_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> OutsideModule:
    """A module on sys.path that belongs to no VISTA plugin; importing it writes a mark."""
    name = f"not_a_vista_plugin_{uuid.uuid4().hex[:8]}"
    mark = tmp_path / "imported.mark"
    (tmp_path / f"{name}.py").write_text(
        f"from pathlib import Path\nPath({str(mark)!r}).write_text('imported')\n"
        "class Encoder:\n    def embed(self, images):\n        return [[1.0] for _ in images]\n"
        "def make_encoder() -> Encoder:\n    return Encoder()\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    return OutsideModule(name=name, mark=mark)


def svg_run(encoder: str) -> RunConfig:
    return RunConfig.model_validate({"env": {"id": SVG, "config": {"embedding_weight": 1.0, "encoder": encoder}}})


def test_the_svg_encoder_is_found_with_its_field_path_and_owner(outside_module: OutsideModule) -> None:
    outside = find_import_targets(svg_run(outside_module.target))
    assert outside == [ImportTargetUse("env.config.encoder", outside_module.target, None)]
    assert outside[0].outside and outside[0].module == outside_module.name
    inside = find_import_targets(svg_run("vista_plugin_svg.encoders:tiny_random_dinov2"))
    assert inside == [ImportTargetUse("env.config.encoder", "vista_plugin_svg.encoders:tiny_random_dinov2",
                                      "vista-plugin-svg")]
    assert not inside[0].outside
    for not_code in ("tiny-random", "hf:dinov2", "hf:facebook/dinov2-small", "models/dino"):
        assert find_import_targets(svg_run(not_code)) == [], not_code
    assert outside_module.untouched()


def test_envs_run_in_ray_actors_are_followed(outside_module: OutsideModule) -> None:
    """The ``ray`` env imports what its ``env`` names inside the actor (``ray/pkg.mod:Factory`` or
    ``env: pkg.mod:Factory``), and the env it wraps has its own config: both are found."""
    factory = outside_module.target
    cases = [
        ({"id": f"ray/{factory}"}, [("env.id", factory)]),
        ({"id": "ray", "config": {"env": factory}}, [("env.config.env", factory)]),
        ({"id": f"ray/{SVG}", "config": {"config": {"embedding_weight": 1.0, "encoder": factory}}},
         [("env.config.config.encoder", factory)]),
        ({"id": "ray", "config": {"env": SVG, "config": {"embedding_weight": 1.0, "encoder": factory}}},
         [("env.config.config.encoder", factory)]),
        ({"id": "ray", "config": {"env": SVG, "config": {"encoder": "tiny-random"}}}, []),
    ]
    for env, expected in cases:
        uses = find_import_targets(RunConfig.model_validate({"env": env}))
        assert [(use.field, use.target) for use in uses] == expected, env
        assert all(use.outside for use in uses)
    assert outside_module.untouched()


def test_installed_plugins_and_the_core_are_vista_packages() -> None:
    owners = vista_packages()
    assert owners["vista_rl"] == "vista-rl"
    assert owners["vista_plugin_svg"] == "vista-plugin-svg"
    assert "os" not in owners and "subprocess" not in owners


def test_outside_targets_warn_naming_the_field_and_the_target(outside_module: OutsideModule,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("VISTA_STRICT_PLUGINS", raising=False)
    with pytest.warns(ImportTargetWarning) as caught:
        uses = check_import_targets(svg_run(outside_module.target))
    assert [str(w.message) for w in caught] == [str(caught[0].message)]
    message = str(caught[0].message)
    assert "env.config.encoder" in message and repr(outside_module.target) in message
    assert "--strict" in message and "VISTA_STRICT_PLUGINS=1" in message
    assert [use.field for use in uses] == ["env.config.encoder"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # code of an installed plugin is no news
        check_import_targets(svg_run("vista_plugin_svg.encoders:tiny_random_dinov2"))
    assert outside_module.untouched()


def test_python_shows_the_warning_once_per_process(outside_module: OutsideModule) -> None:
    run = svg_run(outside_module.target)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")  # what a `vista` process runs with
        for _ in range(3):
            check_import_targets(run, strict=False)
    assert len(caught) == 1 and caught[0].category is ImportTargetWarning


@pytest.mark.parametrize("how", ["argument", "env-var", "context"])
def test_strict_mode_refuses_before_anything_is_imported(outside_module: OutsideModule, how: str,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    run = svg_run(outside_module.target)
    with pytest.raises(ImportTargetRefused) as refused:
        if how == "argument":
            check_import_targets(run, strict=True)
        elif how == "env-var":
            monkeypatch.setenv("VISTA_STRICT_PLUGINS", "1")
            check_import_targets(run)
        else:
            with strict_import_targets():
                check_import_targets(run)
    message = str(refused.value)
    assert "env.config.encoder" in message and repr(outside_module.target) in message
    assert isinstance(refused.value, vista_rl.ConfigError)  # `vista` exits 2 with it
    assert outside_module.untouched()
    assert check_import_targets(svg_run("tiny-random"), strict=True) == []  # nothing to refuse


def test_make_engine_warns_or_refuses_before_the_engine_is_built(outside_module: OutsideModule,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """The engine build is where a run config turns into code that runs, so the check sits there:
    ``vista train`` and ``vista_rl.train`` both go through it."""
    built: list[Any] = []

    @vista_rl.hookimpl
    def register_engines(register: vista_rl.RegisterEngine) -> None:
        register("test-it-engine", lambda run, resume: built.append(run))

    vista_rl.host().register_object(SimpleNamespace(register_engines=register_engines),
                                    vista_rl.PluginInfo("test-it-engines", "vista-test-plugin", "0", "tests"))
    try:
        run = svg_run(outside_module.target)
        monkeypatch.setenv("VISTA_STRICT_PLUGINS", "1")
        with pytest.raises(ImportTargetRefused):
            vista_rl.make_engine("test-it-engine", run=run)
        assert built == []
        monkeypatch.delenv("VISTA_STRICT_PLUGINS")
        with pytest.warns(ImportTargetWarning, match="env.config.encoder"), \
                pytest.raises(vista_rl.PluginLoadError):  # the stand-in engine follows no contract
            vista_rl.make_engine("test-it-engine", run=run)
        assert len(built) == 1
    finally:
        vista_rl.host().unregister("vista-test-plugin:test-it-engines")
    assert outside_module.untouched()


class Loader(BaseModel):
    factory: Annotated[str | None, config_fields.ImportTarget] = None
    label: str = ""


class NestedConfig(BaseModel):
    plugins: list[Annotated[str, config_fields.ImportTarget]] = []
    inner: Loader | None = None
    by_name: dict[str, Loader] = {}
    hub: Annotated[str | None, config_fields.ImportTarget, config_fields.NonCodePrefixes(("hf:",))] = None
    note: str = ""


class NestedEnv:
    config_class = NestedConfig


class ToolConfig(BaseModel):
    loader: Annotated[str | None, config_fields.ImportTarget] = None


class ConfiguredTool:
    config_class = ToolConfig


class BackendConfig(BaseModel):
    processor: Annotated[str | None, config_fields.ImportTarget] = None


class ConfiguredBackend:
    config_class = BackendConfig


@pytest.fixture
def nested_plugin(vista_plugin: Callable[..., str]) -> None:
    @vista_rl.hookimpl
    def register_envs(register: vista_rl.RegisterEnv) -> None:
        register("test-it/nested-v0", NestedEnv)

    @vista_rl.hookimpl
    def register_tools(register: vista_rl.RegisterTool) -> None:
        register("test-it/loader", ConfiguredTool)

    @vista_rl.hookimpl
    def register_models(register: vista_rl.RegisterModel) -> None:
        register("test-it-backend", ConfiguredBackend)

    vista_plugin(SimpleNamespace(register_envs=register_envs, register_tools=register_tools,
                                 register_models=register_models), name="import-targets")


def test_the_walk_reaches_lists_sub_models_dict_values_tools_and_the_backend(nested_plugin: None) -> None:
    run = RunConfig.model_validate({
        "env": {"id": "test-it/nested-v0", "config": {
            "plugins": ["a.b:c", "tiny-random"], "inner": {"factory": "d:e", "label": "x:y"},
            "by_name": {"one": {"factory": "f.g:H.make"}}, "hub": "hf:model", "note": "looks:like_one"}},
        "model": {"backend": "test-it-backend", "config": {"processor": "vista_rl.judges:normalize_answer"}},
        "rollout": {"tools": {"zoom": {"use": "test-it/loader", "config": {"loader": "m:n"}},
                              "unknown/tool": {"config": {"loader": "o:p"}}}},
    })
    uses = find_import_targets(run)
    assert [(use.field, use.target) for use in uses] == [
        ("env.config.plugins[0]", "a.b:c"),
        ("env.config.inner.factory", "d:e"),
        ("env.config.by_name.one.factory", "f.g:H.make"),
        ("rollout.tools.zoom.config.loader", "m:n"),
        ("model.config.processor", "vista_rl.judges:normalize_answer"),
    ]
    assert [use.outside for use in uses] == [True, True, True, True, False]
    listing = import_targets_listing(uses)
    assert "env.config.inner.factory -> d:e (outside the installed VISTA plugins)" in listing
    assert "model.config.processor -> vista_rl.judges:normalize_answer (vista-rl)" in listing
    assert import_targets_listing([]).endswith(": none")


def test_an_env_that_cannot_be_loaded_is_skipped_not_fatal() -> None:
    run = RunConfig.model_validate({"env": {"id": "no-such/env-v0", "config": {"encoder": "os:abort"}}})
    assert find_import_targets(run) == []


@pytest.mark.parametrize(("value", "expected"), [
    ("pkg.mod:Obj.attr", "pkg.mod:Obj.attr"), (" a:b ", "a:b"), ("hf:x", "hf:x"), ("a:b()", None),
    ("a/b:c", None), ("http://host:5000", None), ("1a:b", None), (3, None), ("plain", None),
])
def test_import_path_of(value: Any, expected: str | None) -> None:
    assert import_path_of(value) == expected
    assert import_path_of("hf:x", ("hf:",)) is None
