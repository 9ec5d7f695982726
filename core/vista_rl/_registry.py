"""Registries of items (envs, tools, judges, ...) contributed by plugins.

Items are lazy: a plugin registers ``"package.module:Object"`` and the module is imported only when
the item is made.  This keeps ``vista envs`` fast even with heavy plugins installed, as Gymnasium's
entry-point strings do.
"""

from __future__ import annotations

import difflib
import functools
import inspect
import pkgutil
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from vista_rl.errors import DuplicateItemError, UnknownItemError

_VERSION_SUFFIX = re.compile(r"^(?P<base>.+)-v(?P<version>\d+)$")


def is_import_path(text: str) -> bool:
    """Whether ``text`` reads as ``package.module:Object`` rather than a registered id.

    Registered ids may contain ``/`` (``gymnasium/FrozenLake-v1``) but module names never do, so
    the part before the colon decides."""
    module_name, sep, _ = text.partition(":")
    return bool(sep) and "/" not in module_name


def resolve_import_path(path: str) -> Any:
    """The object named by ``package.module:Object.attr``, importing its module.

    The one resolver for such strings (registry targets, env factories given by path), built on
    :func:`pkgutil.resolve_name` so the format matches the standard library's."""
    return pkgutil.resolve_name(path)


@dataclass(frozen=True)
class ItemSpec:
    """One registered item and where it came from."""

    kind: str
    id: str
    target: Any
    plugin: str
    distribution: str
    version: str
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def description(self) -> str:
        text = self.metadata.get("description")
        if text:
            return str(text)
        if not isinstance(self.target, str):
            doc = inspect.getdoc(self.target) or ""
            return doc.splitlines()[0] if doc else ""
        return ""

    @property
    def target_path(self) -> str:
        if isinstance(self.target, str):
            return self.target
        module = getattr(self.target, "__module__", "?")
        name = getattr(self.target, "__qualname__", type(self.target).__name__)
        return f"{module}:{name}"

    def load(self) -> Any:
        """Resolve the target, importing its module if it was registered as a string."""
        if not isinstance(self.target, str):
            return self.target
        module_name, _, attr = self.target.partition(":")
        if not attr:
            raise ValueError(
                f"{self.kind} {self.id!r} from {self.distribution} has target {self.target!r}; "
                "expected 'package.module:Object'"
            )
        return resolve_import_path(self.target)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "kind": self.kind,
            "target": self.target_path,
            "plugin": self.plugin,
            "distribution": self.distribution,
            "version": self.version,
            "description": self.description,
            "metadata": {k: v for k, v in self.metadata.items() if _jsonable(v)},
        }


def _jsonable(value: Any) -> bool:
    return isinstance(value, (str, int, float, bool, type(None), list, dict, tuple))


def split_version(item_id: str) -> tuple[str, int | None]:
    """``"ns/name-v2"`` -> ``("ns/name", 2)``; ids without a version give ``None``."""
    match = _VERSION_SUFFIX.match(item_id)
    if not match:
        return item_id, None
    return match.group("base"), int(match.group("version"))


#: Picks the provider of an id that several plugins registered; None when none may be preferred.
Chooser = Callable[[str, list[ItemSpec]], "ItemSpec | None"]


def _no_preference(_item_id: str, candidates: list[ItemSpec]) -> ItemSpec | None:
    return candidates[0] if len(candidates) == 1 else None


@dataclass(frozen=True)
class FamilyClash:
    """Several distributions provide versions of one unversioned id (``sokoban/sokoban``).

    ``providers`` holds each distribution's newest version; ``winner`` is the one whose versions the
    unversioned id resolves among (None: no pinned or first-party provider, so it refuses)."""

    base: str
    winner: ItemSpec | None
    providers: tuple[ItemSpec, ...]


@dataclass(frozen=True)
class Resolution:
    """Who provides an id that more than one plugin registered: ``winner`` (None: ambiguous)."""

    item_id: str
    winner: ItemSpec | None
    candidates: tuple[ItemSpec, ...]


class Registry:
    """All items of one kind, keyed by id.

    Every registration is kept; an id registered by several plugins resolves through ``choose``
    (the plugin host prefers first-party and pinned providers), never by registration order, so
    which plugin loaded first cannot decide who serves an id.
    """

    def __init__(self, kind: str, *, instantiate: bool = True, choose: Chooser = _no_preference) -> None:
        self.kind = kind
        self.instantiate = instantiate
        self._choose = choose
        self._candidates: dict[str, list[ItemSpec]] = {}
        self._items: dict[str, ItemSpec] = {}
        self._ambiguous: dict[str, list[ItemSpec]] = {}

    def __contains__(self, item_id: object) -> bool:
        return isinstance(item_id, str) and self._resolve_id(item_id) is not None

    def __iter__(self) -> Iterator[ItemSpec]:
        """The provider of every id; every candidate of an ambiguous id (so listings show them)."""
        specs = [*self._items.values(), *(spec for specs in self._ambiguous.values() for spec in specs)]
        return iter(sorted(specs, key=lambda spec: (spec.id, spec.distribution)))

    def __len__(self) -> int:
        return len(self._candidates)

    def ids(self) -> list[str]:
        return sorted(self._candidates)

    def add(self, spec: ItemSpec) -> Resolution | None:
        """Record a registration; for an id now registered more than once, how it resolves.

        A plugin registering the same id twice keeps its first registration (its own code fixes the
        order) and is told so with :class:`DuplicateItemError`."""
        candidates = self._candidates.setdefault(spec.id, [])
        for known in candidates:
            if (known.plugin, known.distribution) == (spec.plugin, spec.distribution):
                raise DuplicateItemError(
                    f"{self.kind} id {spec.id!r} is registered twice by {spec.distribution} {spec.version} "
                    f"(plugin {spec.plugin!r}); the first registration is kept"
                )
        candidates.append(spec)
        return self._settle(spec.id)

    def _settle(self, item_id: str) -> Resolution | None:
        candidates = self._candidates.get(item_id, [])
        self._items.pop(item_id, None)
        self._ambiguous.pop(item_id, None)
        if not candidates:
            self._candidates.pop(item_id, None)
            return None
        if len(candidates) == 1:
            self._items[item_id] = candidates[0]
            return None
        winner = self._choose(item_id, list(candidates))
        if winner is None:
            self._ambiguous[item_id] = list(candidates)
        else:
            self._items[item_id] = winner
        return Resolution(item_id, winner, tuple(candidates))

    def remove_plugin(self, plugin: str, distribution: str | None = None) -> None:
        """Forget every item of one plugin (all plugins of that entry-point name without ``distribution``)."""
        for item_id in list(self._candidates):
            self._candidates[item_id] = [
                spec for spec in self._candidates[item_id]
                if not (spec.plugin == plugin and distribution in (None, spec.distribution))
            ]
            self._settle(item_id)

    def ambiguity_message(self, item_id: str) -> str:
        candidates = self._ambiguous.get(item_id, [])
        providers = " and ".join(f"{spec.distribution} {spec.version} (plugin {spec.plugin!r})" for spec in candidates)
        pins = " or ".join(f"VISTA_PREFER={item_id}={spec.distribution}" for spec in candidates)
        return (f"{self.kind} id {item_id!r} is registered by {providers}, and none of them is first-party or "
                f"pinned, so VISTA will not guess. Choose one with {pins} (or [prefer] in plugins.toml), "
                f"or uninstall the one you do not want.")

    def _resolve_id(self, item_id: str) -> str | None:
        resolved = self._lookup(item_id)
        return resolved if isinstance(resolved, str) else (item_id if resolved is not None else None)

    def _lookup(self, item_id: str) -> str | FamilyClash | None:
        """The registered id that serves ``item_id``; a :class:`FamilyClash` when it is an unversioned
        id whose versions come from several distributions and none of them may be preferred."""
        if item_id in self._candidates:
            return item_id
        # Routed ids: an item registered as "prefix/*" serves every "prefix/<rest>" (e.g. remote/<env id>).
        for known in self._candidates:
            if known.endswith("/*") and item_id.startswith(known[:-1]) and len(item_id) > len(known) - 1:
                return known
        # An unversioned id picks the newest version, as gymnasium does for "name" vs "name-vN" ...
        base, version = split_version(item_id)
        if version is not None:
            return None
        family = [known for known in self._candidates
                  if split_version(known)[0] == base or split_version(known)[0].split("/")[-1] == base]
        if not family:
            return None
        bases = {split_version(known)[0] for known in family}
        if len(bases) > 1:
            return None  # ambiguous short name across namespaces
        # ... but only among the versions of ONE provider: another distribution registering a newer
        # "-vN" must not take the unversioned id over (issue 22, item 5).
        clash = self.family_clash(bases.pop())
        if clash is not None:
            if clash.winner is None:
                return clash
            family = [known for known in family if self._registered_by(known, clash.winner.distribution)]
        return max(family, key=lambda known: split_version(known)[1] or 0)

    def family_clash(self, base: str) -> FamilyClash | None:
        """How the unversioned id ``base`` resolves when several distributions register its versions
        (None when one distribution registers them all, or when the others only duplicate ids it
        registers too: the rules for duplicate ids settle those one by one).  The distribution is
        chosen as for a duplicate id: pinned (``VISTA_PREFER=base=DIST`` or the namespace), else the
        one first-party distribution; with neither the unversioned id is ambiguous."""
        registered: dict[str, list[ItemSpec]] = {}
        for known, specs in self._candidates.items():
            if split_version(known)[0] == base:
                for spec in specs:
                    registered.setdefault(spec.distribution, []).append(spec)
        if len(registered) < 2:
            return None
        providers = tuple(max(specs, key=lambda spec: split_version(spec.id)[1] or 0)
                          for _, specs in sorted(registered.items()))
        winner = self._choose(base, list(providers))
        ids = {dist: {spec.id for spec in specs} for dist, specs in registered.items()}
        if winner is None:
            if sum(all(other <= mine for other in ids.values()) for mine in ids.values()) == 1:
                return None
            return FamilyClash(base, None, providers)
        # only distributions with versions of their own contest the unversioned id
        contenders = tuple(spec for spec in providers if spec.distribution == winner.distribution
                           or not ids[spec.distribution] <= ids[winner.distribution])
        return FamilyClash(base, winner, contenders) if len(contenders) > 1 else None

    def _registered_by(self, item_id: str, distribution: str) -> bool:
        return any(spec.distribution == distribution for spec in self._candidates.get(item_id, []))

    def family_message(self, clash: FamilyClash) -> str:
        names = " and ".join(f"{spec.distribution} {spec.version} ({spec.id})" for spec in clash.providers)
        pins = " or ".join(f"VISTA_PREFER={clash.base}={spec.distribution}" for spec in clash.providers)
        return (f"{self.kind} id {clash.base!r} (no version) has versions from {names}, and none of them is "
                f"first-party or pinned, so VISTA will not guess whose newest version to use. Ask for a "
                f"versioned id, choose one with {pins} (or [prefer] in plugins.toml), or uninstall the one "
                f"you do not want.")

    def spec(self, item_id: str, *, installed_plugins: list[str] | None = None) -> ItemSpec:
        resolved = self._lookup(item_id)
        if isinstance(resolved, FamilyClash):
            raise DuplicateItemError(self.family_message(resolved))
        if resolved is None:
            raise UnknownItemError(self._unknown_message(item_id, installed_plugins or []))
        if resolved in self._ambiguous:
            raise DuplicateItemError(self.ambiguity_message(resolved))
        return self._items[resolved]

    def _unknown_message(self, item_id: str, installed_plugins: list[str]) -> str:
        close = difflib.get_close_matches(item_id, list(self._candidates), n=5, cutoff=0.4)
        short = [known for known in self._candidates if item_id.lower() in known.lower()]
        suggestions = list(dict.fromkeys(close + short))[:5]
        lines = [f"No {self.kind[:-1] if self.kind.endswith('s') else self.kind} with id {item_id!r}."]
        if suggestions:
            lines.append("Did you mean: " + ", ".join(suggestions) + "?")
        elif self._candidates:
            lines.append("Known ids: " + ", ".join(sorted(self._candidates)[:20]))
        lines.append(
            "Installed plugins: " + (", ".join(installed_plugins) if installed_plugins else "(none)")
        )
        lines.append(f"List them with `vista {self.kind}`; install the plugin that provides it with pip.")
        return "\n".join(lines)

    def make(self, item_id: str, /, *, _installed_plugins: list[str] | None = None, **config: Any) -> Any:
        """Create the item.  Classes and factories are called with ``config``; for registries that
        do not instantiate (estimators), config is bound with ``functools.partial``.  An item
        registered as ``"prefix/*"`` (with metadata ``route_argument``) is made for any
        ``"prefix/<rest>"`` id, receiving ``<rest>`` as that argument."""
        spec = self.spec(item_id, installed_plugins=_installed_plugins)
        if spec.id.endswith("/*"):
            # the rest of the id goes to the argument the routed item names (default "id")
            config = {spec.metadata.get("route_argument", "id"): item_id[len(spec.id) - 1:], **config}
        obj = spec.load()
        if not self.instantiate:
            return functools.partial(obj, **config) if config else obj
        if not callable(obj):
            if config:
                raise TypeError(f"{self.kind} {item_id!r} is an instance and takes no config")
            return obj
        return obj(**config)
