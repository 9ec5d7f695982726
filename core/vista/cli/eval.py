"""``vista eval``: run a policy on an env for N episodes and report metrics with 95% CIs."""

from __future__ import annotations

import json
from pathlib import Path

import click
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

import vista
from vista.model import SamplingParams
from vista.observation import Message
from vista.stats import mean, proportion


def _parse_model_spec(spec: str) -> tuple[str, str | None]:
    backend, _, path = spec.partition(":")
    return backend, (path or None)


@click.command("eval")
@click.option("--env", "env_id", required=True, help="Registered env id.")
@click.option("--model", "model_spec", required=True, help="BACKEND:PATH_OR_URL, e.g. scripted:oracle.")
@click.option("--episodes", default=20, show_default=True, type=click.IntRange(min=1))
@click.option("--max-turns", default=5, show_default=True, type=click.IntRange(min=1))
@click.option("--seed", default=0, show_default=True, type=int, help="First episode seed.")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=None)
def eval_command(env_id: str, model_spec: str, episodes: int, max_turns: int, seed: int,
                 out_dir: Path | None) -> None:
    """Evaluate a model backend on an environment."""
    backend_id, path = _parse_model_spec(model_spec)
    backend = vista.make_model(backend_id, path=path)
    params = SamplingParams(temperature=0.0, max_tokens=256)
    successes, rewards, format_errors, turns_used = 0, [], 0, []
    with Progress(transient=True) as progress:
        task = progress.add_task(f"eval {env_id}", total=episodes)
        for episode in range(episodes):
            env = vista.make_env(env_id)
            observation, _info = env.reset(seed=seed + episode)
            chat = [Message("system", env.system_prompt()), Message.from_observation(observation)]
            total, success, turns = 0.0, False, 0
            for turns in range(1, max_turns + 1):  # noqa: B007
                oracle = [env.oracle_response()] if getattr(backend, "needs_oracle", False) else None
                kwargs = {"oracle_responses": oracle} if oracle is not None else {}
                text = backend.generate([chat], params, **kwargs)[0][0].text
                result = env.step(text)
                total += result.reward
                format_errors += int(not result.info.get("format_ok", True))
                success = bool(result.info.get("success", False))
                if result.done:
                    break
                chat += [Message("assistant", text), Message.from_observation(result.observation)]
            env.close()
            successes += int(success)
            rewards.append(total)
            turns_used.append(float(turns))
            progress.advance(task)
    summary = {
        "env": env_id,
        "model": model_spec,
        "episodes": episodes,
        "success_rate": proportion(successes, episodes).to_dict(),
        "mean_reward": mean(rewards).to_dict(),
        "mean_turns": mean(turns_used).to_dict(),
        "format_errors": format_errors,
    }
    table = Table(title=f"{env_id} with {model_spec}")
    table.add_column("metric")
    table.add_column("value [95% CI]")
    table.add_row("success rate", str(proportion(successes, episodes)))
    table.add_row("mean reward", str(mean(rewards)))
    table.add_row("mean turns", str(mean(turns_used)))
    table.add_row("format errors", str(format_errors))
    Console().print(table)
    if out_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / "metrics.json").write_text(json.dumps(summary, indent=2))
        click.echo(f"metrics written to {out_dir / 'metrics.json'}")
