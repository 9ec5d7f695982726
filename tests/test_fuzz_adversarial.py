"""The adversarial fuzz entry (issue 13): ``benchmarks/fuzz_adversarial.py`` sends more than 10,000
hostile strings through every registered env's ``step()``, the env server and ``vista serve``, and
(issue 22) over 10,000 more through the tool server, env-server client configs, ``vista serve``
image parts and ``vista data convert`` inputs, and must report zero uncaught exceptions.  The full
run takes minutes, so it is marked slow."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

import vista_rl
from vista_rl_sdk.checks import ADVERSARIAL_ACTIONS

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "fuzz_adversarial.py"


def _module():
    spec = importlib.util.spec_from_file_location("fuzz_adversarial", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_strings_are_seeded_and_start_with_the_sdk_ones():
    fuzz = _module()
    first, again = fuzz.adversarial_strings(300, seed=3), fuzz.adversarial_strings(300, seed=3)
    assert first == again and len(first) == 300 and len(set(first)) > 250
    assert set(ADVERSARIAL_ACTIONS.values()) <= set(first[:40])
    assert fuzz.adversarial_strings(300, seed=4) != first
    assert any("\ud800" in text or "\udfff" in text for text in first[40:])  # generated surrogates too
    assert any(len(text) > 1000 for text in first[40:])


def test_the_hostile_inputs_are_seeded_and_varied():
    import random

    fuzz = _module()
    urls = [fuzz.hostile_data_url(random.Random(i), "x") for i in range(200)]
    assert urls == [fuzz.hostile_data_url(random.Random(i), "x") for i in range(200)]
    assert any(url.startswith("file:") for url in urls) and len(set(urls)) > 100
    kinds = {fuzz.hostile_config_body(random.Random(i), "y")[0] for i in range(200)}
    assert kinds == {"import_path", "host_path", "records", "nesting", "numbers", "string"}


def test_the_hostile_observe_bodies_are_seeded_and_varied():
    import random

    import msgpack

    fuzz = _module()
    bodies = [fuzz.hostile_observe_body(random.Random(i), "z\ud800", ["a", "b"]) for i in range(200)]
    assert bodies == [fuzz.hostile_observe_body(random.Random(i), "z\ud800", ["a", "b"]) for i in range(200)]
    assert {kind for kind, _ in bodies} == set(fuzz.OBSERVE_KINDS)
    decoded = [msgpack.unpackb(body, raw=False, strict_map_key=False, unicode_errors="surrogatepass")
               for _, body in bodies]
    assert any(len(item["calls"]) == 65 for message in decoded for item in message["items"])
    assert any("\ud800" in item["response"] for message in decoded for item in message["items"])


@pytest.mark.slow
def test_ten_thousand_hostile_strings_raise_nothing_anywhere():
    completed = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True, timeout=1800)
    report = json.loads(completed.stdout)
    assert "harness_error" not in report, report.get("harness_error")
    assert report["strings_total"] >= 20_000
    new = ("tool_server", "env_server_configs", "convert")
    assert sum(report[part][key]["sent"] for part, key in zip(new, ("calls", "sessions", "records"), strict=True)) \
        + report["serve"]["images"]["sent"] >= 10_000
    assert report["convert"]["confinement_breaches"] == 0 and report["peak_rss_mb"] > 0
    for env_id in vista_rl.host().registry("envs").ids():
        assert report["envs"][env_id].get("sent", 0) > 0, (env_id, report["envs"][env_id])
    assert report["env_server"]["actions"]["sent"] > 0 and report["serve"]["messages"]["sent"] > 0
    # a 400 is the right answer to many of these; what must never happen is a 5xx or an exception
    assert report["serve"]["messages"]["outcomes"].get("200", 0) > 0
    assert report["uncaught_exceptions"] == 0, json.dumps(report, indent=1)[:4000]
    assert completed.returncode == 0
