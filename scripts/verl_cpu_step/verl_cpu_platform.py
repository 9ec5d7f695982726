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


def _cpu_device_module() -> ModuleType:
    """``torch.cpu`` plus the memory calls verl makes on ``torch.cuda`` (``memory_reserved``,
    ``mem_get_info``, ...), answered for host memory or as zero: verl only logs and frees with them."""
    import psutil

    module = ModuleType("vista_cpu_device")
    module.__dict__.update({name: getattr(torch.cpu, name) for name in dir(torch.cpu) if not name.startswith("__")})
    for name in ("memory_reserved", "memory_allocated", "max_memory_allocated", "max_memory_reserved"):
        setattr(module, name, lambda *args, **kwargs: 0)
    for name in ("empty_cache", "reset_peak_memory_stats", "reset_max_memory_allocated", "ipc_collect"):
        setattr(module, name, lambda *args, **kwargs: None)
    module.mem_get_info = lambda *args, **kwargs: (psutil.virtual_memory().available, psutil.virtual_memory().total)
    module.memory_stats = lambda *args, **kwargs: {}
    module.get_device_name = lambda *args, **kwargs: "CPU"  # verl's flops counter: "CPU" has no peak flops
    module.is_available = lambda: True
    module.device_count = lambda: 1
    module.current_device = lambda: torch.device("cpu")
    module.set_device = lambda *args, **kwargs: None
    module.manual_seed = torch.manual_seed
    module.manual_seed_all = torch.manual_seed
    return module


_CPU_DEVICE_MODULE = _cpu_device_module()


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
        return _CPU_DEVICE_MODULE

    def is_available(self) -> bool:
        return True

    def is_platform_available(self, use_smi_check: bool = False) -> bool:
        return os.environ.get("VERL_PLATFORM", "") == "cpu"

    def current_device(self) -> Any:
        # verl passes get_device_id() straight to .to(device=...) and FSDP's device_id: an int there
        # means an accelerator index, so the CPU's "index" is the device itself
        return torch.device("cpu")

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


def _dedupe_backend(init: Any) -> Any:
    """verl builds ``f"cpu:gloo,{device}:{backend}"`` (verl/utils/distributed.py), which on this
    platform is ``cpu:gloo,cpu:gloo``, a string torch rejects (duplicate device type); one entry each."""

    def init_process_group(*args: Any, **kwargs: Any) -> Any:
        backend = kwargs.get("backend")
        if isinstance(backend, str) and "," in backend:
            kwargs["backend"] = ",".join(dict.fromkeys(part.strip() for part in backend.split(",")))
        return init(*args, **kwargs)

    init_process_group.vista_cpu_dedupe = True  # type: ignore[attr-defined]
    return init_process_group


if os.environ.get("VERL_PLATFORM", "") == "cpu" and not hasattr(torch.distributed.init_process_group,
                                                                 "vista_cpu_dedupe"):
    torch.distributed.init_process_group = _dedupe_backend(torch.distributed.init_process_group)


def _reloadable_cpu_linear_weights() -> bool:
    """vLLM's CPU build packs every linear layer's weight into a oneDNN/SGL kernel after loading and
    replaces ``layer.weight`` by an empty ``Parameter`` without its ``weight_loader``
    (``vllm/model_executor/layers/utils.py``, ``dispatch_cpu_unquantized_gemm(layer, remove_weight=True)``,
    called by ``UnquantizedLinearMethod.process_weights_after_loading``).  verl syncs the trained
    weights into the server in place with ``model.load_weights`` (``verl/workers/rollout/vllm_rollout/
    utils.py``, ``_update_weights``), which then fails: ``AttributeError: 'Parameter' object has no
    attribute 'weight_loader'`` (and ``BufferError: cannot close exported pointers exist`` while the
    worker unwinds).  Here each layer keeps its weight and multiplies with ``torch.nn.functional.linear``
    (vLLM's own fallback for layers it does not pack, ``_cpu_skip_gemm_dispatch``): slower, reloadable.
    Only in processes that already run vLLM (its worker imports verl's worker extension, so this plugin,
    before it loads the model)."""
    import sys

    if "vllm" not in sys.modules:
        return False
    import vllm.model_executor.layers.linear as linear
    method = linear.UnquantizedLinearMethod
    if getattr(method.process_weights_after_loading, "vista_cpu_reloadable", False):
        return True
    original = method.process_weights_after_loading

    def process_weights_after_loading(self: Any, layer: torch.nn.Module) -> None:
        if getattr(layer, "weight", None) is not None and getattr(layer.weight, "ndim", 0) == 2:
            layer.cpu_linear = torch.nn.functional.linear
            return
        original(self, layer)

    process_weights_after_loading.vista_cpu_reloadable = True  # type: ignore[attr-defined]
    method.process_weights_after_loading = process_weights_after_loading
    return True


if os.environ.get("VERL_PLATFORM", "") == "cpu":
    _reloadable_cpu_linear_weights()
