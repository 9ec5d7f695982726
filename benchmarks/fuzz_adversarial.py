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
  or a dropped connection; a 400 for a bad request is the right answer), and requests with hostile
  ``image_url`` parts (PNG headers claiming up to 100000x100000, truncated or random bytes, TIFF and
  EPS files, ``file://`` and remote URLs, too many images);
- the tool server (``mark``, a real child process): strings as arguments, metadata, tool ids and raw
  bodies, and hostile images (raw headers whose bytes do not match, unknown modes, PNG bombs);
- env-server client configs (``vista env-server`` as a child process, restarted if it dies):
  ``POST /sessions`` with import paths, host paths, records that carry host paths, nesting up to
  100,000 deep and non-finite numbers; an accepted session is reset and stepped once (a dropped
  connection is a server that died);
- env-server ``POST /observe`` on a grounded zoom env: calls with huge, deep or non-JSON arguments,
  long texts and names, off-image and non-finite points, more calls than an item holds (a 5xx, a
  dropped connection or an env that raised is a failure; a 4xx or an item refused by a limit is
  handled), then issue 33's 12,000-point spam and eight 7 MB arguments with their reward, step time
  and memory;
- ``vista serve`` abandoned streams (issue 33): six streamed ``n=16, max_tokens=512`` requests whose
  sockets close, at once or while generating, then a small request, timed against the quiet server
  (a probe past 2x its quiet latency + 2 s is a failure);
- ``vista data convert`` (the function, as a black box) over hostile release files in a temp dir:
  ChartQA ``imgname`` and records ``images``/``dataset`` that are absolute, ``..``, symlinks out
  or odd; a file written outside DST, or a record pointing outside DST, counts as a failure.

The report's ``peak_rss_mb`` is the harness's peak RSS and ``peak_rss_children_mb`` the largest
child server's.

Usage: ``python benchmarks/fuzz_adversarial.py [--per-env N] [--server N] [--serve N] [--serve-images N]
[--tool-server N] [--env-configs N] [--convert N] [--observe N] [--abandoned-streams N] [--no-ray]``; exit status 1 when anything went uncaught.
"""

from __future__ import annotations

import argparse
import base64
import concurrent.futures
import io
import json
import os
import random
import resource
import struct
import subprocess
import sys
import tempfile
import time
import traceback
import tracemalloc
import zlib
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
    mathvista = str(testing.write_mathvista(data_dir / "mathvista"))
    remote = {"url": server_url} if server_url else None
    return {
        "chartqa/records-v0": ("chartqa/records-v0", {"dataset": "chartqa", "dataset_config": {"root": chartqa}}),
        "vqa/multiple-choice-v0": ("vqa/multiple-choice-v0", {"dataset": "scienceqa", "dataset_config": {"root": scienceqa},
                                                              "tools": ["crop_bbox"]}),
        "vqa/short-answer-v0": ("vqa/short-answer-v0", {"dataset": "chartqa", "dataset_config": {"root": chartqa}}),
        "vqa/records-v0": ("vqa/records-v0", {"dataset": "mathvista", "dataset_config": {"root": mathvista}}),
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

def fuzz_serve(strings: list[str], raw_count: int, image_strings: list[str] | None = None,
               threads: int = 8) -> dict[str, Any]:
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

        images = Tally()
        started = time.perf_counter()

        def send_images(index: int) -> tuple[str, int | str]:
            text = (image_strings or [])[index]
            rng = random.Random(index)
            parts: list[dict[str, Any]] = [{"type": "text", "text": text[:200]}]
            count = 33 if rng.random() < 0.03 else rng.randint(1, 3)
            parts += [{"type": "image_url", "image_url": {"url": hostile_data_url(rng, text)}} for _ in range(count)]
            body = json.dumps({"messages": [{"role": "user", "content": parts}], "max_tokens": 1}).encode()
            try:
                return text, http.post("/v1/chat/completions", content=body,
                                       headers={"content-type": "application/json"}).status_code
            except httpx.HTTPError as exc:
                return text, f"{type(exc).__name__}: {exc}"

        with concurrent.futures.ThreadPoolExecutor(threads) as pool:
            for text, status in pool.map(send_images, range(len(image_strings or []))):
                if isinstance(status, str) or status >= 500:
                    images.fail(text, str(status))
                else:
                    images.ok(str(status))
        images.seconds = time.perf_counter() - started
    backend.close()
    return {"messages": messages.to_dict(), "raw_bodies": raw.to_dict(), "images": images.to_dict()}


# ------------------------------------------------------------------ vista serve: abandoned streams

def fuzz_abandoned_streams(streams: int = 6, n: int = 16, max_tokens: int = 512, probe_tokens: int = 8) -> dict[str, Any]:
    """Issue 33's attack on ``vista serve`` (the tiny Qwen2.5-VL, real HTTP on 127.0.0.1):
    ``streams`` streamed ``n=16, max_tokens=512`` requests whose sockets close, then one
    ``probe_tokens``-token request, timed against the same request on the quiet server.  Two ways
    to leave: at once (the request sent, the socket closed) and while generating (closed once the
    model has started on them).  Was: the probe waited for every abandoned token (60.8 s against
    1.4 s in the issue).  ``within_2x`` is the issue's bar; ``uncaught`` counts a probe past
    2x + 2 s (slack for a loaded machine), far below what the abandoned work costs."""
    import socket
    import statistics

    import httpx
    from vista_plugin_transformers.backend import TransformersBackend
    from vista_plugin_transformers.server import BackgroundServer, create_app

    from vista_rl_sdk.tiny_models import cached_tiny_model

    backend = TransformersBackend(path=str(cached_tiny_model()), device="cpu")
    probe = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": probe_tokens, "temperature": 0.0}
    body = json.dumps({"messages": [{"role": "user", "content": "tell me a long story"}], "n": n,
                       "max_tokens": max_tokens, "temperature": 1.0, "stream": True}).encode()
    request = (f"POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n"
               f"content-length: {len(body)}\r\n\r\n").encode() + body
    report: dict[str, Any] = {"streams": streams, "n": n, "max_tokens": max_tokens, "uncaught": 0}
    started = time.perf_counter()
    with BackgroundServer(create_app(backend, "tiny", batch_window_ms=10.0)) as server, \
            httpx.Client(base_url=server.url, timeout=600) as http:

        def latency() -> float:
            began = time.perf_counter()
            http.post("/v1/chat/completions", json=probe).raise_for_status()
            return time.perf_counter() - began

        latency()
        for mode in ("closed_at_once", "closed_while_generating"):
            quiet = statistics.median(latency() for _ in range(5))
            calls = backend.timings.calls
            sockets = [socket.create_connection((server.host, server.port)) for _ in range(streams)]
            for sock in sockets:
                sock.sendall(request)
            deadline = time.monotonic() + 60
            while mode == "closed_while_generating" and backend.timings.calls == calls and time.monotonic() < deadline:
                time.sleep(0.005)
            for sock in sockets:
                sock.close()
            after = latency()
            report[mode] = {"quiet_s": round(quiet, 3), "after_s": round(after, 3), "ratio": round(after / quiet, 1),
                            "within_2x": after <= 2 * quiet}
            report["uncaught"] += int(after > 2 * quiet + 2.0)
        report["stats"] = http.get("/stats").json()
    backend.close()
    report["seconds"] = round(time.perf_counter() - started, 1)
    report["load_1m"] = round(os.getloadavg()[0], 2)
    return report


# ------------------------------------------------------------------------------- hostile images

def png_header_only(width: int, height: int) -> bytes:
    """A PNG whose header claims ``width`` x ``height`` with almost no pixel data (a bomb header)."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"\x00" * 16)) + chunk(b"IEND", b"")


def small_image(rng: random.Random, fmt: str) -> bytes:
    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", (rng.randint(1, 24), rng.randint(1, 24)), (rng.randrange(256), 0, 0)).save(buffer, format=fmt)
    return buffer.getvalue()


def hostile_image_bytes(rng: random.Random, text: str) -> bytes:
    """Encoded image bytes a hostile client might send: bombs, truncations, odd formats, junk."""
    roll = rng.randrange(9)
    if roll == 0:
        return png_header_only(rng.choice([4097, 12000, 16000, 65535, 100000]), rng.choice([1, 4097, 12000, 65535]))
    if roll == 1:
        return png_header_only(rng.randint(0, 3), rng.randint(0, 3))
    if roll == 2:
        data = small_image(rng, "PNG")
        return data[:rng.randint(0, len(data))]
    if roll == 3:
        return rng.randbytes(rng.randint(0, 4096))
    if roll == 4:
        return b"%!PS-Adobe-3.0 EPSF-3.0\n%%BoundingBox: 0 0 100 100\n" + text.encode("utf-8", "replace")[:500]
    if roll == 5:
        return small_image(rng, "TIFF")
    if roll == 6:
        return text.encode("utf-8", "surrogatepass")[:5000]
    return small_image(rng, rng.choice(["PNG", "JPEG", "GIF", "BMP", "WEBP"]))  # valid: a 200


def hostile_data_url(rng: random.Random, text: str) -> str:
    roll = rng.random()
    if roll < 0.08:
        return rng.choice(["file:///etc/passwd", "http://169.254.169.254/latest", "/etc/hostname", "", "data:",
                           "data:image/png," + text[:100], "data:image/png;base64,%%%" + text[:50]])
    encoded = base64.b64encode(hostile_image_bytes(rng, text)).decode()
    return f"data:image/{rng.choice(['png', 'jpeg', 'x'])};base64,{encoded}"


# ------------------------------------------------------------------------------------ tool server

def hostile_wire_image(rng: random.Random, text: str) -> Any:
    roll = rng.randrange(8)
    if roll == 0:  # a header claiming far more pixels than its bytes hold
        return {"codec": "raw", "mode": rng.choice(["RGBA", "RGB", "L", "1", "I;16", "CMYK"]),
                "size": [rng.choice([16000, 65535, 1 << 20, 3]), rng.choice([16000, 65535, 7])], "data": b"\x00" * 115}
    if roll == 1:
        return {"codec": "raw", "mode": text[:20], "size": [8, 8], "data": b"\x00" * 192}
    if roll == 2:
        return {"codec": "raw", "mode": "RGB", "size": [rng.choice([-1, 0, 2**70, 1.5, "8", None]), 8], "data": b""}
    if roll == 3:
        return {"codec": "png", "data": hostile_image_bytes(rng, text)}
    if roll == 4:
        return {"codec": text[:30], "data": text}
    if roll == 5:
        return {"codec": "raw", "mode": "P", "size": [4, 4], "data": b"\x01" * 16, "palette": text.encode("utf-8", "replace")[:900]}
    if roll == 6:
        return text
    return {"codec": "raw", "mode": "RGB", "size": [8, 8], "data": bytes(192)}  # valid


def fuzz_tool_server(strings: list[str], threads: int = 4) -> dict[str, Any]:
    """Strings as arguments, metadata, tool ids, raw bodies and hostile images at a real tool server."""
    import httpx
    import msgpack
    from vista_plugin_envserver.codec import CONTENT_TYPE
    from vista_plugin_toolserve.http_client import LocalToolServer

    tally = Tally()
    started = time.perf_counter()
    server = LocalToolServer("mark", {}, threads=threads)
    good = {"codec": "raw", "mode": "RGB", "size": [16, 16], "data": bytes(16 * 16 * 3)}
    try:
        with httpx.Client(base_url=server.url, timeout=120) as http:

            def send(index: int) -> tuple[str, int | str]:
                text, rng = strings[index], random.Random(index)
                kind = index % 5
                call: Any = {"tool": "mark", "arguments": {"points": [[1, 1]], "image": 0}, "images": [good]}
                if kind == 0:
                    call["arguments"] = text
                elif kind == 1:
                    call["arguments"] = {"points": text, "image": 0, text[:50]: [text]}
                    call["metadata"] = {text[:50]: text, "full_resolution": {"0": {"__vista_image__":
                                                                                   hostile_wire_image(rng, text)}}}
                elif kind == 2:
                    call["images"] = [hostile_wire_image(rng, text) for _ in range(rng.randint(1, 3))]
                elif kind == 4:
                    call = {"tool": text, "images": [good] * (40 if rng.random() < 0.2 else 1)}
                try:
                    body = (text.encode("utf-8", "surrogatepass") if kind == 3
                            else msgpack.packb(call, use_bin_type=True, unicode_errors="surrogatepass"))
                    return text, http.post("/call", content=body, headers={"content-type": CONTENT_TYPE}).status_code
                except httpx.HTTPError as exc:
                    return text, f"{type(exc).__name__}: {exc}"
                except (ValueError, TypeError, OverflowError) as exc:  # msgpack cannot even pack it: not sent
                    return text, f"unsendable: {type(exc).__name__}"

            with concurrent.futures.ThreadPoolExecutor(threads) as pool:
                for text, status in pool.map(send, range(len(strings))):
                    if isinstance(status, str) and status.startswith("unsendable"):
                        tally.ok("unsendable")
                    elif isinstance(status, str) or status >= 500:
                        tally.fail(text, str(status))
                    else:
                        tally.ok(str(status))
    finally:
        server.close()
    tally.seconds = time.perf_counter() - started
    return {"calls": tally.to_dict()}


# ------------------------------------------------------------------------- env-server client config

CONFIG_ENVS = ["svg/reconstruct-v0", "frozenlake/frozenlake-v0", "vqa/records-v0", "vqa/short-answer-v0"]
IMPORT_KEYS = ["encoder", "renderer", "reward_fn", "judge", "env", "factory", "class_path", "parser", "loader", "tool"]
IMPORT_VALUES = ["os:abort", "os:system", "subprocess:Popen", "builtins:eval", "vista_rl.cli.main:main", "os.abort",
                 "importlib:import_module", "ctypes:CDLL"]
HOST_PATHS = ["/etc/passwd", "/etc/shadow", "../../../../etc/hostname", "/proc/self/environ", "~/.ssh/id_rsa",
              "file:///etc/passwd", "/dev/zero", "\\\\server\\share", "C:\\Windows\\win.ini"]


def hostile_config_body(rng: random.Random, text: str) -> tuple[str, bytes]:
    """(kind, JSON body) for ``POST /sessions``: a hostile client config."""
    env_id = rng.choice(CONFIG_ENVS)
    kind = rng.choice(["import_path", "host_path", "records", "nesting", "numbers", "string"])
    config: Any
    if kind == "import_path":
        config = {rng.choice(IMPORT_KEYS): rng.choice(IMPORT_VALUES + [text[:200]])}
    elif kind == "host_path":
        config = {rng.choice(["records_path", "path", "root", "svg_path", "font_path", "image_root"]): rng.choice(HOST_PATHS),
                  "dataset_config": {"root": rng.choice(HOST_PATHS)}}
    elif kind == "records":
        config = {"records_path": None, "records": [{"id": "x", "dataset": text[:100], "question": "q", "answer": "a",
                                                     "images": [rng.choice(HOST_PATHS + [text[:300]])]}]}
    elif kind == "nesting":
        depth = rng.choice([5, 33, 1000, 100_000])
        raw = b'{"env_id": "' + env_id.encode() + b'", "config": {"k": ' + b"[" * depth + b"]" * depth + b"}}"
        return kind, raw
    elif kind == "numbers":
        value = rng.choice([b"1e308", b"NaN", b"Infinity", b"-1", b"1" + b"0" * 5000, b"0.5"])
        key = rng.choice([b"size", b"max_steps", b"tile_size", b"seed", b"n"])
        return kind, b'{"env_id": "' + env_id.encode() + b'", "config": {"' + key + b'": ' + value + b"}}"
    else:
        config = {text[:100]: text[:2000]}
    body = json.dumps({"env_id": env_id, "config": config, "count": 1}).encode("utf-8", "surrogatepass")
    return kind, body


class _EnvServerProcess:
    """``vista env-server`` in a child process (so a config that kills it cannot kill the harness)."""

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self.process: subprocess.Popen[bytes] | None = None
        self.starts = 0
        self.url = ""

    def start(self) -> None:
        from vista_plugin_transformers.server import free_port, wait_for_health

        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        command = [sys.executable, "-c", "from vista_rl.cli.main import main; main()", "env-server",
                   *[arg for env_id in CONFIG_ENVS for arg in ("--env", env_id)], "--port", str(port)]
        log = self.log_dir / f"env-server-{self.starts}.log"
        with log.open("wb") as handle:
            self.process = subprocess.Popen(command, stdout=handle, stderr=handle,
                                            env={**os.environ, "OMP_NUM_THREADS": "1"})
        self.starts += 1
        wait_for_health(self.url, self.process, timeout_s=120, log_path=log)

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=30)


def fuzz_env_configs(strings: list[str], log_dir: Path) -> dict[str, Any]:
    import httpx
    from vista_plugin_envserver.client import EnvServerClient, ItemError

    tally = Tally()
    accepted: dict[str, int] = {}
    started = time.perf_counter()
    server = _EnvServerProcess(log_dir)
    server.start()
    try:
        for index, text in enumerate(strings):
            rng = random.Random(index)
            kind, body = hostile_config_body(rng, text)
            try:
                response = httpx.post(f"{server.url}/sessions", content=body,
                                      headers={"content-type": "application/json"}, timeout=60)
            except httpx.HTTPError as exc:
                tally.fail(text, f"{kind}: {type(exc).__name__}: {exc}"[:200])
                server.stop()
                server.start()
                continue
            if response.status_code >= 500:
                tally.fail(text, f"{kind}: HTTP {response.status_code}: {response.text[:120]}")
                continue
            tally.ok(f"{kind}:{response.status_code}")
            if response.status_code != 200:
                continue
            accepted[kind] = accepted.get(kind, 0) + 1
            try:  # an accepted config must also survive a reset and a step
                client = EnvServerClient(server.url)
                ids = [session["id"] for session in response.json()["sessions"]]
                outcomes = client.reset([(sid, 0) for sid in ids])
                outcomes += client.step([(sid, "<svg " + text[:500]) for sid in ids])
                client.close_sessions(ids)
                if any(isinstance(item, ItemError) and "raised" in item.message for item in outcomes):
                    tally.fail(text, f"{kind}: an env call raised")
            except Exception as exc:  # noqa: BLE001 - a dead server or a broken reply is the failure counted
                tally.fail(text, f"{kind} (after 200): {type(exc).__name__}: {exc}"[:200])
                if not server.alive():
                    server.start()
    finally:
        server.stop()
    tally.seconds = time.perf_counter() - started
    return {"sessions": tally.to_dict(), "accepted_by_kind": accepted, "server_starts": server.starts}


# -------------------------------------------------------------------------- env server /observe

OBSERVE_ENV = "grounding/zoom-spot-v0"  # a grounded multi-turn env: what it is shown counts for reward
OBSERVE_KINDS = ("text", "big_list", "deep", "non_json", "long_text", "long_name", "points", "many_calls")


def hostile_observe_call(rng: random.Random, text: str, kind: str) -> dict[str, Any]:
    """One tool call of ``kind`` for ``POST /observe`` (see :func:`hostile_observe_body`)."""
    import msgpack

    name, result = "search_coordinate", "zoomed"
    arguments: Any = {"coordinate": [rng.randint(0, 300), rng.randint(0, 300)]}
    if kind == "text":
        arguments = {"coordinate": [text[:40], text[40:80]], text[:100]: text[:2000]}
    elif kind == "big_list":
        arguments = {"coordinate": [0] * rng.choice([3, 10_000, 1_000_000])}  # 7M: observe_attacks
    elif kind == "deep":
        arguments = {"coordinate": [1, 2]}
        for _ in range(rng.choice([6, 9, 25])):
            arguments = {"a": [arguments]}
    elif kind == "non_json":
        arguments = rng.choice([{"coordinate": b"\x00" * 64}, {1: 2}, {"t": msgpack.Timestamp(0)},
                                {"e": msgpack.ExtType(5, b"x")}, [1, 2], "(3, 4)", None])
    elif kind == "long_text":
        result = (text or "x") * (rng.choice([1_000, 100_000]) // max(len(text), 1) + 1)
    elif kind == "long_name":
        name = (text[:100] or "n") * 300
    elif kind == "points":
        arguments = {"coordinate": [rng.choice([float("nan"), float("inf"), -1e308, 2**63 - 1, -5]),
                                    rng.uniform(-1e9, 1e9)], "image": rng.choice([0, 1, -1, "0", None])}
    return {"name": name, "arguments": arguments, "result_text": result, "num_images": rng.choice([0, 1, 2**31]),
            "error": rng.random() < 0.2}


def hostile_observe_body(rng: random.Random, text: str, sessions: list[str]) -> tuple[str, bytes]:
    """(kind, msgpack body) for ``POST /observe``: a few items on the given sessions, each with tool
    calls a hostile client sends (huge, deep or non-JSON arguments, long texts and names, off-image
    and non-finite points, more calls than an item may hold).  Most texts are made UTF-8-clean as
    the client does; the rest go out with lone surrogates as invalid UTF-8."""
    import msgpack
    from vista_plugin_envserver.codec import wire_text

    kind = rng.choice(OBSERVE_KINDS)
    text = wire_text(text) if rng.random() < 0.8 else text
    calls = 65 if kind == "many_calls" else rng.randint(1, 8)
    items = [{"session": rng.choice(sessions), "response": text[:70_000],
              "calls": [hostile_observe_call(rng, text, kind) for _ in range(calls)]}
             for _ in range(rng.randint(1, 3))]
    return kind, msgpack.packb({"items": items}, use_bin_type=True, unicode_errors="surrogatepass")


def _rss_mb() -> float:
    return int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def observe_attacks(url: str) -> dict[str, Any]:
    """Issue 33's two ``/observe`` attacks at their size: 12,000 distinct zoom points, then the
    oracle's answer (reward and ``/step`` time next to the oracle's honest episode); and eight
    ~7 MB requests of one call holding a 7M-element list, then eight more (this process's RSS
    growth after each eight, as the server runs in it, and the Python memory still allocated, which
    the allocator's caching does not blur).  Was: reward 960.9, a 5.1 s step, 71 -> 503 MB
    kept after eight, +54 MB for each."""
    import httpx
    from vista_plugin_envserver.client import EnvServerClient
    from vista_plugin_envserver.codec import CONTENT_TYPE, pack, unpack

    from vista_rl import ToolCallRecord
    from vista_rl.limits import release_memory

    client = EnvServerClient(url)
    honest, spam = client.create(2)
    client.reset([(honest.id, 0), (spam.id, 0)])
    (tool_turn,) = client.oracle([honest.id])
    call = json.loads(str(tool_turn).split("<tool_call>")[1].split("</tool_call>")[0])
    client.observe_tool_turn([(honest.id, str(tool_turn), [ToolCallRecord(call["name"], call["arguments"], "", 1, False)])])
    points = [[10 * i, 10 * j] for i in range(120) for j in range(100)]
    refused = 0
    for start in range(0, len(points), 4000):
        chunk = points[start:start + 4000]
        results = client.observe_tool_turn([(spam.id, "<think>zoom</think>", [
            ToolCallRecord("search_coordinate", {"coordinate": p}, "", 1, False) for p in chunk[k:k + 64]])
            for k in range(0, len(chunk), 64)])
        refused += sum(result is not None for result in results)
    rewards, step_s = {}, {}
    for name, session in (("oracle", honest), ("spam", spam)):
        (answer,) = client.oracle([session.id])
        started = time.perf_counter()
        (result,) = client.step([(session.id, str(answer))])
        step_s[name] = round(time.perf_counter() - started, 4)
        rewards[name] = round(getattr(result, "reward", float("nan")), 3)
    client.reset([(honest.id, 1)])  # an open episode: an env ignores what it is shown after the end
    body = pack({"items": [{"session": honest.id, "response": "r",
                            "calls": [{"name": "search_coordinate", "arguments": {"v": [0] * 7_000_000}}]}]})
    release_memory()
    before, seconds, outcomes, kept = _rss_mb(), [], [], []
    tracemalloc.start()
    with httpx.Client(base_url=url, timeout=120) as http:
        for index in range(16):
            started = time.perf_counter()
            reply = http.post("/observe", content=body, headers={"content-type": CONTENT_TYPE})
            seconds.append(time.perf_counter() - started)
            item = unpack(reply.content)["results"][0] if reply.status_code == 200 else {}
            outcomes.append(f"{reply.status_code}:{'accepted' if item.get('ok') else 'refused'}")
            if index in (7, 15):  # after 8 and 16: a plateau is the allocator's cache, growth is kept data
                release_memory()
                kept.append(round(_rss_mb() - before, 1))
    python_kept = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    del body
    client.close_sessions([honest.id, spam.id])
    return {"spam_points": len(points), "spam_items_refused": refused, "oracle_reward": rewards["oracle"],
            "spam_reward": rewards["spam"], "spam_beats_oracle": rewards["spam"] > rewards["oracle"],
            "oracle_step_s": step_s["oracle"], "spam_step_s": step_s["spam"], "big_argument_request_mb": 7,
            "big_argument_outcomes": sorted(set(outcomes)), "big_argument_s_max": round(max(seconds), 2),
            "rss_kept_after_8_and_16_big_mb": kept, "python_kept_after_16_big_mb": round(python_kept / 2**20, 2)}


def fuzz_env_server_observe(strings: list[str]) -> dict[str, Any]:
    """``POST /observe`` on a grounded zoom env (real HTTP on 127.0.0.1): hostile bodies from
    :func:`hostile_observe_body`, a 5xx, a dropped connection or an env that raised is a failure, a
    4xx or an item refused by a limit a handled one; then :func:`observe_attacks`."""
    import httpx
    from vista_plugin_envserver.app import ServerSettings
    from vista_plugin_envserver.client import EnvServerClient
    from vista_plugin_envserver.codec import CONTENT_TYPE, unpack
    from vista_plugin_envserver.server import BackgroundServer

    tally = Tally()
    with BackgroundServer(ServerSettings(env_ids=[OBSERVE_ENV])) as server, \
            httpx.Client(base_url=server.url, timeout=120) as http:
        client = EnvServerClient(server.url)
        sessions = [info.id for info in client.create(8)]
        client.reset([(sid, 0) for sid in sessions])
        started = time.perf_counter()
        for index, text in enumerate(strings):
            kind, body = hostile_observe_body(random.Random(index), text, sessions)
            try:
                response = http.post("/observe", content=body, headers={"content-type": CONTENT_TYPE})
            except httpx.HTTPError as exc:
                tally.fail(text, f"{kind}: {type(exc).__name__}: {exc}"[:200])
                continue
            if response.status_code != 200:
                (tally.fail(text, f"{kind}: HTTP {response.status_code}: {response.text[:120]}")
                 if response.status_code >= 500 else tally.ok(f"{kind}:{response.status_code}"))
                continue
            errors = [str(r.get("error")) for r in unpack(response.content)["results"] if not r.get("ok")]
            raised = [error for error in errors if "refused" not in error]
            if raised:
                tally.fail(text, f"{kind}: {raised[0]}"[:200])
            else:
                tally.ok(f"{kind}:{'refused' if errors else 'ok'}")
            if index % 40 == 39:  # new episodes, so per-episode budgets refill and later items reach the env
                client.reset([(sid, index) for sid in sessions])
        tally.seconds = time.perf_counter() - started
        client.close_sessions(sessions)
        return {"items": tally.to_dict(), "attacks": observe_attacks(server.url)}


# ------------------------------------------------------------------------------- vista data convert

def _hostile_image_names(rng: random.Random, text: str, outside: Path, src: Path) -> str:
    return rng.choice([
        text[:300], str(outside / "secret.png"), "../" * rng.randint(1, 8) + "etc/hostname", "/etc/passwd",
        "png/../../" + text[:40], "link-out.png", "./" + text[:60], "\x00" + text[:20], "", ".", "..",
        str(src / "ChartQA Dataset" / "test" / "png" / "real.png"), "real.png",
    ])


def fuzz_convert(strings: list[str], workdir: Path, batch: int = 100) -> dict[str, Any]:
    """Hostile release files through ``vista data convert``'s ``convert`` (chartqa and records)."""
    import click
    from PIL import Image
    from rich.console import Console
    from vista_plugin_datasets.convert import convert

    tally = Tally()
    breaches: list[str] = []
    started = time.perf_counter()
    outside = workdir / "outside"
    outside.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", (4, 4), (255, 0, 0)).save(outside / "secret.png")
    secret = (outside / "secret.png").read_bytes()
    quiet = Console(file=io.StringIO())
    for start in range(0, len(strings), batch):
        chunk = strings[start:start + batch]
        rng = random.Random(start)
        name = "chartqa" if (start // batch) % 2 == 0 else "records"
        src, dst = workdir / f"src-{start}", workdir / f"dst-{start}"
        base = src / "ChartQA Dataset" / "test"
        (base / "png").mkdir(parents=True, exist_ok=True)
        Image.new("RGB", (4, 4)).save(base / "png" / "real.png")
        Image.new("RGB", (4, 4)).save(src / "real.png")
        (base / "png" / "link-out.png").symlink_to(outside / "secret.png")
        (src / "link-out.png").symlink_to(outside / "secret.png")
        rows = [{"imgname": _hostile_image_names(rng, text, outside, src), "query": text[:200] or "q", "label": "a"}
                for text in chunk]
        if name == "chartqa":
            (base / "test_human.json").write_text(json.dumps(rows), encoding="utf-8", errors="surrogatepass")
            (base / "test_augmented.json").write_text("[]")
            source: Path = src / "ChartQA Dataset"
        else:
            source = src / "records.jsonl"
            lines = [json.dumps({"id": f"r{i}", "dataset": rng.choice([text[:80], "../../../x", "/abs", "..", "", "ok"]),
                                 "question": "q", "answer": "a", "images": [row["imgname"]]})
                     for i, (text, row) in enumerate(zip(chunk, rows, strict=True))]
            source.write_text("\n".join(lines) + "\n", encoding="utf-8", errors="surrogatepass")
        before = {path for path in workdir.rglob("*") if not path.is_relative_to(dst)}
        try:
            result = convert(name, source, dst, console=quiet)
        except click.ClickException as exc:  # "no record could be written": a handled refusal
            for _ in chunk:
                tally.ok("refused-all")
            del exc
        except Exception as exc:  # noqa: BLE001 - the thing being counted
            for text in chunk:
                tally.fail(text, f"{name}: {type(exc).__name__}: {exc}"[:200])
            continue
        else:
            handled = len(result.refused) + len(result.skipped)
            for index in range(len(chunk)):
                tally.ok("written" if index < result.written else "refused" if index < result.written + handled
                         else "dropped")
            for line in result.path.read_text(encoding="utf-8").splitlines():
                for image in json.loads(line).get("images", []):
                    target = (result.path.parent / image).resolve()
                    if not target.is_relative_to(dst.resolve()):
                        breaches.append(f"{name}: record image {image[:80]!r} points outside DST")
                    elif target.is_file() and target.read_bytes() == secret:
                        breaches.append(f"{name}: a file from outside SRC was copied into DST: {image[:80]!r}")
        after = {path for path in workdir.rglob("*") if not path.is_relative_to(dst)}
        breaches += [f"{name}: written outside DST: {path}" for path in sorted(after - before)[:5]]
    tally.uncaught += len(breaches)
    tally.examples += breaches[:5]
    tally.seconds = time.perf_counter() - started
    return {"records": tally.to_dict(), "confinement_breaches": len(breaches)}


# ------------------------------------------------------------------------------------------ main

def _count(report: Any, key: str) -> int:
    if isinstance(report, dict):
        own = report.get(key, 0) if isinstance(report.get(key, 0), int) else 0
        return own + sum(_count(value, key) for name, value in report.items() if isinstance(value, dict))
    return 0


def run(per_env: int, server: int, serve: int, seed: int, use_ray: bool, serve_images: int = 0,
        tool_server: int = 0, env_configs: int = 0, convert: int = 0, observe: int = 0) -> dict[str, Any]:
    from vista_plugin_envserver.app import ServerSettings
    from vista_plugin_envserver.server import BackgroundServer

    import vista_rl

    started = time.perf_counter()
    pool = adversarial_strings(max(per_env, server, serve, serve_images, tool_server, env_configs, convert, observe), seed)
    report: dict[str, Any] = {"seed": seed}
    host_envs = sorted({*SERVER_ENVS, "oddshape/odd-colour-v0", "frozenlake/frozenlake-v0"})
    with tempfile.TemporaryDirectory() as tmp, BackgroundServer(ServerSettings(env_ids=host_envs)) as env_server:
        report["envs"] = fuzz_all_envs(pool[:per_env], Path(tmp), env_server.url, use_ray)
        report["env_server"] = fuzz_env_server(env_server.url, pool[:server], raw_count=min(server, 1000))
    if observe:
        report["env_server_observe"] = fuzz_env_server_observe(pool[:observe])
    report["serve"] = fuzz_serve(pool[:serve], raw_count=min(serve, 200), image_strings=pool[:serve_images])
    if tool_server:
        report["tool_server"] = fuzz_tool_server(pool[:tool_server])
    with tempfile.TemporaryDirectory() as tmp:
        if env_configs:
            report["env_server_configs"] = fuzz_env_configs(pool[:env_configs], Path(tmp))
        if convert:
            report["convert"] = fuzz_convert(pool[:convert], Path(tmp) / "convert")
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
    report["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    report["peak_rss_children_mb"] = round(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, 1)
    return report


def run_new(serve_images: int, tool_server: int, env_configs: int, convert: int, seed: int) -> dict[str, Any]:
    """Only the surfaces issue 22 added (quicker to iterate on)."""
    started = time.perf_counter()
    pool = adversarial_strings(max(serve_images, tool_server, env_configs, convert), seed)
    report: dict[str, Any] = {"seed": seed}
    report["serve"] = fuzz_serve([], raw_count=0, image_strings=pool[:serve_images])
    report["tool_server"] = fuzz_tool_server(pool[:tool_server])
    with tempfile.TemporaryDirectory() as tmp:
        report["env_server_configs"] = fuzz_env_configs(pool[:env_configs], Path(tmp))
        report["convert"] = fuzz_convert(pool[:convert], Path(tmp) / "convert")
    report["strings_total"] = _count(report, "sent")
    report["uncaught_exceptions"] = _count(report, "uncaught")
    report["seconds"] = round(time.perf_counter() - started, 1)
    report["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    report["peak_rss_children_mb"] = round(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, 1)
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--per-env", type=int, default=300, help="strings stepped through each registered env")
    parser.add_argument("--server", type=int, default=4000, help="strings sent as env-server actions")
    parser.add_argument("--serve", type=int, default=200, help="strings sent to vista serve")
    parser.add_argument("--serve-images", type=int, default=2000,
                        help="vista serve requests with hostile image_url parts")
    parser.add_argument("--tool-server", type=int, default=3500, help="calls sent to a tool server")
    parser.add_argument("--env-configs", type=int, default=2000, help="hostile client configs sent to /sessions")
    parser.add_argument("--convert", type=int, default=3000, help="hostile release records through vista data convert")
    parser.add_argument("--observe", type=int, default=1000, help="hostile POST /observe bodies (issue 33)")
    parser.add_argument("--abandoned-streams", type=int, default=6,
                        help="streamed n=16 requests abandoned before a timed small one (issue 33); 0 skips")
    parser.add_argument("--only-new", action="store_true",
                        help="only the issue-22 surfaces (no envs, env-server actions or serve text)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-ray", action="store_true", help="skip the ray and ray/* env ids (no Ray start)")
    args = parser.parse_args(argv)
    try:
        if args.only_new:
            report = run_new(args.serve_images, args.tool_server, args.env_configs, args.convert, args.seed)
        else:
            report = run(args.per_env, args.server, args.serve, args.seed, use_ray=not args.no_ray,
                         serve_images=args.serve_images, tool_server=args.tool_server, env_configs=args.env_configs,
                         convert=args.convert, observe=args.observe)
        if args.abandoned_streams and not args.only_new:
            report["serve_abandoned_streams"] = fuzz_abandoned_streams(args.abandoned_streams)
            report["uncaught_exceptions"] += report["serve_abandoned_streams"]["uncaught"]
    except Exception:  # noqa: BLE001 - the harness itself failing is reported as JSON too
        report = {"harness_error": traceback.format_exc(), "uncaught_exceptions": -1}
    print(json.dumps(report, indent=1))
    return 0 if report.get("uncaught_exceptions") == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
