"""The evaluation job: released items per mechanism over a budget grid, with trials.

    python -m pipelines.evaluate --input ../shared/data/imdb_50k_reviews.csv.gz \\
        --format csv --user-field @row --text-field review \\
        --mechanisms weighted-gaussian,policy-gaussian,gw,sips,truncated-geometric \\
        --epsilons 1,2,3,4 --delta 1e-5 --trials 3 --k-anonymity 20 --output eval/

First the input is read and tokenised once into a per-user cache (JSON
lines) in the output directory. Then every (mechanism, budget, trial) runs as
its own pipeline on that cache, with fresh OS randomness, and its released
items and wall time are recorded. Finally it writes:

* ``results.csv``: mechanism, budget, trial, released, wall seconds (and the
  k-anonymity coverage with ``--k-anonymity``),
* ``summary.md``: mean ± std of released items per mechanism and budget,
* ``utility.png``: released items vs ε (or ρ), one line per mechanism.

``--k-anonymity K`` also reports the share of items held by ≥ K users that
each run released (dpsu Table 3). Those counts come from the raw data: they
are NOT differentially private and are for evaluation only.
"""

from __future__ import annotations

import argparse
import csv
import glob
import json
import math
import os
import statistics
import sys
import time

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions

from beam_dpsu.accounting import Budget, ZCDPBudget
from beam_dpsu.mechanisms import SelectItems
from beam_dpsu.report import NON_PRIVATE_NOTE
from pipelines.inputs import ReadPairs
from pipelines.vocabulary import (UsageError, add_input_arguments, add_mechanism_arguments,
                                  check_input_args, mechanism_from_args, flags, tokenizer_from_args)


def _floats(text: str) -> list[float]:
    try:
        values = [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers, got {text!r}")
    if not values:
        raise argparse.ArgumentTypeError("expected at least one number")
    return values


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m pipelines.evaluate", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_input_arguments(parser)
    add_mechanism_arguments(parser, several=True)
    g = parser.add_argument_group("budget grid (user-level)")
    g.add_argument(*flags("epsilons"), type=_floats, help="comma-separated ε values of (ε, δ)-DP")
    g.add_argument(*flags("rhos"), type=_floats, help="comma-separated ρ values of zCDP")
    g.add_argument(*flags("delta"), type=float, required=True, help="δ of every budget")
    parser.add_argument(*flags("trials"), type=int, default=1, help="runs per mechanism and budget")
    parser.add_argument(*flags("k-anonymity"), type=int,
                        help="also report the share of items held by >= K users that each run "
                             "releases (non-private, evaluation only)")
    parser.add_argument(*flags("output"), required=True, help="output directory (local)")
    return parser


def budgets_from_args(args) -> list:
    if (args.epsilons is None) == (args.rhos is None):
        raise UsageError("give exactly one of --epsilons or --rhos")
    if args.epsilons is not None:
        return [Budget(e, args.delta) for e in args.epsilons]
    return [ZCDPBudget(r, args.delta) for r in args.rhos]


def budget_label(budget) -> str:
    return (f"eps={budget.epsilon:g}" if isinstance(budget, Budget) else f"rho={budget.rho:g}")


def budget_x(budget) -> float:
    return budget.epsilon if isinstance(budget, Budget) else budget.rho


def progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# -- the per-user cache ----------------------------------------------------------


def build_cache(args, options, cache_dir: str) -> None:
    """Reads and tokenises the input once: one JSON line [user, [items…]] per user."""
    tokenizer = tokenizer_from_args(args)
    with beam.Pipeline(options=options) as p:
        _ = (p
             | "ReadPairs" >> ReadPairs(args.input, args.format, args.user_field,
                                        args.text_field, tokenizer, args.skip_header_lines)
             | "GroupByUser" >> beam.GroupByKey()
             | "AsJson" >> beam.MapTuple(lambda user, items: json.dumps([user, list(items)]))
             | "WriteCache" >> beam.io.WriteToText(os.path.join(cache_dir, "users"),
                                                   file_name_suffix=".jsonl"))


def read_cache_pairs(p, cache_dir: str):
    def pairs(line):
        user, items = json.loads(line)
        return ((user, item) for item in items)

    return (p
            | "ReadCache" >> beam.io.ReadFromText(os.path.join(cache_dir, "users-*.jsonl"))
            | "AsPairs" >> beam.FlatMap(pairs))


def items_held_by_at_least(cache_dir: str, k: int) -> set:
    """Items held by ≥ k distinct users (raw counts; NOT private)."""
    holders: dict = {}
    for path in glob.glob(os.path.join(cache_dir, "users-*.jsonl")):
        with open(path, encoding="utf-8") as f:
            for line in f:
                _, items = json.loads(line)
                for item in set(items):
                    holders[item] = holders.get(item, 0) + 1
    return {item for item, n in holders.items() if n >= k}


def run_trial(options, cache_dir: str, mechanism, budget, out_prefix: str) -> tuple[list, float]:
    """One fresh-randomness run; returns (released items, wall seconds)."""
    start = time.perf_counter()
    with beam.Pipeline(options=options) as p:
        _ = (read_cache_pairs(p, cache_dir)
             | "SelectItems" >> SelectItems(mechanism, budget)
             | "WriteReleased" >> beam.io.WriteToText(out_prefix, file_name_suffix=".txt"))
    seconds = time.perf_counter() - start
    released = []
    for path in glob.glob(out_prefix + "-*.txt"):
        with open(path, encoding="utf-8") as f:
            released += [line.rstrip("\n") for line in f if line.strip()]
        os.remove(path)
    return released, seconds


# -- outputs ---------------------------------------------------------------------


def write_summary(rows: list[dict], path: str, k_anonymity: int | None) -> None:
    groups: dict = {}
    for row in rows:
        groups.setdefault((row["mechanism"], row["budget"]), []).append(row)
    lines = ["# Evaluation summary", "",
             "Released items, mean ± standard deviation over trials.", ""]
    header = "| mechanism | budget | trials | released | wall seconds |"
    rule = "|---|---|---|---|---|"
    if k_anonymity:
        header += f" coverage of items held by ≥ {k_anonymity} users |"
        rule += "---|"
    lines += [header, rule]

    def mean_std(values):
        m = statistics.fmean(values)
        s = statistics.stdev(values) if len(values) > 1 else 0.0
        return m, s

    for (mechanism, budget), group in groups.items():
        m, s = mean_std([r["released"] for r in group])
        w, _ = mean_std([r["wall_seconds"] for r in group])
        line = f"| {mechanism} | {budget} | {len(group)} | {m:,.1f} ± {s:,.1f} | {w:.1f} |"
        if k_anonymity:
            c, cs = mean_std([r["k_anonymity_coverage"] for r in group])
            line += f" {100 * c:.1f}% ± {100 * cs:.1f}% |"
        lines.append(line)
    if k_anonymity:
        lines += ["", f"Coverage uses raw (non-private) counts of who holds each item. "
                      f"{NON_PRIVATE_NOTE} For evaluation only."]
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")


def write_plot(rows: list[dict], path: str, x_name: str, title: str) -> None:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise UsageError("utility.png needs matplotlib: pip install -e '.[plot]'") from None
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for mechanism in dict.fromkeys(r["mechanism"] for r in rows):
        points: dict = {}
        for r in rows:
            if r["mechanism"] == mechanism:
                points.setdefault(r["x"], []).append(r["released"])
        xs = sorted(points)
        means = [statistics.fmean(points[x]) for x in xs]
        stds = [statistics.stdev(points[x]) if len(points[x]) > 1 else 0.0 for x in xs]
        ax.errorbar(xs, means, yerr=stds, marker="o", capsize=3, label=mechanism)
    ax.set_xlabel(x_name)
    ax.set_ylabel("released items")
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv=None) -> int:
    try:
        return _main(argv)
    except (UsageError, ValueError, TypeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


def _main(argv) -> int:
    args, beam_args = build_parser().parse_known_args(argv)
    check_input_args(args)
    budgets = budgets_from_args(args)
    if args.trials < 1:
        raise UsageError(f"--trials must be >= 1, got {args.trials}")
    if args.k_anonymity is not None and args.k_anonymity < 1:
        raise UsageError(f"--k-anonymity must be >= 1, got {args.k_anonymity}")
    mechanisms = [mechanism_from_args(args, name.strip(), ignore_unused=True)
                  for name in args.mechanisms.split(",") if name.strip()]
    for budget in budgets:  # calibrate everything before running anything
        for mechanism in mechanisms:
            mechanism.calibrate(budget)
    options = PipelineOptions(beam_args)
    os.makedirs(args.output, exist_ok=True)
    cache_dir = os.path.join(args.output, "cache")

    progress(f"reading and tokenising {args.input} …")
    start = time.perf_counter()
    build_cache(args, options, cache_dir)
    progress(f"cached the input in {time.perf_counter() - start:.1f} s")
    frequent = (items_held_by_at_least(cache_dir, args.k_anonymity)
                if args.k_anonymity else None)

    rows = []
    total = len(mechanisms) * len(budgets) * args.trials
    done = 0
    for mechanism in mechanisms:
        for budget in budgets:
            for trial in range(1, args.trials + 1):
                done += 1
                released, seconds = run_trial(options, cache_dir, mechanism, budget,
                                              os.path.join(args.output, "released"))
                row = {"mechanism": mechanism.name, "budget": budget_label(budget),
                       "x": budget_x(budget), "trial": trial, "released": len(released),
                       "wall_seconds": round(seconds, 3)}
                if frequent is not None:
                    row["k_anonymity_coverage"] = (
                        len(frequent & set(released)) / len(frequent) if frequent else math.nan)
                rows.append(row)
                progress(f"[{done}/{total}] {mechanism.name} {budget_label(budget)} "
                         f"trial {trial}/{args.trials}: {len(released):,} items in {seconds:.1f} s")

    fields = ["mechanism", "budget", "trial", "released", "wall_seconds"]
    if frequent is not None:
        fields.append("k_anonymity_coverage")
    with open(os.path.join(args.output, "results.csv"), "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=fields, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    write_summary(rows, os.path.join(args.output, "summary.md"), args.k_anonymity)
    x_name = "ε" if isinstance(budgets[0], Budget) else "ρ (zCDP)"
    write_plot(rows, os.path.join(args.output, "utility.png"), x_name,
               f"Released items vs {x_name} (δ = {args.delta:g})")
    progress(f"wrote results.csv, summary.md and utility.png to {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
