"""``vista eval`` over several model workers (processes, each with its own backend): the run must be
the same as with one worker, and lost workers must be recorded, never hang or drop episodes.

Worker processes discover plugins through entry points, so these tests use installed envs
(oddshape, grounding), not the in-process test plugins."""

from __future__ import annotations

import json
import os
import signal

import pytest

from tests.cli_testkit import run_vista
from vista_rl.config import RunConfig
from vista_rl.rollout import ModelWorkerError, ProcessModelWorkerPool, episode_specs, make_chunks
from vista_rl.store import RunReader

ODD = "oddshape/odd-colour-v0"
VOLATILE = {"timings", "wall_s", "seconds", "latency_s", "model_s"}


def _normalised(run_dir):
    """Trajectories keyed by (seed, sample), without wall-clock fields."""
    def scrub(value):
        if isinstance(value, dict):
            return {k: scrub(v) for k, v in value.items() if k not in VOLATILE and not k.endswith("_s")}
        if isinstance(value, list):
            return [scrub(v) for v in value]
        return value
    rows = [json.loads(line) for line in (run_dir / "trajectories.jsonl").read_text().splitlines()]
    return {(row["seed"], row["sample_index"]): scrub(row) for row in rows}


def _eval(capsys, out, *extra):
    code, text = run_vista(capsys, "eval", "--out", str(out), "--no-html", *extra)
    assert code == 0, text
    return json.loads((out / "metrics.json").read_text())


@pytest.mark.parametrize("env_id,model", [(ODD, ["--model", "scripted:oracle"]),
                                          ("grounding/web-action-v0", ["--model", "scripted:oracle"])])
def test_two_process_workers_give_the_single_worker_run(tmp_path, capsys, env_id, model):
    common = ["--env", env_id, *model, "--episodes", "6", "--group-size", "2", "--seed", "3", "--batch-size", "4"]
    single = _eval(capsys, tmp_path / "one", *common)
    double = _eval(capsys, tmp_path / "two", *common, "--model-workers", "2")
    assert double["model_workers"]["workers"] == 2
    assert sum(double["model_workers"]["episodes_per_worker"]) == 12
    assert min(double["model_workers"]["episodes_per_worker"]) > 0  # both workers ran episodes
    assert _normalised(tmp_path / "one") == _normalised(tmp_path / "two")
    for key in ("success_rate", "mean_reward", "episodes"):
        assert single[key] == double[key]
    indices = sorted(t.metadata["episode_index"] for t in RunReader(tmp_path / "two"))
    assert indices == list(range(12))  # global indices, not per-chunk ones


def test_a_per_turn_script_is_the_same_on_three_workers(tmp_path, capsys):
    script = tmp_path / "policy.yaml"
    script.write_text(json.dumps({
        "env": {"id": ODD}, "model": {"backend": "scripted", "config": {
            "responses": ["<think>look</think><answer>1</answer>", "<answer>2</answer>"], "per_turn": True}},
        "rollout": {"episodes": 5, "max_turns": 3, "batch_size": 2}}))
    _eval(capsys, tmp_path / "one", str(script))
    _eval(capsys, tmp_path / "three", str(script), "--set", "rollout.model_workers=3")
    assert _normalised(tmp_path / "one") == _normalised(tmp_path / "three")


def test_chunks_cover_every_episode_once_in_order():
    specs = episode_specs(ODD, range(10), group_size=3)
    chunks = make_chunks(specs, workers=4, batch_size=64)
    assert [i for c in chunks for i in c.indices] == list(range(30))
    assert len(chunks) >= 8 and all(len(c.specs) <= 64 for c in chunks)
    assert [s for c in chunks for s in c.specs] == specs
    assert make_chunks([], 2, 8) == []


def _config(**rollout):
    return RunConfig.model_validate({"env": {"id": ODD}, "model": {"backend": "scripted", "path": "oracle"},
                                     "rollout": {"batch_size": 2, **rollout}})


def test_a_worker_that_cannot_start_is_a_clear_error():
    config = RunConfig.model_validate({"env": {"id": ODD}, "model": {"backend": "scripted", "config": {}}})
    with pytest.raises(ModelWorkerError, match="could not start scripted.*needs path='oracle'"):
        ProcessModelWorkerPool(config, 2)


def test_dead_workers_are_recorded_and_never_hang_the_run():
    specs = episode_specs(ODD, range(8))
    with ProcessModelWorkerPool(_config(), 2) as pool:
        os.kill(pool._processes[0].pid, signal.SIGKILL)
        pool._processes[0].join(timeout=10)
        survivors = list(pool.stream(specs))
        assert sorted(t.seed for t in survivors) == list(range(8))  # every episode exactly once
        lost = [t for t in survivors if t.failure]
        assert all("model worker 0 died" in t.failure and t.metadata["stop_reason"] == "worker_error" for t in lost)
        assert all(t.success for t in survivors if not t.failure) and len(lost) <= 2  # at most one chunk lost
        assert pool.episodes_per_worker[1] == 8 - len(lost)
        os.kill(pool._processes[1].pid, signal.SIGKILL)
        pool._processes[1].join(timeout=10)
        gone = list(pool.stream(specs))
    assert sorted(t.seed for t in gone) == list(range(8))
    assert all(t.failure and not t.success for t in gone)


def test_the_cli_checks_the_model_path_before_starting_workers(tmp_path, capsys):
    code, text = run_vista(capsys, "eval", "--env", ODD, "--model", f"transformers:{tmp_path / 'missing'}",
                           "--model-workers", "2", "--out", str(tmp_path / "run"))
    assert code != 0 and "does not exist" in text


def test_greedy_tiny_vlm_gives_the_same_run_on_two_workers(tmp_path, capsys, tiny_model_dir):
    """A real transformers backend per worker process (a tiny random Qwen2.5-VL), greedy decoding;
    the two-worker run batches episodes differently from the one-worker run, and still matches."""
    pytest.importorskip("vista_plugin_transformers")
    common = ["--env", ODD, "--model", f"transformers:{tiny_model_dir}", "--episodes", "4", "--max-turns", "1",
              "--max-tokens", "12", "--batch-size", "3", "--set", "model.config.device=\"cpu\""]
    _eval(capsys, tmp_path / "one", *common)
    _eval(capsys, tmp_path / "two", *common, "--model-workers", "2")
    one, two = _normalised(tmp_path / "one"), _normalised(tmp_path / "two")
    # Responses, token ids, masks, rewards and metrics are identical.  Log-probabilities are equal up
    # to float rounding (~5e-7): a batch of 3 and a batch of 2 pad differently, which changes the
    # order of float additions in attention, never the argmax.
    logprobs = {key: (row["token_view"] or {}).pop("logprobs", None) for rows in (one, two) for key, row in
                [(k + (id(rows),), r) for k, r in rows.items()]}
    assert one == two
    for key in one:
        a, b = logprobs[key + (id(one),)], logprobs[key + (id(two),)]
        assert a is not None and len(a) == len(b)
        assert all(abs(x - y) < 1e-5 for x, y in zip(a, b, strict=True) if x is not None and y is not None)
    texts = [turn["response"] for row in one.values() for turn in row["turns"]]
    assert len(texts) == 4 and any(texts)  # the model really generated
