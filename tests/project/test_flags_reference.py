"""docs/reference/flags.md is the jobs' own ``--help``, generated from their parsers.

After changing a flag, write the page again (and commit it)::

    python -m tests.project.test_flags_reference
"""

from __future__ import annotations

import os
import sys
from unittest import mock

from tests.support.paths import ROOT

PAGE = os.path.join(ROOT, "docs", "reference", "flags.md")
WIDTH = "100"  # argparse wraps --help to $COLUMNS: fixed, so the page does not vary

# (title, module, what it is), in the order of the page.
JOBS = (
    ("beam-dpsu", "pipelines.command", "the console command: the jobs as subcommands"),
    ("beam-dpsu vocabulary", "pipelines.vocabulary", "releases a vocabulary"),
    ("beam-dpsu ngrams", "pipelines.ngrams", "releases n-grams (DPNE)"),
    ("beam-dpsu evaluate", "pipelines.evaluation.evaluate",
     "evaluation only: mechanisms over a budget grid, with trials"),
    ("python -m pipelines.evaluation.benchmark", "pipelines.evaluation.benchmark",
     "evaluation only: the jobs' speed against reading their input"),
    ("python -m pipelines.evaluation.peers", "pipelines.evaluation.peers",
     "evaluation only: PipelineDP's partition selection beside ours"),
    ("python -m pipelines.evaluation.max_items", "pipelines.evaluation.max_items",
     "evaluation only: `max_items_per_user=\"auto\"` against a grid of fixed Δ0"),
)

HEADER = """# The jobs' flags

Every flag of every job, with its default, exactly as the job's `--help`
prints it (generated from the jobs' argparse parsers by
`python -m tests.project.test_flags_reference`; the suite checks that this
page matches them). Beam's own pipeline options (`--runner` and the runners'
flags) mix in: see [the jobs](../jobs.md) and
[run on Dataflow, Flink, Spark](../how-to/runners.md).
"""


def help_text(module_name: str, prog: str) -> str:
    import importlib
    module = importlib.import_module(module_name)
    parser = module.build_parser()
    parser.prog = prog
    with mock.patch.dict(os.environ, {"COLUMNS": WIDTH}):
        return parser.format_help().rstrip() + "\n"


def page() -> str:
    parts = [HEADER]
    for title, module, what in JOBS:
        parts.append(f"\n## {title}\n\n{what[0].upper() + what[1:]} (`{module}`).\n\n"
                     f"```text\n{help_text(module, title)}```\n")
    return "".join(parts)


def test_the_flags_page_is_the_parsers_help():
    with open(PAGE, encoding="utf-8") as f:
        committed = f.read()
    assert committed == page(), ("docs/reference/flags.md differs from the jobs' --help: "
                                 "write it again with python -m tests.project.test_flags_reference")


def test_every_job_is_on_the_page():
    from tests.support.job_flags import job_parsers
    modules = {module for _, module, _ in JOBS}
    named = {"vocabulary": "pipelines.vocabulary", "ngrams": "pipelines.ngrams",
             "evaluate": "pipelines.evaluation.evaluate",
             "benchmark": "pipelines.evaluation.benchmark",
             "delta0_benchmark": "pipelines.evaluation.max_items",
             "command": "pipelines.command", "benchmark_peers": "pipelines.evaluation.peers"}
    assert {named[job] for job in job_parsers()} <= modules


if __name__ == "__main__":
    with open(PAGE, "w", encoding="utf-8") as f:
        f.write(page())
    print(f"wrote {os.path.relpath(PAGE, ROOT)}", file=sys.stderr)
