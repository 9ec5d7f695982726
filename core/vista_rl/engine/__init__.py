"""The ``local`` training engine: SFT, GRPO and PPO (value head) on one device with transformers models.

Heavy imports (torch, transformers) happen only when the engine is made, so ``import vista_rl`` and
``vista --help`` stay fast.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from vista_rl.engine.trainer import LocalEngine

__all__ = ["LocalEngine"]


def __getattr__(name: str) -> Any:
    if name == "LocalEngine":
        from vista_rl.engine.trainer import LocalEngine

        return LocalEngine
    raise AttributeError(name)
