"""One test per hook spec (``test_hook_<name>``, datasette's discipline; tests/test_docs.py checks
that each exists): each registers the example plugin from its page in docs/hooks/ through the
plugin host, makes the item through the public API and uses it.  So the documented examples work,
lazy targets stay lazy, and every hook is exercised end to end."""

from __future__ import annotations

import importlib
import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import click
import pytest
import torch
import yaml
from click.testing import CliRunner
from PIL import Image

import vista_rl
from tests.docblocks import DOCS, materialize
from vista_rl import PluginInfo, host
from vista_rl_sdk import check_env, check_estimator, check_judge, check_tool

LoadExample = Callable[[str], tuple[str, PluginInfo]]


@pytest.fixture
def doc_example(vista_plugin: Callable[..., str], tmp_path: Path,
                monkeypatch: pytest.MonkeyPatch) -> Iterator[LoadExample]:
    """Write a hook page's example package, import it and register it for this test."""
    packages: list[str] = []

    def load(hook: str) -> tuple[str, PluginInfo]:
        package = materialize(DOCS / "hooks" / f"{hook}.md", tmp_path)
        packages.append(package)
        monkeypatch.syspath_prepend(str(tmp_path))
        name = vista_plugin(importlib.import_module(package), name=f"doc-{hook}", distribution=f"doc-{hook}")
        info = next(p for p in vista_rl.get_plugins() if p.name == name)
        assert info.errors == [] and hook in info.hooks
        return package, info

    yield load
    for module in [m for m in sys.modules if m.split(".")[0] in packages]:
        del sys.modules[module]


def test_hook_register_envs(doc_example: LoadExample) -> None:
    package, info = doc_example("register_envs")
    (env_id,) = info.items["envs"]
    assert f"{package}.env" not in sys.modules, "the env module must load only when the env is made"
    check_env(env_id, cross_process=False)  # a temporary plugin does not exist in another process
    env = vista_rl.make_env(env_id)
    _, reset_info = env.reset(seed=1)
    assert env.step(env.oracle_response() or "").info["success"]
    assert vista_rl.host().spec("envs", env_id).distribution == "doc-register_envs"
    assert reset_info["answer"] in ("heads", "tails")


def test_hook_register_tools(doc_example: LoadExample) -> None:
    _, info = doc_example("register_tools")
    (tool_id,) = info.items["tools"]
    tool = vista_rl.make_tool(tool_id)
    check_tool(tool, **host().spec("tools", tool_id).metadata["check_args"])
    result = tool({"image_index": 0}, vista_rl.ToolContext(images=[Image.new("RGB", (30, 20))]))
    assert result.text == "30x20" and not result.error
    assert tool({"image_index": 5}, vista_rl.ToolContext(images=[])).error


def test_hook_register_judges(doc_example: LoadExample) -> None:
    _, info = doc_example("register_judges")
    (judge_id,) = info.items["judges"]
    judge = vista_rl.make_judge(judge_id)
    check_judge(judge, **host().spec("judges", judge_id).metadata["check_args"])
    assert judge("The answer is (B).", "B").score == 1.0
    assert judge("I pick C.", "B").details == {"picked": "C"}


def test_hook_register_advantage_estimators(doc_example: LoadExample) -> None:
    _, info = doc_example("register_advantage_estimators")
    (estimator_id,) = info.items["estimators"]
    check_estimator(vista_rl.make_estimator(estimator_id))
    from vista_rl.estimator import AdvantageBatch

    batch = AdvantageBatch(token_rewards=torch.tensor([[0.0, 2.0]]), response_mask=torch.ones(1, 2))
    doubled = vista_rl.make_estimator(estimator_id, scale=2.0)(batch)  # params are bound, not called
    assert doubled.advantages.tolist() == [[4.0, 4.0]]


def test_hook_register_datasets(doc_example: LoadExample) -> None:
    _, info = doc_example("register_datasets")
    records = vista_rl.make_dataset(info.items["datasets"][0], count=4)
    assert [r.answer for r in records] == ["0", "2", "4", "6"]
    assert all(isinstance(r, vista_rl.TaskRecord) for r in records)


def test_hook_register_models(doc_example: LoadExample) -> None:
    _, info = doc_example("register_models")
    backend = vista_rl.make_model(info.items["models"][0], path=None)
    outputs = backend.generate([[vista_rl.Message("user", "blue")]], vista_rl.SamplingParams(n=2))
    assert [g.text for g in outputs[0]] == ["<answer>blue</answer>"] * 2


def test_hook_register_model_families(doc_example: LoadExample, tiny_internvl_dir: Path) -> None:
    """The page's family is picked by model_type and changes how the engine renders a tool turn."""
    from transformers import AutoProcessor
    from vista_plugin_local.chat_tokens import ChatEncoder
    from vista_plugin_local.families import InternVLFamily, family_for

    _, info = doc_example("register_model_families")
    assert info.items["families"] == ["internvl-tool-role"]
    family = family_for(model_type="internvl_tools")
    assert type(family).__name__ == "ToolRoleInternVL" and isinstance(family, InternVLFamily)
    processor = AutoProcessor.from_pretrained(tiny_internvl_dir)
    assert type(family_for(processor)) is InternVLFamily  # the built-in one still owns the processor class
    plain = ChatEncoder(processor).message_segment("tool", "3 boxes", [])[0]
    custom = ChatEncoder(processor, family=family).message_segment("tool", "3 boxes", [])[0]
    assert processor.tokenizer.decode(custom) == "<|im_start|>tool\n3 boxes<|im_end|>\n"
    assert processor.tokenizer.decode(plain) == "<|im_start|>user\n3 boxes<|im_end|>\n"


def test_hook_register_engines(doc_example: LoadExample, tmp_path: Path,
                               capsys: pytest.CaptureFixture[str]) -> None:
    """The page's engine follows the contract, and runs under the real `vista train` exactly as written."""
    from vista_rl.cli.main import main
    from vista_rl.config import RunConfig

    _, info = doc_example("register_engines")
    (engine_id,) = info.items["engines"]
    out = tmp_path / "run"
    data = {"engine": engine_id, "output_dir": str(out), "env": {"id": "oddshape/odd-colour-v0"},
            "eval": {"seeds": {"start": 5000, "count": 10}}}
    run = RunConfig.model_validate({**data, "engine_config": {engine_id: {"episodes": 3}}})
    engine = vista_rl.make_engine(engine_id, run=run)
    assert isinstance(engine, vista_rl.Engine)
    assert engine.validate().details == "oracle play on 3 seeds of oddshape/odd-colour-v0"
    assert engine.run()["success_rate"] == 1.0

    config = tmp_path / "run.yaml"
    config.write_text(yaml.safe_dump({**data, "engine": "local"}))

    def vista(*args: str) -> int:
        try:
            main(["train", str(config), "--engine", engine_id, *args])
        except SystemExit as exc:
            return int(exc.code or 0)
        return 0

    assert vista("--dry-run", "--set", f"engine_config.{engine_id}.episodes=2") == 0
    assert "oracle play on 2 seeds" in capsys.readouterr().out and not out.exists()
    assert vista("--dry-run", "--set", f"engine_config.{engine_id}.episodez=2") == 2
    assert f"engine_config.{engine_id}.episodez: unknown key" in capsys.readouterr().err
    assert vista("--set", f"engine_config.{engine_id}.episodes=4") == 0
    assert f"run directory: {out}" in capsys.readouterr().out
    assert json.loads((out / "status.json").read_text())["status"] == "completed"


def test_hook_register_loggers(doc_example: LoadExample, tmp_path: Path) -> None:
    """The page's logger is listed, made with a trainer.loggers entry's options, and gets the run's records."""
    package, info = doc_example("register_loggers")
    assert info.items["loggers"] == ["tsv"] and f"{package}.tsv" not in sys.modules
    from vista_rl.cli import build_cli

    result = CliRunner().invoke(build_cli(), ["loggers", "--json"])
    assert result.exit_code == 0 and "tsv" in [item["id"] for item in json.loads(result.output)]
    loggers = vista_rl.RunLoggers([{"id": "tsv", "filename": "run.tsv"}])
    loggers.start(tmp_path, {"seed": 7})
    loggers.log({"stage": "rl", "step": 1, "global_step": 3, "reward_mean": 0.5, "label": "x"}, 3)
    loggers.log({"stage": "eval", "global_step": 3, "success": {"value": 1.0, "ci95_low": 0.2}}, 3)
    loggers.finish("completed")
    assert (tmp_path / "run.tsv").read_text() == (
        "# seed 7\n3\trl/reward_mean\t0.5\n3\teval/success/value\t1.0\n3\teval/success/ci95_low\t0.2\n# completed\n")
    assert json.loads((tmp_path / "loggers.json").read_text()) == {"tsv": {"status": "ok"}}


def test_hook_register_commands(doc_example: LoadExample) -> None:
    _, info = doc_example("register_commands")
    group = click.Group("vista")
    host().call_each("register_commands", lambda _info: {"cli": group}, only_plugin=info.key)
    result = CliRunner().invoke(group, ["doc-hello", "Ada"])
    assert result.exit_code == 0 and result.output == "Hello, Ada!\n"


TYPED_PLUGIN = '''
from vista_rl import Env, Judge, RegisterEnv, RegisterEstimator, RegisterJudge, hookimpl


@hookimpl
def register_envs(register: RegisterEnv) -> None:
    register("typed/lazy-v0", "typed_plugin.env:Lazy", description="a lazy target is always fine")
    register("typed/judge-as-env-v0", Judge)
    register(3, Env)


@hookimpl
def register_judges(register: RegisterJudge) -> None:
    register("typed/judge", Judge, description="fine")


@hookimpl
def register_advantage_estimators(register: RegisterEstimator) -> None:
    register("typed/not-an-estimator", len)
'''


@pytest.mark.slow
def test_register_protocols_let_a_type_checker_catch_wrong_registrations(tmp_path: Path) -> None:
    """The ``Register*`` protocols carry each kind's contract: mypy flags a judge registered as an env,
    a non-string id and a function that is no estimator, and accepts the right registrations.
    (Slow on a cold mypy cache: about a minute, for the core's and torch's types.)"""
    mypy_api = pytest.importorskip("mypy.api")
    repo = Path(__file__).resolve().parents[1]
    module = tmp_path / "typed_plugin.py"
    module.write_text(TYPED_PLUGIN)
    stdout, _, status = mypy_api.run([str(module), "--config-file", str(repo / "pyproject.toml"),
                                      "--cache-dir", str(repo / ".mypy_cache"), "--no-error-summary"])
    errors = sorted(int(line.split(":")[1]) for line in stdout.splitlines() if ": error:" in line)
    assert status == 1 and errors == [8, 9, 19], stdout
