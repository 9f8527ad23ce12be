"""The jobs through Beam's portable job API (the one Flink and Dataflow use).

The test starts Beam's local job service, then runs the vocabulary job with
every mechanism and the n-gram job with ``--runner PortableRunner
--environment_type LOOPBACK``: stateful DoFns with timers (sequential
policies), side inputs (SIPS, DPNE, GW-KT) and our coders all go through the
portable translation. One more run uses the DirectRunner's multi-processing
mode, where every element crosses a process boundary.
"""

import glob
import os
import socket
import subprocess
import sys
import time

import pytest

from beam_dpsu import MECHANISMS
from pipelines import ngrams, vocabulary
from tests.support.job_output import read_report
from tests.support.paths import ROOT
from tests.support.input_files import write_lines

pytestmark = [pytest.mark.job, pytest.mark.subprocess]

MSNBC_1K = os.path.join(ROOT, "examples", "msnbc_1k.seq")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def job_endpoint():
    port = free_port()
    service = subprocess.Popen(
        [sys.executable, "-m", "apache_beam.runners.portability.local_job_service_main",
         "--port", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 60
        while True:
            try:
                socket.create_connection(("localhost", port), timeout=1).close()
                break
            except OSError:
                if time.time() > deadline or service.poll() is not None:
                    raise RuntimeError("the local job service did not start") from None
                time.sleep(0.2)
        yield f"localhost:{port}"
    finally:
        service.terminate()
        service.wait(timeout=30)


def portable(endpoint):
    # Without a `pip freeze` per job: Beam stages the submitting machine's packages
    # for the runner to log, which no assertion here reads (about 1.5 CPU-s a job).
    return ["--runner", "PortableRunner", "--job_endpoint", endpoint,
            "--environment_type", "LOOPBACK",
            "--experiments", "disable_logging_submission_environment"]


def read_items(out, prefix="items"):
    items = []
    for path in glob.glob(os.path.join(out, f"{prefix}-*.txt")):
        with open(path, encoding="utf-8") as f:
            items += [line.strip() for line in f if line.strip()]
    return sorted(items), read_report(out)


@pytest.fixture(scope="module")
def pairs_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("data") / "pairs.csv"
    lines = [f"user{u},common" for u in range(80)] + [f"user{u},also" for u in range(0, 80, 2)]
    lines += ["loner,secret"]
    return write_lines(path, lines)


@pytest.mark.parametrize("mechanism", sorted(MECHANISMS))
def test_vocabulary_job_on_the_portable_runner(job_endpoint, pairs_file, tmp_path, mechanism):
    out = str(tmp_path / "out")
    extra = [] if mechanism == "gw" else ["--max-items-per-user", "2"]
    if mechanism == "gw":  # GW-KT: the public counts arrive as a side input
        extra += ["--public-input", pairs_file, "--public-format", "text"]
    code = vocabulary.main(["--input", pairs_file, "--format", "pairs", "--mechanism",
                            mechanism, *extra, "--epsilon", "20", "--delta", "1e-6",
                            "--seed", "1", "--non-private-stats", "--output", out,
                            *portable(job_endpoint)])
    assert code == 0
    items, report = read_items(out)
    assert items == ["also", "common"]
    assert report["released_items"] == 2 and report["non_private_counts"]["users"] == 81


def test_ngram_job_on_the_portable_runner(job_endpoint, tmp_path):
    out = str(tmp_path / "out")
    assert ngrams.main(["--input", MSNBC_1K, "--format", "msnbc", "--max-n", "3",
                        "--max-items-per-user", "10", "--epsilon", "4", "--delta", "1e-5",
                        "--seed", "2", "--output", out, *portable(job_endpoint)]) == 0
    ngram_lines, report = read_items(out, "ngrams")
    assert report["released_ngrams"] == len(ngram_lines) > 20
    assert [s["k"] for s in report["level_stats"]] == [2, 3]


def test_vocabulary_job_multi_processing(pairs_file, tmp_path):
    out = str(tmp_path / "out")
    assert vocabulary.main(["--input", pairs_file, "--format", "pairs",
                            "--mechanism", "policy-gaussian",
                            "--max-items-per-user", "2", "--epsilon", "20", "--delta", "1e-6",
                            "--seed", "1", "--output", out, "--direct_num_workers", "2",
                            "--direct_running_mode", "multi_processing"]) == 0
    items, _ = read_items(out)
    assert items == ["also", "common"]


@pytest.mark.parametrize("location", ["/nonexistent/prism", "http://127.0.0.1:9/prism.zip"])
def test_a_prism_runner_that_cannot_start_is_one_error_line(pairs_file, tmp_path, location,
                                                            capsys):
    # Prism, named by --runner, cannot be fetched or found: one error line, exit 2, and
    # no output folder; never Beam's traceback.
    out = tmp_path / "out"
    code = vocabulary.main(["--input", pairs_file, "--format", "pairs", "--epsilon", "1",
                            "--delta", "1e-5", "--output", str(out),
                            "--runner", "PrismRunner", "--prism_location", location])
    err = capsys.readouterr().err
    assert code == 2 and not out.exists()
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "Traceback" not in err, err
    assert "Prism runner could not start" in errors[0] and "--runner" in errors[0]
