"""Speed of the grid-game envs (Sokoban 6x6 with 1 box, FrozenLake 4x4, vision) against VAGEN's, as JSON.

Per env: reset (generation + first frame) and a full turn (``env.step`` on a one-action response:
parse, move, info, vision frame), ours and the anchor's, interleaved in chunks (A B A B ...), with
median and min-max.  The anchor, named in the JSON under ``anchor``, is never swapped silently:

- ``--vagen PATH``: VAGEN's own env classes (``vagen.envs`` Sokoban and FrozenLake, imported from that
  checkout, in ``--vagen-python``, default this Python), called through one asyncio loop as VAGEN's
  agent loop calls them;
- otherwise the envs VAGEN wraps: gym-sokoban's ``SokobanEnv`` (in a throwaway venv under /tmp, since
  it needs the old ``gym``; built unless ``--no-install``) and gymnasium's ``FrozenLakeEnv``.

FrozenLake reset is measured twice because VISTA and VAGEN do different work there:
``reset_new_map_per_seed`` (ours: generate and check a new map; anchor: VAGEN's ``generate_random_map`` +
a new ``FrozenLakeEnv``, what VAGEN's main branch does per seed) and ``reset_kept_map`` (both keep one
map and put the player back at its start, what VAGEN's legacy env does).  Our frame alone (incremental
redraw and full redraw) is reported without an anchor.

Usage: ``python benchmarks/envs.py [--tiny | --quick] [--vagen PATH [--vagen-python PY]] [--no-install]``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

from _bench import WORKER_LOOP, Worker, dist_versions, interleave, machine, ratio, summarize, timed

GYM_SOKOBAN_VENV = Path("/tmp/vista-bench-gym-sokoban")
SOKOBAN = {"dim_room": (6, 6), "num_boxes": 1}
FROZENLAKE = {"size": 4, "p": 0.8}

#: the anchor's calls, in its own Python; argv: kind [vagen path]
ANCHOR_SCRIPT = WORKER_LOOP + r'''
import warnings
warnings.filterwarnings("ignore")
kind = sys.argv[1]
ops = {}
versions = {}
from importlib import metadata
def version(name):
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None
try:
    if kind == "gym_sokoban":
        import numpy as np
        from gym_sokoban.envs.sokoban_env import SokobanEnv
        env = SokobanEnv(dim_room=(6, 6), num_boxes=1, max_steps=100)
        def reset(i, arg):
            np.random.seed(i)
            env.reset()
            env.render(mode="rgb_array")
        def step(i, arg):
            _, _, done, _ = env.step(1 + i % 4)
            env.render(mode="rgb_array")
            if done:
                np.random.seed(i); env.reset()
        env.reset()
        ops = {"sokoban_reset": reset, "sokoban_step": step}
        versions = {name: version(name) for name in ("gym", "gym-sokoban", "numpy")}
    elif kind == "vagen":
        import asyncio, subprocess
        sys.path.insert(0, sys.argv[2])
        from vagen.envs.sokoban.sokoban_env import Sokoban
        from vagen.envs.frozenlake.frozenlake_env import FrozenLake
        loop = asyncio.new_event_loop()
        envs = {"sokoban": Sokoban({"render_mode": "vision", "prompt_format": "free_think", "dim_room": (6, 6),
                                    "num_boxes": 1}),
                "frozenlake": FrozenLake({"render_mode": "vision", "prompt_format": "free_think", "size": 4,
                                          "p": 0.8})}
        names = {"sokoban": ["up", "down", "left", "right"], "frozenlake": ["left", "down", "right", "up"]}
        def make(name):
            env = envs[name]
            def reset(i, arg):
                loop.run_until_complete(env.reset(seed=i))
            def step(i, arg):
                reply = "<think>go</think><answer>" + names[name][i % 4] + "</answer>"
                _, _, done, _ = loop.run_until_complete(env.step(reply))
                if done:
                    loop.run_until_complete(env.reset(seed=i))
            loop.run_until_complete(env.reset(seed=0))
            return reset, step
        for name in envs:
            ops[name + "_reset"], ops[name + "_step"] = make(name)
        try:
            commit = subprocess.run(["git", "-C", sys.argv[2], "rev-parse", "--short", "HEAD"],
                                    capture_output=True, text=True).stdout.strip() or None
        except OSError:
            commit = None
        versions = {"vagen_commit": commit, **{n: version(n) for n in ("gym", "gym-sokoban", "gymnasium")}}
    print(json.dumps({"ok": True, "versions": versions}), flush=True)
except Exception as exc:
    print(json.dumps({"error": f"{type(exc).__name__}: {exc}"}), flush=True)
    sys.exit(0)
serve(ops)
'''


def ensure_gym_sokoban(install: bool) -> tuple[Path | None, str]:
    """The python of the throwaway gym-sokoban venv, built on first use (never the project venv)."""
    python = GYM_SOKOBAN_VENV / "bin" / "python"
    if python.exists():
        return python, "reused"
    if not install:
        return None, f"no gym-sokoban venv at {GYM_SOKOBAN_VENV} and --no-install given"
    try:
        subprocess.run([sys.executable, "-m", "venv", str(GYM_SOKOBAN_VENV)], check=True, capture_output=True,
                       timeout=300)
        subprocess.run([str(python), "-m", "pip", "install", "-q", "gym-sokoban"], check=True,
                       capture_output=True, text=True, timeout=900)
    except subprocess.CalledProcessError as exc:
        return None, f"pip install gym-sokoban failed: {(exc.stderr or '')[-400:]}"
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"could not build the gym-sokoban venv: {exc}"
    return python, "installed"


class Ours:
    """VISTA's env: reset(seed) and one-action turns, resetting (untimed share) when an episode ends."""

    def __init__(self, env_id: str, **config: Any) -> None:
        import vista_rl

        self.env = vista_rl.make_env(env_id, render_mode="vision", prompt_format="no_think", **config)
        self.replies = [f"<answer>{name}</answer>" for name in self.env.action_names]  # type: ignore[attr-defined]
        self.env.reset(seed=0)

    def reset(self, start: int, n: int) -> list[float]:
        return timed(lambda i: self.env.reset(seed=i), n, start)

    def step(self, start: int, n: int) -> list[float]:
        def one(i: int) -> None:
            if self.env.step(self.replies[i % len(self.replies)]).done:
                self.env.reset(seed=i)
        return timed(one, n, start)


def worker_side(worker: Worker, op: str) -> Any:
    def side(start: int, n: int) -> list[float]:
        answer = worker.call(op=op, start=start, n=n)
        if "error" in answer:
            raise RuntimeError(f"anchor {op}: {answer['error']}")
        return list(answer["times"])
    return side


def gymnasium_frozenlake() -> dict[str, Any]:
    """gymnasium's FrozenLake, as VAGEN wraps it: a new map per seed, a kept map, and turns."""
    import gymnasium
    from gymnasium.envs.toy_text.frozen_lake import FrozenLakeEnv, generate_random_map

    kept = FrozenLakeEnv(desc=generate_random_map(size=4, p=0.8, seed=0), render_mode="rgb_array",
                         is_slippery=False)
    kept.reset(seed=0)
    walker = FrozenLakeEnv(desc=generate_random_map(size=4, p=0.8, seed=0), render_mode="rgb_array",
                           is_slippery=False)
    walker.reset(seed=0)

    made: list[Any] = []

    def new_map(i: int) -> None:
        env = FrozenLakeEnv(desc=generate_random_map(size=4, p=0.8, seed=i), render_mode="rgb_array",
                            is_slippery=False)
        env.reset(seed=i)
        env.render()
        made.append(env)

    def close_made() -> None:  # untimed: envs left open would pile up pygame state and slow every render
        while made:
            made.pop().close()

    def kept_map(i: int) -> None:
        kept.reset(seed=i)
        kept.render()

    def step(i: int) -> None:
        _, _, terminated, truncated, _ = walker.step(i % 4)
        walker.render()
        if terminated or truncated:
            walker.reset(seed=i)

    return {"version": gymnasium.__version__,
            "reset_new_map_per_seed": lambda s, n: timed(new_map, n, s, before=close_made),
            "reset_kept_map": lambda s, n: timed(kept_map, n, s),
            "step_render": lambda s, n: timed(step, n, s)}


def pair(ours: Any, anchor: Any, rounds: int, per_round: int, anchor_name: str, what: str) -> dict[str, Any]:
    try:
        a, b = interleave(ours, anchor, rounds, per_round)
    except Exception as exc:  # one failing pair is reported; the others still run
        return {"work": what, "anchor": anchor_name, "status": "failed", "reason": f"{type(exc).__name__}: {exc}"}
    ours_s, anchor_s = summarize(a), summarize(b)
    return {"work": what, "anchor": anchor_name, "ours": ours_s, "anchor_timing": anchor_s,
            "anchor_over_ours": ratio(anchor_s, ours_s)}


def render_only(rounds: int) -> dict[str, Any]:
    """Our frame alone after a move: the incremental redraw and a full redraw (no anchor)."""
    import vista_rl

    env = vista_rl.make_env("sokoban/sokoban-v0", render_mode="vision", prompt_format="no_think", **SOKOBAN)
    env.reset(seed=0)
    replies = [f"<answer>{name}</answer>" for name in env.action_names]  # type: ignore[attr-defined]
    frame = env._frame  # type: ignore[attr-defined]  # gamekit's TileFrame: the redraw cache
    incremental: list[float] = []
    full: list[float] = []
    for i in range(rounds):
        if env.step(replies[i % 4]).done:
            env.reset(seed=i)
        frame.mark(*range(4))  # a move changes 2-3 cells
        incremental += timed(lambda _: env.render_image(), 1)  # type: ignore[attr-defined]
        frame.reset()
        full += timed(lambda _: env.render_image(), 1)  # type: ignore[attr-defined]
    return {"render_incremental": summarize(incremental), "render_full": summarize(full),
            "image_size": list(env.render_image().size)}  # type: ignore[attr-defined]


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--tiny", action="store_true", help="a few calls per side (for tests); never installs")
    size.add_argument("--quick", action="store_true", help="fewer samples (smoke run)")
    parser.add_argument("--rounds", type=int, help="interleaved rounds per pair (default by size)")
    parser.add_argument("--vagen", type=Path, help="a VAGEN checkout: its env classes become the anchor")
    parser.add_argument("--vagen-python", default=sys.executable, help="the Python that can import VAGEN")
    parser.add_argument("--no-install", action="store_true", help="never build the gym-sokoban venv")
    args = parser.parse_args()
    rounds, per_round = (2, 3) if args.tiny else (10, 20) if args.quick else (20, 50)
    rounds = args.rounds or rounds
    warnings.filterwarnings("ignore")

    report: dict[str, Any] = {"benchmark": "envs", "machine": machine(),
                              "interleaving": {"rounds": rounds, "calls_per_round": per_round}}
    versions: dict[str, Any] = {"ours": dist_versions("vista-rl", "vista-plugin-sokoban", "vista-plugin-frozenlake",
                                                      "numpy", "pillow")}
    anchors: dict[str, str] = {}
    sokoban_anchor: Worker | None = None
    vagen: Worker | None = None
    if args.vagen is not None:
        vagen = Worker(args.vagen_python, ANCHOR_SCRIPT, ["vagen", str(args.vagen.resolve())])
        if "error" in vagen.setup:
            report["status"] = "failed"
            report["reason"] = f"--vagen {args.vagen}: {vagen.setup['error']} (no fallback to another anchor)"
            print(json.dumps(report, indent=2))
            sys.exit(1)
        versions["anchor"] = vagen.setup["versions"]
        anchors = {"sokoban": "vagen", "frozenlake": "vagen"}
        sokoban_anchor = vagen
    else:
        python, how = ensure_gym_sokoban(install=not (args.tiny or args.no_install))
        if python is not None:
            worker = Worker(python, ANCHOR_SCRIPT, ["gym_sokoban"])
            if "error" in worker.setup:
                how = worker.setup["error"]
            else:
                sokoban_anchor = worker
        anchors["sokoban"] = "gym-sokoban" if sokoban_anchor else f"skipped: {how}"
        versions["anchor"] = {"gym-sokoban": sokoban_anchor.setup["versions"] if sokoban_anchor else None}
        anchors["frozenlake"] = "gymnasium"
    report["anchor"] = anchors

    ours_sokoban = Ours("sokoban/sokoban-v0", **SOKOBAN)
    ours_lake = Ours("frozenlake/frozenlake-v0", **FROZENLAKE)
    lake_map = ours_lake.env.lake.rows()  # type: ignore[attr-defined]
    ours_kept = Ours("frozenlake/frozenlake-v0", desc=lake_map)

    sokoban: dict[str, Any] = {}
    if sokoban_anchor is not None:
        sokoban["reset"] = pair(ours_sokoban.reset, worker_side(sokoban_anchor, "sokoban_reset"), rounds, per_round,
                                anchors["sokoban"], "generate a level + first frame")
        sokoban["step_render"] = pair(ours_sokoban.step, worker_side(sokoban_anchor, "sokoban_step"), rounds,
                                      per_round, anchors["sokoban"], "one-action turn + frame")
    else:
        sokoban["status"] = anchors["sokoban"]
        sokoban["ours_only"] = {"reset": summarize(ours_sokoban.reset(0, rounds * per_round)),
                                "step_render": summarize(ours_sokoban.step(0, rounds * per_round))}
    report["sokoban_6x6_1box"] = sokoban

    gym_lake = gymnasium_frozenlake()
    versions["anchor"]["gymnasium"] = gym_lake["version"]
    lake: dict[str, Any] = {}
    if vagen is not None:
        lake["reset_new_map_per_seed"] = pair(ours_lake.reset, worker_side(vagen, "frozenlake_reset"), rounds,
                                              per_round, "vagen", "new map per seed (VAGEN main) + first frame")
        lake["step_render"] = pair(ours_lake.step, worker_side(vagen, "frozenlake_step"), rounds, per_round,
                                   "vagen", "one-action turn + frame")
    else:
        lake["reset_new_map_per_seed"] = pair(ours_lake.reset, gym_lake["reset_new_map_per_seed"], rounds,
                                              per_round, "gymnasium", "new map per seed (VAGEN main) + first frame")
        lake["step_render"] = pair(ours_lake.step, gym_lake["step_render"], rounds, per_round, "gymnasium",
                                   "one-action turn + frame")
    lake["reset_kept_map"] = pair(ours_kept.reset, gym_lake["reset_kept_map"], rounds, per_round, "gymnasium",
                                  "kept map, player back at its start (VAGEN legacy) + first frame")
    report["frozenlake_4x4"] = lake
    report["ours_frame_only"] = render_only(rounds * per_round // 2)
    report["versions"] = versions
    for worker in {id(w): w for w in (sokoban_anchor, vagen) if w is not None}.values():
        worker.close()
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
