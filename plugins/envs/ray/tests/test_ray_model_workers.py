"""Model workers as Ray actors on a real local Ray cluster: the same trajectories as one in-process
engine, global episode indices, a clear start-up error, and a killed actor's chunk recorded as
failed while the rest of the run goes on."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

ray = pytest.importorskip("ray")

from vista_plugin_ray.model_workers import RayModelWorkerPool  # noqa: E402

from vista_rl.config import RunConfig  # noqa: E402
from vista_rl.rollout import ModelWorkerError, RolloutEngine, episode_specs, make_backend, make_pool  # noqa: E402

ODD = "oddshape/odd-colour-v0"


@pytest.fixture(scope="module", autouse=True)
def ray_cluster() -> Iterator[None]:
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"PYTHONPATH": os.environ.get("PYTHONPATH", ""), "OMP_NUM_THREADS": "1"}})
    yield
    ray.shutdown()


def _config(**model):
    return RunConfig.model_validate({"env": {"id": ODD}, "model": model or {"backend": "scripted", "path": "oracle"},
                                     "rollout": {"batch_size": 3, "model_workers": 2, "model_worker_mode": "ray"}})


def _key(trajectory):
    data = trajectory.to_dict()
    data["metadata"] = {k: v for k, v in data["metadata"].items() if not k.endswith("_s")}
    return data


def test_ray_workers_match_one_local_engine():
    config = _config()
    specs = episode_specs(ODD, range(5), group_size=2)
    with RolloutEngine(make_backend(config), config.rollout, seed=config.seed) as engine:
        local = {(t.seed, t.sample_index): _key(t) for t in engine.stream(specs)}
    with make_pool(config) as pool:
        assert isinstance(pool, RayModelWorkerPool)
        remote = list(pool.stream(specs))
        assert sorted(t.metadata["episode_index"] for t in remote) == list(range(10))
        assert min(pool.episodes_per_worker) > 0 and pool.timings.episodes == 10
    assert {(t.seed, t.sample_index): _key(t) for t in remote} == local


def test_a_bad_backend_config_fails_at_start():
    with pytest.raises(ModelWorkerError, match="could not start scripted"):
        RayModelWorkerPool(_config(backend="scripted", config={}), 2)


def test_a_killed_actor_fails_its_chunk_and_the_run_goes_on():
    specs = episode_specs(ODD, range(8))
    with RayModelWorkerPool(_config(), 2) as pool:
        ray.kill(pool._actors[0], no_restart=True)
        results = list(pool.stream(specs))
    assert sorted(t.seed for t in results) == list(range(8))
    failed = [t for t in results if t.failure]
    assert all("model worker 0 failed" in t.failure for t in failed) and len(failed) <= 2
    assert all(t.success for t in results if not t.failure)
