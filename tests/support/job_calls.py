"""Jobs run in this process: ``pipelines.JOB.main(argv)`` with stdout and stderr captured,
answered as :mod:`tests.support.job_processes` answers a subprocess run (a
``CompletedProcess``), so that the checks of :mod:`tests.support.job_checks`
(``assert_refused``, ``assert_ran``) apply.

A run costs the pipeline's own time only (a subprocess adds Python's and Beam's imports,
about 3 s). What a real process would print on stderr is printed here too: the job's
progress and error lines; every log record of level WARNING or above that reaches the
root logger, written as Python's last-resort handler writes it in a process that
configured no logging (pytest's own handlers on the root logger are set aside meanwhile);
and Python's warnings, under the interpreter's default filters (pytest's recording of
them is set aside meanwhile).
Tests about the process itself (signals, imports, ``python -m``) keep a subprocess.
"""

import contextlib
import importlib
import io
import logging
import math
import signal
import subprocess
import sys
import warnings

from tests.support.runner import job_args


class _Expired(Exception):
    """The job was still running at the timeout."""


@contextlib.contextmanager
def _alarm(seconds):
    """Raises ``_Expired`` in the job if it runs past ``seconds`` (None: no limit)."""
    if seconds is None:
        yield
        return

    def expire(*_):
        raise _Expired(f"the job was still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(math.ceil(seconds))
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def _print_warning(message, category, filename, lineno, file=None, line=None):
    sys.stderr.write(warnings.formatwarning(message, category, filename, lineno, line))


@contextlib.contextmanager
def _as_a_fresh_process():
    """The root logger as a process that configured no logging has it: no handlers (Python's
    last-resort handler writes WARNING and above to ``sys.stderr``), level WARNING; warnings
    filtered as ``python -m`` filters them (no -W flag) and printed on ``sys.stderr``."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    root.handlers, root.level = [], logging.WARNING
    with warnings.catch_warnings():
        warnings.resetwarnings()
        for category in (DeprecationWarning, PendingDeprecationWarning, ImportWarning,
                         ResourceWarning):
            warnings.simplefilter("ignore", category)
        warnings.simplefilter("default", append=True)
        warnings.showwarning = _print_warning
        try:
            yield
        finally:
            root.handlers, root.level = handlers, level


# The jobs that take Beam's options: run on the suite's runner unless a test names one.
_BEAM_JOBS = ("vocabulary", "ngrams", "evaluation.evaluate", "evaluation.peers")


def run(module: str, args, timeout: float | None = None) -> subprocess.CompletedProcess:
    """``pipelines.<module>.main(args)`` in this process: (exit code, stdout, stderr). An
    exit through ``SystemExit`` (``--help``, ``--version``) gives its code. A job taking
    Beam's options runs on the suite's runner (tests/support/runner.py) unless ``args``
    choose one."""
    argv = job_args(args) if module in _BEAM_JOBS else [str(a) for a in args]
    main = importlib.import_module(f"pipelines.{module}").main
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), \
            _as_a_fresh_process(), _alarm(timeout):
        try:
            code = main(argv)
        except SystemExit as exit_:  # as the interpreter ends on it
            code = exit_.code if isinstance(exit_.code, int) else 0 if exit_.code is None else 1
            if not isinstance(exit_.code, int) and exit_.code is not None:
                print(exit_.code, file=err)
    return subprocess.CompletedProcess([module, *argv], code, out.getvalue(), err.getvalue())


def vocabulary(args, timeout: float | None = None) -> subprocess.CompletedProcess:
    return run("vocabulary", args, timeout)
