"""How fast the jobs run, against reading their input: wall time, pairs/s and peak memory.

    python -m pipelines.evaluation.benchmark --job vocabulary \\
        --mechanisms weighted-gaussian,policy-gaussian,sips,gw -- \\
        --input data/imdb_50k_reviews.csv.gz --user-field @row --text-field review \\
        --rho 0.1 --delta 1e-5 --max-items-per-user 100

Everything after ``--`` is the job's own command line (without ``--output``
and, for the vocabulary job, without ``--mechanism``). The pair count, times
and memory are raw figures of the input, not private: for evaluation only.
Method: docs/explanation/reading.md#the-benchmark.
"""

from __future__ import annotations

import importlib
import itertools
import json
import os
import statistics
import shutil
import subprocess
import sys
import tempfile
import time
from types import SimpleNamespace

from pipelines.flags import flags, JobArgumentParser
from pipelines.errors import UsageError
from pipelines.evaluation.lists import comma_list
from pipelines.progress import progress
from pipelines.job_runner import check_scratch_folder, read_json, run_job, scratch_folder
from pipelines.interrupts import end_program
import apache_beam as beam  # noqa: E402

from beam_dpsu.core.checks import canonical_name  # noqa: E402

PROG = "python -m pipelines.evaluation.benchmark"
JOBS = ("vocabulary", "ngrams")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def build_parser() -> JobArgumentParser:
    parser = JobArgumentParser(
        prog=PROG,
        description="Time a job against a read-only pipeline over the same files, in fresh "
                    "processes on this machine: wall time, its ratio to reading, pairs per "
                    "second and peak memory; optionally against another checkout (--before). "
                    "Give the job's own flags after --.",
        examples=[
            f"{PROG} --job vocabulary --mechanisms weighted-gaussian,sips -- --input "
            "examples/imdb_2k.csv.gz --user-field user --text-field review --rho 0.1 "
            "--delta 1e-5 --max-items-per-user 100",
            f"{PROG} --job ngrams --before /tmp/before -- --input "
            "data/msnbc990928.zip --max-n 6 --max-items-per-user 10 --epsilon 1 "
            "--delta 1e-7"], beam_options=False)
    g = parser.add_argument_group("benchmark")
    g.add_argument(*flags("job"), choices=JOBS, default="vocabulary",
                   help="the job to time")
    g.add_argument(*flags("mechanisms"), default="weighted-gaussian", metavar="M[,M…]",
                   help="vocabulary job: the mechanisms to time, one job run each")
    g.add_argument(*flags("max-items-values"), metavar="V[,V…]",
                   help="vocabulary job: time each mechanism once per --max-items-per-user "
                        "value here (e.g. 100,auto), interleaved in the same run; leave "
                        "--max-items-per-user out of the job's flags")
    g.add_argument(*flags("repeats"), type=int, default=1, metavar="N",
                   help="runs of each pipeline; the fastest and the median are reported")
    g.add_argument(*flags("before"), metavar="DIR",
                   help="another checkout of the project whose job is timed too, "
                        "interleaved with this one's (same flags, same data)")
    g.add_argument(*flags("workdir"), metavar="FOLDER",
                   help="scratch folder for the jobs' outputs (default: a temporary folder, "
                        "removed at the end)")
    g.add_argument(*flags("json"), action="store_true",
                   help="print one JSON line per result instead of a table row")
    g.add_argument(*flags("read-only"), action="store_true",
                   help="run only the read-only pipeline in this process and print its pair "
                        "count as JSON (what the benchmark times)")
    return parser


def _job_flags(mechanism: str | None, max_items: str | None) -> list:
    """The flags a run adds to the job's own: its mechanism and Δ0, when given."""
    return ([] if mechanism is None else ["--mechanism", mechanism]) + (
        [] if max_items is None else ["--max-items-per-user", max_items])


def absolute_inputs(job_argv: list) -> list:
    """``job_argv`` with the values of --input/--public-input made absolute (local paths)."""
    out = list(job_argv)
    for i, arg in enumerate(out):
        flag, eq, value = arg.partition("=")
        if flag not in ("--input", "--public-input", "--public_input"):
            continue
        if eq and "://" not in value:
            out[i] = f"{flag}={os.path.abspath(value)}"
        elif not eq and i + 1 < len(out) and "://" not in out[i + 1]:
            out[i + 1] = os.path.abspath(out[i + 1])
    return out


def prepare(argv):
    argv = list(sys.argv[1:] if argv is None else argv)
    split = argv.index("--") if "--" in argv else len(argv)
    args = build_parser().parse_args(argv[:split])  # --help, and the benchmark's own flags
    if split == len(argv):
        raise UsageError("give the job's own flags after --, e.g. -- --input FILE "
                         "--rho 0.1 --delta 1e-5")
    job_argv = argv[split + 1:]
    if args.repeats < 1:
        raise UsageError(f"--repeats must be >= 1, got {args.repeats}")
    if any(a == "--output" or a.startswith("--output=") for a in job_argv):
        raise UsageError("leave --output out of the job's flags: the benchmark writes to "
                         "its scratch folder")
    if args.before and not os.path.isdir(os.path.join(args.before, "pipelines")):
        raise UsageError(f"--before {args.before!r} is not a checkout of this project "
                         "(no pipelines/ folder)")
    # The jobs run in their checkout's folder (--before's too): input paths made absolute.
    job_argv = absolute_inputs(job_argv)
    mechanisms = comma_list(args.mechanisms, "--mechanisms", canonical_name, "mechanisms")
    if args.job == "ngrams":
        mechanisms = [None]
    max_items = [None]
    if args.max_items_values:
        if args.job != "vocabulary" or any(
                a.split("=")[0] in ("--max-items-per-user", "--max_items_per_user")
                for a in job_argv):
            raise UsageError("--max-items-values: vocabulary job only, without "
                             "--max-items-per-user among the job's flags")
        max_items = comma_list(args.max_items_values, "--max-items-values")
    # The job's own parser checks its flags and the input before anything runs.
    module = importlib.import_module(f"pipelines.{args.job}")
    probe = ["--output", os.path.join(tempfile.gettempdir(), "beam_dpsu_benchmark_probe")]
    for mechanism, value in itertools.product(mechanisms, max_items):
        job_args = module.parse_args(job_argv + _job_flags(mechanism, value) + probe)[0]
    if args.workdir and not args.read_only:  # created here, once everything else is checked
        check_scratch_folder(args.workdir, "--workdir")
    return SimpleNamespace(args=args, job_argv=job_argv, mechanisms=mechanisms,
                           max_items=max_items, job_args=job_args, output=None)


def _run_read_only(job) -> str:
    """Reads, parses and tokenises every record; prints the (user, item) pair count."""
    from pipelines.settings import read_input
    from pipelines.io.read import ReadDocuments, ReadUserItems, items_of
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "pairs.txt")
        with beam.Pipeline() as pipeline:
            read = ReadUserItems if job.args.job == "vocabulary" else ReadDocuments
            _ = (pipeline
                 | "Read" >> read_input(read, job.job_args)
                 | "PairsPerRecord" >> beam.Map(lambda e: len(items_of(e[1])))
                 | "SumPairs" >> beam.CombineGlobally(sum)
                 | "Write" >> beam.io.WriteToText(path, shard_name_template=""))
        pairs = read_count(path)
    print(json.dumps({"pairs": pairs}), flush=True)
    return ""


def read_count(path: str) -> int:
    """The number a one-line count file written by a pipeline holds."""
    with open(path, encoding="utf-8") as f:
        return int(f.read().strip() or 0)


def time_process(command, cwd: str, log_path: str) -> tuple[float, float]:
    """Runs ``command`` in a fresh process; (wall seconds, peak RSS in MiB); raises on failure."""
    with open(log_path, "w", encoding="utf-8") as log:
        start = time.perf_counter()
        process = subprocess.Popen(command, cwd=cwd, env=dict(os.environ, PYTHONPATH=cwd),
                                   stdout=log, stderr=log)
        _, status, usage = os.wait4(process.pid, 0)
        wall = time.perf_counter() - start
        process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        with open(log_path, encoding="utf-8") as log:
            lines = [line for line in log.read().splitlines() if line.strip()]
        raise UsageError(f"{' '.join(command[:3])} failed (exit {process.returncode}): "
                         f"{lines[-1] if lines else 'no output'}; see {log_path}")
    # ru_maxrss: KiB on Linux, the largest process of the tree that was waited for.
    return wall, usage.ru_maxrss / 1024.0


def _released(job: str, output: str) -> int:
    report = read_json(os.path.join(output, "report.json"))
    return report["released_items" if job == "vocabulary" else "released_ngrams"]


def run_prepared(job) -> str:
    args = job.args
    if args.read_only:
        return _run_read_only(job)
    with scratch_folder(args.workdir, "beam_dpsu_benchmark_") as workdir:
        # Each round runs every pipeline once (this checkout's reader for both codes), so
        # a machine that slows down or speeds up during the run weighs on all alike.
        # Each pipeline: (label, code, checkout, log name, output folder, command).
        pipelines: list = [("read-only", "read-only", ROOT, "read-only", None, [
            sys.executable, "-m", "pipelines.evaluation.benchmark", "--read-only", "--job",
            args.job, "--", *job.job_argv])]
        codes = [("this", ROOT)] + ([("before", os.path.abspath(args.before))]
                                    if args.before else [])
        for mechanism, value, (code, root) in itertools.product(job.mechanisms, job.max_items,
                                                                codes):
            label = (mechanism or "dpne") + ("" if value is None else f" Δ0={value}")
            name = f"{code}-{mechanism or args.job}-{value}"
            output = os.path.join(workdir, name)
            pipelines.append((label, code, root, name, output, [
                sys.executable, "-m", f"pipelines.{args.job}", *job.job_argv, "--output",
                output, *_job_flags(mechanism, value)]))
        results: dict = {(label, code): [] for label, code, *_ in pipelines}
        for i in range(args.repeats):
            for label, code, root, name, output, command in pipelines:
                log = os.path.join(workdir, f"{name}-{i}.log")
                if output is not None:
                    # A job refuses an output folder that holds files (and --before's
                    # checkout may not know --overwrite): each run starts without one.
                    shutil.rmtree(output, ignore_errors=True)
                wall, rss = time_process(command, root, log)
                if output is None:  # the read-only run, which prints its pair count
                    with open(log, encoding="utf-8") as f:
                        pairs = json.loads(f.read().strip().splitlines()[-1])["pairs"]
                results[label, code].append(
                    (wall, rss, None if output is None else _released(args.job, output)))
            if args.repeats > 1:
                progress(f"round {i + 1} of {args.repeats}: every pipeline ran once")
    read_walls = [run[0] for run in results["read-only", "read-only"]]
    progress(f"read-only: {pairs:,} pairs in {min(read_walls):.1f} s (peak "
             f"{max(r[1] for r in results['read-only', 'read-only']):,.0f} MiB; "
             "non-private figures, for evaluation only)")
    if not args.json:
        print("NON-PRIVATE figures of the input and the run (pairs, times, memory): for "
              "evaluation only", flush=True)
        print(f"{'mechanism':>24} {'code':>9} {'wall s':>8} {'median':>8} {'× read':>7} "
              f"{'× rounds':>8} {'pairs/s':>11} {'peak MiB':>9} {'released':>9}", flush=True)
    for (mechanism, code), runs in results.items():
        wall, median = min(r[0] for r in runs), statistics.median(r[0] for r in runs)
        rss, released = max(r[1] for r in runs), runs[-1][2]
        ratios = [run[0] / read for run, read in zip(runs, read_walls)]
        result = {"job": args.job, "mechanism": mechanism, "code": code, "pairs": pairs,
                  "wall_seconds": round(wall, 2), "median_seconds": round(median, 2),
                  "ratio_to_read": round(wall / min(read_walls), 2),
                  "median_round_ratio_to_read": round(statistics.median(ratios), 2),
                  "pairs_per_second": round(pairs / wall), "peak_mib": round(rss),
                  "released": released}
        if args.json:
            print(json.dumps({**result, "non_private": True}), flush=True)
            continue
        shown = "" if released is None else f"{released:,}"
        print("{mechanism:>24} {code:>9} {wall_seconds:>8.1f} {median_seconds:>8.1f} "
              "{ratio_to_read:>7.2f} {median_round_ratio_to_read:>8.2f} {pairs_per_second:>11,} "
              "{peak_mib:>9,} {shown:>9}".format(**result, shown=shown), flush=True)
    return ""


def main(argv=None) -> int:
    return run_job("benchmark", argv, prepare, run_prepared)


if __name__ == "__main__":
    end_program(main())
