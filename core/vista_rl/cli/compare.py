"""``vista compare RUN_A RUN_B --out compare.html``: two eval runs as curves and per-seed wins."""

from __future__ import annotations

from pathlib import Path

import click

from vista_rl.errors import VistaError


@click.command("compare")
@click.argument("run_a", type=click.Path(file_okay=False, exists=True, path_type=Path))
@click.argument("run_b", type=click.Path(file_okay=False, exists=True, path_type=Path))
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default=Path("compare.html"),
              show_default=True, help="HTML file to write (works offline; links into each run's viewer).")
def compare_command(run_a: Path, run_b: Path, out: Path) -> None:
    """Compare two eval run directories: success and reward curves, per-seed wins and losses."""
    from vista_rl.store.compare import write_compare

    try:
        result = write_compare(run_a, run_b, out)
    except VistaError as exc:
        raise click.ClickException(str(exc)) from None
    for run in (result.a, result.b):
        click.echo(f"{run.label}: {run.run_dir} · {len(run.episodes)} episode(s) · success rate "
                   f"{run.success_rate:.3f} · mean reward {run.mean_reward:.3g}")
    tally = result.tally
    click.echo(f"per seed: A wins {tally['win']}, B wins {tally['loss']}, ties {tally['tie']}"
               + (f", only in A {tally['only A']}, only in B {tally['only B']}"
                  if tally["only A"] or tally["only B"] else ""))
    click.echo(f"comparison written to {result.path}")
