"""The plugin manager: discovery, isolated loading, switches and registries.

Why not ``pm.load_setuptools_entrypoints``?  pluggy's loader has no error isolation: one plugin that
fails to import aborts the whole load.  Here every entry point and every hook implementation runs
in isolation; a failure is recorded (distribution, version, error) and everything else keeps working.
``VISTA_STRICT_PLUGINS=1`` re-raises instead, for CI and plugin authors.

Environment switches (read at load time):

- ``VISTA_LOAD_PLUGINS=a,b``: load only these entry points (empty string: none).
- ``VISTA_DISABLE_PLUGINS=a,b``: block these entry points.
- ``VISTA_STRICT_PLUGINS=1``: re-raise plugin errors.
- ``VISTA_TRACE_PLUGINS=1``: print every hook call and the items it registered to stderr.
"""

from __future__ import annotations

import importlib
import os
import sys
import threading
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any

import pluggy

from vista_rl import hookspecs
from vista_rl.errors import DuplicateItemError, PluginLoadError
from vista_rl.registry import ItemSpec, Registry, resolve_import_path

ENTRY_POINT_GROUP = "vista_rl"
#: The group plugins used before the rename to ``vista-rl``; still read (with a deprecation warning)
#: for one release so that already-published plugins keep loading.
LEGACY_ENTRY_POINT_GROUP = "vista"
#: The core's distribution name on the package index.
CORE_DISTRIBUTION = "vista-rl"

#: Core features are plugins too: they register through the same hooks (datasette's DEFAULT_PLUGINS).
DEFAULT_PLUGINS: tuple[str, ...] = (
    "vista_rl.builtin.judges",
    "vista_rl.builtin.models",
    "vista_rl.builtin.commands",
    "vista_rl.builtin.estimators",
    "vista_rl.builtin.engines",
    "vista_rl.builtin.envs",
)

#: kind -> (hook name, whether ``make`` instantiates the target)
KINDS: dict[str, tuple[str, bool]] = {
    "envs": ("register_envs", True),
    "tools": ("register_tools", True),
    "judges": ("register_judges", True),
    "estimators": ("register_advantage_estimators", False),
    "datasets": ("register_datasets", True),
    "models": ("register_models", True),
    "engines": ("register_engines", True),
}


@dataclass
class PluginInfo:
    """What ``vista plugins`` shows for one plugin."""

    name: str
    distribution: str
    version: str
    module: str
    builtin: bool = False
    hooks: list[str] = field(default_factory=list)
    items: dict[str, list[str]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "distribution": self.distribution,
            "version": self.version,
            "module": self.module,
            "builtin": self.builtin,
            "hooks": sorted(self.hooks),
            "items": {k: sorted(v) for k, v in sorted(self.items.items()) if v},
            "errors": list(self.errors),
            "warnings": list(self.warnings),
        }


def _env_list(name: str) -> list[str] | None:
    value = os.environ.get(name)
    if value is None:
        return None
    return [part.strip() for part in value.split(",") if part.strip()]


def _flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in {"1", "true", "yes", "on"}


def core_version() -> str:
    try:
        return metadata.version(CORE_DISTRIBUTION)
    except metadata.PackageNotFoundError:  # running from a source tree without install
        return "0+unknown"


def core_compatibility_warning(requirements: list[str] | None, core: str) -> str | None:
    """Why a plugin's declared ``vista-rl`` range excludes the installed core, or None if it fits.

    pip installs whatever the resolver picks, so a plugin built for another core release can end up
    beside this one; saying so up front beats an obscure AttributeError later.
    """
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.utils import canonicalize_name
    from packaging.version import InvalidVersion

    for line in requirements or []:
        try:
            requirement = Requirement(line)
        except InvalidRequirement:
            continue
        if canonicalize_name(requirement.name) != CORE_DISTRIBUTION or requirement.marker is not None:
            continue
        try:
            fits = requirement.specifier.contains(core, prereleases=True)
        except InvalidVersion:
            return None
        if not fits:
            return f"declares {CORE_DISTRIBUTION}{requirement.specifier} but {CORE_DISTRIBUTION} {core} is installed"
    return None


def _describe_error(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


class _PluginManager(pluggy.PluginManager):
    """pluggy's manager that also accepts hook implementations marked for the pre-rename project name."""

    def parse_hookimpl_opts(self, plugin: object, name: str) -> Any:
        opts = super().parse_hookimpl_opts(plugin, name)
        if opts is None and name.startswith("register_"):
            method = getattr(plugin, name, None)
            opts = getattr(method, f"{LEGACY_ENTRY_POINT_GROUP}_impl", None)
        return opts


class PluginHost:
    """Owns the pluggy manager, the per-plugin records and the registries."""

    def __init__(self) -> None:
        self.pm = _PluginManager(hookspecs.PROJECT_NAME)
        self.pm.add_hookspecs(hookspecs)
        self._lock = threading.RLock()
        self._loaded = False
        self._plugins: dict[str, PluginInfo] = {}
        self._registries: dict[str, Registry] = {}

    # ------------------------------------------------------------------ loading
    @property
    def strict(self) -> bool:
        return _flag("VISTA_STRICT_PLUGINS")

    @property
    def tracing(self) -> bool:
        return _flag("VISTA_TRACE_PLUGINS")

    def _fail(self, info: PluginInfo, what: str, exc: BaseException) -> None:
        message = f"{what}: {_describe_error(exc)}"
        info.errors.append(message)
        detail = f"{info.distribution} {info.version} (plugin {info.name!r}) {message}"
        if self.tracing:
            traceback.print_exception(exc, file=sys.stderr)
        if self.strict:
            raise PluginLoadError(detail) from exc
        print(f"vista: warning: {detail}", file=sys.stderr)

    def load(self) -> None:
        """Load built-in plugins and entry points once.  Safe to call from many threads."""
        if self._loaded:
            return
        with self._lock:
            if self._loaded:
                return
            only = _env_list("VISTA_LOAD_PLUGINS")
            blocked = set(_env_list("VISTA_DISABLE_PLUGINS") or [])
            for module_name in DEFAULT_PLUGINS:
                name = module_name.rsplit(".", 1)[-1]
                if f"vista.{name}" in blocked:
                    continue
                info = PluginInfo(
                    name=f"vista.{name}",
                    distribution=CORE_DISTRIBUTION,
                    version=core_version(),
                    module=module_name,
                    builtin=True,
                )
                self._import_and_register(info, module_name)
            for ep in self._entry_points():
                if ep.name in blocked or (only is not None and ep.name not in only):
                    continue
                if ep.name in self._plugins:
                    continue
                dist = getattr(ep, "dist", None)
                info = PluginInfo(
                    name=ep.name,
                    distribution=dist.name if dist is not None else "?",
                    version=dist.version if dist is not None else "?",
                    module=ep.value,
                )
                mismatch = core_compatibility_warning(dist.requires if dist is not None else None, core_version())
                if mismatch:
                    info.warnings.append(mismatch)
                    print(f"vista: warning: {info.distribution} {info.version} (plugin {info.name!r}) {mismatch}",
                          file=sys.stderr)
                self._import_and_register(info, ep.value)
            if only:
                missing = [name for name in only if name not in self._plugins]
                for name in missing:
                    print(f"vista: warning: plugin {name!r} from VISTA_LOAD_PLUGINS is not installed",
                          file=sys.stderr)
            self._loaded = True

    @staticmethod
    def _entry_points() -> list[metadata.EntryPoint]:
        """Entry points of the ``vista_rl`` group, then legacy ``vista`` ones not shadowed by a new one."""
        current = sorted(metadata.entry_points(group=ENTRY_POINT_GROUP), key=lambda ep: ep.name)
        names = {ep.name for ep in current}
        legacy = [ep for ep in metadata.entry_points(group=LEGACY_ENTRY_POINT_GROUP) if ep.name not in names]
        for ep in sorted(legacy, key=lambda ep: ep.name):
            dist = getattr(ep, "dist", None)
            print(f"vista: warning: plugin {ep.name!r} ({dist.name if dist else '?'}) declares its entry point "
                  f"in the old group {LEGACY_ENTRY_POINT_GROUP!r}; it is read for this release only: move it to "
                  f"[project.entry-points.{ENTRY_POINT_GROUP}]", file=sys.stderr)
        return current + sorted(legacy, key=lambda ep: ep.name)

    def _import_and_register(self, info: PluginInfo, module_name: str) -> None:
        self._plugins[info.name] = info
        try:
            # A plain dotted name is imported as is, so an ImportError inside the plugin surfaces.
            module = resolve_import_path(module_name) if ":" in module_name else importlib.import_module(module_name)
        except BaseException as exc:  # noqa: BLE001 - a plugin may raise anything at import
            if isinstance(exc, KeyboardInterrupt):
                raise
            self._fail(info, "failed to import", exc)
            return
        self.register_object(module, info)

    def register_object(self, plugin: object, info: PluginInfo) -> None:
        """Register an already-imported plugin object (a module or any object with hookimpls)."""
        with self._lock:
            self._plugins[info.name] = info
            try:
                self.pm.register(plugin, name=info.name)
            except BaseException as exc:  # noqa: BLE001
                if isinstance(exc, KeyboardInterrupt):
                    raise
                self._fail(info, "failed to register", exc)
                return
            info.hooks = sorted(
                impl_name
                for impl_name in dir(plugin)
                if impl_name.startswith("register_") and hasattr(self.pm.hook, impl_name)
                and any(impl.plugin is plugin for impl in getattr(self.pm.hook, impl_name).get_hookimpls())
            )
            for registry in self._registries.values():
                self._collect_from(registry, only_plugin=info.name)

    def unregister(self, name: str) -> None:
        """Remove a plugin and every item it contributed (used by the temporary-plugin fixture)."""
        with self._lock:
            plugin = self.pm.get_plugin(name)
            if plugin is not None:
                self.pm.unregister(plugin, name=name)
            self._plugins.pop(name, None)
            for registry in self._registries.values():
                registry.remove_plugin(name)

    # --------------------------------------------------------------- registries
    def registry(self, kind: str) -> Registry:
        if kind not in KINDS:
            raise KeyError(f"unknown kind {kind!r}; expected one of {', '.join(KINDS)}")
        self.load()
        with self._lock:
            registry = self._registries.get(kind)
            if registry is None:
                registry = Registry(kind, instantiate=KINDS[kind][1])
                self._collect_from(registry)
                self._registries[kind] = registry
            return registry

    def call_each(
        self,
        hook_name: str,
        make_kwargs: Callable[[PluginInfo], dict[str, Any]],
        only_plugin: str | None = None,
    ) -> None:
        """Call every implementation of a hook on its own, so one failing plugin spoils nothing."""
        for impl in getattr(self.pm.hook, hook_name).get_hookimpls():
            if only_plugin is not None and impl.plugin_name != only_plugin:
                continue
            info = self._plugins.get(impl.plugin_name) or PluginInfo(
                name=impl.plugin_name, distribution="?", version="?", module="?"
            )
            if self.tracing:
                print(f"vista: trace: {hook_name} -> {info.name} ({info.distribution})", file=sys.stderr)
            call_kwargs = {arg: value for arg, value in make_kwargs(info).items() if arg in impl.argnames}
            try:
                impl.function(**call_kwargs)
            except BaseException as exc:  # noqa: BLE001
                if isinstance(exc, KeyboardInterrupt):
                    raise
                self._fail(info, f"raised in {hook_name}", exc)

    def _collect_from(self, registry: Registry, only_plugin: str | None = None) -> None:
        self.call_each(
            KINDS[registry.kind][0],
            lambda info: {"register": self._make_register(registry, info)},
            only_plugin=only_plugin,
        )

    def _make_register(self, registry: Registry, info: PluginInfo) -> Any:
        def register(item_id: str, target: Any, **item_metadata: Any) -> None:
            if not isinstance(item_id, str) or not item_id:
                raise ValueError(f"{registry.kind} ids must be non-empty strings, got {item_id!r}")
            spec = ItemSpec(
                kind=registry.kind,
                id=item_id,
                target=target,
                plugin=info.name,
                distribution=info.distribution,
                version=info.version,
                metadata=dict(item_metadata),
            )
            try:
                registry.add(spec)
            except DuplicateItemError as exc:
                self._fail(info, "duplicate id", exc)
                return
            info.items.setdefault(registry.kind, []).append(item_id)
            if self.tracing:
                print(f"vista: trace:   {registry.kind}: {item_id} -> {spec.target_path}", file=sys.stderr)

        return register

    # ----------------------------------------------------------------- queries
    def plugins(self) -> list[PluginInfo]:
        """Every plugin, with the items it contributed (all registries are collected)."""
        for kind in KINDS:
            self.registry(kind)
        return sorted(self._plugins.values(), key=lambda info: (not info.builtin, info.name))

    def installed_names(self) -> list[str]:
        self.load()
        return [f"{p.distribution} {p.version}" for p in self._plugins.values() if not p.builtin]

    def make(self, kind: str, item_id: str, /, **config: Any) -> Any:
        return self.registry(kind).make(item_id, _installed_plugins=self.installed_names(), **config)

    def spec(self, kind: str, item_id: str) -> ItemSpec:
        return self.registry(kind).spec(item_id, installed_plugins=self.installed_names())

    def reset(self) -> None:
        """Forget everything; the next query loads again (reads the switches anew)."""
        with self._lock:
            for name, plugin in list(self.pm.list_name_plugin()):
                self.pm.unregister(plugin, name=name)
            self._plugins.clear()
            self._registries.clear()
            self._loaded = False


_host: PluginHost | None = None
_host_lock = threading.Lock()


def host() -> PluginHost:
    """The process-wide plugin host (the only global mutable state in VISTA)."""
    global _host
    if _host is None:
        with _host_lock:
            if _host is None:
                _host = PluginHost()
    return _host


def load_plugins() -> None:
    host().load()


def get_plugins() -> list[PluginInfo]:
    return host().plugins()
