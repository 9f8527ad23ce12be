"""Throughput and utility of SelectItems on real data, on the DirectRunner.

    python -m pipelines.benchmark --input ../shared/data/imdb_50k_reviews.csv.gz \\
        --format csv --user-field @row --text-field review \\
        --mechanisms weighted-gaussian --rho 0.1 --delta 1e-5 --max-items-per-user 100

First a read-only pipeline (read, tokenise, count pairs) is timed, then one
pipeline per mechanism (read, tokenise, SelectItems, count released). The
time SelectItems adds is the difference, and pairs/second is the number of
input pairs over that difference. Both are wall-clock times of whole
pipelines on this machine: compare mechanisms within one run only.
"""

from __future__ import annotations

import json
import sys
import time
from types import SimpleNamespace

from pipelines import cli  # first: it quiets Beam's logging before Beam loads
import apache_beam as beam  # noqa: E402
from apache_beam.options.pipeline_options import PipelineOptions  # noqa: E402

from beam_dpsu.mechanisms import SelectItems  # noqa: E402
from pipelines.inputs import FORMATS, ReadPairs  # noqa: E402

PROG = "python -m pipelines.benchmark"


def _count_into(pcoll, path: str, label: str):
    """Counts ``pcoll`` and writes the number to ``path`` (read back after the run)."""
    return (pcoll
            | f"Count{label}" >> beam.combiners.Count.Globally()
            | f"Write{label}" >> beam.io.WriteToText(path, shard_name_template=""))


def _read_count(path: str) -> int:
    with open(path, encoding="utf-8") as f:
        return int(f.read().strip())


def time_pipeline(build, options: PipelineOptions) -> float:
    start = time.perf_counter()
    with beam.Pipeline(options=options) as p:
        build(p)
    return time.perf_counter() - start


def build_parser() -> cli.JobArgumentParser:
    parser = cli.JobArgumentParser(
        prog=PROG,
        description="Time SelectItems per mechanism on real data on this machine: a "
                    "read-only pipeline first, then one pipeline per mechanism; prints "
                    "released items and input pairs per second of selection.",
        examples=[f"{PROG} --input examples/imdb_2k.csv.gz --user-field user --text-field "
                  "review --mechanisms weighted-gaussian,sips --rho 0.1 --delta 1e-5 "
                  "--max-items-per-user 100"])
    cli.add_input_arguments(parser, FORMATS)
    cli.add_mechanism_arguments(parser, several=True, public_input=False)
    cli.add_budget_arguments(parser)
    g = parser.add_argument_group("benchmark")
    g.add_argument(*cli.flags("workdir"), default="/tmp/beam_dpsu_benchmark", metavar="FOLDER",
                   help="scratch folder for the counts")
    g.add_argument(*cli.flags("json"), action="store_true",
                   help="print one JSON line per result")
    return parser


def prepare(argv):
    args, options = cli.parse_job_args(build_parser(), argv)
    budget = cli.budget_from_args(args)
    mechanisms = [cli.mechanism_from_args(args, name.strip(), ignore_unused=True)
                  for name in args.mechanisms.split(",") if name.strip()]
    for mechanism in mechanisms:
        mechanism.calibrate(budget)
    args.files = cli.resolve_input(args, FORMATS)
    return SimpleNamespace(args=args, options=options, budget=budget, mechanisms=mechanisms,
                           output=args.workdir)


def run_prepared(job) -> str:
    args, options, budget = job.args, job.options, job.budget
    tokenizer = cli.tokenizer_from_args(args)

    def read(p):
        return p | "ReadPairs" >> ReadPairs(args.input, args.format, args.user_field,
                                            args.text_field, tokenizer, args.skip_header_lines,
                                            files=args.files)

    # First the cost of reading and tokenising alone.
    pairs_path = f"{args.workdir}/pairs.txt"
    read_seconds = time_pipeline(lambda p: _count_into(read(p), pairs_path, "Pairs"), options)
    n_pairs = _read_count(pairs_path)
    cli.progress(f"read+tokenise: {n_pairs:,} pairs in {read_seconds:.1f} s")

    # Then each mechanism on the same input.
    for mechanism in job.mechanisms:
        select = SelectItems(mechanism, budget, hot_key_fanout=args.hot_key_fanout)
        out_path = f"{args.workdir}/{mechanism.name}.txt"
        total = time_pipeline(
            lambda p: _count_into(read(p) | "SelectItems" >> select, out_path, "Released"),
            options)
        select_seconds = max(total - read_seconds, 1e-9)
        result = {
            "mechanism": mechanism.name,
            "max_items_per_user": getattr(mechanism, "max_items_per_user", None),
            "budget": budget.to_dict(), "released": _read_count(out_path),
            "pairs": n_pairs, "pipeline_seconds": round(total, 2),
            "select_seconds": round(select_seconds, 2),
            "pairs_per_second": round(n_pairs / select_seconds),
        }
        if args.json:
            print(json.dumps(result), flush=True)
        else:
            print(f"{mechanism.name:>20}: released {result['released']:>7,}  "
                  f"pipeline {total:7.1f} s  SelectItems {select_seconds:7.1f} s  "
                  f"{result['pairs_per_second']:>10,} pairs/s", flush=True)
    return ""


def main(argv=None) -> int:
    return cli.run_job("benchmark", argv, prepare, run_prepared)


if __name__ == "__main__":
    sys.exit(main())
