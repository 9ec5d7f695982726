"""Loaded by verl itself on ``import verl`` (entry point group ``verl.plugins``), in every process:
the trainer, Ray workers, reward workers.  It registers the vista agent loop and our estimators in
verl's registries and installs the compute-advantage bridge, so no verl file is edited and nothing
depends on the driver having imported us first.

Everything is deferred to first use where possible: ``import verl`` runs this before verl's own
subpackages finish importing, so imports here happen inside a function run after verl is loaded.
"""

from __future__ import annotations

import logging

logger = logging.getLogger(__name__)


def activate() -> None:
    """Register everything in verl (idempotent)."""
    from vista_plugin_verl import (
        agent_loop,  # noqa: F401 - @register("vista_agent") runs on import
        patches,
    )
    from vista_plugin_verl.estimators import install_bridge, register_in_verl

    register_in_verl()
    install_bridge()
    patches.install()  # named, tested fixes of verl 0.9.x bugs (vista_plugin_verl/patches.py)


try:
    activate()
except Exception as exc:  # noqa: BLE001 - verl itself swallows plugin errors; say what happened
    logger.warning("vista-plugin-verl: could not register in verl: %s", exc)
