"""Jobs run as a user runs them: ``python -m pipelines.JOB`` in a subprocess from the
repository root (what a refused or a finished run must look like:
:mod:`tests.support.job_checks`)."""

import contextlib
import os
import signal
import subprocess
import sys

from tests.support.paths import ROOT


def run(module: str, args, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", f"pipelines.{module}", *map(str, args)],
                          cwd=ROOT, capture_output=True, text=True, timeout=timeout)


@contextlib.contextmanager
def sigint_as_in_a_terminal():
    """Processes started inside get SIGINT's default action, as from a terminal.

    A shell starts a background command (``pytest … &``) with SIGINT ignored, an
    ignored signal stays ignored across exec, and a job started so keeps it ignored
    while it imports (as a program should: ``pipelines.interrupts.quiet_start``).
    A test that sends a job SIGINT checks what a user's Ctrl-C does, so it starts
    the job with the default action whatever the suite was started from.
    """
    ignored = signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    if ignored:  # a Python handler becomes the default action in an exec'd child
        signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        if ignored:
            signal.signal(signal.SIGINT, signal.SIG_IGN)


def vocabulary(args, timeout: float = 300) -> subprocess.CompletedProcess:
    return run("vocabulary", args, timeout)


def child_pids(pid: int, command_part: bytes) -> list[int]:
    """The processes whose parent is ``pid`` and whose command line holds ``command_part``
    (read from /proc: Linux)."""
    pids = []
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                command = f.read()
        except (OSError, ValueError, IndexError):
            continue
        if ppid == pid and command_part in command:
            pids.append(int(entry))
    return pids


def interrupt_once_imported(argv, first_line: str, sig) -> tuple[int, str, str]:
    """Runs ``python argv`` with Python's import log on stderr and sends ``sig`` once a
    line of that log starts with ``first_line``; returns (exit code, stdout, stderr).

    At PYTHONVERBOSE level 2 (every path tried) the imports write megabytes, so the
    process blocks on the full pipe until the signal: the log says when, not a clock."""
    with sigint_as_in_a_terminal():
        proc = subprocess.Popen([sys.executable, *argv], cwd=ROOT, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True,
                                env={**os.environ, "PYTHONVERBOSE": "2"})
    try:
        assert proc.stderr is not None
        for line in proc.stderr:
            if line.startswith(first_line):
                break
        proc.send_signal(sig)
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    return proc.returncode, stdout, stderr
