"""The command-line flags the jobs (and Beam's options parser) accept."""

import re

from pipelines import command, flags, ngrams, vocabulary
from pipelines.evaluation import benchmark, evaluate
from pipelines.evaluation import max_items as delta0_benchmark

try:
    from pipelines.evaluation import peers as benchmark_peers
except ImportError:  # pragma: no cover - needs only what the jobs need
    benchmark_peers = None

FLAG = re.compile(r"--[a-z][a-z0-9_-]*")


def beam_flags() -> set:
    return set(flags.beam_option_flags())


def job_flags(parser) -> set:
    return {s for a in parser._actions for s in a.option_strings}


def job_parsers():
    parsers = {"vocabulary": vocabulary.build_parser(), "ngrams": ngrams.build_parser(),
               "evaluate": evaluate.build_parser(), "benchmark": benchmark.build_parser(),
               "delta0_benchmark": delta0_benchmark.build_parser(),
               "command": command.build_parser()}  # beam-dpsu's own (--version)
    if benchmark_peers is not None:
        parsers["benchmark_peers"] = benchmark_peers.build_parser()
    return parsers
