"""SIGINT and SIGTERM while a job runs: one line ``interrupted``, exit 128 + signal.

The output folder is put in place or removed whole whatever the moment of the
signal (:meth:`Interrupts.held`; docs/privacy.md, invariants: one folder, one
release). Before the job runs, while its module imports Beam (seconds), the
same line and exit code come from :func:`quiet_start`'s handler, installed by
the ``pipelines`` package before it imports anything else; after the job,
:func:`end_program` keeps it in place until the process has ended. Only the
interpreter's own start (before any of this package runs) is left to the
signals' default actions.
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
        if arg == "-m":
            return argv[i + 1] if i + 1 < len(argv) else ""
        if arg.startswith("-m"):
            return arg[2:]
        if not arg.startswith("-") or arg.startswith("-c"):
            return ""  # a script or a command: no module
        i += 2 if arg in ("-X", "-W") else 1
    return ""


def interrupted_line() -> str:
    """What a job says when a signal ends it: ``interrupted``, or, once its release is in
    place, that the release is complete (so that nobody runs the job again for it, which
    would spend the budget again)."""
    done = INTERRUPTS.released_to
    if done is None:
        return "interrupted"
    return (f"interrupted after the release was complete: {done} holds it (running the "
            "job again would spend the budget again)")


def _exit_while_starting(signum, _frame):
    try:
        sys.stderr.write(interrupted_line() + "\n")
        sys.stderr.flush()
    finally:
        # Before the job: nothing written yet, no import to finish. After it: the
        # output is in place (or gone) and the summary printed.
        os._exit(128 + signum)


def end_program(code: int) -> NoReturn:
    """Ends a job run as a program with exit ``code``, once the job has returned.

    Python's own shutdown (seconds with Beam loaded) resets the signals to their
    default actions part-way, so a signal then ended the process by the signal
    (or, during the exit callbacks, printed ``Exception ignored … KeyboardInterrupt``
    and exited 0). Instead the exit callbacks run here with the start handler in
    place (a signal: ``interrupted``, 128 + the signal), the streams are flushed,
    and the process ends without the interpreter's teardown.
    """
    import atexit
    for sig in (signal.SIGINT, signal.SIGTERM):
        if signal.getsignal(sig) is not signal.SIG_IGN:  # ignored (nohup, &) stays so
            signal.signal(sig, _exit_while_starting)
    try:
        atexit._run_exitfuncs()  # what the interpreter's exit would call (logging too)
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):  # a closed pipe: nothing more to say
                pass
        os._exit(code if isinstance(code, int) else 1)


def quiet_start(argv=None) -> bool:
    """In a job started as ``python -m pipelines.JOB``: a SIGINT or SIGTERM before the
    job runs (while its module imports Beam) prints ``interrupted`` and exits with
    128 + the signal, as an interrupt of the running job does, instead of a
    ``KeyboardInterrupt`` traceback from inside the import. Called when the
    ``pipelines`` package is imported, the job module's first import; the job's
    :class:`Interrupts` take over while it runs. Returns whether it installed
    the handler (not in other programs, nor where a handler is already set).
    """
    module = _started_module(sys.orig_argv if argv is None else argv)
    if not module.startswith("pipelines.") or module in _NOT_JOBS:
        return False
    return install_start_handler()


def install_start_handler() -> bool:
    """Installs :func:`quiet_start`'s handler for SIGINT and SIGTERM where they have
    their default actions (in the main thread only); returns whether it did (for a
    program that starts jobs otherwise, e.g. the ``beam-dpsu`` command)."""
    if threading.current_thread() is not threading.main_thread():
        return False
    installed = False
    for sig in (signal.SIGINT, signal.SIGTERM):
        if signal.getsignal(sig) in (signal.default_int_handler, signal.SIG_DFL):
            signal.signal(sig, _exit_while_starting)
            installed = True
    return installed


class Interrupts:
    """SIGINT and SIGTERM while a job runs (a context manager around the job).

    The first signal is recorded and raised as ``KeyboardInterrupt`` wherever
    the job is (Beam re-raises it from a step as a ``RuntimeError``, which is
    why the signal is recorded rather than recognised by the exception's
    type), and logging stops, so that Beam's ERROR log of the interrupted step
    and its threads' lines do not follow. Later signals are ignored while the
    job cleans up. Once the output is being put in place (:meth:`held`) a
    signal is too late to stop it: the job then completes.

    ``on_interrupt`` holds what else the first signal must stop, called with no
    argument before the interrupt is raised: the worker processes of the
    multi-process mode, which Beam waits for before the job can clean up
    (``pipelines.worker.WORKERS``).
    """

    def __init__(self):
        self.signal: int | None = None
        # The output folder once the release is in place there (set by the output folder's
        # commit; kept after the job, until the process ends).
        self.released_to: str | None = None
        self._held, self._pending = False, None
        self._previous: dict = {}
        self.on_interrupt: list = []

    def __enter__(self):
        self.signal, self._held, self._pending = None, False, None
        self.released_to = None
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
        """A signal inside the block waits until it ends, then interrupts (or, without
        ``then_raise``, is dropped: the block put the output in place or cleaned up)."""
        self._held, self._pending = True, None
        try:
            yield
        finally:
            self._held = False
        if then_raise and self._pending is not None and self.signal is None:
            self._interrupt(self._pending)

    def exit_code(self) -> int:
        """128 + the signal that interrupted the job (SIGINT when it was a KeyboardInterrupt
        from elsewhere)."""
        return 128 + (self.signal or signal.SIGINT)


INTERRUPTS = Interrupts()
