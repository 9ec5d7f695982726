"""Ray env workers on a real local Ray cluster (2 CPUs): discovery in the actors, equivalence with
local envs, batched steps, and workers killed or hung mid-episode."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

ray = pytest.importorskip("ray")

from vista_plugin_ray.pool import EnvWorkerError, RayEnv, RayEnvPool  # noqa: E402

import vista_rl  # noqa: E402
from vista_rl_sdk.checks import check_env, observation_fingerprint  # noqa: E402

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from ray_test_envs import CounterEnv  # noqa: E402

COUNTER = "ray_test_envs:CounterEnv"


@pytest.fixture(scope="module", autouse=True)
def ray_cluster() -> Iterator[None]:
    path = os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"PYTHONPATH": path, "OMP_NUM_THREADS": "1"}})
    yield
    ray.shutdown()


def _kill(handle: object) -> None:
    """ray.kill is asynchronous: wait until the actor is really gone, so the next call sees a dead worker."""
    ray.kill(handle, no_restart=True)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            ray.get(handle.info.remote(), timeout=5)  # type: ignore[attr-defined]
        except (ray.exceptions.RayActorError, ray.exceptions.GetTimeoutError):
            return
        time.sleep(0.05)
    raise AssertionError("the killed actor still answers")


def _local_run(seed: int, actions: list[str]) -> list[tuple[str, float]]:
    env = CounterEnv()
    out = [(observation_fingerprint(env.reset(seed=seed)[0]), 0.0)]
    for action in actions:
        result = env.step(action)
        out.append((observation_fingerprint(result.observation), result.reward))
    return out


def _remote_run(env: RayEnv, seed: int, actions: list[str]) -> list[tuple[str, float]]:
    out = [(observation_fingerprint(env.reset(seed=seed)[0]), 0.0)]
    for action in actions:
        result = env.step(action)
        out.append((observation_fingerprint(result.observation), result.reward))
    return out


def test_workers_discover_plugins_themselves(vista_plugin) -> None:  # type: ignore[no-untyped-def]
    # a plugin registered only in the driver must not appear in the workers: nothing is shipped
    driver_only = SimpleNamespace(register_envs=vista_rl.hookimpl(
        lambda register: register("driveronly/x-v0", "ray_test_envs:CounterEnv")))
    vista_plugin(driver_only)
    assert "driveronly/x-v0" in vista_rl.host().registry("envs")
    with RayEnvPool(COUNTER, num_workers=2) as pool:
        infos = [pool.worker_info(i) for i in range(2)]
    assert len({info["pid"] for info in infos} | {os.getpid()}) == 3
    for info in infos:
        assert {"oddshape", "ray"} <= set(info["plugins"])  # found through entry points in the actor
        assert "oddshape/odd-colour-v0" in info["envs"]
        assert "driveronly/x-v0" not in info["envs"]


def test_registered_ray_env_passes_check_env() -> None:
    check_env(lambda **config: vista_rl.make_env("ray", env="oddshape/odd-colour-v0", config=config),
              {"grid": 3}, cross_process=False)


def test_pool_envs_match_local_envs_and_batch() -> None:
    actions = ["+1", "+2", "x", "+3"]
    with RayEnvPool(COUNTER, num_workers=2) as pool:
        envs = [pool.make_env() for _ in range(4)]
        assert len({env.index for env in envs}) == 2  # spread over both workers
        for seed, env in enumerate(envs):
            assert _remote_run(env, seed, actions) == _local_run(seed, actions)
        for seed, env in enumerate(envs):
            env.reset(seed=seed)
        results = pool.step_batch(envs, ["+5"] * 4)
        assert [r.info["state"] for r in results] == [seed * 10 + 5 for seed in range(4)]


def test_killed_worker_is_replaced_and_the_episode_replayed() -> None:
    actions = ["+1", "+2", "+3", "+4"]
    expected = _local_run(7, actions)
    with RayEnvPool(COUNTER, num_workers=1, call_timeout_s=30) as pool:
        env, neighbour = pool.make_env(), pool.make_env()
        neighbour.reset(seed=1)
        neighbour.step("+1")
        got = [(observation_fingerprint(env.reset(seed=7)[0]), 0.0)]
        for index, action in enumerate(actions):
            if index == 2:
                old_pid = pool.worker_info(0)["pid"]
                _kill(pool.worker(0)[0])  # mid-episode
            result = env.step(action)
            got.append((observation_fingerprint(result.observation), result.reward))
        assert got == expected
        assert result.info["worker_restarts"] == 1 and pool.replacements == 1
        assert pool.worker_info(0)["pid"] != old_pid
        # the other env on the dead worker restores itself too, with its own history
        assert neighbour.step("+1").info["state"] == 12
        assert pool.replacements == 1  # one death, one replacement


def test_killed_worker_with_recovery_fail_marks_the_episode_failed() -> None:
    with RayEnvPool(COUNTER, num_workers=1, recovery="fail") as pool:
        env = pool.make_env()
        env.reset(seed=3)
        env.step("+1")
        _kill(pool.worker(0)[0])
        result = env.step("+1")
        assert result.truncated and result.info["worker_lost"] and "died mid-episode" in result.info["env_error"]
        observation, info = env.reset(seed=3)  # a fresh episode works on the replacement
        assert info["state"] == 30 and env.step("+2").info["state"] == 32


def test_a_hung_worker_times_out_and_nothing_hangs() -> None:
    with RayEnvPool("ray_test_envs:SleepyEnv", num_workers=1, call_timeout_s=2.0) as pool:
        env = pool.make_env()
        env.reset(seed=1)
        env.step("+1")
        started = time.monotonic()
        result = env.step("sleep")  # hangs on the worker; replayed on the replacement it hangs again
        # Two 2 s timeouts plus a worker restart; the bound only separates "gave up" from "hung for
        # the hour the env sleeps", with room for a loaded 2-core machine (a restart took 20 s there).
        assert time.monotonic() - started < 120
        assert result.truncated and "could not be restored" in result.info["env_error"]
        assert env.reset(seed=2)[1]["state"] == 20  # and the env is usable again


def test_env_exception_on_worker_is_feedback_not_a_crash() -> None:
    with RayEnvPool("ray_test_envs:CrashEnv", num_workers=1) as pool:
        env = pool.make_env()
        env.reset(seed=0)
        result = env.step("boom")
        assert result.truncated and "kaboom" in result.info["env_error"]
        assert pool.replacements == 0  # the worker is fine; only the env raised
        assert env.step("+1").reward == 1.0


def test_unknown_env_fails_clearly() -> None:
    with RayEnvPool("nope/missing-v0", num_workers=1) as pool, pytest.raises(EnvWorkerError, match="missing-v0"):
        pool.make_env()


def test_rollout_engine_runs_episodes_on_ray_actors() -> None:
    """`ray/<env id>` through the core rollout engine: every episode's env lives in its own actor
    (which re-discovers plugins), and the results equal a local rollout of the same seeds."""
    from vista_rl.rollout import RolloutEngine, episode_specs

    seeds = [0, 1, 2, 3]
    with RolloutEngine(vista_rl.make_model("scripted", path="oracle")) as engine:
        remote = engine.run(episode_specs("ray/oddshape/odd-colour-v0", seeds))
        local = engine.run(episode_specs("oddshape/odd-colour-v0", seeds))
    assert [t.failure for t in remote] == [None] * len(seeds)
    assert [t.success for t in remote] == [True] * len(seeds)
    assert [t.total_reward for t in remote] == [t.total_reward for t in local]
    assert [t.turns[0].response for t in remote] == [t.turns[0].response for t in local]


def test_local_engine_trains_on_ray_envs(tmp_path: Path, tiny_model_dir: Path) -> None:
    """Training rolls out through the same core engine, so `ray/<env id>` trains like a local env."""
    pytest.importorskip("transformers")
    import json

    from vista_rl.config import RunConfig, validate_config

    run = validate_config(RunConfig, {
        "seed": 1, "output_dir": str(tmp_path / "run"), "model": {"path": str(tiny_model_dir)},
        "env": {"id": "ray/oddshape/odd-colour-v0", "config": {"config": {"grid": 2, "cell_size": 28}}},
        "rollout": {"max_turns": 1, "group_size": 2, "sampling": {"max_tokens": 4}},
        "trainer": {"steps": 1, "seeds_per_step": 2, "train_seeds": {"start": 0, "count": 10}},
        "eval": {"seeds": {"start": 100, "count": 1}, "at_start": False},
    })
    engine = vista_rl.make_engine("local", run=run)
    engine.run()
    batch = engine.last_batch
    assert batch is not None and len(batch.samples) == 4 and not batch.dropped
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert rows[-1]["stage"] == "rl" and rows[-1]["optimizer_steps"] == 1 and rows[-1]["env_errors"] == 0
