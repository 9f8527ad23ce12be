"""What a refused or a finished job run must look like, for a run in this process
(:mod:`tests.support.job_calls`) or in a subprocess (:mod:`tests.support.job_processes`):
both answer a ``CompletedProcess``. Nothing here starts a process, so a test file that
only checks runs stays out of the ``subprocess`` tier (tests/support/tiers.py)."""

import os

import beam_dpsu


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


def released(out) -> list:
    return beam_dpsu.read_released(os.path.join(str(out), "items-*.txt"))
