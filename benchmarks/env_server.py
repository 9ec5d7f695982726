"""Env-server throughput and latency: steps/s and p50/p99 request latency at 1, 16 and 64 sessions.

Runs ``vista env-server`` in its own process on 127.0.0.1 (as deployed), then drives it two ways:

- ``batched``: one client moves all N sessions with one ``/step`` request per round (how a rollout
  engine that steps N envs in lock-step uses it);
- ``per_session``: N client threads, each a ``RemoteEnv`` sending its own single-session requests.

The baseline is the same env stepped in-process with no server, measured in the same run.  Sokoban
(vision) is used when the sokoban plugin is installed; otherwise the odd-colour env, and the JSON
says so.  Episodes that end are reset (a batched ``/reset`` of the finished sessions); resets count
in the wall time but not in ``steps``.

    python benchmarks/env_server.py [--seconds 3] [--sessions 1 16 64]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import threading
import time
from typing import Any

import httpx
from _bench import stamp
from rich.progress import Progress
from vista_plugin_envserver.client import EnvServerClient, ItemError, RemoteEnv

import vista_rl

SOKOBAN = "sokoban/sokoban-v0"
FALLBACK = "oddshape/odd-colour-v0"
ACTIONS = ["<think>go</think><answer>Left</answer>", "<think>go</think><answer>Up</answer>",
           "<think>go</think><answer>Right</answer>", "<think>go</think><answer>Down</answer>",
           "<think>go</think><answer>3</answer>"]


def pick_env() -> tuple[str, dict[str, Any], str | None]:
    registry = vista_rl.host().registry("envs")
    if SOKOBAN in registry:
        for config in ({"render_mode": "vision"}, {}):
            try:
                env = vista_rl.make_env(SOKOBAN, **config)
                observation, _ = env.reset(seed=0)
                env.close()
                if observation.images:
                    return SOKOBAN, config, None
            except Exception:  # noqa: BLE001 - try the next config
                continue
        return FALLBACK, {}, f"{SOKOBAN} is installed but no vision config worked; used {FALLBACK}"
    return FALLBACK, {}, f"{SOKOBAN} is not installed; used {FALLBACK} (one-turn vision env)"


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def local_baseline(env_id: str, config: dict[str, Any], seconds: float) -> dict[str, float]:
    env = vista_rl.make_env(env_id, **config)
    env.reset(seed=0)
    steps, seed, start = 0, 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        result = env.step(ACTIONS[steps % len(ACTIONS)])
        steps += 1
        if result.done:
            seed += 1
            env.reset(seed=seed)
    elapsed = time.perf_counter() - start
    return {"steps_per_s": steps / elapsed, "resets": seed}


def run_batched(url: str, env_id: str, config: dict[str, Any], sessions: int, seconds: float) -> dict[str, Any]:
    client = EnvServerClient(url)
    ids = [s.id for s in client.create(sessions, env_id=env_id, config=config)]
    client.reset([(sid, i) for i, sid in enumerate(ids)])
    latencies: list[float] = []
    steps = resets = rounds = errors = 0
    next_seed = sessions
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        sent = time.perf_counter()
        results = client.step([(sid, ACTIONS[(rounds + i) % len(ACTIONS)]) for i, sid in enumerate(ids)])
        latencies.append(time.perf_counter() - sent)
        rounds += 1
        steps += len(results)
        finished = [sid for sid, r in zip(ids, results, strict=True) if isinstance(r, ItemError) or r.done]
        errors += sum(isinstance(r, ItemError) for r in results)
        if finished:
            client.reset([(sid, next_seed + i) for i, sid in enumerate(finished)])
            next_seed += len(finished)
            resets += len(finished)
    elapsed = time.perf_counter() - start
    client.close_sessions(ids)
    client.close()
    return {
        "steps_per_s": round(steps / elapsed, 1),
        "step_request_p50_ms": round(1000 * percentile(latencies, 0.50), 3),
        "step_request_p99_ms": round(1000 * percentile(latencies, 0.99), 3),
        "per_step_p50_ms": round(1000 * percentile(latencies, 0.50) / sessions, 4),
        "rounds": rounds, "steps": steps, "resets": resets, "item_errors": errors,
    }


def run_per_session(url: str, env_id: str, config: dict[str, Any], sessions: int, seconds: float) -> dict[str, Any]:
    client = EnvServerClient(url)  # one connection pool shared by all threads, as one process would
    envs = [RemoteEnv(url, env=env_id, config=config, client=client) for _ in range(sessions)]
    latencies: list[list[float]] = [[] for _ in envs]
    counts = [0] * sessions
    stop = threading.Event()
    barrier = threading.Barrier(sessions + 1)

    def worker(index: int) -> None:
        env = envs[index]
        env.reset(seed=index)
        seed = index
        barrier.wait()
        while not stop.is_set():
            sent = time.perf_counter()
            result = env.step(ACTIONS[counts[index] % len(ACTIONS)])
            latencies[index].append(time.perf_counter() - sent)
            counts[index] += 1
            if result.done:
                seed += sessions
                env.reset(seed=seed)

    threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(sessions)]
    for thread in threads:
        thread.start()
    barrier.wait()
    start = time.perf_counter()
    time.sleep(seconds)
    stop.set()
    for thread in threads:
        thread.join(30)
    elapsed = time.perf_counter() - start
    for env in envs:
        env.close()
    client.close()
    flat = [x for per in latencies for x in per]
    return {
        "steps_per_s": round(sum(counts) / elapsed, 1),
        "step_request_p50_ms": round(1000 * percentile(flat, 0.50), 3),
        "step_request_p99_ms": round(1000 * percentile(flat, 0.99), 3),
        "steps": sum(counts),
    }


def start_server(env_id: str) -> tuple[subprocess.Popen[bytes], str]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    command = [sys.executable, "-c", "from vista_rl.cli.main import main; main()", "env-server", "--env", env_id,
               "--port", str(port), "--max-sessions", "4096", "--threads", "4"]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               env={**os.environ, "OMP_NUM_THREADS": "1"})
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            httpx.get(url + "/health", timeout=1).raise_for_status()
            return process, url
        except httpx.HTTPError:
            if process.poll() is not None:
                raise RuntimeError("the env server exited during start-up") from None
            time.sleep(0.2)
    process.kill()
    raise RuntimeError("the env server did not start within 60 s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="measuring time per configuration")
    parser.add_argument("--sessions", type=int, nargs="+", default=[1, 16, 64])
    parser.add_argument("--tiny", action="store_true", help="0.3 s at 1 and 4 sessions (for tests)")
    args = parser.parse_args()
    if args.tiny:
        args.seconds, args.sessions = 0.3, [1, 4]

    env_id, config, note = pick_env()
    report: dict[str, Any] = {"env": env_id, "env_config": config, "note": note, "cpu_count": os.cpu_count(),
                              "seconds_per_config": args.seconds, "target": ">= 2000 steps/s at 64 sessions"}
    process, url = start_server(env_id)
    try:
        with Progress(transient=True) as progress:
            task = progress.add_task("env-server benchmark", total=1 + 2 * len(args.sessions))
            report["local_in_process"] = local_baseline(env_id, config, args.seconds)
            progress.advance(task)
            for mode, runner in (("batched", run_batched), ("per_session", run_per_session)):
                report[mode] = {}
                for sessions in args.sessions:
                    progress.update(task, description=f"{mode} x{sessions}")
                    report[mode][str(sessions)] = runner(url, env_id, config, sessions, args.seconds)
                    progress.advance(task)
    finally:
        process.terminate()
        process.wait(timeout=20)
    local = report["local_in_process"]["steps_per_s"]
    top = str(max(args.sessions))
    report["batched_vs_local_ratio"] = round(report["batched"][top]["steps_per_s"] / local, 3)
    report["target_met"] = report["batched"][top]["steps_per_s"] >= 2000
    report = stamp(report, "the same env stepped in-process (no server), same run",
                   ["vista-plugin-envserver", "vista-plugin-sokoban"])
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
