"""``engine_config.verl`` on the local engine: its keys are checked, never skipped.

One run config serves every engine, so the local engine reads the verl engine's section too: a
misspelt key there (``engine_config.verl.cluster.nodes``) is an error on a laptop, as a misspelt
``engine_config.local`` key is on the cluster (``vista_plugin_verl.local_section``).  Nothing of the
section is trained here (it holds only what verl alone has).

Where the verl plugin is installed its own schema validates the section (keys and values); a laptop
venv usually lacks it, so :data:`KEYS` lists the section's keys here as well
(``plugins/engines/verl/tests/test_verl_coverage.py`` checks the two agree).
"""

from __future__ import annotations

from pydantic import BaseModel

from vista_rl.config import KeyTree, RunConfig, check_section_keys, engine_section

PREFIX = "engine_config.verl"
#: ``engine_config.verl``'s keys (``cluster`` nested), as ``vista_plugin_verl.config.VerlEngineConfig``
#: declares them.
KEYS: KeyTree = {
    "critic_lr": None,
    "cluster": dict.fromkeys(("n_gpus_per_node", "nnodes", "rollout_backend", "tensor_parallel_size",
                              "gpu_memory_utilization", "max_prompt_length", "max_response_length")),
    "overrides": None,
    "sft_overrides": None,
    "python": None,
}


def verl_schema() -> type[BaseModel] | None:
    """The verl engine's own schema of its section where that plugin is installed, else None."""
    try:
        from vista_plugin_verl.config import VerlEngineConfig
    except ImportError:
        return None
    return VerlEngineConfig


def check(run: RunConfig) -> None:
    """Raise ConfigError naming the full key of anything in ``engine_config.verl`` the verl engine would
    reject; with the verl plugin absent, its unknown keys."""
    if "verl" not in run.engine_config:
        return
    schema = verl_schema()
    if schema is not None:
        engine_section(run, "verl", schema)
        return
    check_section_keys(run.engine_config["verl"] or {}, KEYS, PREFIX, "the verl engine's section")
