"""A CPU platform for verl 0.9.1, for one debugging step on a machine without a GPU.

verl 0.9.1 has no CPU platform (upstream's fallback is the open PR verl-project/verl#3405).  It does
have a platform registry (``verl.plugin.platform.PlatformRegistry``, chosen by ``VERL_PLATFORM``),
so this module registers ``cpu`` there instead of patching verl's files: device ``cpu``, collective
backend ``gloo``.  Ray's ``GPU`` resource stays the unit of placement: verl reads it by name in
several places (``ResourcePoolManager._check_resource_available``, ``get_accelerator_ids()["GPU"]``),
so ``ray.init`` declares ``num_gpus=N`` logical GPUs on this CPU-only node and each worker holds one.

scripts/verl_cpu_step/run.sh installs it into its throw-away interpreter only, as a ``verl.plugins``
entry point, so ``import verl`` loads it in every process (Ray workers too) before anything asks
for the platform.  Never installed into a real environment.
"""

from __future__ import annotations

import contextlib
import os
from types import ModuleType
from typing import Any

import torch
from verl.plugin.platform.platform_base import PlatformBase
from verl.plugin.platform.platform_manager import PlatformRegistry

RESOURCE = "GPU"


@PlatformRegistry.register(platform="cpu")
class PlatformCPU(PlatformBase):
    """verl's device hooks on the CPU: one 'device' per worker, gloo collectives, no CUDA runtime."""

    @property
    def device_name(self) -> str:
        return "cpu"

    @property
    def vendor_name(self) -> str:
        return "cpu"

    @property
    def device_module(self) -> ModuleType:
        return torch.cpu

    def is_available(self) -> bool:
        return True

    def is_platform_available(self, use_smi_check: bool = False) -> bool:
        return os.environ.get("VERL_PLATFORM", "") == "cpu"

    def current_device(self) -> int:
        return 0

    def device_count(self) -> int:
        return 1

    def set_device(self, device_index: int) -> None:
        return None

    def synchronize(self, device_index: int | None = None) -> None:
        return None

    def manual_seed(self, seed: int) -> None:
        torch.manual_seed(seed)

    def manual_seed_all(self, seed: int) -> None:
        torch.manual_seed(seed)

    def set_allocator_settings(self, settings: str) -> None:
        return None

    def empty_cache(self) -> None:
        return None

    def get_device_capability(self, device_index: int = 0) -> tuple[int | None, int | None]:
        return None, None

    def communication_backend_name(self) -> str:
        return "gloo"

    def visible_devices_envvar(self) -> str:
        return "CUDA_VISIBLE_DEVICES"  # what Ray sets for a worker holding a (logical) GPU

    def nvtx_range(self, msg: str) -> Any:
        return contextlib.nullcontext()

    def profiler_start(self) -> None:
        return None

    def profiler_stop(self) -> None:
        return None

    def ray_resource_name(self) -> str:
        return RESOURCE

    def ray_resource_options(self, num_gpus: float) -> dict[str, Any]:
        return {"num_gpus": num_gpus}

    def ray_noset_envvars(self) -> list[str]:
        return ["RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES"]

    def is_ipc_supported(self) -> bool:
        return False

    def cudart(self) -> Any:
        return None
