"""Who provides an item id that several plugins register: the user's pins, then first-party.

pip installs anything into the same environment, so a package can register ``sokoban/sokoban-v0``
next to the real plugin.  Which one serves the id must not depend on the order entry points happen
to load in: a provider the user pinned wins, else the one provider that is ours, else nobody (the id
is ambiguous and the user is asked to choose).  Pins come from ``VISTA_PREFER=ID=DIST,...`` over the
``[prefer]`` table of ``plugins.toml``; ``ID`` is an item id or a namespace (``sokoban`` covers every
``sokoban/...`` id).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

from vista_rl._registry import ItemSpec
from vista_rl.errors import ConfigError

#: The core's distribution name on the package index.
CORE_DISTRIBUTION = "vista-rl"
#: Distributions this project publishes (canonical names).  When one of them and another
#: distribution register the same id, ours serves it unless the user pins the other; a package
#: merely *named* ``vista-plugin-*`` is not trusted for that.  ``tests/test_plugins.py`` checks this
#: list against ``plugins/*/pyproject.toml``.
FIRST_PARTY_DISTRIBUTIONS: frozenset[str] = frozenset({
    CORE_DISTRIBUTION,
    "vista-plugin-chartqa",
    "vista-plugin-datasets",
    "vista-plugin-decodekit",
    "vista-plugin-detection",
    "vista-plugin-envserver",
    "vista-plugin-frozenlake",
    "vista-plugin-gamekit",
    "vista-plugin-grounding",
    "vista-plugin-gymnasium",
    "vista-plugin-judges",
    "vista-plugin-local",
    "vista-plugin-navigation",
    "vista-plugin-oddshape",
    "vista-plugin-openai",
    "vista-plugin-ray",
    "vista-plugin-scenekit",
    "vista-plugin-sokoban",
    "vista-plugin-svg",
    "vista-plugin-tools",
    "vista-plugin-trackers",
    "vista-plugin-toolserve",
    "vista-plugin-transformers",
    "vista-plugin-verl",
    "vista-plugin-vigorl",
    "vista-plugin-visual-search",
    "vista-plugin-vllm",
    "vista-plugin-vqa",
    "vista-plugin-worldmodel",
})


def canonical_name(name: str) -> str:
    """A distribution name as the package index compares them (PEP 503)."""
    from packaging.utils import canonicalize_name

    return str(canonicalize_name(name))


def plugins_config_path() -> Path:
    """``$VISTA_CONFIG_DIR/plugins.toml``, default ``~/.config/vista/plugins.toml``."""
    base = os.environ.get("VISTA_CONFIG_DIR") or os.path.join(os.path.expanduser("~"), ".config", "vista")
    return Path(base) / "plugins.toml"


def read_preferences(environ: Mapping[str, str] | None = None, config: Path | None = None) -> dict[str, str]:
    """Pinned providers: id or namespace -> canonical distribution name.

    From the ``[prefer]`` table of ``plugins.toml`` (``"sokoban" = "vista-plugin-sokoban"``), then
    ``VISTA_PREFER=ID=DIST,...`` on top.  A malformed entry is an error: a pin that silently does
    nothing would leave the user believing they chose."""
    if sys.version_info >= (3, 11):  # only for the load, not for ``import vista_rl``
        import tomllib
    else:  # Python 3.10, which the core supports, has no tomllib
        import tomli as tomllib

    environ = os.environ if environ is None else environ
    path = plugins_config_path() if config is None else config
    pins: dict[str, str] = {}
    if path.is_file():
        try:
            table = tomllib.loads(path.read_text(encoding="utf-8")).get("prefer", {})
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise ConfigError(f"{path}: cannot read plugin preferences: {exc}") from None
        if not isinstance(table, dict) or not all(isinstance(v, str) for v in table.values()):
            raise ConfigError(f'{path}: [prefer] must map ids to distribution names, e.g. "sokoban" = '
                                  '"vista-plugin-sokoban"')
        pins.update({str(key): canonical_name(value) for key, value in table.items()})
    for entry in (environ.get("VISTA_PREFER") or "").split(","):
        if not entry.strip():
            continue
        key, sep, dist = entry.partition("=")
        if not sep or not key.strip() or not dist.strip():
            raise ConfigError(f"VISTA_PREFER entry {entry.strip()!r} is not ID=DISTRIBUTION "
                                  "(e.g. VISTA_PREFER=sokoban=vista-plugin-sokoban)")
        pins[key.strip()] = canonical_name(dist.strip())
    return pins


class ProviderPolicy:
    """Pins (id or namespace -> canonical distribution) and the rule that picks a provider."""

    def __init__(self, pins: Mapping[str, str] | None = None) -> None:
        self.pins = dict(pins or {})

    @classmethod
    def from_settings(cls) -> ProviderPolicy:
        """The pins of this process's environment and ``plugins.toml``."""
        return cls(read_preferences())

    def pin_for(self, item_id: str) -> tuple[str, str] | None:
        """(key, distribution) of the pin that covers ``item_id``: the id itself, else its namespace."""
        for key in (item_id, item_id.split("/", 1)[0]):
            if key in self.pins:
                return key, self.pins[key]
        return None

    def choose(self, item_id: str, candidates: list[ItemSpec]) -> ItemSpec | None:
        """The provider of an id several plugins registered: pinned, else the one first-party one."""
        pin = self.pin_for(item_id)
        if pin is not None:
            pinned = [spec for spec in candidates if canonical_name(spec.distribution) == pin[1]]
            if len(pinned) == 1:
                return pinned[0]
        ours = [spec for spec in candidates if canonical_name(spec.distribution) in FIRST_PARTY_DISTRIBUTIONS]
        return ours[0] if len(ours) == 1 else None

    def pinned(self, item_id: str, spec: ItemSpec) -> str | None:
        """``KEY=DIST`` when a pin is what made ``spec`` the provider of ``item_id``."""
        pin = self.pin_for(item_id)
        if pin is None or canonical_name(spec.distribution) != pin[1]:
            return None
        return f"{pin[0]}={pin[1]}"
