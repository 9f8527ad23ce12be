"""Jobs run as a user runs them: ``python -m pipelines.JOB`` in a subprocess from the
repository root, and what a refused or a finished run must look like."""

import contextlib
import csv
import os
import signal
import subprocess
import sys

import beam_dpsu

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


def error_lines(proc) -> list[str]:
    return [line for line in proc.stderr.splitlines() if line.startswith("error:")]


def assert_refused(proc, out=None) -> str:
    """Exit 2, exactly one ``error:`` line (returned), no traceback, nothing written."""
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-3000:])
    lines = error_lines(proc)
    assert len(lines) == 1, proc.stderr[-3000:]
    if out is not None:
        assert not os.path.exists(out)
        parent, name = os.path.split(str(out).rstrip("/"))
        assert not [n for n in os.listdir(parent) if n.startswith(f".{name}.beam_dpsu")]
    return lines[0]


def assert_ran(proc) -> None:
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert proc.returncode == 0 and not error_lines(proc), proc.stderr[-3000:]


def write_pairs(path, items_per_user, users: int = 60) -> str:
    """``users`` users each holding every item of ``items_per_user``, written by
    Python's csv.writer (items holding a quote, comma or line break are quoted)."""
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        for u in range(users):
            for item in items_per_user:
                writer.writerow([f"u{u}", item])
    return str(path)


def released(out) -> list:
    return beam_dpsu.read_released(os.path.join(str(out), "items-*.txt"))


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
