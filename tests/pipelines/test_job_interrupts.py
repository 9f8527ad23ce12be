"""Interrupts of a job run as a user runs it (``python -m pipelines.vocabulary``): Ctrl-C
or SIGTERM while Beam imports, and the DirectRunner's multi-process mode, whose worker
processes must neither speak on the console nor outlive the job.

An interrupted job prints one line ``interrupted`` and exits with 128 + the signal,
without a traceback, leaving no output folder (docs/privacy.md: one folder, one release).
"""

import ast
import glob
import os
import random
import re
import signal
import subprocess
import sys
import time

import pytest

from tests.support.input_files import write_pairs
from tests.support.job_checks import assert_ran
from tests.support.job_processes import (child_pids, interrupt_once_imported,
                                         sigint_as_in_a_terminal, vocabulary)
from tests.support.paths import ROOT

pytestmark = pytest.mark.subprocess

FIXED = ["--delta", "1e-5", "--max-items-per-user", "2"]


@pytest.fixture
def pairs(tmp_path) -> str:
    return write_pairs(tmp_path / "pairs.csv", ["cat", "dog"])


# -- 10: multi-process DirectRunner ----------------------------------------------------
# Costs a multi-process run (worker processes start and import Beam).


def test_multi_processing_shows_progress_and_no_beam_noise(tmp_path, pairs):
    proc = vocabulary(["--input", pairs, "--format", "pairs", "--epsilon", "1", *FIXED,
                       "--output", tmp_path / "out", "--direct_num_workers", "2",
                       "--direct_running_mode=multi_processing"])
    assert_ran(proc)
    for noise in ("Discarding unparseable args", "Logging handler created", "apitools",
                  "No semi_persistent_directory found"):
        assert noise not in proc.stderr, proc.stderr[-3000:]
    assert re.search(r"^\[vocabulary .*\] sips: released ", proc.stderr, re.M), \
        proc.stderr[-3000:]
    assert re.search(r"^\[vocabulary .*\] wrote .*items-00000-of-00001\.txt", proc.stderr,
                     re.M), proc.stderr[-3000:]


def _signal_group(proc, sig):
    os.killpg(proc.pid, sig)


def _signal_job_alone(proc, sig):
    proc.send_signal(sig)


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="finds the worker processes in /proc")
@pytest.mark.parametrize("send,sig,code", [
    # Ctrl-C in a terminal signals every process of the job: the job and its workers.
    (_signal_group, signal.SIGINT, 130),
    # A scheduler's SIGTERM (kill PID) reaches the job alone: the job must not wait
    # for its workers for ever, and they must end with it.
    (_signal_job_alone, signal.SIGTERM, 143),
], ids=["ctrl-c-to-the-group", "sigterm-to-the-job-alone"])
def test_multi_processing_interrupt_is_one_line_and_leaves_no_worker(tmp_path, send, sig,
                                                                       code):
    # The signal is sent once both workers run (then they import Beam and run
    # bundles for seconds: the job takes ~10 s more on 100,000 pairs).
    rng = random.Random(1)
    path = tmp_path / "pairs.csv"
    with open(path, "w", encoding="utf-8") as f:
        f.writelines(f"u{u},i{rng.randrange(3000)}\n" for u in range(20_000) for _ in range(5))
    out = tmp_path / "out"
    with sigint_as_in_a_terminal():
        proc = subprocess.Popen(
            [sys.executable, "-m", "pipelines.vocabulary", "--input", str(path), "--format",
             "pairs", "--epsilon", "1", "--delta", "1e-5", "--max-items-per-user", "5",
             "--output", str(out), "--direct_num_workers", "2",
             "--direct_running_mode=multi_processing"],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            start_new_session=True)
    try:
        deadline = time.monotonic() + 240
        while (len(workers := child_pids(proc.pid, b"pipelines.worker")) < 2
               and proc.poll() is None):
            assert time.monotonic() < deadline, "no worker processes started"
            time.sleep(0.1)
        time.sleep(1)
        send(proc, sig)
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == code, (proc.returncode, stderr[-3000:])
    assert "Traceback" not in stderr and "Exception in thread" not in stderr, stderr[-3000:]
    assert stderr.splitlines()[-1] == "interrupted" and stdout == "", stderr[-3000:]
    assert [line for line in stderr.splitlines() if not line.startswith("[vocabulary ")] \
        == ["interrupted"], stderr[-3000:]
    assert os.listdir(tmp_path) == ["pairs.csv"]
    deadline = time.monotonic() + 30
    while any(os.path.exists(f"/proc/{pid}") for pid in workers):  # none left behind
        assert time.monotonic() < deadline, "worker processes outlived the job"
        time.sleep(0.2)


# -- Ctrl-C while the job imports Beam (the first seconds) ----------------------------


# The last line of stderr: "interrupted", maybe after a message of Python's import log.
LAST_LINE_WHILE_IMPORTING = r"(?:(?:# |import ).*)?interrupted"


@pytest.mark.parametrize("sig,code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_an_interrupt_while_beam_imports_is_one_line(sig, code):
    # PYTHONVERBOSE makes the job log each import on stderr: the signal is sent once
    # apache_beam's own modules import (after the pipelines package, before the job).
    # At level 2 (every path tried) the rest of the imports write megabytes, so the
    # job blocks on the full pipe until the signal: on a loaded machine it cannot
    # finish --help before the signal arrives.
    returncode, stdout, stderr = interrupt_once_imported(
        ["-m", "pipelines.vocabulary", "--help"], "import 'apache_beam.", sig)
    assert returncode == code, (returncode, stderr[-3000:])
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr, stderr[-3000:]
    # Python's import log (this test's probe, not the job's output) prints a message and
    # its newline in two writes; a signal between the two leaves the job's line right
    # after the message ("# trying /…/pickler….sointerrupted"), which happened once in a
    # suite run. The job's own output is still the one word, last.
    last = stderr.splitlines()[-1]
    assert re.fullmatch(LAST_LINE_WHILE_IMPORTING, last) and stdout == "", stderr[-3000:]


def test_an_import_log_message_cut_by_the_signal_is_told_from_the_jobs_line():
    # The job's line alone, or after an import-log message the signal cut; never after
    # anything else, nor with anything after it.
    pattern = LAST_LINE_WHILE_IMPORTING
    assert re.fullmatch(pattern, "interrupted")
    assert re.fullmatch(pattern, "# trying /x/pickler.cpython-311-x86_64-linux-gnu.sointerrupted")
    assert re.fullmatch(pattern, "import 'apache_beam.x' # <loader>interrupted")
    for line in ("Traceback interrupted", "interrupted!", "KeyboardInterrupt", "",
                 "[vocabulary 1.0s] interrupted"):
        assert not re.fullmatch(pattern, line), line


def test_the_start_handler_is_for_jobs_only():
    from pipelines.interrupts import _started_module
    assert _started_module(["python", "-m", "pipelines.vocabulary", "--rho", "1"]) \
        == "pipelines.vocabulary"
    assert _started_module(["python", "-X", "importtime", "-mpipelines.ngrams"]) \
        == "pipelines.ngrams"
    for argv in (["python", "-m", "pytest", "-m", "pipelines.x"], ["python", "job.py"],
                 ["python", "-c", "pass"], ["beam-dpsu", "vocabulary"]):
        assert not _started_module(argv).startswith("pipelines."), argv
    # In this process (pytest) importing pipelines installed nothing.
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


# -- the first moments and the last ----------------------------------------------------


@pytest.mark.parametrize("sig,code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_the_handler_comes_before_the_pipelines_package_imports_anything_else(sig, code):
    # An interrupt in a job's first moments ended it by the signal: the handler came
    # after the package's own imports (logging among them). Now it comes first, so a
    # signal once the package imports logging is one line. The import log (level 2:
    # the job blocks on the full pipe until the signal) says when, not a clock.
    returncode, stdout, stderr = interrupt_once_imported(
        ["-m", "pipelines.vocabulary", "--help"], "import 'logging'", sig)
    assert returncode == code, (returncode, stderr[-3000:])
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr, stderr[-3000:]
    last = stderr.splitlines()[-1]
    assert re.fullmatch(LAST_LINE_WHILE_IMPORTING, last) and stdout == "", stderr[-3000:]


@pytest.mark.parametrize("sig,code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_an_interrupt_after_the_summary_is_one_line_and_the_release_stays_whole(
        tmp_path, pairs, sig, code):
    # After the summary, Python's shutdown (seconds with Beam loaded) ran with the
    # signals' default actions: SIGTERM ended the job by the signal, and Ctrl-C once
    # printed "Exception ignored in atexit callback … KeyboardInterrupt" and exited 0.
    # The signal is sent once the summary is read: the job may have ended by then
    # (exit 0); if not, it says so in one line and exits 128 + the signal.
    out = tmp_path / "out"
    with sigint_as_in_a_terminal():
        proc = subprocess.Popen(
            [sys.executable, "-m", "pipelines.vocabulary", "--input", pairs, "--format",
             "pairs", "--epsilon", "1", *FIXED, "--output", str(out)],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        summary = proc.stdout.readline()
        proc.send_signal(sig)
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert "; wrote " in summary and stdout == "", (summary, stderr[-3000:])
    assert proc.returncode in (0, code), (proc.returncode, stderr[-3000:])
    for noise in ("Traceback", "KeyboardInterrupt", "Exception ignored"):
        assert noise not in stderr, stderr[-3000:]
    if proc.returncode:  # the line says the release is complete, so nobody runs it again
        assert stderr.splitlines()[-1] == (
            f"interrupted after the release was complete: {out} holds it (running the job "
            "again would spend the budget again)"), stderr[-3000:]
    assert sorted(os.listdir(out)) == ["items-00000-of-00001.txt", "report.json"]


@pytest.mark.parametrize("released", [False, True])
def test_a_signal_after_the_job_says_whether_the_release_is_in_place(released, tmp_path):
    # The start handler (in place from the job's end until the process ends) tells a
    # signal before any release from one after the release was put in place.
    script = (
        "import os, signal\n"
        "from pipelines.interrupts import INTERRUPTS, install_start_handler\n"
        f"INTERRUPTS.released_to = {str(tmp_path) if released else None!r}\n"
        "install_start_handler()\n"
        "os.kill(os.getpid(), signal.SIGTERM)\n"
        "import time; time.sleep(30)\n")
    proc = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 143, proc.stderr
    last = proc.stderr.splitlines()[-1]
    assert last == (f"interrupted after the release was complete: {tmp_path} holds it "
                    "(running the job again would spend the budget again)"
                    if released else "interrupted"), proc.stderr


def _main_block(path) -> str:
    """The source of a module's ``if __name__ == "__main__":`` block ("" if none)."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    for node in tree.body:
        if (isinstance(node, ast.If) and isinstance(node.test, ast.Compare)
                and ast.unparse(node.test) == "__name__ == '__main__'"):
            return "\n".join(ast.unparse(statement) for statement in node.body)
    return ""


# Not jobs: the DirectRunner's worker processes; the command, whose main() ends the
# program itself when run as one (pipelines.command.main).
NOT_ENDED_BY_END_PROGRAM = ("worker.py", "command.py")


def test_every_job_run_as_a_program_ends_through_end_program():
    # sys.exit(main()) leaves Python's shutdown (seconds with Beam loaded) to the
    # signals' default actions: a Ctrl-C then ended the job by the signal.
    jobs = [path for folder in ("pipelines", "pipelines/evaluation")
            for path in glob.glob(os.path.join(ROOT, folder, "*.py"))
            if os.path.basename(path) not in NOT_ENDED_BY_END_PROGRAM and _main_block(path)]
    assert len(jobs) >= 6, jobs
    for path in jobs:
        assert _main_block(path) == "end_program(main())", path


def test_ctrl_c_after_a_benchmark_error_line_is_one_line_not_the_signal():
    # After its error line the benchmark (Beam loaded) went through Python's
    # shutdown, where the signals have their default actions: a Ctrl-C sent on that
    # line ended it by SIGINT (exit -2, nothing said) in 4 runs of 5. Now either the
    # job has ended (2) or it says so in one line and exits 130, whenever the signal
    # lands; the test above holds every job to that.
    with sigint_as_in_a_terminal():
        proc = subprocess.Popen(
            [sys.executable, "-m", "pipelines.evaluation.benchmark", "--job", "vocabulary"],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        first = proc.stderr.readline()
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert first.startswith("error: give the job's own flags after --"), (first, stderr)
    assert proc.returncode in (2, 130), (proc.returncode, stderr[-3000:])
    assert stdout == "" and stderr == ("interrupted\n" if proc.returncode == 130 else ""), \
        stderr[-3000:]
