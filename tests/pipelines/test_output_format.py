"""``--output-format parquet`` of the vocabulary and n-gram jobs: under one --seed the
Parquet release holds exactly the text release's items (and counts), in the same
order and shards (each job runs once per configuration and format)."""

import contextlib
import glob
import io
import os
import random

import pyarrow.parquet as pq
import pytest

import beam_dpsu
from pipelines import ngrams as ngrams_job
from pipelines import vocabulary as vocabulary_job
from tests.support import job_calls
from tests.support.job_output import read_report
from tests.support.paths import ROOT
from tests.support.input_files import write_lines

pytestmark = pytest.mark.job

MSNBC_1K = os.path.join(ROOT, "examples", "msnbc_1k.seq")
BUDGET = ["--epsilon", "4", "--delta", "1e-5", "--seed", "7"]
# (job, what it writes, its flags, --with-counts, --num-shards)
RUNS = {
    "vocabulary": ("vocabulary", "items", False, 1),
    "vocabulary-counts": ("vocabulary", "items", True, 3),
    "ngrams-counts": ("ngrams", "ngrams", True, 2),
}


@pytest.fixture(scope="module")
def pairs_file(tmp_path_factory):
    # Items with characters the text output escapes (a backslash, a tab), so that
    # the comparison checks the unescaping too.
    rng = random.Random(0)
    vocab = ["cat", "dog", "a\\b", "tab\there", "ünï", "x y"] + [f"w{i}" for i in range(40)]
    path = tmp_path_factory.mktemp("in") / "in.csv"
    lines = []
    for user in range(400):
        for item in rng.sample(vocab[:8] if user % 2 else vocab, 5):
            lines.append(f'u{user},"{item}"')
    return write_lines(path, lines)


def job_argv(job: str, pairs: str, with_counts: bool, shards: int) -> list:
    if job == "vocabulary":
        argv = ["--input", pairs, "--format", "pairs", "--max-items-per-user", "5"]
    else:
        argv = ["--input", MSNBC_1K, "--max-n", "3", "--max-items-per-user", "10"]
    return argv + BUDGET + ["--num-shards", str(shards)] + (
        ["--with-counts"] if with_counts else [])


@pytest.fixture(scope="module")
def outputs(tmp_path_factory, pairs_file):
    """Each configuration run once per format: {(run, format): (folder, summary line)}."""
    done = {}
    for run, (job, _, with_counts, shards) in RUNS.items():
        for fmt in ("text", "parquet"):
            out = str(tmp_path_factory.mktemp(f"{run}-{fmt}") / "out")
            # On the suite's runner (tests/support/runner.py), as every job run here.
            proc = job_calls.run(job, job_argv(job, pairs_file, with_counts, shards)
                                 + ["--output-format", fmt, "--output", out])
            assert proc.returncode == 0, proc.stderr
            done[run, fmt] = out, proc.stdout
    return done


def parquet_rows(out: str, pattern: str) -> list[dict]:
    rows = []
    for path in sorted(glob.glob(os.path.join(out, pattern))):
        rows += pq.read_table(path).to_pylist()
    return rows


@pytest.mark.parametrize("run", sorted(RUNS))
def test_parquet_release_equals_text_release(outputs, run):
    job, what, with_counts, shards = RUNS[run]
    ngrams = job == "ngrams"
    text_out, _ = outputs[run, "text"]
    parquet_out, _ = outputs[run, "parquet"]
    column = "ngram" if ngrams else "item"

    expected = beam_dpsu.read_released(os.path.join(text_out, f"{what}-*.txt"), ngrams=ngrams)
    rows = parquet_rows(parquet_out, f"{what}-*.parquet")
    got = [tuple(r[column]) if ngrams else r[column] for r in rows]
    assert got == expected and len(expected) > 0
    if not ngrams:
        assert {"a\\b", "tab\there", "x y"} <= set(expected)  # escaped in the text output
    assert all(set(r) == {column} for r in rows)
    # Shard by shard too: each item is in the same shard in both formats.
    for shard in range(shards):
        name = f"{what}-{shard:05d}-of-{shards:05d}"
        assert [tuple(r[column]) if ngrams else r[column]
                for r in pq.read_table(os.path.join(parquet_out, name + ".parquet")).to_pylist()
                ] == beam_dpsu.read_released(os.path.join(text_out, name + ".txt"),
                                             ngrams=ngrams)

    files = [f"{what}-{s:05d}-of-{shards:05d}" for s in range(shards)]
    counts = [f"counts-{s:05d}-of-{shards:05d}" for s in range(shards)] if with_counts else []
    assert sorted(os.listdir(parquet_out)) == sorted(
        [f + ".parquet" for f in files + counts] + ["report.json"])
    assert sorted(os.listdir(text_out)) == sorted(
        [f + ".txt" for f in files] + [f + ".tsv" for f in counts] + ["report.json"])
    if with_counts:
        expected_counts = beam_dpsu.read_counts(os.path.join(text_out, "counts-*.tsv"),
                                                ngrams=ngrams)
        count_rows = parquet_rows(parquet_out, "counts-*.parquet")
        assert all(set(r) == {column, "count"} for r in count_rows)
        assert [(tuple(r[column]) if ngrams else r[column], r["count"])
                for r in count_rows] == expected_counts
        assert [item for item, _ in expected_counts] == expected


def test_num_shards_gives_that_many_parquet_files(outputs):
    out, _ = outputs["vocabulary-counts", "parquet"]
    assert len(glob.glob(os.path.join(out, "items-*-of-00003.parquet"))) == 3
    assert len(glob.glob(os.path.join(out, "counts-*-of-00003.parquet"))) == 3


@pytest.mark.parametrize("run", sorted(RUNS))
def test_report_and_summary_name_the_format(outputs, run):
    job, what, with_counts, shards = RUNS[run]
    shard = "00000" if shards == 1 else "*"
    for fmt, suffix, counts_suffix in (("text", ".txt", ".tsv"),
                                       ("parquet", ".parquet", ".parquet")):
        out, summary = outputs[run, fmt]
        report = read_report(out)
        assert report["output_format"] == fmt
        text_report = read_report(outputs[run, "text"][0])
        # The format is the only difference between the two reports.
        assert {k: v for k, v in report.items() if k != "output_format"} == {
            k: v for k, v in text_report.items() if k != "output_format"}
        assert f"{out}/{what}-{shard}-of-{shards:05d}{suffix}" in summary
        assert (f"{out}/counts-{shard}-of-{shards:05d}{counts_suffix}" in summary) == with_counts


@pytest.mark.parametrize("main", [vocabulary_job.main, ngrams_job.main])
def test_bad_output_format_is_one_error_line(tmp_path, main):
    path = tmp_path / "in.txt"
    path.write_text("the cat sat\n", encoding="utf-8")
    out = tmp_path / "out"
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = main(["--input", str(path), "--format", "text", "--epsilon", "1",
                     "--delta", "1e-5", "--output", str(out), "--output-format", "csv"])
    # Only the error line (progress lines start with "[").
    lines = [line for line in err.getvalue().splitlines() if not line.startswith("[")]
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error: "), err.getvalue()
    assert "--output-format" in lines[0] and "'csv'" in lines[0]
    assert not out.exists()
