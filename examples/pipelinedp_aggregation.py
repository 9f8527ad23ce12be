"""A released vocabulary as the public partitions of a PipelineDP aggregation, one budget.

First beam_dpsu releases the words of a review corpus under user-level
(ε, δ)-DP (``SelectItems``). Then PipelineDP computes, for every released
word and no other, the DP number of reviews using it and their DP mean length
in tokens (clipped to [0, MAX_LENGTH]), with the released words as *public
partitions*: since the set is already DP, PipelineDP spends nothing on
choosing partitions and every released word gets a row. Its rows are first
restricted to the released words with ``beam_dpsu.KeepReleased`` (a side
input of the released set: no shuffle), so PipelineDP is told they are
already filtered and bounds each user's contributions among released words only.

One total budget pays for both. The selection needs δ (an item held by one
user may be released with probability ≤ δ); PipelineDP's Laplace noise on
public partitions is pure ε-DP. So the selection gets (1 − share)·ε and all of
δ, the aggregation share·ε and δ = 0, and basic composition (ε and δ add;
Dwork & Roth Thm 3.16) gives the total. ``BudgetAccountant`` records both
parts; spending more than the total raises ``BudgetExceededError``.

    pip install -e ".[test]"          # PipelineDP is in the test extra
    python examples/pipelinedp_aggregation.py --input examples/imdb_2k.csv.gz \\
        --epsilon 2 --delta 1e-5 --output /tmp/word_stats

Writes ``OUT/word_stats.tsv`` (``word<TAB>reviews<TAB>mean_length``, sorted by
word: an order that depends only on the released set) and ``OUT/report.json``
(both budget parts, the selection's report, PipelineDP's parameters).
"""

from __future__ import annotations

import argparse
import os
import sys

import apache_beam as beam

from beam_dpsu import (Budget, BudgetAccountant, KeepReleased, SelectItems, WeightedGaussian,
                       canonical_user_id)
from beam_dpsu.core.report import to_json
from beam_dpsu.core.tokenizer import Tokenizer
from pipelines.io.read import ReadDocuments

MAX_LENGTH = 500  # tokens; longer reviews count as this long in the mean


def split_budget(total: Budget, aggregation_share: float,
                 accountant: BudgetAccountant) -> tuple[Budget, Budget]:
    """(selection, aggregation) parts of ``total``, both spent from ``accountant``."""
    if not 0.0 < aggregation_share < 1.0:
        raise ValueError(f"aggregation_share must lie strictly between 0 and 1, "
                         f"got {aggregation_share!r}")
    return accountant.spend_all(
        Budget(total.epsilon * (1.0 - aggregation_share), total.delta),  # needs δ
        Budget(total.epsilon * aggregation_share, 0.0))  # Laplace on public partitions: pure


def aggregate_over_released(documents, released, aggregation: Budget,
                            max_partitions_per_user: int, max_length: int = MAX_LENGTH):
    """PipelineDP: (word, (reviews, mean length)) for every released word, under ``aggregation``.

    Returns the aggregates and PipelineDP's accountant, whose
    ``compute_budgets()`` must run once the pipeline is built.
    """
    import pipeline_dp

    accountant = pipeline_dp.NaiveBudgetAccountant(total_epsilon=aggregation.epsilon,
                                                   total_delta=aggregation.delta)
    engine = pipeline_dp.DPEngine(accountant, pipeline_dp.BeamBackend())
    params = pipeline_dp.AggregateParams(
        metrics=[pipeline_dp.Metrics.COUNT, pipeline_dp.Metrics.MEAN],
        noise_kind=pipeline_dp.NoiseKind.LAPLACE,
        max_partitions_contributed=max_partitions_per_user,
        max_contributions_per_partition=1,
        min_value=0.0, max_value=float(max_length),
        public_partitions_already_filtered=True)  # by KeepReleased below
    extractors = pipeline_dp.DataExtractors(
        privacy_id_extractor=lambda row: canonical_user_id(row[0]),
        partition_extractor=lambda row: row[1],
        value_extractor=lambda row: row[2])
    # One row per (user, distinct word of a review): the review's length, for
    # the released words only (which rows pass depends on the released set alone).
    rows = (documents
            | "WordRows" >> beam.FlatMap(
                lambda doc: ((doc[0], word, float(min(len(doc[1]), max_length)))
                             for word in set(doc[1])))
            | "KeepReleasedWords" >> KeepReleased(released, key=lambda row: row[1]))
    aggregates = engine.aggregate(rows, params, extractors, public_partitions=released)
    return aggregates, accountant, params


def build_pipeline(pipeline, documents, total: Budget, aggregation_share: float = 0.5,
                   max_words_per_user: int = 100, max_partitions_per_user: int = 25,
                   seed: int | None = None, accountant: BudgetAccountant | None = None,
                   max_length: int = MAX_LENGTH):
    """Selection then aggregation on ``documents`` ((user, tokens)); returns (rows, report).

    ``max_words_per_user`` is the selection's Δ0; ``max_partitions_per_user``
    PipelineDP's bound on the released words each user is aggregated on
    (smaller: less noise per word, more users' words left out). ``rows`` is a
    PCollection of (word, reviews, mean length); ``seed`` fixes beam_dpsu's
    selection only (tests; PipelineDP always draws fresh noise).
    """
    accountant = BudgetAccountant(total) if accountant is None else accountant
    selection, aggregation = split_budget(total, aggregation_share, accountant)
    # First release the words (each review is one user).
    select = SelectItems(WeightedGaussian(max_items_per_user=max_words_per_user), selection,
                         seed=seed)
    released = (documents
                | "Pairs" >> beam.FlatMap(lambda doc: ((doc[0], word) for word in doc[1]))
                | "SelectWords" >> select)
    # Then aggregate over exactly the released words with PipelineDP.
    aggregates, pdp_accountant, params = aggregate_over_released(
        documents, released, aggregation, max_partitions_per_user, max_length)
    pdp_accountant.compute_budgets()
    rows = aggregates | "AsRows" >> beam.MapTuple(
        lambda word, metrics: (word, metrics.count, metrics.mean))
    report = {
        "total": total.to_dict(),
        "composition": "basic composition: ε and δ add (Dwork & Roth Thm 3.16)",
        "selection": select.report,
        "aggregation": {"library": "PipelineDP", "budget": aggregation.to_dict(),
                        "metrics": ["count", "mean"], "noise": "laplace",
                        "public_partitions": "the released words",
                        "rows_kept_by": "beam_dpsu.KeepReleased (side input)",
                        "max_partitions_contributed": params.max_partitions_contributed,
                        "max_contributions_per_partition": 1,
                        "value_bounds": [0, max_length]},
        "spent": accountant.spent(),
    }
    return rows, report


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--input", default=os.path.join(os.path.dirname(__file__),
                                                        "imdb_2k.csv.gz"))
    parser.add_argument("--user-field", default="user")
    parser.add_argument("--text-field", default="review")
    parser.add_argument("--epsilon", type=float, default=2.0)
    parser.add_argument("--delta", type=float, default=1e-5)
    parser.add_argument("--aggregation-share", type=float, default=0.5,
                        help="share of ε for PipelineDP's aggregation (default 0.5)")
    parser.add_argument("--max-words-per-user", type=int, default=100,
                        help="Δ0 of the selection (default 100)")
    parser.add_argument("--max-partitions-per-user", type=int, default=25,
                        help="released words each user is aggregated on (default 25)")
    parser.add_argument("--output", required=True)
    args = parser.parse_args(argv)
    try:
        import pipeline_dp  # noqa: F401
    except ImportError:
        print("error: this example needs PipelineDP: pip install -e '.[test]'", file=sys.stderr)
        return 2
    try:
        total = Budget(args.epsilon, args.delta)
        with beam.Pipeline() as p:
            documents = p | "Read" >> ReadDocuments(args.input, "csv", args.user_field,
                                                    args.text_field, Tokenizer())
            rows, report = build_pipeline(p, documents, total, args.aggregation_share,
                                          args.max_words_per_user,
                                          args.max_partitions_per_user)
            _ = (rows
                 | "All" >> beam.combiners.ToList()
                 | "Sorted" >> beam.FlatMap(sorted)
                 | "Format" >> beam.MapTuple(lambda w, n, mean: f"{w}\t{n:.0f}\t{mean:.1f}")
                 | "Write" >> beam.io.WriteToText(os.path.join(args.output, "word_stats"),
                                                  file_name_suffix=".tsv",
                                                  shard_name_template=""))
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    with open(os.path.join(args.output, "report.json"), "w", encoding="utf-8") as f:
        f.write(to_json(report) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
