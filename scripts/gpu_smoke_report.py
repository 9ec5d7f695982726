"""The run directory ``python -m vista_plugin_local.main_job`` reads, assembled from scripts/gpu-smoke.sh's
two stages: the SFT stage (the local engine, ``trainer.steps=0``) and the RL stage (the verl engine,
started from the SFT model).

The main job's report needs ``config.yaml``, ``results.json`` (the trainer's held-out evals, reused
where the decoding matches) and ``models/sft`` / ``models/final`` (Hugging Face model directories).
The SFT run has the first evals and ``models/sft``; the verl run has the RL run config and verl's
checkpoints, whose actor is a Hugging Face directory once ``hf_model`` is among its save contents
(or after ``python -m verl.model_merger merge``).  Nothing is evaluated here: main_job evaluates the
RL model, the blanked-image run and the blind baseline itself, on the same held-out seeds.

    python scripts/gpu_smoke_report.py final-model VERL_RUN          # prints the actor's HF dir, or exits 1
    python scripts/gpu_smoke_report.py assemble SFT_RUN VERL_RUN FINAL_MODEL OUT
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path
from typing import Any

import yaml

#: Evals of the SFT run the report reuses (its ``final`` eval is the SFT model again, under another name).
REUSED_EVALS = ("untrained", "sft")
#: What a model directory needs besides weights for ``AutoProcessor``: copied from the SFT model when
#: verl's directory lacks them (verl saves the config and tokenizer, not always the image processor).
PROCESSOR_FILES = ("preprocessor_config.json", "video_preprocessor_config.json", "processor_config.json",
                   "chat_template.json", "chat_template.jinja", "tokenizer.json", "tokenizer_config.json",
                   "special_tokens_map.json", "vocab.json", "merges.txt", "generation_config.json")


def latest_step_dir(checkpoints: Path) -> Path:
    """``checkpoints/global_step_N`` that verl's ``latest_checkpointed_iteration.txt`` names."""
    marker = checkpoints / "latest_checkpointed_iteration.txt"
    if not marker.is_file():
        raise FileNotFoundError(f"{marker}: verl saved no checkpoint (trainer.save_freq)")
    return checkpoints / f"global_step_{int(marker.read_text().strip())}"


def has_weights(model_dir: Path) -> bool:
    return (model_dir / "config.json").is_file() and any(model_dir.glob("*.safetensors"))


def final_model(verl_run: Path) -> Path | None:
    """The last checkpoint's actor as a Hugging Face directory with weights, if verl wrote one."""
    hf = latest_step_dir(verl_run / "checkpoints") / "actor" / "huggingface"
    return hf if has_weights(hf) else None


def _link(target: Path, link: Path) -> None:
    link.parent.mkdir(parents=True, exist_ok=True)
    if link.is_symlink() or link.exists():
        link.unlink()
    link.symlink_to(target.resolve(), target_is_directory=True)


def assemble(sft_run: Path, verl_run: Path, final: Path, out: Path) -> Path:
    """Write OUT/config.yaml and OUT/results.json and link OUT/models/{sft,final}; returns OUT."""
    if not has_weights(final):
        raise FileNotFoundError(f"{final}: no Hugging Face model with weights")
    sft_config: dict[str, Any] = yaml.safe_load((sft_run / "config.yaml").read_text())
    config: dict[str, Any] = yaml.safe_load((verl_run / "config.yaml").read_text())
    # the untrained row is the model SFT started from; the SFT row is what verl started from
    config.update(engine="local", output_dir=str(out), model=sft_config["model"], sft=sft_config["sft"])
    results: dict[str, Any] = json.loads((sft_run / "results.json").read_text())
    evals = results.get("evals", {})
    results["evals"] = {label: evals[label] for label in REUSED_EVALS if label in evals}
    results.pop("main_job", None)
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    (out / "results.json").write_text(json.dumps(results, indent=2), encoding="utf-8")
    _link(sft_run / "models" / "sft", out / "models" / "sft")
    for name in PROCESSOR_FILES:
        source = sft_run / "models" / "sft" / name
        if source.is_file() and not (final / name).exists():
            try:
                shutil.copy2(source, final / name)
            except OSError as exc:  # one file that cannot be copied must not hide the others
                print(f"warning: {name} not copied into {final}: {exc}", file=sys.stderr)
    _link(final, out / "models" / "final")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    find = sub.add_parser("final-model")
    find.add_argument("verl_run", type=Path)
    build = sub.add_parser("assemble")
    for name in ("sft_run", "verl_run", "final", "out"):
        build.add_argument(name, type=Path)
    args = parser.parse_args(argv)
    if args.command == "final-model":
        found = final_model(args.verl_run)
        if found is None:
            return 1
        print(found)
        return 0
    print(assemble(args.sft_run, args.verl_run, args.final, args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
