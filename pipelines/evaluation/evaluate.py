"""The evaluation job: released items per mechanism over a budget grid, with trials.

    python -m pipelines.evaluation.evaluate --input data/imdb_50k_reviews.csv.gz \\
        --user-field @row --text-field review \\
        --mechanisms weighted-gaussian,policy-gaussian,gw,sips,truncated-geometric \\
        --epsilons 1,2,3,4 --delta 1e-5 --trials 3 --k-anonymity 20 --output eval/

FOR EVALUATION ONLY: it releases from the same data once per mechanism, budget
and trial, so the privacy loss of the whole evaluation is the sum of all of
them, and its summary holds raw counts. Publish nothing from it. The cache, the
outputs and the raw figures: docs/explanation/reading.md#the-evaluation-job.
"""

from __future__ import annotations

import csv
import functools
import glob
import hashlib
import itertools
import json
import math
import os
import shutil
import statistics
import time
from collections import Counter
from types import SimpleNamespace
from typing import Collection, Hashable, Iterable, Mapping

from pipelines.flags import flags, JobArgumentParser, parse_job_args
from pipelines.flag_groups import (add_input_arguments, add_mechanism_arguments,
                                   add_overwrite_argument)
from pipelines.settings import (check_calibrates, mechanism_from_args, read_input,
                                require_selection_delta, resolve_input)
from pipelines.errors import flag_errors, UsageError
from pipelines.evaluation.lists import comma_list
from pipelines.output_folder import staging_of
from pipelines.progress import progress
from pipelines.job_runner import check_scratch_folder, job_pipeline, run_job, scratch_folder
from pipelines.interrupts import end_program
import apache_beam as beam  # noqa: E402
from apache_beam.io.filesystem import CompressionTypes  # noqa: E402
from apache_beam.io.filesystems import FileSystems  # noqa: E402

from beam_dpsu.core.budgets import Budget, ZCDPBudget  # noqa: E402
from beam_dpsu.core.checks import canonical_name, plural  # noqa: E402
from beam_dpsu.select_items import SelectItems  # noqa: E402
from beam_dpsu.beam.output import read_released, WriteReleased  # noqa: E402
from beam_dpsu.core.report import NON_PRIVATE_NOTE  # noqa: E402
from pipelines.io import formats  # noqa: E402
from pipelines.io.read import ReadUserItems, items_of  # noqa: E402

PROG = "python -m pipelines.evaluation.evaluate"


def build_parser(prog: str = PROG) -> JobArgumentParser:
    parser = JobArgumentParser(
        prog=prog,
        description="Evaluate mechanisms: released items per mechanism over a grid of "
                    "budgets, with trials; writes results.csv, summary.md and utility.png. "
                    "For evaluation only: it releases from the same data many times.",
        examples=[
            f"{prog} --input examples/imdb_2k.csv.gz --user-field user --text-field review "
            "--mechanisms weighted-gaussian,sips,gw --epsilons 1,2,4 --delta 1e-5 "
            "--trials 3 --output eval/"])
    add_input_arguments(parser, formats.FORMATS)
    add_mechanism_arguments(parser, several=True, public_input=False)
    g = parser.add_argument_group("budget grid (user-level)")
    g.add_argument(*flags("epsilons"), metavar="E,E…",
                   help="comma-separated ε values of (ε, δ)-DP budgets")
    g.add_argument(*flags("rhos"), metavar="R,R…",
                   help="comma-separated ρ values of zCDP budgets; give --epsilons or --rhos")
    g.add_argument(*flags("delta"), type=float, required=True, metavar="D",
                   help="δ of every budget")
    g = parser.add_argument_group("evaluation")
    g.add_argument(*flags("trials"), type=int, default=1, metavar="N",
                   help="runs per mechanism and budget, each with fresh randomness")
    g.add_argument(*flags("k-anonymity"), type=int, metavar="K",
                   help="also report the share of items held by >= K users that each run "
                        "releases (raw counts, evaluation only)")
    g.add_argument(*flags("dataset"), metavar="NAME",
                   help="the data set's name in summary.md (default: the input file name)")
    g.add_argument(*flags("no-plot"), action="store_true",
                   help="do not draw utility.png (which needs matplotlib)")
    g.add_argument(*flags("cache-dir"), metavar="FOLDER",
                   help="keep the tokenised per-user cache (raw user data) in FOLDER, one "
                        "subfolder per input and reading flags, and reuse it; by default it "
                        "lives in a temporary folder removed at exit")
    g.add_argument(*flags("output"), required=True, metavar="FOLDER",
                   help="local output folder for results.csv, summary.md and utility.png")
    add_overwrite_argument(g)
    return parser


# Coverage, from raw counts of who holds each item: NOT private, for evaluation only.
def missing_mass(pair_counts: Mapping[Hashable, int], released: Collection) -> float:
    """The missing mass (Dick, Joseph & Raman, ICLR 2026): the share of the distinct
    (user, item) pairs whose item is not released.

    Args:
      pair_counts: distinct (user, item) pairs per item of the input (its users).
      released: the released set; items the input does not hold cover nothing.

    Returns:
      Σ over unreleased items of their pairs / Σ over all items; NaN for no pairs.

    Raises:
      ValueError: a count is not an integer >= 0.
    """
    total = missed = 0
    for item, n in pair_counts.items():
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise ValueError(f"pair counts must be integers >= 0, got {n!r}")
        total += n
        if item not in released:
            missed += n
    return missed / total if total else math.nan


def pair_counts(user_item_lists: Iterable[Iterable[Hashable]]) -> dict:
    """Distinct (user, item) pairs per item, from one item list per user."""
    return Counter(item for items in user_item_lists for item in set(items))


# The grid's flags for the library's names (pipelines.errors.FLAG_OF has the single-budget ones).
_GRID_FLAGS = {"epsilon": "--epsilons", "rho": "--rhos", "mechanism": "--mechanisms"}


def _budgets(args) -> list:
    if (args.epsilons is None) == (args.rhos is None):
        raise UsageError("give exactly one of --epsilons or --rhos")
    dp = args.epsilons is not None
    values = comma_list(args.epsilons if dp else args.rhos, "--epsilons" if dp else "--rhos",
                        float, "numbers")
    with flag_errors(**_GRID_FLAGS):
        budgets = [(Budget if dp else ZCDPBudget)(v, args.delta) for v in values]
    require_selection_delta(args.delta)
    return budgets


def build_cache(args, options, cache_dir: str) -> None:
    """Reads and tokenises the input once: one JSON line [user, [items…]] per user."""
    with job_pipeline(options) as p:
        _ = (p
             | "ReadUserItems" >> read_input(ReadUserItems, args)
             | "GroupByUser" >> beam.GroupByKey()
             | "UserItems" >> beam.MapTuple(lambda user, records: (
                 user, [item for record in records for item in items_of(record)]))
             | "HoldingItems" >> beam.Filter(lambda user_items: len(user_items[1]) > 0)
             | "AsJson" >> beam.Map(json.dumps)
             | "WriteCache" >> beam.io.WriteToText(os.path.join(cache_dir, "users"),
                                                   file_name_suffix=".jsonl"))


_CACHE_VERSION = 1  # the cache's layout (how the input is read: READING_RULES_VERSION)


def _file_digest(path: str) -> str:
    """sha256 of a file's bytes as stored (not decompressed)."""
    digest = hashlib.sha256()
    with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _cache_key(args) -> dict:
    """Everything that decides what the cache holds (the reading rules read at call time)."""
    return {"version": _CACHE_VERSION, "reading_rules": formats.READING_RULES_VERSION,
            "files": [[path, _file_digest(path)] for path in sorted(args.files)],
            "format": args.format, "user_field": args.user_field,
            "text_field": args.text_field, "items_field": getattr(args, "items_field", None),
            "skip_header_lines": args.skip_header_lines, "keep_case": args.keep_case,
            "keep_urls": args.keep_urls}


def _cache_is_complete(cache_dir: str, key: dict) -> bool:
    # The key file is written last, so an interrupted build does not count.
    try:
        with open(os.path.join(cache_dir, "key.json"), encoding="utf-8") as f:
            return json.load(f) == key and bool(_cache_files(cache_dir))
    except (OSError, ValueError):
        return False


def _cache_files(cache_dir: str) -> list[str]:
    return sorted(glob.glob(os.path.join(cache_dir, "users-*.jsonl")))


def _cached_item_lists(cache_dir: str):
    for path in _cache_files(cache_dir):
        with open(path, encoding="utf-8") as f:
            for line in f:
                if line.strip():
                    yield json.loads(line)[1]


def count_users(cache_dir: str) -> int:
    """Users in the cache: a raw count, for the evaluation summary."""
    return sum(1 for _ in _cached_item_lists(cache_dir))


def _mean_std(values) -> tuple[float, float]:
    return statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else 0.0


def _mechanism_line(mechanism) -> str:
    params = {k: v for k, v in mechanism.to_dict().items()
              if k not in ("name", "public_counts") and v is not None}
    if "max_items_per_user" in params:
        params["Δ0"] = params.pop("max_items_per_user")
    text = ", ".join(f"{k} = {v:g}" if isinstance(v, float) else f"{k} = {v}"
                     for k, v in params.items())
    return f"* `{mechanism.name}`: {text}"


def _summary(job, rows: list[dict], users: int, dataset: str) -> str:
    """summary.md: what was evaluated on which data, then released items per cell."""
    budgets, k, trials = job.budgets, job.args.k_anonymity, job.args.trials
    dp = isinstance(budgets[0], Budget)
    values = ", ".join(f"{b.epsilon if dp else b.rho:g}" for b in budgets)
    grid = ("(ε, δ)-DP with ε ∈ {" if dp else "δ-approximate ρ-zCDP with ρ ∈ {") + values + "}"
    lines = ["# Evaluation summary", "",
             "**For evaluation only.** This evaluation releases from the same data once per "
             "mechanism, budget and trial: the privacy loss of the whole evaluation is the sum "
             "of all those releases, and the user count, missing mass and coverage figures are "
             "raw (not private). It is for comparing mechanisms only; publish nothing from it.",
             "", f"* Data set: {dataset} (`{job.args.input}`), {users:,} users (raw count)",
             f"* Budgets (user-level): {grid}, δ = {budgets[0].delta:g}; "
             f"{trials} trial{'s' * (trials != 1)} each, fresh randomness per trial",
             "* Mechanisms:"]
    lines += ["  " + _mechanism_line(m) for m in job.mechanisms]
    lines += ["", "Released items, mean ± standard deviation over trials.", "",
              "| mechanism | budget | trials | released | missing mass (raw) | wall seconds |"
              + (f" coverage of items held by ≥ {k} users |" if k else ""),
              "|---|---|---|---|---|---|" + ("---|" if k else "")]
    groups: dict = {}
    for row in rows:
        groups.setdefault((row["mechanism"], row["budget"]), []).append(row)
    for (mechanism, budget), group in groups.items():
        m, s = _mean_std([r["released"] for r in group])
        mm, mms = _mean_std([r["missing_mass"] for r in group])
        line = (f"| {mechanism} | {budget} | {len(group)} | {m:,.1f} ± {s:,.1f} | "
                f"{100 * mm:.1f}% ± {100 * mms:.1f}% | "
                f"{statistics.fmean(r['wall_seconds'] for r in group):.1f} |")
        if k:
            c, cs = _mean_std([r["k_anonymity_coverage"] for r in group])
            line += f" {100 * c:.1f}% ± {100 * cs:.1f}% |"
        lines.append(line)
    coverage = (f" and the coverage (the share of the items held by ≥ {k} users that the run "
                "released)" if k else "")
    lines += ["", "Missing mass: the share of the input's distinct (user, item) pairs whose "
                  f"item is not released (Dick, Joseph & Raman, ICLR 2026). It{coverage} "
                  f"{'use' if k else 'uses'} raw (non-private) counts of who holds "
                  f"each item. {NON_PRIVATE_NOTE} For evaluation only."]
    return "\n".join(lines) + "\n"


def _write_plot(rows: list[dict], path: str, x_name: str, title: str) -> None:
    import matplotlib  # present: prepare checked it before any work
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(7, 4.5))
    curves: dict = {}
    for r in rows:
        curves.setdefault(r["mechanism"], {}).setdefault(r["x"], []).append(r["released"])
    for mechanism, points in curves.items():
        xs = sorted(points)
        means, stds = zip(*(_mean_std(points[x]) for x in xs))
        ax.errorbar(xs, means, yerr=stds, marker="o", capsize=3, label=mechanism)
    ax.set_xlabel(x_name)
    ax.set_ylabel("released items")
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def prepare(argv, prog: str = PROG):
    """Everything checked before any work: flags, grid, mechanisms, matplotlib, input."""
    args, options = parse_job_args(build_parser(prog), argv)
    budgets = _budgets(args)
    for flag, value in (("--trials", args.trials), ("--k-anonymity", args.k_anonymity)):
        if value is not None and value < 1:
            raise UsageError(f"{flag} must be >= 1, got {value}")
    if "://" in args.output:
        raise UsageError(f"--output must be a local folder, got {args.output!r}")
    if args.cache_dir and (os.path.abspath(args.cache_dir) + os.sep).startswith(
            os.path.abspath(args.output) + os.sep):
        raise UsageError("--cache-dir must not be inside --output: the output folder is "
                         "written whole and replaced as a whole")
    mechanisms = [mechanism_from_args(args, name, ignore_unused=True)
                  for name in comma_list(args.mechanisms, "--mechanisms", canonical_name,
                                         "mechanisms")]
    with flag_errors(**_GRID_FLAGS):
        for budget, mechanism in itertools.product(budgets, mechanisms):  # before any run
            check_calibrates(mechanism, budget)
    if not args.no_plot:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            raise UsageError("utility.png needs matplotlib: pip install -e '.[plot]', or "
                             "give --no-plot") from None
    args.files = resolve_input(args, formats.FORMATS)
    if args.cache_dir:  # created here, once everything else is checked
        check_scratch_folder(args.cache_dir, "--cache-dir")
    return SimpleNamespace(args=args, options=options, budgets=budgets, mechanisms=mechanisms,
                           output=args.output, overwrite=args.overwrite,
                           inputs=args.files + [args.cache_dir or ""])


def run_prepared(job) -> str:
    args, options, budgets, mechanisms = job.args, job.options, job.budgets, job.mechanisms
    with scratch_folder(args.cache_dir, "beam_dpsu_eval_") as work_dir:
        out = staging_of(job)  # put in place as --output when the job ends
        key = _cache_key(args) if args.cache_dir else None
        digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]
        cache_dir = os.path.join(work_dir, f"cache-{digest}" if key else "cache")
        if key is not None and _cache_is_complete(cache_dir, key):
            progress(f"using the cache in {cache_dir}")
        else:
            progress(f"reading and tokenising {args.input} into "
                     + (cache_dir if args.cache_dir else "a temporary cache") + " …")
            start = time.perf_counter()
            # A build that did not finish may have left shards a new one would not replace.
            shutil.rmtree(cache_dir, ignore_errors=True)
            build_cache(args, options, cache_dir)
            if key is not None:
                with open(os.path.join(cache_dir, "key.json"), "w", encoding="utf-8") as f:
                    json.dump(key, f, sort_keys=True)
            progress(f"cached the input in {time.perf_counter() - start:.1f} s")
        users = count_users(cache_dir)
        # Raw counts (NOT private), for the missing mass and coverage figures.
        holders = pair_counts(_cached_item_lists(cache_dir))
        frequent = ({item for item, n in holders.items() if n >= args.k_anonymity}
                    if args.k_anonymity else None)
        rows = []
        total = len(mechanisms) * len(budgets) * args.trials
        out_prefix = os.path.join(work_dir, "released")
        for mechanism, budget, trial in itertools.product(mechanisms, budgets,
                                                          range(1, args.trials + 1)):
            dp = isinstance(budget, Budget)
            label = f"eps={budget.epsilon:g}" if dp else f"rho={budget.rho:g}"
            start = time.perf_counter()  # one run, with fresh randomness
            with job_pipeline(options) as p:
                _ = (p
                     | "ReadCache" >> beam.io.ReadFromText(
                         os.path.join(cache_dir, "users-*.jsonl"))
                     | "AsRecords" >> beam.Map(lambda line: tuple(json.loads(line)))
                     | "SelectItems" >> SelectItems(mechanism, budget,
                                                    hot_key_fanout=args.hot_key_fanout)
                     | "WriteReleased" >> WriteReleased(out_prefix, file_name_suffix=".txt"))
            seconds = time.perf_counter() - start
            # The items, unescaped: their lines escape backslashes and line breaks.
            released = set(read_released(out_prefix + "-*.txt"))
            for path in glob.glob(out_prefix + "-*.txt"):
                os.remove(path)
            row = {"mechanism": mechanism.name, "budget": label,
                   "x": budget.epsilon if dp else budget.rho, "trial": trial,
                   "released": len(released),
                   "missing_mass": round(missing_mass(holders, released), 6),
                   "wall_seconds": round(seconds, 3)}
            if frequent is not None:
                row["k_anonymity_coverage"] = (len(frequent & released) / len(frequent)
                                               if frequent else math.nan)
            rows.append(row)
            progress(f"[{len(rows)}/{total}] {mechanism.name} {label} trial {trial}/{args.trials}: "
                     f"{plural(len(released), 'item')} in {seconds:.1f} s")
        fields = ["mechanism", "budget", "trial", "released", "missing_mass", "wall_seconds"]
        with open(os.path.join(out, "results.csv"), "w", newline="", encoding="utf-8") as f:
            writer = csv.DictWriter(f, extrasaction="ignore", fieldnames=fields + (
                ["k_anonymity_coverage"] if frequent is not None else []))
            writer.writeheader()
            writer.writerows(rows)
        dataset = args.dataset or os.path.basename(args.input.rstrip("/"))
        with open(os.path.join(out, "summary.md"), "w", encoding="utf-8") as f:
            f.write(_summary(job, rows, users, dataset))
        written = ["results.csv", "summary.md"]
        if not args.no_plot:
            x_name = "ε" if isinstance(budgets[0], Budget) else "ρ (zCDP)"
            _write_plot(rows, os.path.join(out, "utility.png"), x_name,
                        f"Released items vs {x_name} on {dataset} (δ = {args.delta:g})")
            written.append("utility.png")
    return (f"evaluated {plural(total, 'run')} ({plural(len(mechanisms), 'mechanism')} × "
            f"{plural(len(budgets), 'budget')} × {plural(args.trials, 'trial')}) on "
            f"{dataset}; wrote {', '.join(written)} to {args.output}")


def main(argv=None, prog: str = PROG) -> int:
    return run_job("evaluate", argv, functools.partial(prepare, prog=prog), run_prepared)


if __name__ == "__main__":
    end_program(main())
