"""The plugin host: discovery, isolated loading, switches, provider preference and registries.

Why not ``pm.load_setuptools_entrypoints``?  pluggy's loader has no error isolation: one plugin that
fails to import aborts the whole load.  Here every entry point is imported on its own, and every
hook is called through pluggy once per plugin (``pm.subset_hook_caller``), so ``tryfirst``/
``trylast`` order the plugins, hook wrappers see each plugin's call (and its exception), pluggy's
tracing shows the calls, and one plugin that raises spoils only its own items.  A failure is
recorded on the plugin's :class:`PluginInfo` (``vista plugins`` shows it) and everything else keeps
working; ``VISTA_STRICT_PLUGINS=1`` raises it instead, for CI and plugin authors.

A plugin's identity is (distribution, entry-point name), as pip and pytest identify plugins: two
distributions that declare the same entry-point name are both loaded and the clash is reported with
both names; neither silently replaces the other.  An item id registered by several plugins resolves
to a pinned provider (``VISTA_PREFER`` / ``[prefer]`` in ``plugins.toml``), else to the one
first-party provider (:mod:`vista_rl._providers`); otherwise it is ambiguous and refuses to
be made until the user chooses.  An unversioned id (``sokoban/sokoban``) resolves among the versions
of one distribution, chosen by the same rule, so another distribution's ``sokoban/sokoban-v1`` cannot
take it over (it is reported as a version clash).  A ``vista`` command name that a second
distribution registers is undone and reported naming both (:mod:`vista_rl._commands`: first-party
wins, else the first registered).  Load order never decides.

Environment switches (read at load time):

- ``VISTA_LOAD_PLUGINS=a,b``: load only these plugins (empty string: none).
- ``VISTA_DISABLE_PLUGINS=a,b``: block these plugins.  A plugin is named by its entry-point name
  (every distribution's), ``distribution:entry-point`` or its distribution name.
- ``VISTA_PREFER=ID=DIST,...``: which distribution provides an id several plugins register; ``ID``
  is an item id (``sokoban/sokoban-v0``) or a namespace (``sokoban``: every ``sokoban/...`` id).
  Overrides the same keys of the ``[prefer]`` table in ``$VISTA_CONFIG_DIR/plugins.toml``
  (default ``~/.config/vista/plugins.toml``).
- ``VISTA_STRICT_PLUGINS=1``: raise plugin errors (one line; ``vista --debug`` adds the traceback).
- ``VISTA_TRACE_PLUGINS=1``: pluggy's hook-call tracing, and every registered item, on stderr.
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
from vista_rl._providers import (
    CORE_DISTRIBUTION,
    FIRST_PARTY_DISTRIBUTIONS,
    ProviderPolicy,
    canonical_name,
)
from vista_rl._registry import FamilyClash, ItemSpec, Registry, Resolution, resolve_import_path, split_version
from vista_rl.errors import DuplicateItemError, PluginLoadError

ENTRY_POINT_GROUP = "vista_rl"
#: The group plugins used before the rename to ``vista-rl``; still read (with a deprecation warning)
#: for one release so that already-published plugins keep loading.
LEGACY_ENTRY_POINT_GROUP = "vista"
#: Core features are plugins too: they register through the same hooks (datasette's DEFAULT_PLUGINS).
DEFAULT_PLUGINS: tuple[str, ...] = (
    "vista_rl.builtin.judges",
    "vista_rl.builtin.models",
    "vista_rl.builtin.commands",
    "vista_rl.builtin.estimators",
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
    "families": ("register_model_families", True),
    "loggers": ("register_loggers", True),
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

    @property
    def key(self) -> str:
        """The plugin's identity, ``distribution:entry-point``; also its name in the pluggy manager."""
        return f"{self.distribution}:{self.name}"

    @property
    def first_party(self) -> bool:
        return canonical_name(self.distribution) in FIRST_PARTY_DISTRIBUTIONS

    def describe(self) -> str:
        return f"{self.distribution} {self.version} (plugin {self.name!r})"

    def matches(self, selector: str) -> bool:
        """Whether a switch entry names this plugin: entry-point name, ``dist:name`` or distribution."""
        if selector in (self.name, self.key):
            return True
        dist, sep, name = selector.partition(":")
        if sep:
            return name == self.name and canonical_name(dist) == canonical_name(self.distribution)
        return canonical_name(selector) == canonical_name(self.distribution)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "key": self.key,
            "distribution": self.distribution,
            "version": self.version,
            "module": self.module,
            "builtin": self.builtin,
            "first_party": self.first_party,
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
    from packaging.version import InvalidVersion

    for line in requirements or []:
        try:
            requirement = Requirement(line)
        except InvalidRequirement:
            continue
        if canonical_name(requirement.name) != CORE_DISTRIBUTION or requirement.marker is not None:
            continue
        try:
            fits = requirement.specifier.contains(core, prereleases=True)
        except InvalidVersion:
            return None
        if not fits:
            return f"declares {CORE_DISTRIBUTION}{requirement.specifier} but {CORE_DISTRIBUTION} {core} is installed"
    return None


def _describe_error(exc: BaseException) -> str:
    """``Type: message`` on one line (a multi-line message keeps its first line)."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


class _PluginManager(pluggy.PluginManager):
    """pluggy's manager that also accepts hook implementations marked for the pre-rename project name."""

    def parse_hookimpl_opts(self, plugin: object, name: str) -> Any:
        opts = super().parse_hookimpl_opts(plugin, name)
        if opts is None and name.startswith("register_"):
            method = getattr(plugin, name, None)
            opts = getattr(method, f"{LEGACY_ENTRY_POINT_GROUP}_impl", None)
        return opts


class _Registrar:
    """The ``register`` callable one plugin receives for one kind (a :class:`vista_rl.Register`)."""

    def __init__(self, host: PluginHost, registry: Registry, info: PluginInfo) -> None:
        self._host = host
        self._registry = registry
        self._info = info

    def __call__(self, item_id: str, target: Any, /, **item_metadata: Any) -> None:
        self._host._add_item(self._registry, self._info, item_id, target, item_metadata)

    def __repr__(self) -> str:  # what pluggy's tracing prints for the ``register`` argument
        return f"<register {self._registry.kind} for {self._info.key}>"


class _HashableProxy:
    """Stands in for an unhashable plugin object (a ``SimpleNamespace``, a dataclass instance):
    ``pm.subset_hook_caller`` keeps plugins in a set, pluggy's registration does not require it.
    The hook functions are copied onto the proxy, since pluggy finds them with
    ``inspect.getattr_static``."""

    def __init__(self, plugin: object, hook_names: list[str]) -> None:
        self.plugin = plugin
        for name in hook_names:
            setattr(self, name, getattr(plugin, name))

    def __repr__(self) -> str:
        return repr(self.plugin)


class PluginHost:
    """Owns the pluggy manager, the per-plugin records and the registries."""

    def __init__(self) -> None:
        self.pm = _PluginManager(hookspecs.PROJECT_NAME)
        self.pm.add_hookspecs(hookspecs)
        #: Print tracebacks of plugin errors (``vista --debug``).
        self.debug = False
        self._lock = threading.RLock()
        self._loaded = False
        self._plugins: dict[str, PluginInfo] = {}
        self._registries: dict[str, Registry] = {}
        self._providers = ProviderPolicy()
        self._undo_tracing: Callable[[], None] | None = None
        # pluggy's tag tracer: silent until a writer is set (VISTA_TRACE_PLUGINS)
        self._trace = self.pm.trace.root.get("vista")

    # ------------------------------------------------------------------ loading
    @property
    def strict(self) -> bool:
        return _flag("VISTA_STRICT_PLUGINS")

    def _fail(self, info: PluginInfo, what: str, exc: BaseException | None = None, *, detail: str | None = None) -> None:
        """Record a plugin error on ``info`` (and warn), or raise it in strict mode."""
        message = detail if detail is not None else f"{what}: {_describe_error(exc) if exc else ''}"
        info.errors.append(message)
        line = f"{info.describe()} {message}"
        if self.debug and exc is not None:
            traceback.print_exception(exc, file=sys.stderr)
        if self.strict:
            raise PluginLoadError(line) from exc
        print(f"vista: warning: {line}", file=sys.stderr)

    def report_error(self, key: str, detail: str) -> None:
        """Record an error of the plugin ``key`` (``distribution:entry-point``) found outside the host
        (a CLI command clash): a warning, or in strict mode a :class:`PluginLoadError`."""
        info = self._plugins.get(key) or PluginInfo(name=key, distribution="?", version="?", module="?")
        if detail not in info.errors:
            self._fail(info, "", detail=detail)

    def _warn(self, info: PluginInfo, message: str) -> None:
        info.warnings.append(message)
        print(f"vista: warning: {info.describe()} {message}", file=sys.stderr)

    def _set_tracing(self) -> None:
        if _flag("VISTA_TRACE_PLUGINS") and self._undo_tracing is None:
            self.pm.trace.root.setwriter(
                lambda text: sys.stderr.write("".join(f"vista: trace: {line}" for line in text.splitlines(True))))
            self._undo_tracing = self.pm.enable_tracing()

    def load(self) -> None:
        """Load built-in plugins and entry points once.  Safe to call from many threads."""
        if self._loaded:
            return
        with self._lock:
            if self._loaded:
                return
            self._set_tracing()
            self._providers = ProviderPolicy.from_settings()
            only = _env_list("VISTA_LOAD_PLUGINS")
            blocked = _env_list("VISTA_DISABLE_PLUGINS") or []
            candidates: list[tuple[PluginInfo, str, Any]] = []
            for module_name in DEFAULT_PLUGINS:
                name = f"vista.{module_name.rsplit('.', 1)[-1]}"
                info = PluginInfo(name=name, distribution=CORE_DISTRIBUTION, version=core_version(),
                                  module=module_name, builtin=True)
                if not any(info.matches(selector) for selector in blocked if selector != CORE_DISTRIBUTION):
                    candidates.append((info, module_name, None))
            for ep in self._entry_points():
                dist = getattr(ep, "dist", None)
                info = PluginInfo(name=ep.name, distribution=dist.name if dist is not None else "?",
                                  version=dist.version if dist is not None else "?", module=ep.value)
                if any(info.matches(selector) for selector in blocked):
                    continue
                if only is not None and not any(info.matches(selector) for selector in only):
                    continue
                candidates.append((info, ep.value, dist))
            self._report_name_clashes([info for info, _, _ in candidates])
            for info, module_name, dist in candidates:
                if dist is not None:
                    mismatch = core_compatibility_warning(dist.requires, core_version())
                    if mismatch:
                        self._warn(info, mismatch)
                self._import_and_register(info, module_name)
            for selector in only or []:
                if not any(info.matches(selector) for info, _, _ in candidates):
                    print(f"vista: warning: plugin {selector!r} from VISTA_LOAD_PLUGINS is not installed",
                          file=sys.stderr)
            self._loaded = True

    def _report_name_clashes(self, infos: list[PluginInfo]) -> None:
        """Several distributions declaring one entry-point name: all load, each is told of the others."""
        by_name: dict[str, list[PluginInfo]] = {}
        for info in infos:
            by_name.setdefault(info.name, []).append(info)
        for name, holders in by_name.items():
            if len({canonical_name(info.distribution) for info in holders}) < 2:
                continue
            for info in holders:
                others = ", ".join(other.describe() for other in holders if other is not info)
                advice = ("" if info.first_party else
                          f"; if it is not meant to be there, disable it with "
                          f"VISTA_DISABLE_PLUGINS={info.distribution}:{name}")
                self._warn(info, f"shares the entry-point name {name!r} with {others}; both are loaded as "
                                 f"separate plugins (identity is distribution:name){advice}")

    @staticmethod
    def _entry_points() -> list[metadata.EntryPoint]:
        """Entry points of the ``vista_rl`` group, then legacy ``vista`` ones that the same distribution
        does not also declare in the new group.  Sorted by (name, distribution): deterministic, and
        nothing depends on the order anyway."""
        def key(ep: metadata.EntryPoint) -> tuple[str, str]:
            dist = getattr(ep, "dist", None)
            return ep.name, canonical_name(dist.name) if dist is not None else "?"

        current = sorted(metadata.entry_points(group=ENTRY_POINT_GROUP), key=key)
        seen = {key(ep) for ep in current}
        legacy = sorted((ep for ep in metadata.entry_points(group=LEGACY_ENTRY_POINT_GROUP) if key(ep) not in seen),
                        key=key)
        for ep in legacy:
            dist = getattr(ep, "dist", None)
            print(f"vista: warning: plugin {ep.name!r} ({dist.name if dist else '?'}) declares its entry point "
                  f"in the old group {LEGACY_ENTRY_POINT_GROUP!r}; it is read for this release only: move it to "
                  f"[project.entry-points.{ENTRY_POINT_GROUP}]", file=sys.stderr)
        return current + legacy

    def _import_and_register(self, info: PluginInfo, module_name: str) -> None:
        self._plugins[info.key] = info
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
            self._plugins[info.key] = info
            try:
                hash(plugin)
            except TypeError:
                plugin = _HashableProxy(plugin, [name for name in dir(plugin) if name.startswith("register_")])
            try:
                self.pm.register(plugin, name=info.key)
            except BaseException as exc:  # noqa: BLE001
                if isinstance(exc, KeyboardInterrupt):
                    raise
                self._fail(info, "failed to register", exc)
                return
            info.hooks = sorted(caller.name for caller in self.pm.get_hookcallers(plugin) or [])
            for registry in self._registries.values():
                self._collect_from(registry, only_plugin=info.key)

    def _find(self, name: str) -> list[PluginInfo]:
        """Plugins by key, else by entry-point name."""
        if name in self._plugins:
            return [self._plugins[name]]
        return [info for info in self._plugins.values() if info.name == name]

    def unregister(self, name: str) -> None:
        """Remove a plugin (by key, or every plugin of an entry-point name) and every item it contributed."""
        with self._lock:
            for info in self._find(name):
                plugin = self.pm.get_plugin(info.key)
                if plugin is not None:
                    self.pm.unregister(plugin, name=info.key)
                self._plugins.pop(info.key, None)
                for registry in self._registries.values():
                    registry.remove_plugin(info.name, info.distribution)

    # --------------------------------------------------------------- registries
    def registry(self, kind: str) -> Registry:
        if kind not in KINDS:
            raise KeyError(f"unknown kind {kind!r}; expected one of {', '.join(KINDS)}")
        self.load()
        with self._lock:
            registry = self._registries.get(kind)
            if registry is None:
                registry = Registry(kind, instantiate=KINDS[kind][1], choose=self._providers.choose)
                self._collect_from(registry)
                self._registries[kind] = registry
            return registry

    def call_each(
        self,
        hook_name: str,
        make_kwargs: Callable[[PluginInfo], dict[str, Any]],
        only_plugin: str | None = None,
        after: Callable[[PluginInfo], None] | None = None,
    ) -> None:
        """Call a hook through pluggy once per implementing plugin, so one failing plugin spoils nothing.

        Plugins are taken in pluggy's own call order (``tryfirst`` first, ``trylast`` last).  Each call
        goes through ``pm.subset_hook_caller`` with every *other* implementing plugin removed, so hook
        wrappers (``wrapper=True``/``hookwrapper=True``) wrap every plugin's call and pluggy's
        monitoring and tracing see it; a wrapper-only plugin is never removed.  ``only_plugin`` (a key
        or an entry-point name) limits the calls to that plugin.  ``after`` runs after each plugin's
        call (also when it raised), to check what the call did; what it raises counts as the plugin's.
        """
        caller = getattr(self.pm.hook, hook_name)
        impls = [impl for impl in caller.get_hookimpls() if not (impl.wrapper or impl.hookwrapper)]
        wanted = {info.key for info in self._find(only_plugin)} if only_plugin is not None else None
        for impl in reversed(impls):  # pluggy calls the last of the list first
            if wanted is not None and impl.plugin_name not in wanted:
                continue
            info = self._plugins.get(impl.plugin_name) or PluginInfo(
                name=impl.plugin_name, distribution="?", version="?", module="?"
            )
            others = [other.plugin for other in impls if other.plugin is not impl.plugin]
            try:
                try:
                    self.pm.subset_hook_caller(hook_name, remove_plugins=others)(**make_kwargs(info))
                finally:
                    if after is not None:
                        after(info)
            except BaseException as exc:  # noqa: BLE001
                if isinstance(exc, KeyboardInterrupt) or (isinstance(exc, PluginLoadError) and self.strict):
                    raise  # strict mode's report of a plugin error (maybe another plugin's): already worded
                self._fail(info, f"raised in {hook_name}", exc)

    def _collect_from(self, registry: Registry, only_plugin: str | None = None) -> None:
        self.call_each(
            KINDS[registry.kind][0],
            lambda info: {"register": _Registrar(self, registry, info)},
            only_plugin=only_plugin,
        )

    def _add_item(self, registry: Registry, info: PluginInfo, item_id: str, target: Any,
                  item_metadata: dict[str, Any]) -> None:
        if not isinstance(item_id, str) or not item_id:
            raise ValueError(f"{registry.kind} ids must be non-empty strings, got {item_id!r}")
        spec = ItemSpec(kind=registry.kind, id=item_id, target=target, plugin=info.name,
                        distribution=info.distribution, version=info.version, metadata=dict(item_metadata))
        try:
            resolution = registry.add(spec)
        except DuplicateItemError as exc:
            self._fail(info, "duplicate id", exc)
            return
        info.items.setdefault(registry.kind, []).append(item_id)
        self._trace(f"{registry.kind}: {item_id} -> {spec.target_path} from {info.key}")
        if resolution is not None:
            self._report_duplicate(registry, resolution)
        base, version = split_version(item_id)
        clash = registry.family_clash(base) if version is not None else None
        if clash is not None:
            self._report_family_clash(registry, clash)

    # ------------------------------------------------------------ duplicate ids
    def _report_duplicate(self, registry: Registry, resolution: Resolution) -> None:
        """Tell every plugin that does not serve a contested id why, with advice about *that* plugin.

        Losing to a first-party provider, or an ambiguous id, is an error of the plugin (strict mode
        raises it); losing to a provider the user pinned is only a warning: the user chose."""
        winner = resolution.winner
        item_id = resolution.item_id
        marker = f"duplicate id: {registry.kind} id {item_id!r}"
        for spec in resolution.candidates:
            if spec is winner:
                continue
            info = self._untold(spec, marker)  # None: unknown, or already told (a third provider)
            if info is None:
                continue
            if winner is None:
                self._fail(info, "duplicate id", detail=f"duplicate id: {registry.ambiguity_message(item_id)}")
                continue
            pinned, why = self._why(item_id, winner)
            detail = (f"{marker} is also registered by {winner.distribution} {winner.version} "
                      f"(plugin {winner.plugin!r}), which serves it ({why}); {spec.distribution}'s is ignored. "
                      f"To use {spec.distribution}'s instead set VISTA_PREFER={item_id}={spec.distribution}; "
                      f"to remove it set VISTA_DISABLE_PLUGINS={spec.distribution}:{spec.plugin}.")
            self._tell(info, "duplicate id", detail, pinned)

    def _untold(self, spec: ItemSpec, marker: str) -> PluginInfo | None:
        """The plugin of ``spec``, unless it is unknown or was already told ``marker``."""
        info = self._plugins.get(f"{spec.distribution}:{spec.plugin}")
        if info is None or any(text.startswith(marker) for text in [*info.errors, *info.warnings]):
            return None
        return info

    def _why(self, item_id: str, winner: ItemSpec) -> tuple[str | None, str]:
        """(the pin that chose ``winner``, or None; why it serves ``item_id``, in words)."""
        pinned = self._providers.pinned(item_id, winner)
        return pinned, f"pinned by VISTA_PREFER/plugins.toml: {pinned}" if pinned else "first-party"

    def _tell(self, info: PluginInfo, what: str, detail: str, pinned: str | None) -> None:
        """Losing to a pinned provider is a warning (the user chose); otherwise the plugin's error."""
        if pinned:
            self._warn(info, detail)
        else:
            self._fail(info, what, detail=detail)

    def _report_family_clash(self, registry: Registry, clash: FamilyClash) -> None:
        """Tell each distribution whose versions of an unversioned id do not serve it why.

        ``sokoban/sokoban`` resolves among one provider's versions only, so a newcomer registering
        ``sokoban/sokoban-v1`` next to first-party ``sokoban/sokoban-v0`` cannot take the short id over;
        it is reported like a duplicate id (an error of the newcomer; strict mode raises)."""
        marker = f"version clash: {registry.kind} id {clash.base!r}"
        winner = clash.winner
        for spec in clash.providers:
            info = None if winner is not None and spec.distribution == winner.distribution else self._untold(spec, marker)
            if info is None:
                continue
            if winner is None:
                self._fail(info, "version clash", detail=f"{marker}: {registry.family_message(clash)}")
                continue
            pinned, why = self._why(clash.base, winner)
            detail = (f"{marker} (no version) resolves among the versions of {winner.distribution} "
                      f"{winner.version} ({why}, newest {winner.id}); {spec.distribution} registers {spec.id}, "
                      f"which is served only when asked for by that full id. To make {clash.base!r} mean "
                      f"{spec.distribution}'s versions set VISTA_PREFER={clash.base}={spec.distribution}; to "
                      f"remove it set VISTA_DISABLE_PLUGINS={spec.distribution}:{spec.plugin}.")
            self._tell(info, "version clash", detail, pinned)

    # ----------------------------------------------------------------- queries
    def plugins(self) -> list[PluginInfo]:
        """Every plugin, with the items it contributed (all registries are collected)."""
        for kind in KINDS:
            self.registry(kind)
        return sorted(self._plugins.values(), key=lambda info: (not info.builtin, info.name, info.distribution))

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
            if self._undo_tracing is not None:
                self._undo_tracing()
                self._undo_tracing = None
                self.pm.trace.root.setwriter(None)
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
