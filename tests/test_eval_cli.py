"""``vista eval`` (flags and YAML) and ``vista trajectories show``, run in-process like a user would."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError

from tests.cli_testkit import run_vista
from tests.rollout_testkit import RolloutTestPlugin
from vista_rl.config import RolloutSection
from vista_rl.model_paths import looks_like_path
from vista_rl.store import RunReader

ODD = "oddshape/odd-colour-v0"


@pytest.fixture(autouse=True)
def test_envs(vista_plugin):
    vista_plugin(RolloutTestPlugin())



def test_eval_with_flags_writes_a_run_directory(tmp_path, capsys):
    out = tmp_path / "run"
    code, text = run_vista(capsys, "eval", "--env", ODD, "--model", "scripted:oracle", "--episodes", "5",
                           "--group-size", "2", "--seed", "10", "--out", str(out))
    assert code == 0, text
    assert "success rate" in text and "format error rate" in text and "1.000 [0.722, 1.000]" in text
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["episodes"] == 10 and metrics["success_rate"]["value"] == 1.0
    for name in ("success_rate", "mean_reward", "format_error_rate", "mean_turns", "mean_tokens"):
        assert set(metrics[name]) == {"value", "ci95_low", "ci95_high", "n"}
    reader = RunReader(out)
    assert sorted({t.seed for t in reader}) == list(range(10, 15))
    config = yaml.safe_load((out / "config.yaml").read_text())
    assert config["rollout"]["sampling"]["temperature"] == 0.0 and config["model"]["path"] == "oracle"
    assert (out / "versions.json").exists() and (out / "trajectories.html").exists()


def test_eval_from_yaml_with_set_overrides_and_reflection(tmp_path, capsys):
    responses = tmp_path / "responses.json"
    # all three seeds answer 9 first (wrong), then 0, 1, 2: right on the second attempt
    responses.write_text(json.dumps(["<answer>9</answer>"] * 3 + [f"<answer>{n}</answer>" for n in range(3)]))
    config = tmp_path / "eval.yaml"
    config.write_text(yaml.safe_dump({
        "env": {"id": "test/guess-v0"},
        "model": {"backend": "scripted", "path": str(responses)},
        "output_dir": str(tmp_path / "yaml-run"),
        "rollout": {"episodes": 2, "reflection": True, "reflection_attempts": 3},
    }))
    code, text = run_vista(capsys, "eval", str(config), "--set", "rollout.episodes=3", "--max-turns", "2")
    assert code == 0, text
    metrics = json.loads((tmp_path / "yaml-run" / "metrics.json").read_text())
    assert metrics["episodes"] == 3 and metrics["success_rate"]["value"] == 1.0
    assert metrics["mean_attempts"]["value"] == 2 and metrics["first_attempt_success_rate"]["value"] == 0
    saved = yaml.safe_load((tmp_path / "yaml-run" / "config.yaml").read_text())
    assert saved["rollout"]["episodes"] == 3 and saved["rollout"]["max_turns"] == 2
    assert saved["rollout"]["sampling"]["temperature"] == 1.0  # flags not given do not override the file


def test_old_reflection_attempts_names_still_work_with_a_warning(tmp_path, capsys):
    """rollout.max_attempts / --max-attempts were renamed rollout.reflection_attempts /
    --reflection-attempts (the vqa env's own answer attempts are another thing): the old names work
    until 0.2 and say so."""
    with pytest.warns(FutureWarning, match=r"rollout\.max_attempts is deprecated.*rollout\.reflection_attempts"):
        section = RolloutSection(reflection=True, max_attempts=2)
    assert section.reflection_attempts == section.max_attempts == 2
    with pytest.raises(ValidationError, match="give only rollout.reflection_attempts"):
        RolloutSection(max_attempts=2, reflection_attempts=3)
    responses = tmp_path / "responses.json"
    responses.write_text(json.dumps(["<answer>9</answer>"]))  # always wrong: every attempt is used
    out = tmp_path / "old-flag"
    code, text = run_vista(capsys, "eval", "--env", "test/guess-v0", "--model", f"scripted:{responses}",
                           "--episodes", "1", "--reflection", "--max-attempts", "2", "--out", str(out), "--no-html")
    assert code == 0, text
    assert "--max-attempts is deprecated" in text
    assert yaml.safe_load((out / "config.yaml").read_text())["rollout"]["reflection_attempts"] == 2
    assert json.loads((out / "metrics.json").read_text())["mean_attempts"]["value"] == 2
    code, text = run_vista(capsys, "eval", "--env", "test/guess-v0", "--model", f"scripted:{responses}",
                           "--max-attempts", "2", "--reflection-attempts", "3", "--out", str(out))
    assert code != 0 and "give only the new one" in text


def test_a_failing_env_is_reported_and_the_run_completes(tmp_path, capsys):
    code, text = run_vista(capsys, "eval", "--env", "test/counter-v0", "--model", "scripted:oracle",
                           "--episodes", "3", "--set", "env.config.raise_on_step=2", "--out", str(tmp_path / "r"))
    assert code == 0, text
    assert "3 episode(s) failed" in text and "counter env broke on step 2" in text
    assert json.loads((tmp_path / "r" / "metrics.json").read_text())["failure_rate"]["value"] == 1.0


@pytest.mark.parametrize(("args", "code", "message"), [
    (["--model", "scripted:/no/such/responses.txt"], 1,
     "could not start model backend scripted:/no/such/responses.txt: /no/such/responses.txt does not exist"),
    (["--model", "scripted:./relative-missing.txt"], 1, "does not exist"),
    (["--model", "no-such-backend:x"], 2, "no-such-backend"),
    (["--model", "scripted:oracle", "--set", "rollout.max_turns=0"], 2, "rollout.max_turns"),
    (["--model", "scripted:oracle", "--set", "rollout.no_such_key=1"], 2, "rollout.no_such_key: unknown key"),
    (["--model", "scripted:oracle", "--set", "env.config.grid=99"], 1, "could not create env"),
    (["--model", "scripted:oracle", "--seed", "1.5"], 2, "'1.5' is not a valid integer"),
    (["--model", "scripted:oracle", "--set", "seed=1.5"], 2, "seed: Input should be a valid integer"),
])
def test_bad_input_gives_a_clear_message(tmp_path, capsys, args, code, message):
    got, text = run_vista(capsys, "eval", "--env", ODD, "--episodes", "1", "--out", str(tmp_path / "x"), *args)
    assert got == code and message in text, text
    assert "Traceback" not in text


def test_a_missing_model_directory_is_a_clear_message(tmp_path, capsys):
    pytest.importorskip("vista_plugin_transformers")
    code, text = run_vista(capsys, "eval", "--env", ODD, "--model", f"transformers:{tmp_path / 'missing'}",
                           "--episodes", "1", "--out", str(tmp_path / "x"))
    assert code == 1 and "could not start model backend transformers:" in text and "does not exist" in text
    assert "Traceback" not in text


def test_env_or_model_is_required(capsys):
    code, text = run_vista(capsys, "eval", "--model", "scripted:oracle")
    assert code == 2 and "--env" in text


def test_trajectories_show(tmp_path, capsys):
    out = tmp_path / "run"
    assert run_vista(capsys, "eval", "--env", "test/counter-v0", "--model", "scripted:oracle", "--episodes", "3",
                     "--out", str(out))[0] == 0
    code, text = run_vista(capsys, "trajectories", "show", str(out), "--episode", "1", "--limit", "2")
    assert code == 0, text
    assert "success rate" in text and "2 of 3 episode(s) listed" in text
    assert "#1 test/counter-v0 seed 1" in text and "response 3" in text and "[image " in text
    code, text = run_vista(capsys, "trajectories", "show", str(tmp_path), "--episode", "9")
    assert code == 1 and "not a VISTA run directory" in text


def test_progress_and_summary_survive_a_model_that_breaks(tmp_path, capsys, vista_plugin):
    from vista_rl.model import ModelBackend

    class Down(ModelBackend):
        def generate(self, chats, params):
            raise ConnectionError("connection dropped")

    class Plugin:
        from vista_rl import hookimpl

        @hookimpl
        def register_models(self, register):
            register("test-down", Down)

    vista_plugin(Plugin())
    code, text = run_vista(capsys, "eval", "--env", ODD, "--model", "test-down", "--episodes", "2",
                           "--out", str(tmp_path / "down"))
    assert code == 0 and "connection dropped" in text
    assert len(list(RunReader(Path(tmp_path / "down")))) == 2


def _seeds_in(out: Path) -> list[int]:
    return [json.loads(line)["seed"] for line in (out / "trajectories.jsonl").read_text().splitlines()]


def test_eval_refuses_an_out_dir_that_holds_a_run(tmp_path, capsys):
    # issue 13 item 4: a second eval into the same --out appended silently (seeds repeated and
    # metrics.json described only the second run)
    out = tmp_path / "run"
    args = ("eval", "--env", ODD, "--model", "scripted:oracle", "--episodes", "3", "--out", str(out), "--no-html")
    assert run_vista(capsys, *args)[0] == 0
    before = (out / "trajectories.jsonl").read_bytes()
    code, text = run_vista(capsys, *args)
    assert code != 0 and "already holds trajectories" in text and "--resume" in text
    assert (out / "trajectories.jsonl").read_bytes() == before
    assert json.loads((out / "metrics.json").read_text())["episodes"] == 3


def test_eval_resume_repairs_a_cut_line_and_runs_only_missing_seeds(tmp_path, capsys):
    out = tmp_path / "run"
    base = ("eval", "--env", ODD, "--model", "scripted:oracle", "--out", str(out), "--no-html")
    assert run_vista(capsys, *base, "--episodes", "3")[0] == 0
    path = out / "trajectories.jsonl"
    data = path.read_bytes()
    path.write_bytes(data[:-200])  # a crash in the middle of the third record's write
    code, text = run_vista(capsys, *base, "--episodes", "5", "--resume")
    assert code == 0, text
    assert "2 episode(s) already recorded" in text
    lines = path.read_text().splitlines()
    assert all(json.loads(line) for line in lines)  # no record glued to a fragment
    assert _seeds_in(out) == [0, 1, 2, 3, 4]  # seed 2 (cut) rerun once, none repeated
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["episodes"] == len(RunReader(out)) == 5 and metrics["seeds"] == 5
    assert metrics["resumed"]["recorded_before"] == 2 and metrics["resumed"]["repaired_bytes"] > 0
    # nothing left to do: a second resume runs nothing and the metrics still describe the file
    assert run_vista(capsys, *base, "--episodes", "5", "--resume")[0] == 0
    assert _seeds_in(out) == [0, 1, 2, 3, 4]
    assert json.loads((out / "metrics.json").read_text())["episodes"] == 5


def test_eval_resume_refuses_a_different_env(tmp_path, capsys):
    out = tmp_path / "run"
    assert run_vista(capsys, "eval", "--env", ODD, "--model", "scripted:oracle", "--episodes", "1",
                     "--out", str(out), "--no-html")[0] == 0
    code, text = run_vista(capsys, "eval", "--env", ODD, "--model", "scripted:oracle", "--episodes", "2",
                           "--set", "env.config.grid=5", "--out", str(out), "--no-html", "--resume")
    assert code != 0 and "cannot resume" in text and "env.config" in text
    assert _seeds_in(out) == [0]


@pytest.mark.parametrize(("spec", "path_like"), [
    ("/abs/model", True), ("./m", True), ("../m", True), ("~/m", True), ("a/b/c", True), ("m/", True),
    ("runs\\m", True), ("runs/tiny-typo", True),  # runs/ exists in the test's working directory
    ("Qwen/Qwen2.5-VL-3B-Instruct", False), ("gpt2", False), ("http://127.0.0.1:8000/v1", False),
])
def test_looks_like_path(tmp_path, monkeypatch, spec, path_like):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "runs").mkdir()
    assert looks_like_path(spec) is path_like


def test_a_path_like_model_spec_that_does_not_exist_fails_at_once(tmp_path, monkeypatch, capsys):
    # issue 13 item 7: --model transformers:runs/tiny-typo spent 148 s in hub retries before failing
    monkeypatch.chdir(tmp_path)
    (tmp_path / "runs" / "tiny").mkdir(parents=True)
    code, text = run_vista(capsys, "eval", "--env", ODD, "--model", "transformers:runs/tiny-typo",
                           "--episodes", "1", "--out", str(tmp_path / "o"))
    assert code != 0 and "runs/tiny-typo does not exist" in text and "tiny" in text


# ---------------------------------------------------------------- totality (issue 22, items 11-14)
def test_eval_refuses_an_out_dir_that_holds_a_training_run(tmp_path, capsys):
    """Attack: ``vista eval --out`` into a training run overwrote its config.yaml and exited 0."""
    out = tmp_path / "train-run"
    (out / "checkpoints" / "step-1").mkdir(parents=True)
    (out / "config.yaml").write_text("engine: local\n")
    (out / "status.json").write_text('{"status": "completed"}')
    args = ("eval", "--env", ODD, "--model", "scripted:oracle", "--episodes", "2", "--out", str(out), "--no-html")
    code, text = run_vista(capsys, *args)
    assert code != 0 and "training run" in text and "--overwrite" in text
    assert (out / "config.yaml").read_text() == "engine: local\n" and not (out / "trajectories.jsonl").exists()
    code, text = run_vista(capsys, *args, "--resume")
    assert code != 0 and (out / "config.yaml").read_text() == "engine: local\n"
    code, text = run_vista(capsys, *args, "--overwrite")
    assert code == 0, text
    assert len(RunReader(out)) == 2 and (out / "checkpoints" / "step-1").is_dir()  # other files are kept


def test_eval_reruns_its_own_empty_dir_and_overwrite_replaces_episodes(tmp_path, capsys):
    out = tmp_path / "run"
    args = ("eval", "--env", ODD, "--model", "scripted:oracle", "--out", str(out), "--no-html")
    assert run_vista(capsys, *args, "--episodes", "3")[0] == 0
    (out / "trajectories.jsonl").write_text("")  # a run that died before its first episode
    assert run_vista(capsys, *args, "--episodes", "2")[0] == 0
    assert _seeds_in(out) == [0, 1]
    code, text = run_vista(capsys, *args, "--episodes", "1", "--overwrite")
    assert code == 0, text
    assert _seeds_in(out) == [0] and json.loads((out / "metrics.json").read_text())["episodes"] == 1
    assert run_vista(capsys, *args, "--episodes", "1", "--overwrite", "--resume")[0] != 0


def test_a_reply_with_a_lone_surrogate_is_recorded_not_fatal(tmp_path, capsys):
    """Attack: ``"<answer>Up\\ud800</answer>"`` made vista eval exit 1 with 0 episodes written."""
    responses = tmp_path / "responses.json"
    responses.write_text(json.dumps(["<answer>1\ud800</answer>", "<answer>0\udfff\ud83d\ude00</answer>"]))
    out = tmp_path / "run"
    code, text = run_vista(capsys, "eval", "--env", "test/guess-v0", "--model", f"scripted:{responses}",
                           "--episodes", "2", "--out", str(out))
    assert code == 0, text
    raw = [json.loads(line) for line in (out / "trajectories.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [record["turns"][0]["response"] for record in raw] == ["<answer>1\ud800</answer>",
                                                                 "<answer>0\udfff\U0001f600</answer>"]  # kept exactly
    responses_read = [record["turns"][0]["response"] for record in RunReader(out).records()]
    assert responses_read == ["<answer>1\ufffd</answer>", "<answer>0\ufffd\U0001f600</answer>"]
    assert "\ufffd" in (out / "trajectories.html").read_text(encoding="utf-8")
    code, text = run_vista(capsys, "trajectories", "show", str(out), "--full")
    assert code == 0, text


def test_a_tool_named_image_gets_an_error_text(tmp_path, capsys):
    """Attack: a tool call named ``<image>`` ended the episode with PlaceholderMismatchError."""
    responses = tmp_path / "responses.json"
    calls = ['<tool_call>{"name": "<image>", "arguments": {}}</tool_call>',
             '<tool_call>{"name": "<|im_end|>", "arguments": {"x": "<image>"}}</tool_call>']
    responses.write_text(json.dumps([*calls, "<answer>inc</answer>"]))
    out = tmp_path / "run"
    code, text = run_vista(capsys, "eval", "--env", "test/tool-counter-v0", "--model", f"scripted:{responses}",
                           "--set", "env.config.target=1", "--set", "rollout.batch_size=1",
                           "--episodes", "1", "--max-turns", "4", "--out", str(out), "--no-html")
    assert code == 0, text
    [trajectory] = list(RunReader(out))
    assert trajectory.failure is None and trajectory.success
    tool_turns = trajectory.turns[1:3]
    assert [turn.observation.count("<image>") for turn in tool_turns] == [0, 0]
    assert "unknown tool '<image >'" in tool_turns[0].observation
    assert "<|" not in tool_turns[1].observation and "unknown tool" in tool_turns[1].observation
