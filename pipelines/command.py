"""The console command ``beam-dpsu``: each job as a subcommand.

    beam-dpsu vocabulary --input examples/imdb_2k.csv.gz --user-field user \\
        --text-field review --rho 0.1 --delta 1e-5 --output out/vocabulary
    beam-dpsu ngrams --input data/msnbc990928.zip --max-n 6 --epsilon 1 --delta 1e-7 \\
        --output out/ngrams
    beam-dpsu evaluate --input … --mechanisms weighted-gaussian,sips --epsilons 1,2 \\
        --delta 1e-5 --output eval/

``beam-dpsu JOB FLAGS…`` is ``python -m MODULE FLAGS…``, MODULE the job's: the
same flags, output, messages and exit codes. A job's module (and with it Beam)
is imported only once its subcommand is known, so ``--help``, ``--version`` and
a mistyped subcommand answer at once (docs/explanation/jobs.md#running-a-job).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from types import ModuleType
from typing import NamedTuple, Sequence

from pipelines.interrupts import end_program, install_start_handler

__all__ = ["PROG", "JOBS", "build_parser", "job_module", "main"]

PROG = "beam-dpsu"


class Job(NamedTuple):
    """A subcommand: the module of the job (its ``main``) and its help line."""

    module: str
    summary: str


JOBS = {
    "vocabulary": Job("pipelines.vocabulary",
                      "release the distinct words (or items) of a user corpus"),
    "ngrams": Job("pipelines.ngrams",
                  "release the n-grams (lengths 1 to T) of a user corpus, with DPNE"),
    "evaluate": Job("pipelines.evaluation.evaluate",
                    "compare mechanisms' releases over a budget grid (evaluation only)"),
}


def build_parser() -> argparse.ArgumentParser:
    """The parser behind ``beam-dpsu --help`` (dispatch is by the first word)."""
    width = max(map(len, JOBS))
    commands = "\n".join(f"  {name:<{width}}  {job.summary}" for name, job in JOBS.items())
    parser = argparse.ArgumentParser(
        prog=PROG, usage=f"{PROG} [--help] [--version] COMMAND [FLAGS …]",
        description="Differentially private set union on Apache Beam. Each command runs one "
                    f"job;\n'{PROG} COMMAND --help' lists its flags.\n\ncommands:\n{commands}",
        epilog=f"'{PROG} COMMAND …' is the same as 'python -m MODULE …', MODULE the "
               "command's:\n" + ", ".join(job.module for job in JOBS.values()) + ".",
        formatter_class=argparse.RawDescriptionHelpFormatter, add_help=False)
    parser.add_argument("-h", "--help", action="store_true", help="show this help and exit")
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    return parser


def job_module(name: str) -> ModuleType:
    """The module of job ``name`` (imported now: it imports Beam)."""
    return importlib.import_module(JOBS[name].module)


def _choices() -> str:
    *names, last = JOBS
    return ", ".join(names) + f" or {last}"


def _usage_error(message: str) -> int:
    print(f"error: {message} (see {PROG} --help)", file=sys.stderr)
    return 2  # a bad command line, as argparse exits


def main(argv: Sequence[str] | None = None) -> int:
    """Runs ``beam-dpsu COMMAND FLAGS…``; returns the exit code.

    Args:
      argv: the command line without the program name (None: ``sys.argv[1:]``).

    Returns:
      0 on success (and for ``--help``, ``--version``), 2 for a bad command line
      (one ``error: …`` line on stderr), 130 when interrupted, else the job's own;
      with ``argv`` None it does not return: the process ends with that code.
    """
    if argv is None:
        install_start_handler()
        end_program(_main(sys.argv[1:]))
    return _main(argv)


def _main(argv: Sequence[str]) -> int:
    if not argv:
        return _usage_error(f"give a command: {_choices()}")
    command, *rest = argv
    if command in ("-h", "--help"):
        print(build_parser().format_help(), end="")
        return 0
    if command == "--version":
        from beam_dpsu import __version__
        print(f"{PROG} {__version__}")
        return 0
    if command not in JOBS:
        what = "option" if command.startswith("-") else "command"
        return _usage_error(f"unknown {what} {command!r}: the commands are {_choices()}")
    try:
        module = job_module(command)  # imports Beam: seconds
        return module.main(rest, prog=f"{PROG} {command}")
    except KeyboardInterrupt:
        # The jobs handle their own interrupts once running; this is the import.
        print("interrupted", file=sys.stderr, flush=True)
        return 130  # 128 + SIGINT, as the jobs exit
    except SystemExit as exc:  # argparse's exit after a job's --help: a code to return
        if exc.code is None or isinstance(exc.code, int):
            return exc.code or 0
        raise


if __name__ == "__main__":
    sys.exit(main())
