"""MCTS over thought steps vs sampling alone, on colour-grid problems with the scripted noisy teacher.

For each problem: one MCTS search (ViGoRL's run settings, ``--simulations`` simulations) and, from
the same teacher, (a) one sampled chain and (b) best-of-k sampled chains with k chosen so the
sampler gets as many teacher replies as the search used (matched budget).  Prints JSON: the share
of problems with at least one correct chain under each, the share of correct rollouts inside the
trees, distinct correct chains per problem after linearisation, replies per search, searches/s.

    python benchmarks/vigorl_mcts.py [--problems 50] [--simulations 8] [--max-depth 10] [--plot out.png]
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from _bench import stamp
from rich.progress import Progress
from vista_plugin_vigorl.mcts.linearize import sample_chains
from vista_plugin_vigorl.mcts.search import MctsSettings, Problem, ThoughtSearch
from vista_plugin_vigorl.mcts.toy import QUESTION, NoisyTeacher, colour_grid
from vista_plugin_vigorl.mcts.tree import TreeNode

import vista_rl


def rollout_counts(node: TreeNode) -> tuple[int, int]:
    correct, total = sum(r.reward >= 1.0 for r in node.rollouts), len(node.rollouts)
    for child in node.children:
        c, t = rollout_counts(child)
        correct, total = correct + c, total + t
    return correct, total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problems", type=int, default=50)
    parser.add_argument("--simulations", type=int, default=8)
    parser.add_argument("--max-depth", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--plot", default=None, help="also save a bar chart of the three rates here")
    parser.add_argument("--tiny", action="store_true", help="2 problems, 2 simulations (for tests)")
    args = parser.parse_args()
    if args.tiny:
        args.problems, args.simulations = 2, 2
    settings = MctsSettings.vigorl_run(n_simulations=args.simulations, max_depth=args.max_depth)
    search = ThoughtSearch(NoisyTeacher(), vista_rl.make_judge("exact"), settings, seed=args.seed)
    found = single = matched = correct = total = replies = chains = 0
    seconds = 0.0
    with Progress(transient=True) as progress:
        bar = progress.add_task("MCTS vs sampling", total=args.problems)
        for index in range(args.problems):
            image, answer, _ = colour_grid(10_000 + index)
            problem = Problem(f"p{index}", QUESTION, [image], answer, "Reason with (x, y) points.")
            started = time.perf_counter()
            result = search.search(problem)
            seconds += time.perf_counter() - started
            found += result.correct_rollouts() > 0
            c, t = rollout_counts(result.root)
            correct, total = correct + c, total + t
            replies += result.stats.replies
            chains += len(sample_chains(result.root.to_dict()))
            samples = search.sample(problem, 1 + result.stats.replies // max(1, settings.max_depth // 2))
            single += samples[0].reward >= 1.0
            matched += any(s.reward >= 1.0 for s in samples)
            progress.advance(bar)
    n = args.problems
    report: dict[str, Any] = {
        "problems": n, "settings": settings.model_dump(include={"n_simulations", "max_depth", "c_puct",
                                                               "n_rollouts_per_node", "num_children_per_expand"}),
        "with_correct_chain": {"mcts": found / n, "one_sample": single / n, "best_of_k_matched_budget": matched / n},
        "correct_rollout_share_in_trees": correct / total if total else 0.0,
        "one_sample_success": single / n,
        "distinct_chains_per_problem": chains / n,
        "teacher_replies_per_search": replies / n,
        "searches_per_s": n / seconds if seconds else None,
    }
    report = stamp(report, "sampling alone from the same teacher (one sample; best-of-k at the same replies)",
                   ["vista-plugin-vigorl"])
    print(json.dumps(report))
    if args.plot:
        plot(report["with_correct_chain"], args.plot, n)


def plot(rates: dict[str, float], path: str, problems: int) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(5, 3.2))
    labels = {"mcts": "MCTS", "one_sample": "one sample", "best_of_k_matched_budget": "best-of-k\n(same replies)"}
    bars = axis.bar([labels[k] for k in rates], [100 * v for v in rates.values()], color=["#3b7", "#999", "#58c"])
    axis.bar_label(bars, fmt="%.0f%%")
    axis.set_ylim(0, 110)
    axis.set_ylabel("problems with a correct chain (%)")
    axis.set_title(f"noisy teacher, {problems} colour-grid problems")
    figure.tight_layout()
    figure.savefig(path, dpi=120)


if __name__ == "__main__":
    main()
