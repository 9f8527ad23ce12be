"""--pre-threshold K on both jobs: the report records K, the release obeys it, bad values
are one error line naming the flag, and the n-gram baselines refuse it."""

import pytest

from pipelines import ngrams, vocabulary
from tests.support.job_output import read_report, shard_lines
from tests.support.runner import job_args

pytestmark = pytest.mark.job

BASE = ["--input", "examples/imdb_2k.csv.gz", "--user-field", "user", "--text-field",
        "review", "--rho", "0.5", "--delta", "1e-5"]


def test_the_vocabulary_job_applies_and_reports_the_pre_threshold(tmp_path, capsys):
    out = tmp_path / "out"
    code = vocabulary.main(job_args([*BASE, "--mechanism", "weighted-gaussian",
                            "--max-items-per-user",
                            "10", "--pre-threshold", "40", "--output", str(out)]))
    capsys.readouterr()
    assert code == 0
    report = read_report(out)
    assert report["pre_threshold"] == 40
    assert report["release_threshold"] >= 39
    released = shard_lines(out, "items-*")
    # Every released word is held by at least 40 of the 2,000 reviews (checked on the raw
    # data, which the test may read): with Δ0 = 10 a word of fewer holders is never noised.
    # Unseeded: none is released w.p. < 1e-10 ("the", "a" and "and" each miss ρ = 44.3 w.p.
    # 6e-5, 1e-3 and 9e-4, their Δ0-samples negatively associated).
    assert released and all(holders >= 40 for holders in
                            _holders_after_any_sampling(released).values())


def _holders_after_any_sampling(words) -> dict:
    """Reviews holding each word at all: an upper bound on its holders after sampling."""
    import csv
    import gzip

    from beam_dpsu.core.tokenizer import Tokenizer
    tokenize = Tokenizer()
    wanted = set(words)
    holders = dict.fromkeys(wanted, 0)
    with gzip.open("examples/imdb_2k.csv.gz", "rt", encoding="utf-8", newline="") as f:
        for row in csv.DictReader(f):
            for word in set(tokenize(row["review"])) & wanted:
                holders[word] += 1
    return holders


@pytest.mark.parametrize("job,extra", [
    (vocabulary, ["--mechanism", "weighted-gaussian", "--max-items-per-user", "10"]),
    (ngrams, ["--max-n", "2", "--max-items-per-user", "10"]),
])
@pytest.mark.parametrize("value,message", [
    ("0", "--pre-threshold must be an int >= 1, got 0"),
    ("two", "--pre-threshold: invalid int value"),
])
def test_a_bad_pre_threshold_is_one_error_line(job, extra, value, message, tmp_path, capsys):
    code = job.main([*BASE, *extra, "--pre-threshold", value, "--output",
                     str(tmp_path / "out")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and err[0].startswith("error:"), err
    assert message in err[0]
    assert not (tmp_path / "out").exists()


def test_the_ngram_baselines_refuse_a_pre_threshold(tmp_path, capsys):
    code = ngrams.main(job_args([*BASE, "--max-n", "2", "--max-items-per-user", "10",
                        "--method",
                        "dpsu-all", "--pre-threshold", "3", "--output", str(tmp_path / "o")]))
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and err == ["error: --pre-threshold applies to --method dpne only, not "
                                 "dpsu-all"]


def test_the_ngram_job_records_the_pre_threshold(tmp_path, capsys):
    out = tmp_path / "out"
    code = ngrams.main(job_args([*BASE, "--max-n", "2", "--max-items-per-user", "10",
                        "--pre-threshold", "5", "--output", str(out)]))
    capsys.readouterr()
    assert code == 0
    assert read_report(out)["pre_threshold"] == 5
