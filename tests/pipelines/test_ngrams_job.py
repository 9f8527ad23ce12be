"""End-to-end tests of ``python -m pipelines.ngrams`` on small files (DirectRunner)."""

import glob
import json
import os
import random

import pytest

from pipelines import ngrams as ngrams_job
from tests.support.job_output import output_bytes, read_report, shard_lines
from tests.support.ngram_corpora import downward_closed, phrase_corpus
from tests.support.paths import ROOT
from tests.support.input_files import write_lines
from tests.support.runner import job_args

pytestmark = pytest.mark.job

MSNBC_1K = os.path.join(ROOT, "examples", "msnbc_1k.seq")
RAW_LEVEL_FIELDS = {"support", "released_from_users", "spurious", "expected_spurious"}


def read_job_output(out):
    lines = [line for line in shard_lines(out, "ngrams-*.txt") if line.strip()]
    return [tuple(line.split(" ")) for line in lines], read_report(out)


def test_ngram_job_on_msnbc_slice(tmp_path, capsys):
    # --format msnbc is inferred from '.seq'; no raw figure in the report by default.
    out = str(tmp_path / "out")
    assert ngrams_job.main(job_args(["--input", MSNBC_1K, "--max-n", "4",
                            "--max-items-per-user", "10",
                            "--epsilon", "4", "--delta", "1e-5", "--output", out])) == 0
    ngrams, report = read_job_output(out)
    assert report["released_ngrams"] == len(ngrams)
    assert sum(report["released_per_length"].values()) == len(ngrams)
    # Unseeded: fails by chance w.p. 4.7e-121 (one of the 10 most visited categories, ≥ 88
    # of 994 lines, missed at level 1: ρ_1 = 11.2, σ_1 = 2.2, lines sampled to Δ_1 = 10).
    assert report["released_per_length"]["1"] >= 10
    assert {t for g in ngrams for t in g} <= {str(i) for i in range(1, 18)}
    assert downward_closed(ngrams)
    assert [s["k"] for s in report["level_stats"]] == [2, 3, 4]
    # One visitor per line: no per-user grouping (each line is its own person).
    assert report["privacy_unit"] == "element"
    assert "non_private_counts" not in report
    assert not any(RAW_LEVEL_FIELDS & set(s) for s in report["level_stats"])
    captured = capsys.readouterr()
    assert captured.out.startswith(f"released {len(ngrams):,} n-grams (")
    assert "with dpne under (ε = 4, δ = 1e-05)-DP; wrote" in captured.out
    for k in range(1, 5):
        assert (f"DPNE level {k} of 4: released {report['released_per_length'][str(k)]:,} "
                f"{k}-grams") in captured.err


def test_ngram_job_non_private_stats(tmp_path):
    out = str(tmp_path / "out")
    assert ngrams_job.main(job_args(["--input", MSNBC_1K, "--format", "msnbc", "--max-n", "3",
                            "--max-items-per-user", "10", "--epsilon", "4", "--delta", "1e-5",
                            "--non-private-stats", "--output", out])) == 0
    ngrams, report = read_job_output(out)
    raw = report["non_private_counts"]
    assert raw["users"] == 994  # 1,001 lines − 7 header lines
    assert [s["k"] for s in raw["level_stats"]] == [2, 3]
    by_k = {s["k"]: s for s in report["level_stats"]}
    for s in raw["level_stats"]:
        assert s["released_from_users"] + s["spurious"] == by_k[s["k"]]["released"]
    assert not any(RAW_LEVEL_FIELDS & set(s) for s in report["level_stats"])


@pytest.fixture(scope="module")
def permuted_documents(tmp_path_factory):
    """The same documents as one JSON-lines file, and permuted over two files."""
    lines = [json.dumps({"user": user, "text": " ".join(doc)})
             for user, doc in phrase_corpus(n_users=250, seed=3)]
    return write_permuted(tmp_path_factory.mktemp("docs"), lines, "jsonl", 150, seed=5)


def write_permuted(base, lines, ext, split_at, seed):
    """``lines`` as one file, and shuffled over two files: (the file, a glob of the two)."""
    one = base / f"one.{ext}"
    write_lines(one, lines)
    shuffled = list(lines)
    random.Random(seed).shuffle(shuffled)
    split = base / "split"
    split.mkdir()
    (split / f"a.{ext}").write_text("\n".join(shuffled[:split_at]) + "\n")
    (split / f"b.{ext}").write_text("\n".join(shuffled[split_at:]) + "\n")
    return str(one), str(split / f"*.{ext}")


def test_dpne_permuted_and_resplit_input_gives_identical_files(tmp_path, permuted_documents):
    # η = 0.5 draws spurious k-grams: they must not stand out (as a block or by order).
    outputs = []
    for name, pattern in zip(("one", "split"), permuted_documents):
        out = str(tmp_path / name)
        assert ngrams_job.main(job_args(["--input", pattern, "--user-field", "user",
                                "--text-field",
                                "text", "--max-n", "3", "--max-items-per-user", "4",
                                "--eta", "0.5", "--epsilon", "2", "--delta", "1e-5",
                                "--seed", "6", "--num-shards", "2", "--output", out])) == 0
        outputs.append(output_bytes(out))
    assert outputs[0] == outputs[1]
    assert sorted(outputs[0]) == ["ngrams-00000-of-00002.txt", "ngrams-00001-of-00002.txt",
                                  "report.json"]
    ngrams, report = read_job_output(str(tmp_path / "one"))
    assert report["released_per_length"]["3"] > 0 and "non_private_counts" not in report
    assert report["privacy_unit"] == "user_id"  # a user field: documents grouped per user
    for name, data in outputs[0].items():
        if name.startswith("ngrams-"):
            lines = data.decode().splitlines()
            assert lines == sorted(lines, key=lambda line: tuple(line.split(" ")))


def test_ngram_job_with_counts(tmp_path):
    # Text corpus: 60 users "new york city", 30 "new york", one "secret phrase here".
    src = tmp_path / "docs.txt"
    src.write_text("\n".join(["new york city"] * 60 + ["new york"] * 30
                             + ["secret phrase here"]) + "\n")
    out = str(tmp_path / "out")
    assert ngrams_job.main(job_args(["--input", str(src), "--max-n", "3",
                            "--max-items-per-user", "6",
                            "--rho", "2", "--delta", "1e-6", "--with-counts",
                            "--counts-share", "0.5", "--output", out])) == 0
    ngrams, report = read_job_output(out)
    lines = [line.split("\t") for line in shard_lines(out, "counts-*.tsv")]
    with open(glob.glob(os.path.join(out, "ngrams-*.txt"))[0], encoding="utf-8") as f:
        ngram_lines = [line.rstrip("\n") for line in f]
    # One count per released n-gram, none else, in the n-grams' order.
    assert [g for g, _ in lines] == ngram_lines and len(ngram_lines) == len(ngrams)
    by_gram = {g: int(c) for g, c in lines}
    # Users hold ≤ 6 n-grams, so 'new york' has 90 holders, 'new york city' 60;
    # noise σ² = Δ0/(2ρ) = 6/(2·1) = 3: |error| ≥ 30 has probability < 1e-60. Unseeded:
    # both are released but w.p. 1.6e-114 ('city', 60 lines of weight 1/√3, or a subgram
    # missed at its level: ρ_1 = 6.8, σ = 1.2).
    assert abs(by_gram["new york"] - 90) < 30 and abs(by_gram["new york city"] - 60) < 30
    assert report["counts"]["noise"] == "discrete_gaussian"
    assert report["counts"]["sigma_squared"] == 3.0
    assert report["budget"] == {"type": "approx-zcdp", "rho": 1.0, "delta": 1e-6}
    assert report["total_budget"] == {"type": "approx-zcdp", "rho": 2.0, "delta": 1e-6}


def test_ngram_job_text_corpus_and_baseline(tmp_path):
    src = tmp_path / "docs.txt"
    src.write_text("\n".join(" ".join(doc) for _, doc in phrase_corpus()) + "\n")
    out = str(tmp_path / "out")
    assert ngrams_job.main(job_args(["--input", str(src), "--max-n", "3", "--method",
                            "dpsu-even",
                            "--epsilon", "3", "--delta", "1e-5", "--max-items-per-user", "6",
                            "--output", out])) == 0
    ngrams, report = read_job_output(out)
    # Unseeded: nothing is released w.p. < 1e-269 (the most held unigram missed).
    assert report["mechanism"]["name"] == "dpsu-even" and ngrams


@pytest.mark.parametrize("args,message", [
    (["--max-items-per-user", "5,5"], "--max-items-per-user needs one value per level"),
    (["--max-items-per-user", "x"], "--max-items-per-user takes an int, 'auto', or a comma-"),
    (["--method", "dpsu-single"], "--method dpsu-single needs --single-n"),
    (["--method", "dpsu-single", "--single-n", "4"],
     "--single-n must lie between 1 and --max-n (3), got 4"),
    (["--single-n", "2"], "--single-n applies to --method dpsu-single only, not dpne"),
    (["--etaa", "0.1"], "unknown flag --etaa; did you mean --eta"),
])
def test_ngram_job_bad_parameters(tmp_path, capsys, args, message):
    src = tmp_path / "docs.txt"
    src.write_text("a b c\n")
    code = ngrams_job.main(job_args(["--input", str(src), "--max-n", "3", *args, "--epsilon",
                            "1",
                            "--delta", "1e-5", "--output", str(tmp_path / "o")]))
    err = capsys.readouterr().err
    assert code == 2 and message in err, err
    assert len(err.strip().splitlines()) == 1


def test_ngram_job_rejects_empty_msnbc_sequence(tmp_path, capsys):
    src = tmp_path / "bad.seq"
    src.write_text("% Sequences:\n\n1 2\n\n3\n")
    code = ngrams_job.main(job_args(["--input", str(src), "--epsilon", "1",
                            "--delta", "1e-5", "--output", str(tmp_path / "o")]))
    assert code == 2 and "bad.seq:4: empty visit sequence" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_ngram_job_rejects_a_corrupt_zip(tmp_path, capsys):
    src = tmp_path / "msnbc.zip"
    src.write_bytes(b"PK\x03\x04 not really a zip")
    code = ngrams_job.main(job_args(["--input", str(src), "--epsilon", "1", "--delta", "1e-5",
                            "--output", str(tmp_path / "o")]))
    assert code == 2 and "msnbc.zip: not a valid zip file" in capsys.readouterr().err


def test_ngram_help_explains_the_notation(capsys):
    with pytest.raises(SystemExit):
        ngrams_job.main(job_args(["--help"]))
    text = " ".join(capsys.readouterr().out.split())
    assert "Δ_k, the contribution bound per level" in text
    assert "η, the spurious-n-gram rate" in text and "S_{k−1} the released (k−1)-grams" in text
    assert "(default: 0.01)" in text and "(default: 3)" in text
    assert "msnbc" in text and "pairs" not in text.split("--format")[1][:60]


def test_dpne_on_text_permuted_and_resplit_gives_identical_files(tmp_path):
    # One person per line (element mode, no user ids): a seeded
    # run on the same lines in another order and split writes the same bytes.
    lines = [" ".join(doc) for _, doc in phrase_corpus(n_users=250, seed=4)]
    outputs = []
    for name, pattern in zip(("one", "split"), write_permuted(tmp_path, lines, "txt", 100, 7)):
        out = str(tmp_path / f"out-{name}")
        assert ngrams_job.main(job_args(["--input", pattern, "--max-n", "3",
                                "--max-items-per-user", "2",
                                "--eta", "0.5", "--epsilon", "2", "--delta", "1e-5",
                                "--seed", "6", "--num-shards", "2", "--output", out])) == 0
        outputs.append(output_bytes(out))
    assert outputs[0] == outputs[1]
    ngrams, report = read_job_output(str(tmp_path / "out-one"))
    assert report["privacy_unit"] == "element" and report["released_per_length"]["2"] > 0
