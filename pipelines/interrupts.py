"""SIGINT and SIGTERM while a job runs: one line ``interrupted``, exit 128 + signal.

The output folder is put in place or removed whole whatever the moment of the
signal. Details: docs/explanation/jobs.md#interrupts
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from typing import NoReturn

# No logging here: this module is imported first, before the handler is in place.

__all__ = ["Interrupts", "INTERRUPTS", "quiet_start", "install_start_handler", "end_program",
           "interrupted_line"]

# Modules run as ``python -m`` that are no job: the DirectRunner's worker processes.
_NOT_JOBS = ("pipelines.worker",)


def _started_module(argv) -> str:
    """The module of ``python … -m MODULE …`` (or ``-mMODULE``), else ""."""
    i = 1
    while i < len(argv):
        arg = argv[i]
        if arg.startswith("-m"):  # -mMODULE, or -m MODULE
            return arg[2:] or (argv[i + 1] if i + 1 < len(argv) else "")
        if not arg.startswith("-") or arg.startswith("-c"):
            return ""  # a script or a command: no module
        i += 2 if arg in ("-X", "-W") else 1
    return ""


def interrupted_line() -> str:
    """``interrupted``, or, once the release is in place, that it is complete."""
    if (done := INTERRUPTS.released_to) is None:
        return "interrupted"
    return (f"interrupted after the release was complete: {done} holds it (running the "
            "job again would spend the budget again)")


def _exit_while_starting(signum, _frame):
    try:
        sys.stderr.write(interrupted_line() + "\n")
        sys.stderr.flush()
    finally:  # before the job nothing is written; after it the output is in place
        os._exit(128 + signum)


def end_program(code: int) -> NoReturn:
    """Ends a job run as a program with exit ``code``, once the job has returned.

    The exit callbacks run with the start handler in place, then the process ends
    without the interpreter's teardown (docs/explanation/jobs.md#interrupts).
    """
    import atexit
    for sig in (signal.SIGINT, signal.SIGTERM):
        if signal.getsignal(sig) is not signal.SIG_IGN:  # ignored (nohup, &) stays so
            signal.signal(sig, _exit_while_starting)
    try:
        atexit._run_exitfuncs()  # what the interpreter's exit would call (logging too)
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError):  # a closed pipe
                stream.flush()
        os._exit(code if isinstance(code, int) else 1)


def quiet_start(argv=None) -> bool:
    """In a job started as ``python -m pipelines.JOB``: a SIGINT or SIGTERM while its
    module imports Beam prints ``interrupted`` and exits 128 + the signal.

    Returns whether it installed the handler (not in other programs, nor over one set).
    """
    module = _started_module(sys.orig_argv if argv is None else argv)
    if not module.startswith("pipelines.") or module in _NOT_JOBS:
        return False
    return install_start_handler()


def install_start_handler() -> bool:
    """Installs :func:`quiet_start`'s handler where SIGINT and SIGTERM have their default
    actions (main thread only); returns whether it did."""
    if threading.current_thread() is not threading.main_thread():
        return False
    default = [sig for sig in (signal.SIGINT, signal.SIGTERM)
               if signal.getsignal(sig) in (signal.default_int_handler, signal.SIG_DFL)]
    for sig in default:
        signal.signal(sig, _exit_while_starting)
    return bool(default)


class Interrupts:
    """SIGINT and SIGTERM while a job runs (a context manager around the job).

    The first signal is recorded (Beam re-raises a step's ``KeyboardInterrupt``
    as a ``RuntimeError``) and raised as ``KeyboardInterrupt``; later ones are
    ignored. ``on_interrupt`` holds what else it must stop (the worker processes).
    """

    def __init__(self):
        self.signal: int | None = None
        self.released_to: str | None = None  # the output, once the release is in place
        self._held, self._pending = False, None
        self._previous: dict = {}
        self.on_interrupt: list = []

    def __enter__(self):
        self.signal, self._held, self._pending, self.released_to = None, False, None, None
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc_info):
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous = {}
        import logging
        logging.disable(logging.NOTSET)
        return False

    def _handle(self, signum, _frame):
        if self._held:
            self._pending = self._pending or signum
            return
        if self.signal is None:
            self._interrupt(signum)

    def _interrupt(self, signum):
        import logging
        self.signal = signum
        logging.disable(logging.CRITICAL)
        for stop in self.on_interrupt:
            stop()
        raise KeyboardInterrupt

    @contextlib.contextmanager
    def held(self, then_raise: bool = True):
        """A signal inside the block waits until it ends, then interrupts (or is dropped)."""
        self._held, self._pending = True, None
        try:
            yield
        finally:
            self._held = False
        if then_raise and self._pending is not None and self.signal is None:
            self._interrupt(self._pending)

    def exit_code(self) -> int:
        """128 + the signal (SIGINT for another KeyboardInterrupt)."""
        return 128 + (self.signal or signal.SIGINT)


INTERRUPTS = Interrupts()
