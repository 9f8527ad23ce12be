"""Peer comparison: PipelineDP's partition selection next to beam_dpsu, same data and budget.

    pip install -e ".[bench]"
    python -m pipelines.benchmark_peers --input ../shared/data/imdb_50k_reviews.csv.gz \\
        --format csv --user-field @row --text-field review \\
        --epsilon 1 --delta 1e-5 --max-items-per-user 100

The same (user, item) pairs go through PipelineDP's ``select_partitions``
(its default truncated-geometric strategy and its Weighted Gaussian strategy,
both at (ε, δ) with ``max_partitions_contributed`` = Δ0) and through our
mechanisms (``--mechanisms``, default weighted-gaussian, policy-gaussian,
sips, gw, truncated-geometric — the last is the same algorithm as PipelineDP's
default strategy), one DirectRunner pipeline each. It prints released items and wall
time side by side. PipelineDP is an optional dependency of this script only.
"""

from __future__ import annotations

import argparse
import sys
import time

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions

from beam_dpsu.accounting import Budget
from beam_dpsu.mechanisms import SelectItems
from pipelines.benchmark import _count_into, _read_count
from pipelines.inputs import ReadPairs
from pipelines.vocabulary import (UsageError, add_input_arguments, add_mechanism_arguments,
                                  check_input_args, mechanism_from_args, flags, tokenizer_from_args)

PEER_STRATEGIES = ("TRUNCATED_GEOMETRIC", "WEIGHTED_GAUSSIAN_THRESHOLDING")


def pipeline_dp_select(pairs, strategy_name: str, budget: Budget, max_items: int):
    """PipelineDP's select_partitions on (user, item) pairs (its Beam backend)."""
    import pipeline_dp

    accountant = pipeline_dp.NaiveBudgetAccountant(total_epsilon=budget.epsilon,
                                                   total_delta=budget.delta)
    engine = pipeline_dp.DPEngine(accountant, pipeline_dp.BeamBackend())
    params = pipeline_dp.SelectPartitionsParams(
        max_partitions_contributed=max_items,
        partition_selection_strategy=getattr(pipeline_dp.PartitionSelectionStrategy,
                                             strategy_name))
    extractors = pipeline_dp.DataExtractors(privacy_id_extractor=lambda r: r[0],
                                            partition_extractor=lambda r: r[1])
    selected = engine.select_partitions(pairs, params, extractors)
    accountant.compute_budgets()
    return selected


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pipelines.benchmark_peers",
                                     description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_input_arguments(parser)
    add_mechanism_arguments(parser, several=True)
    parser.set_defaults(mechanisms="weighted-gaussian,policy-gaussian,sips,gw,truncated-geometric")
    parser.add_argument(*flags("epsilon"), type=float, required=True)
    parser.add_argument(*flags("delta"), type=float, required=True)
    parser.add_argument(*flags("peer-strategies"), default=",".join(PEER_STRATEGIES),
                        help="PipelineDP strategies to run (its weighted Gaussian recomputes "
                             "σ for every partition and is slow on large vocabularies)")
    parser.add_argument(*flags("workdir"), default="/tmp/beam_dpsu_peers")
    args, beam_args = parser.parse_known_args(argv)
    try:
        import pipeline_dp  # noqa: F401
    except ImportError:
        print("error: this benchmark needs PipelineDP: pip install -e '.[bench]'", file=sys.stderr)
        return 2
    try:
        check_input_args(args)
    except (UsageError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    budget = Budget(args.epsilon, args.delta)
    max_items = args.max_items_per_user or 100
    args.max_items_per_user = max_items
    options = PipelineOptions(beam_args)
    tokenizer = tokenizer_from_args(args)

    def read(p):
        return p | "ReadPairs" >> ReadPairs(args.input, args.format, args.user_field,
                                            args.text_field, tokenizer, args.skip_header_lines)

    strategies = [s.strip() for s in args.peer_strategies.split(",") if s.strip()]
    unknown = set(strategies) - set(PEER_STRATEGIES)
    if unknown:
        print(f"error: unknown PipelineDP strategies {sorted(unknown)}; choose from "
              f"{list(PEER_STRATEGIES)}", file=sys.stderr)
        return 2
    runs = [(f"PipelineDP {s.lower()}", lambda pairs, s=s: pipeline_dp_select(
        pairs, s, budget, max_items)) for s in strategies]
    for name in args.mechanisms.split(","):
        mechanism = mechanism_from_args(args, name.strip(), ignore_unused=True)
        runs.append((f"beam_dpsu {mechanism.name}",
                     lambda pairs, m=mechanism: pairs | SelectItems(m, budget)))

    print(f"budget (ε, δ) = ({budget.epsilon:g}, {budget.delta:g}), Δ0 = {max_items}")
    print(f"{'selection':>42} | {'released':>9} | {'wall s':>7}", flush=True)
    for i, (name, select) in enumerate(runs):
        out = f"{args.workdir}/run{i}.txt"
        start = time.perf_counter()
        with beam.Pipeline(options=options) as p:
            _count_into(select(read(p)), out, "Released")
        seconds = time.perf_counter() - start
        print(f"{name:>42} | {_read_count(out):>9,} | {seconds:>7.1f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
