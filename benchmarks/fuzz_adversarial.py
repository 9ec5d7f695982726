"""Adversarial fuzz of every registered env, the env server and ``vista serve``; prints JSON.

Strings: the SDK's named hostile outputs (``ADVERSARIAL_ACTIONS``, ``GARBAGE_ACTIONS``) first, then
strings from a seeded generator that splices the pieces parsers and servers trip on: tags cut or
nested, ``<tool_call>`` JSON with huge ints or deep brackets, lone surrogates, NULs, bidi and
zero-width marks, model special tokens (``<|image_pad|>``), ``<image>`` placeholders, and runs up to
100k characters.  The same seed gives the same strings on any machine.

Targets, each counting *uncaught* failures (what must never happen):

- every registered env id, made with the config in ``ENV_CONFIGS`` where it needs one (wrapper ids
  ``remote``/``remote/*`` point at the env server started here, ``ray``/``ray/*`` at a local Ray):
  an exception out of ``step()`` or a result that is not a ``StepResult``;
- the env server (real HTTP on 127.0.0.1): strings as batched ``/step`` actions (a 5xx, a dropped
  connection, or an item the server reports as "step raised") and as raw request bodies (a 5xx);
- ``vista serve`` over a tiny random Qwen2.5-VL: strings as message text and as raw bodies (a 5xx
  or a dropped connection; a 400 for a bad request is the right answer).

Usage: ``python benchmarks/fuzz_adversarial.py [--per-env N] [--server N] [--serve N] [--no-ray]``;
exit status 1 when anything went uncaught.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import random
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

FRAGMENTS = (
    "<think>", "</think>", "<answer>", "</answer>", "<tool_call>", "</tool_call>", "<observation>",
    "</observation>", "<prediction>", "</prediction>", "<reasoning>", "</reasoning>", "<image>",
    "<|image_pad|>", "<|vision_start|>", "<|vision_end|>", "<|im_end|>", "<|im_start|>assistant\n",
    '{"name": "crop_bbox", "arguments": {"bbox": [0, 0, 1e308, -1]}}', '{"name": ', '"arguments": ',
    '{"name": "zoom", "arguments": {"x": NaN, "y": Infinity}}', "[", "]", "{", "}", ",", ":", '"',
    "Up", "Down", "Left", "Right", "up,down,left", "A", "B", "(C)", "42", "-0", "1e999", "0x1f", "3/4",
    "\ud800", "\udfff", "\U0001f916", "\x00", "\u202e", "\u200b", "\ufeff", "\r\n", "\t", "\\", "%s%n",
    "ÜñíçødÉ", "é", "𝔘𝔭", "null", "true", "None", "'", "<", ">", "</", "&lt;answer&gt;",
)


def generated_strings(count: int, seed: int) -> Iterator[str]:
    """``count`` hostile strings from a seeded generator (see the module docstring)."""
    rng = random.Random(seed)
    for _ in range(count):
        pieces: list[str] = []
        for _ in range(rng.randint(1, 12)):
            roll = rng.random()
            if roll < 0.04:
                pieces.append(rng.choice("0123456789") * rng.randint(1000, 6000))  # huge ints
            elif roll < 0.07:
                pieces.append(rng.choice("[{(") * rng.randint(100, 100_000))  # deep nesting
            elif roll < 0.09:
                pieces.append(rng.choice(FRAGMENTS) * rng.randint(50, 5000))  # long repetition
            elif roll < 0.15:
                pieces.append("".join(chr(rng.randint(0, 0x10FFFF)) for _ in range(rng.randint(1, 40))))
            else:
                pieces.append(rng.choice(FRAGMENTS))
        yield "".join(pieces)


def adversarial_strings(count: int, seed: int) -> list[str]:
    """The SDK's named hostile outputs first, then generated ones, ``count`` in all."""
    from vista_rl_sdk.checks import ADVERSARIAL_ACTIONS, GARBAGE_ACTIONS

    named = list(dict.fromkeys([*ADVERSARIAL_ACTIONS.values(), *GARBAGE_ACTIONS]))
    return (named + list(generated_strings(max(0, count - len(named)), seed)))[:count]


class Tally:
    """What one target saw: strings sent, answers by kind, uncaught failures with a few examples."""

    def __init__(self) -> None:
        self.sent = 0
        self.uncaught = 0
        self.outcomes: dict[str, int] = {}
        self.examples: list[str] = []
        self.seconds = 0.0

    def ok(self, outcome: str) -> None:
        self.sent += 1
        self.outcomes[outcome] = self.outcomes.get(outcome, 0) + 1

    def fail(self, text: str, what: str) -> None:
        self.sent += 1
        self.uncaught += 1
        if len(self.examples) < 5:
            self.examples.append(f"{what} on {text[:60]!r}")

    def to_dict(self) -> dict[str, Any]:
        return {"sent": self.sent, "uncaught": self.uncaught, "outcomes": self.outcomes,
                "examples": self.examples, "seconds": round(self.seconds, 2)}


# ------------------------------------------------------------------------------------------ envs

def env_configs(data_dir: Path, server_url: str | None) -> dict[str, tuple[str, dict[str, Any]] | None]:
    """Registered id -> (id to make, config) for ids that need config; None: not fuzzable here."""
    from vista_plugin_datasets import testing
    from vista_plugin_grounding.testing import write_screenspot_v2

    chartqa = str(testing.write_chartqa(data_dir / "chartqa"))
    screenspot = str(write_screenspot_v2(data_dir / "ScreenSpot-v2"))
    scienceqa = str(testing.write_scienceqa(data_dir / "scienceqa"))
    remote = {"url": server_url} if server_url else None
    return {
        "chartqa/records-v0": ("chartqa/records-v0", {"dataset": "chartqa", "dataset_config": {"root": chartqa}}),
        "vqa/multiple-choice-v0": ("vqa/multiple-choice-v0", {"dataset": "scienceqa", "dataset_config": {"root": scienceqa},
                                                              "tools": ["crop_bbox"]}),
        "vqa/short-answer-v0": ("vqa/short-answer-v0", {"dataset": "chartqa", "dataset_config": {"root": chartqa}}),
        "gymnasium/make-v0": ("gymnasium/make-v0", {"gym_id": "FrozenLake-v1"}),
        "grounding/screenspot-v0": ("grounding/screenspot-v0", {"dataset": "screenspot_v2",
                                                                "dataset_config": {"root": screenspot}}),
        "remote": ("remote", {**remote, "env": "oddshape/odd-colour-v0"}) if remote else None,
        "remote/*": ("remote/frozenlake/frozenlake-v0", remote) if remote else None,
        "ray": ("ray", {"env": "sokoban/sokoban-v0"}),
        "ray/*": ("ray/oddshape/odd-colour-v0", {}),
        "vista/blank-images": ("vista/blank-images", {"env": "frozenlake/frozenlake-v0"}),
        "worldmodel/state-reward-v0": ("worldmodel/state-reward-v0", {"env": "sokoban/sokoban-v0"}),
    }


def fuzz_env(make: Callable[[], Any], strings: list[str]) -> Tally:
    from vista_rl.env import StepResult

    tally = Tally()
    started = time.perf_counter()
    env = make()
    try:
        episode = 0
        env.reset(seed=episode)
        for text in strings:
            try:
                result = env.step(text)
            except Exception as exc:  # noqa: BLE001 - the thing being counted
                tally.fail(text, f"{type(exc).__name__}: {exc}"[:200])
                env.reset(seed=episode)
                continue
            if not isinstance(result, StepResult):
                tally.fail(text, f"step returned {type(result).__name__}")
                continue
            tally.ok("terminated" if result.terminated else "truncated" if result.truncated else "continued")
            if result.terminated or result.truncated:
                episode += 1
                env.reset(seed=episode)
    finally:
        env.close()
    tally.seconds = time.perf_counter() - started
    return tally


def fuzz_all_envs(strings: list[str], data_dir: Path, server_url: str | None, use_ray: bool) -> dict[str, Any]:
    import vista_rl

    configs = env_configs(data_dir, server_url)
    report: dict[str, Any] = {}
    for env_id in vista_rl.host().registry("envs").ids():
        target = configs.get(env_id, (env_id, {}))
        if target is None or (not use_ray and env_id.startswith("ray")):
            report[env_id] = {"skipped": "no env server" if target is None else "--no-ray"}
            continue
        make_id, config = target
        try:
            tally = fuzz_env(lambda make_id=make_id, config=config: vista_rl.make_env(make_id, **config), strings)
        except Exception as exc:  # noqa: BLE001 - an env we could not even make is reported, not fatal
            report[env_id] = {"error": f"could not run {make_id}: {type(exc).__name__}: {exc}"[:300], "uncaught": 1,
                              "sent": 0}
            continue
        report[env_id] = {"made_as": make_id, **tally.to_dict()}
    return report


# ------------------------------------------------------------------------------------ env server

SERVER_ENVS = ["oddshape/odd-colour-v0", "frozenlake/frozenlake-v0", "sokoban/sokoban-v0", "count-objects/count-objects-v0"]


def post_raw(http: Any, route: str, text: str, content_type: str, tally: Tally) -> None:
    """POST ``text`` as a raw body: a 5xx or a dropped connection is a failure, any 4xx a handled refusal."""
    import httpx

    try:
        response = http.post(route, content=text.encode("utf-8", "surrogatepass"), headers={"content-type": content_type})
    except httpx.HTTPError as exc:
        tally.fail(text, f"{type(exc).__name__}: {exc}")
        return
    if response.status_code >= 500:
        tally.fail(text, f"HTTP {response.status_code}: {response.text[:120]}")
    else:
        tally.ok(str(response.status_code))


def fuzz_env_server(url: str, strings: list[str], raw_count: int) -> dict[str, Any]:
    import httpx
    from vista_plugin_envserver.client import EnvServerClient, EnvServerError, ItemError

    actions, raw = Tally(), Tally()
    started = time.perf_counter()
    client = EnvServerClient(url)
    sessions = [info.id for env_id in SERVER_ENVS for info in client.create(4, env_id=env_id)]
    client.reset([(sid, 0) for sid in sessions])
    for start in range(0, len(strings), len(sessions)):
        chunk = strings[start:start + len(sessions)]
        items = list(zip(sessions, chunk, strict=False))
        try:
            results = client.step(items)
        except (EnvServerError, httpx.HTTPError) as exc:
            for _, text in items:
                actions.fail(text, f"batch failed: {exc}"[:200])
            continue
        done = []
        for (sid, text), result in zip(items, results, strict=True):
            if isinstance(result, ItemError):
                actions.fail(text, f"server item error: {result.message}"[:200])
            else:
                actions.ok("terminated" if result.terminated else "continued")
                if result.terminated or result.truncated:
                    done.append(sid)
        if done:
            client.reset([(sid, start) for sid in done])
    client.close_sessions(sessions)
    actions.seconds = time.perf_counter() - started

    started = time.perf_counter()
    routes = ["/sessions", "/reset", "/step", "/oracle", "/close"]
    with httpx.Client(base_url=url, timeout=60) as http:
        for index, text in enumerate(strings[:raw_count]):
            content_type = "application/json" if index % 2 else "application/msgpack"
            post_raw(http, routes[index % len(routes)], text, content_type, raw)
    raw.seconds = time.perf_counter() - started
    return {"actions": actions.to_dict(), "raw_bodies": raw.to_dict()}


# ----------------------------------------------------------------------------------- vista serve

def fuzz_serve(strings: list[str], raw_count: int, threads: int = 8) -> dict[str, Any]:
    import httpx
    from vista_plugin_transformers.backend import TransformersBackend
    from vista_plugin_transformers.server import BackgroundServer, create_app

    from vista_rl_sdk.tiny_models import cached_tiny_model

    backend = TransformersBackend(path=str(cached_tiny_model()), device="cpu")
    messages, raw = Tally(), Tally()
    with BackgroundServer(create_app(backend, "tiny", batch_window_ms=10.0)) as server, \
            httpx.Client(base_url=server.url, timeout=300) as http:

        def send(index: int) -> tuple[str, int | str]:
            text = strings[index]
            role = ("user", "system", "assistant")[index % 3]
            chat = [{"role": role, "content": text}] + ([{"role": "user", "content": "go"}] if role != "user" else [])
            body = json.dumps({"messages": chat, "max_tokens": 1 + index % 3, "temperature": index % 2,
                               "seed": index}).encode()
            try:
                return text, http.post("/v1/chat/completions", content=body,
                                       headers={"content-type": "application/json"}).status_code
            except httpx.HTTPError as exc:
                return text, f"{type(exc).__name__}: {exc}"

        started = time.perf_counter()
        with concurrent.futures.ThreadPoolExecutor(threads) as pool:
            for text, status in pool.map(send, range(len(strings))):
                if isinstance(status, str) or status >= 500:
                    messages.fail(text, str(status))
                else:
                    messages.ok(str(status))
        messages.seconds = time.perf_counter() - started

        started = time.perf_counter()
        for text in strings[:raw_count]:
            post_raw(http, "/v1/chat/completions", text, "application/json", raw)
        raw.seconds = time.perf_counter() - started
    backend.close()
    return {"messages": messages.to_dict(), "raw_bodies": raw.to_dict()}


# ------------------------------------------------------------------------------------------ main

def _count(report: Any, key: str) -> int:
    if isinstance(report, dict):
        own = report.get(key, 0) if isinstance(report.get(key, 0), int) else 0
        return own + sum(_count(value, key) for name, value in report.items() if isinstance(value, dict))
    return 0


def run(per_env: int, server: int, serve: int, seed: int, use_ray: bool) -> dict[str, Any]:
    from vista_plugin_envserver.app import ServerSettings
    from vista_plugin_envserver.server import BackgroundServer

    import vista_rl

    started = time.perf_counter()
    pool = adversarial_strings(max(per_env, server, serve), seed)
    report: dict[str, Any] = {"seed": seed}
    host_envs = sorted({*SERVER_ENVS, "oddshape/odd-colour-v0", "frozenlake/frozenlake-v0"})
    with tempfile.TemporaryDirectory() as tmp, BackgroundServer(ServerSettings(env_ids=host_envs)) as env_server:
        report["envs"] = fuzz_all_envs(pool[:per_env], Path(tmp), env_server.url, use_ray)
        report["env_server"] = fuzz_env_server(env_server.url, pool[:server], raw_count=min(server, 1000))
    report["serve"] = fuzz_serve(pool[:serve], raw_count=min(serve, 200))
    if use_ray:
        try:
            import ray

            ray.shutdown()
        except ImportError:
            pass
    report["registered_envs"] = len(vista_rl.host().registry("envs").ids())
    report["strings_total"] = _count(report, "sent")
    report["uncaught_exceptions"] = _count(report, "uncaught")
    report["seconds"] = round(time.perf_counter() - started, 1)
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--per-env", type=int, default=300, help="strings stepped through each registered env")
    parser.add_argument("--server", type=int, default=4000, help="strings sent as env-server actions")
    parser.add_argument("--serve", type=int, default=200, help="strings sent to vista serve")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-ray", action="store_true", help="skip the ray and ray/* env ids (no Ray start)")
    args = parser.parse_args(argv)
    try:
        report = run(args.per_env, args.server, args.serve, args.seed, use_ray=not args.no_ray)
    except Exception:  # noqa: BLE001 - the harness itself failing is reported as JSON too
        report = {"harness_error": traceback.format_exc(), "uncaught_exceptions": -1}
    print(json.dumps(report, indent=1))
    return 0 if report.get("uncaught_exceptions") == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
