"""Which fields of a run config name code to import, and what a local run does about them.

Why this exists: ``vista env-server`` refuses every field marked
:data:`vista_rl.config_fields.ImportTarget` from its clients, but a local ``vista train`` or
``vista eval`` (or ``vista_rl.make_engine`` from Python) hands the run config's values to the
plugins as they are, and a plugin imports and calls what such a field names (the svg env's
``encoder: "my_pkg.sims:factory"``).  A run config is a file that gets shared, copied from issues
and downloaded, so code it names is named here, before anything imports it:

- :func:`find_import_targets` walks a validated :class:`~vista_rl.config.RunConfig` (its own
  fields, the env's config class, the config classes of the tools that ``rollout.tools`` overrides
  and of the model backend) for values of ``ImportTarget`` fields that have the ``module:attr``
  shape, each with its dotted field path and the installed VISTA distribution the module belongs
  to (``None`` when it belongs to none);
- :func:`check_import_targets` warns once for each target outside the installed VISTA plugins, or,
  in strict mode (``vista train --strict``, ``VISTA_STRICT_PLUGINS=1``), refuses the run with
  :class:`ImportTargetRefused` before anything is imported.

"Installed VISTA plugins" are the core and every distribution that declares an entry point in the
``vista_rl`` group (its entry-point package and the top-level packages it installs): code the user
installed as a VISTA plugin, not code a config names.  Reading that list imports nothing.
"""

from __future__ import annotations

import re
import types
import typing
import warnings
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from importlib import metadata
from typing import TYPE_CHECKING, Any, Union

from pydantic import BaseModel

from vista_rl._plugins import ENTRY_POINT_GROUP, LEGACY_ENTRY_POINT_GROUP, host
from vista_rl._providers import CORE_DISTRIBUTION
from vista_rl.config_fields import (
    ImportTarget,
    NonCodePrefixes,
    _fields_by_name,
    _fits,
    _is_model,
    _markers,
    config_class_of,
)
from vista_rl.errors import ConfigError

if TYPE_CHECKING:
    from vista_rl.config import RunConfig

#: ``package.module:Object.attr``, the shape :func:`vista_rl.resolve_import_path` imports.
_IMPORT_PATH = re.compile(r"^\s*(?P<module>[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*):"
                          r"(?P<attr>[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)\s*$")
_STRICT_HINT = "--strict or VISTA_STRICT_PLUGINS=1"
#: strict mode for the checks inside :func:`strict_import_targets` (``None``: not set there)
_STRICT: ContextVar[bool | None] = ContextVar("vista_import_targets_strict", default=None)


class ImportTargetWarning(UserWarning):
    """A run config names code outside the installed VISTA plugins; the run imports it."""


class ImportTargetRefused(ConfigError):
    """Strict mode: the run config names code outside the installed VISTA plugins."""


@dataclass(frozen=True)
class ImportTargetUse:
    """One import target a run config names."""

    #: the dotted path of the field in the run config, ``env.config.encoder``
    field: str
    #: what it names, ``my_pkg.sims:dreamsim_encoder``
    target: str
    #: the installed VISTA distribution its top-level package belongs to; ``None``: none does
    distribution: str | None

    @property
    def module(self) -> str:
        return self.target.strip().partition(":")[0]

    @property
    def outside(self) -> bool:
        """Whether the target is code that no installed VISTA plugin (nor the core) ships."""
        return self.distribution is None

    def describe(self) -> str:
        """``env.config.encoder -> pkg:attr (vista-plugin-svg)`` for listings."""
        where = "outside the installed VISTA plugins" if self.outside else self.distribution
        return f"{self.field} -> {self.target.strip()} ({where})"


def import_path_of(value: Any, non_code_prefixes: tuple[str, ...] = ()) -> str | None:
    """``value`` stripped when it has the ``module:attr`` shape of an import path (and does not start
    with one of ``non_code_prefixes``, such as ``hf:``), else ``None``."""
    if not isinstance(value, str) or value.strip().startswith(non_code_prefixes):
        return None
    return value.strip() if _IMPORT_PATH.match(value) else None


def vista_packages() -> dict[str, str]:
    """Top-level package -> distribution, for the core and every distribution that declares a VISTA
    entry point.  Read from installed metadata; no plugin code runs."""
    owners = {"vista_rl": CORE_DISTRIBUTION}
    for group in (ENTRY_POINT_GROUP, LEGACY_ENTRY_POINT_GROUP):
        for entry in metadata.entry_points(group=group):
            dist = getattr(entry, "dist", None)
            name = dist.name if dist is not None else "?"
            owners.setdefault(entry.value.partition(":")[0].split(".")[0].strip(), name)
            top_level = dist.read_text("top_level.txt") if dist is not None else None
            for package in (top_level or "").split():
                owners.setdefault(package, name)
    return owners


def find_import_targets(run: RunConfig) -> list[ImportTargetUse]:
    """Every import target ``run`` names, in config order (see the module docstring).

    A plugin whose factory cannot be loaded (an unknown id, an import error) is skipped: the
    engine's own checks report it, and code it cannot load is never called either."""
    found: list[tuple[str, str]] = []
    _walk_model(type(run), run.model_dump(mode="python"), "", found)
    _walk_env(run.env.id, run.env.config, "env.id", "env.config", found)
    sections: list[tuple[str, str, Mapping[str, Any], str]] = []
    sections += [("tools", override.use or tool_id, override.config, f"rollout.tools.{tool_id}.config")
                 for tool_id, override in run.rollout.tools.items()]
    sections.append(("models", run.model.backend, run.model.config, "model.config"))
    for kind, item_id, config, where in sections:
        config_class = _config_class(kind, item_id) if config else None
        if config_class is not None:
            _walk_model(config_class, config, where, found)
    owners = vista_packages()
    return [ImportTargetUse(field, target, owners.get(target.partition(":")[0].split(".")[0]))
            for field, target in found]


def import_targets_listing(uses: list[ImportTargetUse]) -> str:
    """What ``vista train --dry-run`` prints: one ``field -> target (owner)`` line per import target."""
    if not uses:
        return "import targets (config fields that name code to import): none"
    lines = [f"  {use.describe()}" for use in uses]
    return "\n".join(["import targets (config fields that name code to import):", *lines])


@contextmanager
def strict_import_targets(strict: bool = True) -> Iterator[None]:
    """Within the block, :func:`check_import_targets` calls that pass no ``strict`` use this one:
    how ``vista train --strict`` reaches the check in the engine build (``make_engine``) without
    setting ``VISTA_STRICT_PLUGINS`` for the whole process."""
    token = _STRICT.set(strict)
    try:
        yield
    finally:
        _STRICT.reset(token)


def check_import_targets(run: RunConfig, strict: bool | None = None) -> list[ImportTargetUse]:
    """Find the import targets of ``run`` and apply the local policy to those outside the installed
    VISTA plugins: an :class:`ImportTargetWarning` naming the field and the target (Python shows
    each one once per process), or in strict mode an :class:`ImportTargetRefused` naming all of
    them.  Returns every target found.  ``strict`` defaults to the enclosing
    :func:`strict_import_targets`, else ``VISTA_STRICT_PLUGINS``.

    ``vista_rl.make_engine`` calls it before the engine makes anything from the config, the last
    point at which nothing the config names has been imported; call it before building envs,
    tools or backends from a run config any other way (``vista eval``)."""
    uses = find_import_targets(run)
    outside = [use for use in uses if use.outside]
    if not outside:
        return uses
    if strict is None:
        strict = _STRICT.get()
    if strict is None:
        strict = host().strict
    if strict:
        named = "; ".join(f"{use.field} names {use.target!r} (module {use.module})" for use in outside)
        raise ImportTargetRefused(
            f"the run config names code outside the installed VISTA plugins: {named}. Strict mode "
            f"({_STRICT_HINT}) refuses to import it; package that code as a VISTA plugin (an entry point "
            f"in the {ENTRY_POINT_GROUP!r} group), or run without strict mode to allow it with a warning")
    for use in outside:
        # Located at "run config" rather than at a line of code (Python prints no source line then),
        # and kept in this module's registry, so that Python's filters show each one once.
        warnings.warn_explicit(
            f"field {use.field} imports {use.target!r}: module {use.module} is not part of the installed "
            f"VISTA plugins, and the run will import and call it with your permissions. Run configs from "
            f"others can run code this way; {_STRICT_HINT} refuses such a config", ImportTargetWarning,
            filename="run config", lineno=0, module=__name__, registry=globals().setdefault("__warningregistry__", {}))
    return uses


def _config_class(kind: str, item_id: str) -> type[BaseModel] | None:
    try:
        factory = host().spec(kind, item_id).load()
    except Exception:  # noqa: BLE001 - an unknown id or a plugin that fails to load is reported where it is made
        return None
    return config_class_of(factory)


def _walk_env(env_id: str, config: Mapping[str, Any], id_where: str, where: str, out: list[tuple[str, str]],
              depth: int = 0) -> None:
    """The env's config, and through a wrapper env (``ray``, ``ray/<env>``: an env in its own
    process) the env it wraps.  A wrapper's config class names its inner env and that env's config
    with ``wraps_env = ("env", "config")``; a routed id (``ray/pkg.mod:Factory``) gives the inner
    env as the rest of the id."""
    config_class = _config_class("envs", env_id)
    if config_class is None or depth > 4:
        return
    _walk_model(config_class, config, where, out)
    wraps = getattr(config_class, "wraps_env", None)
    if not wraps:
        return
    env_field, config_field = wraps
    inner, inner_where = config.get(env_field), f"{where}.{env_field}"
    routed = _routed_rest(env_id)
    if routed is not None:
        inner, inner_where = routed, id_where
        target = import_path_of(routed)
        if target is not None:
            out.append((id_where, target))
    inner_config = config.get(config_field)
    if isinstance(inner, str) and import_path_of(inner) is None and isinstance(inner_config, Mapping):
        _walk_env(inner, inner_config, inner_where, f"{where}.{config_field}", out, depth + 1)


def _routed_rest(item_id: str) -> str | None:
    """``rest`` when ``item_id`` is ``prefix/rest`` served by an item registered as ``prefix/*``."""
    try:
        spec = host().spec("envs", item_id)
    except Exception:  # noqa: BLE001 - an unknown id is reported where the env is made
        return None
    return item_id[len(spec.id) - 1:] if spec.id.endswith("/*") else None


def _walk_model(model: type[BaseModel], data: Mapping[str, Any], where: str, out: list[tuple[str, str]]) -> None:
    fields = _fields_by_name(model)
    for key, value in data.items():
        field = fields.get(key) if isinstance(key, str) else None
        if field is None or value is None:
            continue
        here = f"{where}.{key}" if where else str(key)
        markers = _markers(field)
        if ImportTarget in markers:
            _collect(value, here, _non_code(markers), out)
        else:
            _walk_type(field.annotation, value, here, out)


def _walk_type(annotation: Any, value: Any, where: str, out: list[tuple[str, str]]) -> None:
    """Follow ``value`` along its declared type to nested models and nested ``ImportTarget`` markers
    (``list[Annotated[str, ImportTarget]]``)."""
    if _is_model(annotation):
        if isinstance(value, Mapping):
            _walk_model(annotation, value, where, out)
        return
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Annotated:
        if ImportTarget in args[1:]:
            _collect(value, where, _non_code(list(args[1:])), out)
        else:
            _walk_type(args[0], value, where, out)
    elif origin is Union or isinstance(annotation, types.UnionType):
        for arm in args:
            if _fits(arm, value) or typing.get_origin(arm) is typing.Annotated:
                _walk_type(arm, value, where, out)
    elif isinstance(value, Mapping) and len(args) == 2 and _fits(annotation, value):
        for key, inner in value.items():
            _walk_type(args[1], inner, f"{where}.{key}", out)
    elif isinstance(value, (list, tuple)) and args and _fits(annotation, value):
        fixed = origin is tuple and not (len(args) == 2 and args[1] is Ellipsis)
        for index, inner in enumerate(value):
            _walk_type(args[index] if fixed and index < len(args) else args[0], inner, f"{where}[{index}]", out)


def _collect(value: Any, where: str, non_code: tuple[str, ...], out: list[tuple[str, str]]) -> None:
    """Every ``module:attr`` string inside an ``ImportTarget`` field's value, at any depth."""
    stack = [(value, where)]
    while stack:
        item, here = stack.pop(0)
        target = import_path_of(item, non_code)
        if target is not None:
            out.append((here, target))
        elif isinstance(item, Mapping):
            stack.extend((inner, f"{here}.{key}") for key, inner in item.items())
        elif isinstance(item, (list, tuple)):
            stack.extend((inner, f"{here}[{index}]") for index, inner in enumerate(item))


def _non_code(markers: list[Any]) -> tuple[str, ...]:
    return tuple(prefix for marker in markers if isinstance(marker, NonCodePrefixes) for prefix in marker.prefixes)


__all__ = ["ImportTargetRefused", "ImportTargetUse", "ImportTargetWarning", "check_import_targets",
           "find_import_targets", "import_path_of", "import_targets_listing", "strict_import_targets",
           "vista_packages"]
