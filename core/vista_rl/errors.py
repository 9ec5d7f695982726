"""Exception types.  Each says what went wrong and what to do about it."""

from __future__ import annotations


class VistaError(Exception):
    """Base class of every error VISTA raises on purpose."""


class UnknownItemError(VistaError, KeyError):
    """An id was looked up that no installed plugin registered."""

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0]) if self.args else ""


class DuplicateItemError(VistaError):
    """Two plugins registered the same id."""


class PluginLoadError(VistaError):
    """A plugin failed to import or raised inside a hook (raised only in strict mode)."""


class ConfigError(VistaError, ValueError):
    """A configuration value is invalid; the message names the key."""
