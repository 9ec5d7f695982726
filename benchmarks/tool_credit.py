"""Where the tool job's RL signal goes: one GRPO batch from a checkpoint of the tool job, measured
turn by turn (issue 26: 20-100 GRPO steps after SFT changed no greedy decision).

Prints one JSON object on stdout:

- ``groups``: how many seeds' groups hold both successes and failures (only those carry a GRPO
  signal), all successes, all failures;
- ``turns``: per turn index (0 = the crop_zoom call, 1 = the answer), the trained tokens, the mean
  |advantage| a token receives, each turn's share of the policy-gradient loss mass under the
  configured aggregation, and the gradient norm of that turn's loss alone (before clipping), with
  the cosine between the call turn's and the answer turn's gradients;
- ``colour``: the answer token's distribution over the four colours on the held-out seeds, given
  the oracle's zoom: greedy accuracy, mean p(correct), the logit margin (greedy minus runner-up),
  and how many seeds are confidently wrong (p(correct) < 0.05: no sampled group there can hold a
  success);
- ``after_update``: the same colour statistics and the KL (k3, to the rollout policy) per turn after
  ``--updates`` optimizer steps on this one batch with the trainer's own update, and how many greedy
  colour decisions flipped.

    .venv/bin/python benchmarks/tool_credit.py MODEL_DIR [--config examples/visual_search_tools.yaml]
        [--seeds 16] [--heldout 200] [--updates 1] [--set algorithm.loss_agg=seq-mean ...]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import yaml
from rich.console import Console
from vista_plugin_local.advantages import make_estimator, per_turn_advantages
from vista_plugin_local.chat_tokens import EpisodeTokens
from vista_plugin_local.config import LocalEngineConfig
from vista_plugin_local.losses import Denominators, aggregate, clipped_policy_loss, kl_k3
from vista_plugin_local.policy import Policy
from vista_plugin_local.ppo_update import OldScores, PolicyUpdate
from vista_plugin_local.rl_step import RLStep, step_sampling
from vista_plugin_local.rollouts import TrainingRollouts
from vista_plugin_local.samples import TrainSample, training_samples
from vista_plugin_local.session import new_optimization
from vista_plugin_local.sft_data import examples_from_turns, trajectory_pieces
from vista_plugin_local.step_metrics import StepMetrics
from vista_plugin_local.trainer import LocalEngine, build_policy
from vista_plugin_visual_search.small import DOT_COLOURS, generate_marker_scene

import vista_rl
from vista_rl import SamplingParams
from vista_rl.config import RunConfig, validate_config
from vista_rl.rollout import RolloutEngine, episode_specs
from vista_rl_sdk.tiny_models import init_tiny_model


def load_config(path: Path, model: str, overrides: list[str]) -> RunConfig:
    data = yaml.safe_load(path.read_text())
    data["model"]["path"] = model
    data["output_dir"] = tempfile.mkdtemp(prefix="tool-credit-")
    for item in overrides:
        key, _, raw = item.partition("=")
        node = data
        *parents, leaf = key.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = yaml.safe_load(raw)
    return validate_config(RunConfig, data, "tool_credit config")


@dataclass(frozen=True)
class Parts:
    """The local engine's parts this measurement drives directly (built as ``LocalEngine.run`` builds them)."""

    run_config: RunConfig
    config: LocalEngineConfig
    policy: Policy
    rollouts: TrainingRollouts
    run_dir: Path
    console: Console

    @property
    def device(self) -> torch.device:
        return self.policy.device


def colour_ids(engine: Parts) -> dict[str, int]:
    """The first token of each colour's reply after ``<answer>``: the token that decides the answer."""
    tokenizer = engine.policy.processor.tokenizer
    answer = tokenizer("<answer>")["input_ids"]
    out = {}
    for name in DOT_COLOURS:
        ids = tokenizer(f"<answer>{name}</answer>")["input_ids"]
        out[name] = ids[len(answer)]
    if len(set(out.values())) != len(out):
        raise SystemExit(f"colour names share their first token: {out}")
    return out


def decision_position(tokens: EpisodeTokens, answer_id: int) -> int | None:
    """Index of the token after the first trained ``<answer>`` (the colour's first token)."""
    for index, (token, trained) in enumerate(zip(tokens.input_ids, tokens.loss_mask, strict=True)):
        if trained and token == answer_id and index + 1 < len(tokens):
            return index + 1
    return None


@torch.no_grad()
def colour_logits(engine: Parts, examples: list[EpisodeTokens], positions: list[int],
                  ids: list[int]) -> torch.Tensor:
    """Logits of the colour tokens at each example's decision position, ``[n, colours]``."""
    policy = engine.policy
    policy.train(False)
    rows = []
    for start in range(0, len(examples), 16):
        chunk, where = examples[start:start + 16], positions[start:start + 16]
        tensors = policy.collate(chunk, left_pad=False)
        inputs = {k: v for k, v in tensors.items() if k != "loss_mask"}
        with policy.autocast():
            logits = policy.model(**inputs, use_cache=False).logits.float()
        for row, position in enumerate(where):
            rows.append(logits[row, position - 1, ids])
    return torch.stack(rows)


def oracle_answer_turns(engine: Parts, seeds: list[int]) -> tuple[list[EpisodeTokens], list[int], list[str]]:
    """The answer turn of the oracle's episode on each seed: the model's context after a correct zoom."""
    run = engine.run_config
    oracle = vista_rl.make_model("scripted", path="oracle")
    with RolloutEngine(oracle, run.rollout, seed=run.seed) as rollout:
        trajectories = rollout.run(episode_specs(run.env.id, seeds, 1, run.env.config))
    answer_id = engine.policy.processor.tokenizer("<answer>")["input_ids"][0]
    examples, positions, truths = [], [], []
    for trajectory in trajectories:
        try:
            turns = examples_from_turns(trajectory.system_prompt, trajectory_pieces(trajectory),
                                        engine.policy.encoder, True, run.rollout.window_size)
            last = turns[-1]
            position = decision_position(last, answer_id)
            if position is None:
                continue
            examples.append(last)
            positions.append(position)
            config = run.env.config
            truths.append(generate_marker_scene(trajectory.seed, config.get("grid", 2), config.get("display_size", 112),
                                                config.get("factor", 8), tuple(config.get("colours") or DOT_COLOURS),
                                                config.get("marker", 2)).answer)
        except Exception as exc:  # one bad seed does not stop the measurement
            print(f"seed {trajectory.seed}: {exc}", file=sys.stderr)
    return examples, positions, truths


def colour_stats(logits: torch.Tensor, truths: list[str], names: list[str]) -> dict[str, Any]:
    probs = torch.softmax(logits, dim=-1)
    target = torch.tensor([names.index(t) if t in names else -1 for t in truths])
    known = target >= 0
    probs, logits, target = probs[known], logits[known], target[known]
    p_right = probs.gather(1, target.unsqueeze(1)).squeeze(1)
    top2 = logits.topk(2, dim=-1).values
    greedy = logits.argmax(-1)
    confusion = torch.zeros((len(names), len(names)), dtype=torch.long)
    for t, g in zip(target.tolist(), greedy.tolist(), strict=True):
        confusion[t, g] += 1
    return {
        "seeds": int(known.sum()),
        "greedy_accuracy": float((greedy == target).float().mean()),
        "p_correct_mean": float(p_right.mean()),
        "p_correct_quantiles": [round(float(q), 3) for q in p_right.quantile(torch.tensor([0.1, 0.25, 0.5, 0.75]))],
        "margin_mean": float((top2[:, 0] - top2[:, 1]).mean()),
        "margin_when_wrong": float((top2[:, 0] - top2[:, 1])[greedy != target].mean()) if (greedy != target).any() else None,
        "confidently_wrong": int((p_right < 0.05).sum()),
        "uncertain": int(((p_right >= 0.05) & (p_right <= 0.95)).sum()),
        "confusion_true_by_greedy": {"order": names, "rows": confusion.tolist()},
        "greedy": greedy.tolist(),
    }


def turn_losses(engine: Parts, samples: list[TrainSample], advantages: torch.Tensor,
                temperature: float) -> dict[int, dict[str, Any]]:
    """Each turn's share of the loss mass and the gradient norm of its loss alone."""
    algorithm = engine.config.algorithm
    policy = engine.policy
    rows = list(range(len(samples)))
    mask_all = torch.tensor([sum(samples[r].tokens.loss_mask) for r in rows], dtype=torch.float32)
    denom = Denominators(tokens=float(mask_all.sum()), sequences=float(len(rows)))
    turns = sorted({s.turn_index or 0 for s in samples})
    out: dict[int, dict[str, Any]] = {}
    grads: dict[int, torch.Tensor] = {}
    params = policy.parameters()
    for turn in turns:
        picked = [r for r in rows if (samples[r].turn_index or 0) == turn]
        policy.train(True)
        for p in params:
            p.grad = None
        loss_mass = 0.0
        for start in range(0, len(picked), 16):
            chunk = picked[start:start + 16]
            tensors = policy.collate([samples[r].tokens for r in chunk], left_pad=False)
            width = tensors["input_ids"].shape[1]
            mask = tensors["loss_mask"]
            adv = advantages[torch.tensor(chunk), :width].to(engine.device)
            scores = policy.score(tensors, temperature)
            pg, _ = clipped_policy_loss(scores.logprobs, scores.logprobs.detach(), adv,
                                        algorithm.clip_ratio_low, algorithm.clip_ratio_high)
            aggregate(pg, mask, algorithm.loss_agg, denom).backward()
            weight = torch.ones_like(mask) if algorithm.loss_agg == "token-mean" else \
                1.0 / mask.sum(-1, keepdim=True).clamp(min=1)
            loss_mass += float((adv.abs() * mask * weight).sum())
        flat = torch.cat([p.grad.flatten() for p in params if p.grad is not None])
        grads[turn] = flat
        tokens = sum(sum(samples[r].tokens.loss_mask) for r in picked)
        adv_abs = sum(float(advantages[r].abs().sum()) for r in picked)
        out[turn] = {"sequences": len(picked), "trained_tokens": tokens,
                     "mean_abs_advantage_per_token": adv_abs / max(tokens, 1),
                     "loss_mass": loss_mass, "grad_norm": float(flat.norm())}
    total = sum(item["loss_mass"] for item in out.values()) or 1.0
    for item in out.values():
        item["loss_mass_share"] = item["loss_mass"] / total
    if 0 in grads and 1 in grads and grads[0].numel() == grads[1].numel():
        out[1]["cosine_with_call_turn"] = float(torch.nn.functional.cosine_similarity(grads[0], grads[1], dim=0))
    for p in params:
        p.grad = None
    return out


@torch.no_grad()
def turn_logprobs(engine: Parts, samples: list[TrainSample], temperature: float) -> list[torch.Tensor]:
    engine.policy.train(False)
    out = []
    for start in range(0, len(samples), 16):
        chunk = samples[start:start + 16]
        tensors = engine.policy.collate([s.tokens for s in chunk], left_pad=False)
        scores = engine.policy.score(tensors, temperature)
        for row, sample in enumerate(chunk):
            n = len(sample.tokens)
            out.append(scores.logprobs[row, :n].cpu())
    return out


def rl_curve(engine: Parts, steps: int, every: int, examples: list[EpisodeTokens], positions: list[int],
             truths: list[str], ids: list[int], names: list[str]) -> list[dict[str, Any]]:
    """Fresh optimizer and scheduler as the trainer makes them, then ``steps`` RL steps."""
    trainer = engine.config.trainer
    optimization = new_optimization(engine.policy, trainer, trainer.lr, steps, trainer.warmup_steps, trainer.scheduler)
    rl_step = RLStep(engine.run_config, engine.policy, engine.rollouts, optimization,
                     value_coef=engine.config.local.value_coef, run_dir=engine.run_dir, console=engine.console)
    curve: list[dict[str, Any]] = []
    window: list[StepMetrics] = []
    for step in range(steps):
        metrics = rl_step(step, step, step_sampling(engine.run_config, step)).metrics
        window.append(metrics)
        if (step + 1) % every == 0 or step + 1 == steps:
            stats = colour_stats(colour_logits(engine, examples, positions, ids), truths, names)
            stats.pop("greedy")
            stats.pop("confusion_true_by_greedy")
            curve.append({"step": step + 1, "train_success": sum(m["success_rate"] for m in window) / len(window),
                          "tool_calls": sum(m["tool_calls_mean"] for m in window) / len(window),
                          "kl": sum(m.get("kl", 0.0) for m in window) / len(window),
                          "entropy": sum(m.get("entropy", 0.0) for m in window) / len(window),
                          "step_s": sum(m["time_step_s"] for m in window) / len(window), **stats})
            print(json.dumps(curve[-1]), file=sys.stderr, flush=True)
            window = []
    return curve


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", nargs="?", help="a saved model directory (e.g. RUN_DIR/models/sft)")
    parser.add_argument("--tiny", action="store_true",
                        help="an untrained tiny model, 2 seeds x 2, 4 held-out seeds (checks the script runs; for tests)")
    parser.add_argument("--config", type=Path, default=Path("examples/visual_search_tools.yaml"))
    parser.add_argument("--seeds", type=int, default=16, help="seeds in the RL batch (each sampled group_size times)")
    parser.add_argument("--heldout", type=int, default=200, help="held-out seeds for the colour statistics")
    parser.add_argument("--updates", type=int, default=1, help="optimizer steps on the batch before re-measuring")
    parser.add_argument("--rl-steps", type=int, default=0,
                        help="then this many RL steps of the trainer's own _rl_step, re-measuring the colour "
                        "statistics every --every steps (a fast proxy of held-out greedy success)")
    parser.add_argument("--every", type=int, default=10)
    parser.add_argument("--set", dest="overrides", action="append", default=[], help="KEY=VALUE config override")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as scratch:
        if args.tiny:
            args.model = str(init_tiny_model(Path(scratch) / "tiny", seed=0))
            args.seeds, args.heldout, args.updates, args.rl_steps = 2, 4, 1, 0
            args.overrides = [*args.overrides, "rollout.group_size=2"]
        elif args.model is None:
            parser.error("a model directory is needed (or --tiny)")
        return measure(args)


def measure(args: argparse.Namespace) -> int:
    """One GRPO batch from ``args.model``: where its loss, gradient and KL go per turn (see module doc)."""
    torch.manual_seed(0)
    run = load_config(args.config, args.model, args.overrides)
    local = LocalEngine(run, console=Console(stderr=True))
    cfg = local.config
    policy = build_policy(run, cfg, local.device)
    with TrainingRollouts.open(policy, run) as rollouts:
        engine = Parts(run, cfg, policy, rollouts, local.run_dir, local.console)
        estimator = make_estimator(cfg.algorithm.estimator, cfg.algorithm.estimator_params)
        optimization = new_optimization(engine.policy, cfg.trainer, cfg.trainer.lr, max(args.updates, 1), 0, "constant")
        policy_update = PolicyUpdate(engine.policy, optimization, cfg.algorithm, value_coef=cfg.local.value_coef,
                                     micro_batch_size=cfg.trainer.micro_batch_size,
                                     max_grad_norm=cfg.trainer.max_grad_norm)
        names = list(DOT_COLOURS)
        ids = colour_ids(engine)
        heldout = cfg.eval.seeds.seeds()[:args.heldout]
        examples, positions, truths = oracle_answer_turns(engine, heldout)
        before_logits = colour_logits(engine, examples, positions, [ids[n] for n in names])
        before = colour_stats(before_logits, truths, names)

        temperature = run.rollout.sampling.temperature
        sampling = SamplingParams(**run.rollout.sampling.model_dump(), n=1, seed=run.seed)
        seeds = cfg.trainer.train_seeds.seeds()[:args.seeds]
        trajectories = engine.rollouts.sample(
            episode_specs(run.env.id, seeds, run.rollout.group_size, run.env.config), sampling)
        samples = training_samples(trajectories, engine.rollouts.backend, run.rollout.per_turn_sequences).samples
        by_group: dict[str, list[bool]] = {}
        for trajectory in trajectories:
            by_group.setdefault(str(trajectory.seed), []).append(trajectory.success)
        mixed = sum(1 for v in by_group.values() if any(v) and not all(v))
        groups = {"groups": len(by_group), "mixed": mixed, "all_success": sum(all(v) for v in by_group.values()),
                  "all_fail": sum(not any(v) for v in by_group.values()),
                  "success_rate": sum(t.success for t in trajectories) / max(len(trajectories), 1),
                  "zoomed": sum(int(t.metadata.get("tool_calls", 0)) > 0 for t in trajectories)}
        width = max(len(s.tokens) for s in samples)
        advantages = per_turn_advantages(estimator, samples, width, cfg.algorithm.turn_credit)
        turns = turn_losses(engine, samples, advantages, temperature)

        old = turn_logprobs(engine, samples, temperature)
        old_tensor = torch.zeros((len(samples), width))
        for row, lp in enumerate(old):
            old_tensor[row, :len(lp)] = lp
        grad_norm: float | None = None
        for _ in range(args.updates):
            grad_norm = policy_update(samples, OldScores(logprobs=old_tensor), advantages, torch.zeros_like(advantages),
                                      temperature, shuffle_seed=0)["grad_norm"]
        new = turn_logprobs(engine, samples, temperature)
        kl: dict[int, list[float]] = {}
        for sample, lp_old, lp_new in zip(samples, old, new, strict=True):
            mask = torch.tensor(sample.tokens.loss_mask, dtype=torch.bool)
            value = kl_k3(lp_new[mask], lp_old[mask]).mean()
            kl.setdefault(sample.turn_index or 0, []).append(float(value))
        after_logits = colour_logits(engine, examples, positions, [ids[n] for n in names])
        after = colour_stats(after_logits, truths, names)
        flipped = sum(1 for a, b in zip(before["greedy"], after["greedy"], strict=True) if a != b)
        moved = float((torch.softmax(after_logits, -1) - torch.softmax(before_logits, -1)).abs().sum(-1).mean() / 2)
        for stats in (before, after):
            stats.pop("greedy")
        report = {
            "model": args.model, "config": str(args.config), "overrides": args.overrides,
            "algorithm": cfg.algorithm.model_dump(), "lr": cfg.trainer.lr, "temperature": temperature,
            "groups": groups, "turns": turns, "colour_before": before,
            "after_update": {"updates": args.updates, "grad_norm": grad_norm,
                             "kl_per_turn": {t: sum(v) / len(v) for t, v in kl.items()},
                             "colour": after, "greedy_colour_flips": flipped,
                             "colour_total_variation_mean": moved},
        }
        if args.rl_steps:
            report["rl_curve"] = rl_curve(engine, args.rl_steps, args.every, examples, positions, truths,
                                          [ids[n] for n in names], names)
        print(json.dumps(report, indent=1, default=lambda o: o if not isinstance(o, float) or math.isfinite(o) else None))
    return 0


if __name__ == "__main__":
    sys.exit(main())
