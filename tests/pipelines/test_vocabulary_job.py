"""End-to-end tests of ``python -m pipelines.vocabulary`` on small files (DirectRunner)."""

import codecs
import glob
import gzip
import json
import os
import random
import re
import subprocess
import sys

import numpy as np
import pytest

from pipelines import vocabulary
from tests.support import job_calls
from tests.support.examples import IMDB_2K as EXAMPLE
from tests.support.examples import imdb_slice
from tests.support.job_checks import assert_ran, released
from tests.support.job_output import output_bytes, released_items_and_report, shard_lines
from tests.support.paths import ROOT
from tests.support.input_files import write_lines, write_pairs
from tests.support.runner import job_args

pytestmark = [pytest.mark.job, pytest.mark.subprocess]
BASE = ["--epsilon", "1", "--delta", "1e-5"]
RAW_FIELDS = {"non_private_counts", "users", "pairs", "distinct_items"}


def run_job(args, capsys=None):
    code = vocabulary.main(job_args(args))
    err = capsys.readouterr().err if capsys else ""
    return code, err


def raw_keys(report) -> set:
    """Keys anywhere in the report that name raw-data figures."""
    found = set()

    def walk(value):
        if isinstance(value, dict):
            for k, v in value.items():
                if k in RAW_FIELDS:
                    found.add(k)
                walk(v)
        elif isinstance(value, list):
            for v in value:
                walk(v)

    walk(report)
    return found


def test_job_on_example_imdb_slice(tmp_path, capsys):
    # --format is inferred from '.csv.gz'; the report holds no raw figure by default. Unseeded:
    # fails w.p. < 1e-60 (the 51 heaviest words, the 3 below among them, weigh ≥ 36, ρ = 5.3).
    out = tmp_path / "out"
    code = vocabulary.main(job_args([
        "--input", EXAMPLE, "--user-field", "user", "--text-field", "review",
        "--mechanism", "weighted-gaussian", "--rho", "0.5", "--delta", "1e-5",
        "--max-items-per-user", "50", "--output", str(out)]))
    assert code == 0
    captured = capsys.readouterr()
    items, report = released_items_and_report(out)
    assert sorted(os.listdir(out)) == ["items-00000-of-00001.txt", "report.json"]
    assert report["mechanism"] == {"name": "weighted-gaussian", "max_items_per_user": 50}
    assert report["budget"] == {"type": "approx-zcdp", "rho": 0.5, "delta": 1e-5}
    assert report["released_items"] == len(items) > 50
    assert not raw_keys(report)
    assert items == sorted(items)
    assert {"the", "movie", "film"} <= set(items)
    assert all(item == item.lower() and " " not in item for item in items)
    # One summary line on stdout; progress on stderr, free of Beam's noise.
    summary = captured.out.strip().splitlines()
    assert len(summary) == 1
    assert re.match(rf"released {len(items):,} items with weighted-gaussian \(max items per "
                    r"user 50\) under ρ = 0.5 "
                    r"zCDP, δ = 1e-05 \(by the mechanism's privacy curve: ≈ \(ε = [\d.]+, "
                    r"δ = 2e-05\)-DP\); wrote .*"
                    r"items-00000-of-00001.txt and .*report.json$", summary[0]), summary[0]
    assert "reading 1 csv file" in captured.err
    assert f"weighted-gaussian: released {len(items):,} items" in captured.err
    assert "apitools" not in captured.err and "Discarding" not in captured.err


@pytest.fixture(scope="module")
def imdb_500(tmp_path_factory):
    """The first 500 reviews of the example (a quarter of its reading time): enough users
    that "the", "movie" and "film" clear the threshold at ρ = 0.5."""
    return imdb_slice(tmp_path_factory.mktemp("imdb") / "imdb_500.csv.gz", 500)


@pytest.mark.parametrize("fields, unit", [(["--user-field", "@row"], "element"),
                                          (["--user-field", "user"], "user_id")])
def test_privacy_unit_follows_the_user_field(tmp_path, imdb_500, fields, unit):
    # @row makes every row its own person, so rows are not merged per user id (the per-user
    # shuffle is left out); a user column is merged per user. Unseeded: fails w.p. 4e-8 (2
    # cases: "film", 272 of 500 users, weight ≈ 16, misses SIPS's 3 rounds at ρ = 0.375).
    out = tmp_path / "out"
    code = vocabulary.main(job_args(["--input", imdb_500, *fields, "--text-field", "review",
                            "--rho", "0.5", "--delta", "1e-5", "--max-items-per-user", "50",
                            "--with-counts", "--output", str(out)]))
    assert code == 0
    items, report = released_items_and_report(out)
    assert report["privacy_unit"] == report["counts"]["privacy_unit"] == unit
    assert report["guarantee"].startswith("element-level" if unit == "element" else "user-level")
    assert {"the", "movie", "film"} <= set(items)


@pytest.mark.parametrize("mechanism", ["count-laplace", "count-gaussian", "weighted-laplace",
                                       "weighted-gaussian"])
def test_job_every_mechanism_on_pairs(tmp_path, mechanism):
    lines = [f"user{u},common" for u in range(60)] + ["loner,secret"]
    src = write_lines(tmp_path / "pairs.csv", ["user,item"] + lines)
    out = tmp_path / "out"
    code = vocabulary.main(job_args(["--input", src, "--format", "pairs",
                            "--skip-header-lines", "1",
                            "--mechanism", mechanism, "--max-items-per-user", "1",
                            "--epsilon", "50", "--delta", "1e-6", "--seed", "3",
                            "--output", str(out)]))
    assert code == 0
    items, report = released_items_and_report(out)
    assert items == ["common"]
    assert report["seeded"] is True and report["seed"] == 3
    assert "non_private_counts" not in report


def test_non_private_stats_are_opt_in(tmp_path, capsys):
    lines = [f"user{u},common" for u in range(60)] + ["loner,secret", "user1,common"]
    src = write_lines(tmp_path / "pairs.csv", lines)
    out = tmp_path / "out"
    assert vocabulary.main(job_args(["--input", src, "--format", "pairs",
                            "--max-items-per-user", "1",
                            "--epsilon", "50", "--delta", "1e-6", "--non-private-stats",
                            "--output", str(out)])) == 0
    _, report = released_items_and_report(out)
    counts = report["non_private_counts"]
    assert {k: counts[k] for k in ("users", "pairs", "distinct_items")} == {
        "users": 61, "pairs": 62, "distinct_items": 2}
    assert "NOT differentially private" in counts["note"]
    # Raw counts stay under non_private_counts; the progress line says so too.
    assert raw_keys({k: v for k, v in report.items() if k != "non_private_counts"}) == set()
    assert "read 62 records from" in capsys.readouterr().err


SIPS_ARGS = ["--format", "csv", "--user-field", "user",
             "--text-field", "review", "--mechanism", "sips", "--rounds", "2", "--ratio", "0.5",
             "--rho", "0.5", "--delta", "1e-5", "--max-items-per-user", "50", "--seed", "3"]


def test_job_sips_reports_rounds(tmp_path, imdb_500, capsys):
    out = tmp_path / "out"
    code = vocabulary.main(job_args(["--input", imdb_500, *SIPS_ARGS, "--output", str(out),
                            "--non-private-stats"]))
    assert code == 0
    items, report = released_items_and_report(out)
    assert report["mechanism"] == {"name": "sips", "max_items_per_user": 50, "rounds": 2,
                                   "ratio": 0.5, "removal": "side_input"}
    assert [r["round"] for r in report["rounds"]] == [0, 1]
    assert report["rounds"][1]["rho"] == pytest.approx(2 * report["rounds"][0]["rho"])
    # Per-round sizes only under non_private_counts, asked for by the flag.
    assert "released_by_stage" not in report
    by_stage = report["non_private_counts"]["released_by_stage"]
    assert by_stage["round_0"] + by_stage["round_1"] == report["released_items"] == len(items)
    assert len(set(items)) == len(items)
    assert report["dp_equivalents"][0]["delta"] == pytest.approx(2e-5)
    err = capsys.readouterr().err
    assert (f"SIPS round 1 of 2: released {by_stage['round_0']:,} items (non-private)"
            in err)
    assert (f"SIPS round 2 of 2: released {by_stage['round_1']:,} items (non-private)"
            in err)


@pytest.fixture(scope="module")
def sips_run(tmp_path_factory, imdb_500):
    """The SIPS run of SIPS_ARGS with no other flag (no --non-private-stats, no
    --with-counts), read by every test about what such a run leaves out: (its output
    folder, its stderr as a process prints it)."""
    out = tmp_path_factory.mktemp("sips") / "out"
    proc = job_calls.vocabulary(["--input", imdb_500, *SIPS_ARGS, "--output", str(out)])
    assert proc.returncode == 0, proc.stderr
    return out, proc.stderr


def test_job_sips_keeps_round_sizes_without_non_private_stats(sips_run):
    # Invariant 6: which round released an item is not a function of
    # the released set (docs/privacy.md, invariant 6): by default neither report nor log says it.
    out, err = sips_run
    items, report = released_items_and_report(out)
    assert report["released_items"] == len(items) > 0
    assert "released_by_stage" not in json.dumps(report)
    assert "round_0" not in json.dumps(report)
    assert "SIPS round" not in err
    assert f"sips: released {len(items):,} items" in err


# -- only the released set leaves: permuted and re-split input, same bytes ---------------


def zipf_pairs(n_users=400, seed=0):
    """Users holding 1–12 items of a Zipf vocabulary: some items sit near the threshold."""
    rng = np.random.default_rng(seed)
    lines = []
    for u in range(n_users):
        items = {f"w{int(rng.zipf(1.3)) % 300}" for _ in range(int(rng.integers(1, 13)))}
        lines += [f"u{u},{item}" for item in sorted(items)]
    return lines


@pytest.fixture(scope="module")
def permuted_inputs(tmp_path_factory):
    """The same pairs as one file in user order, and permuted over three files."""
    base = tmp_path_factory.mktemp("permuted")
    lines = zipf_pairs()
    one = write_lines(base / "one.csv", lines)
    shuffled = list(lines)
    random.Random(7).shuffle(shuffled)
    split = base / "split"
    split.mkdir()
    for i, part in enumerate((shuffled[:500], shuffled[500:900], shuffled[900:])):
        with gzip.open(split / f"part{i}.csv.gz", "wt", encoding="utf-8") as f:
            f.write("\n".join(part) + "\n")
    return one, str(split / "part*.csv.gz")


@pytest.mark.parametrize("mechanism,extra", [
    ("weighted-gaussian", ["--num-shards", "3"]),
    ("sips", []),
    ("policy-gaussian", []),
])
def test_permuted_and_resplit_input_gives_identical_files(tmp_path, permuted_inputs,
                                                          mechanism, extra):
    one, split = permuted_inputs
    outputs = []
    for name, pattern in (("one", one), ("split", split)):
        out = tmp_path / name
        assert vocabulary.main(job_args(["--input", pattern, "--format", "pairs", "--mechanism",
                                mechanism, "--max-items-per-user", "5", "--rho", "2",
                                "--delta", "1e-5", "--seed", "11", *extra,
                                "--output", str(out)])) == 0
        outputs.append(output_bytes(out))
    assert outputs[0] == outputs[1]
    items, report = released_items_and_report(tmp_path / "one")
    assert 5 < len(items) < 300  # a real release: neither nothing nor everything
    assert not raw_keys(report)
    shards = int(extra[1]) if extra else 1
    assert len([n for n in outputs[0] if n.startswith("items-")]) == shards
    for name, data in outputs[0].items():  # every shard is sorted
        if name.startswith("items-"):
            lines = data.decode().splitlines()
            assert lines == sorted(lines)


def test_job_sips_flags_are_refused_by_other_mechanisms(tmp_path, capsys):
    path = write_csv(tmp_path, "u1,cat\n")
    code, err = run_job(["--input", path, "--format", "pairs", "--mechanism",
                         "weighted-laplace", "--rounds", "2", *BASE,
                         "--output", str(tmp_path / "o")], capsys)
    assert code == 2 and "--mechanism weighted-laplace does not take --rounds" in err


# The 60 users fill "common" up to the cutoff Γ = ρ + α·scale and stop, so it
# is released unless the noise falls below −α·scale: with α = 3 that is
def test_job_public_input_needs_gw(tmp_path, capsys):
    path = write_csv(tmp_path, "u1,cat\n")
    code, err = run_job(["--input", path, "--format", "pairs", "--public-input", path,
                         "--mechanism", "weighted-gaussian", *BASE,
                         "--output", str(tmp_path / "o")], capsys)
    assert code == 2 and "--public-input applies to --mechanism gw only" in err


def test_job_jsonl_and_text_formats_inferred(tmp_path):
    jsonl = tmp_path / "posts.jsonl.gz"
    with gzip.open(jsonl, "wt", encoding="utf-8") as f:
        for u in range(50):
            f.write(json.dumps({"author": u, "body": "Hello WORLD, see https://x.example/y"})
                    + "\n")
    out = tmp_path / "out_jsonl"
    assert vocabulary.main(job_args(["--input", str(jsonl), "--user-field", "author",
                            "--text-field", "body", "--epsilon", "50", "--delta", "1e-6",
                            "--max-items-per-user", "5", "--output", str(out)])) == 0
    items, report = released_items_and_report(out)
    # Unseeded: fails w.p. < 1e-24 (each word weighs ≥ 20 at any Δ0; SIPS's ρ ≤ 4.1, σ ≤ 0.6).
    assert items == ["hello", "see", "world"]  # URL stripped, lower-cased, sorted

    text = tmp_path / "lines.txt"
    text.write_text("\n".join(["Alpha beta"] * 40) + "\n")
    out = tmp_path / "out_text"
    assert vocabulary.main(job_args(["--input", str(text), "--keep-case", "--epsilon", "50",
                            "--delta", "1e-6", "--output", str(out)])) == 0
    items, report = released_items_and_report(out)
    assert items == ["Alpha", "beta"]


# -- input read as written: a byte order mark, items used as they are ---------------------

FIXED = ["--delta", "1e-5", "--max-items-per-user", "2"]


def test_csv_with_utf8_bom_is_read(tmp_path):
    path = tmp_path / "excel.csv"
    rows = "user,text\n" + "".join(f"u{i},the cat\n" for i in range(60))
    path.write_bytes(codecs.BOM_UTF8 + rows.encode("utf-8"))
    out = tmp_path / "out"
    proc = job_calls.vocabulary(["--input", path, "--user-field", "user", "--text-field", "text",
                                 "--epsilon", "2", *FIXED, "--seed", "1", "--output", out])
    assert_ran(proc)
    assert set(released(out)) == {"the", "cat"}


# --format pairs is a CSV dialect: its items are used as they are.
def test_pairs_items_keep_their_whitespace(tmp_path):
    path = write_pairs(tmp_path / "pairs.csv", [" spaced ", "\x0bvt"])
    out = tmp_path / "out"
    proc = job_calls.vocabulary(["--input", path, "--format", "pairs", "--epsilon", "2", *FIXED,
                                 "--seed", "1", "--output", out])
    assert_ran(proc)
    assert sorted(released(out)) == sorted([" spaced ", "\x0bvt"])


def test_pairs_quoted_item_with_a_line_break_is_one_item(tmp_path):
    path = write_pairs(tmp_path / "pairs.csv", ["two\nlines"])
    out = tmp_path / "out"
    proc = job_calls.vocabulary(["--input", path, "--format", "pairs", "--epsilon", "2", *FIXED,
                                 "--seed", "1", "--output", out])
    assert_ran(proc)
    assert released(out) == ["two\nlines"]


def write_csv(tmp_path, body, name="in.csv"):
    path = tmp_path / name
    path.write_text(body)
    return str(path)


@pytest.mark.parametrize("body,fields,message", [
    # Found on the first record, before any pipeline runs.
    ("user,text\n,world\n", ["--user-field", "user", "--text-field", "text"],
     r"in.csv:2: record 1: user id field 'user' is missing or empty"),
    ("user,body\nu1,hello\n", ["--user-field", "user", "--text-field", "text"],
     r"in.csv: the header \(line 1, 2 fields\) has no field 'text'"),
    ("user,text\n", ["--user-field", "user", "--text-field", "text"],
     r"no records in the input: .*in.csv is empty or only a header"),
    # Found in the pipeline (a later record).
    ("user,text\nu1,hello\nsecret-user\n", ["--user-field", "user", "--text-field", "text"],
     r"in.csv:3: record 2: text field 'text' is missing \(the row has fewer fields"),
])
def test_job_bad_csv_records(tmp_path, capsys, body, fields, message):
    path = write_csv(tmp_path, body)
    code, err = run_job(["--input", path, "--format", "csv", *fields, *BASE,
                         "--output", str(tmp_path / "o")], capsys)
    assert code == 2
    assert re.search(message, err), err
    assert len(err.strip().splitlines()) == 1 or "error:" in err.strip().splitlines()[-1]
    assert "secret-user" not in err and "hello" not in err  # no record text
    assert not os.path.exists(tmp_path / "o")  # the folder this run created is gone


def test_job_bad_pairs_record_names_line_not_text(tmp_path, capsys):
    path = write_csv(tmp_path, "u1,cat\nsecret-user\n")
    code, err = run_job(["--input", path, "--format", "pairs", *BASE,
                         "--output", str(tmp_path / "o")], capsys)
    assert code == 2 and "in.csv:2: expected 2 fields user,item, got 1" in err
    assert "secret-user" not in err


@pytest.mark.parametrize("args,message", [
    (["--input", "/nonexistent/*.csv", *BASE], "no input file matches '/nonexistent/*.csv'"),
    (["--epsilon", "-1", "--delta", "1e-5"], "--epsilon must be a finite number > 0, got -1.0"),
    (["--epsilon", "1", "--rho", "0.1", "--delta", "1e-5"], "give exactly one of --epsilon"),
    (["--epsilon", "1", "--delta", "2"], "--delta must satisfy 0 < delta < 1, got 2.0"),
    (["--epsilon", "1", "--delta", "0"], "--delta must be > 0, got 0: selecting items is never "
                                         "pure differential privacy"),
    (["--counts-share", "0.5", *BASE], "--counts-share and --counts-max-items-per-user need "
                                       "--with-counts"),
    (["--with-counts", "--counts-share", "1.5", *BASE],
     "--counts-share must lie strictly between 0 and 1, got 1.5"),
    (["--with-counts", "--counts-max-items-per-user", "0", *BASE],
     "--counts-max-items-per-user must be >= 1, got 0"),
    (["--mechanism", "magic", *BASE], "unknown mechanism 'magic'"),
    (["--mechanism", "wieghted-gaussian", *BASE], "did you mean weighted-gaussian"),
    (["--mechanism", "policy-gaussian-l1", *BASE], "not differentially private"),
    (["--max-items-per-user", "0", *BASE], "--max-items-per-user must be >= 1, got 0"),
    (["--format", "csv", *BASE], "--format csv needs --user-field and --text-field"),
    (BASE, "--format csv (inferred from the file name) needs --user-field and --text-field; "
           "for headerless lines of user,item give --format pairs"),
    (["--format", "pairs", "--num-shards", "0", *BASE], "--num-shards must be >= 1, got 0"),
    (["--format", "pairs", "--mechansim", "sips", *BASE],
     "unknown flag --mechansim; did you mean --mechanism?"),
    (["--format", "pairs", "--max-item-per-user", "5", *BASE],
     "unknown flag --max-item-per-user; did you mean --max-items-per-user"),
    (["--format", "pairs", "--mech", "sips", *BASE], "unknown flag --mech;"),
    (["--format", "pairs", "--direct_num_worker", "2", *BASE],
     "unknown flag --direct_num_worker; did you mean --direct_num_workers"),
    (["--format", "pairs", "--runner", "NoSuchRunner", *BASE],
     "--runner NoSuchRunner: Unexpected pipeline runner: NoSuchRunner"),
    (["--format", "pairs", "--epsilon", "x", "--delta", "1e-5"],
     "argument --epsilon: invalid float value: 'x'"),
    (["--format", "pairs", "--epsilon", "1"], "the following arguments are required: --delta"),
])
def test_job_bad_parameters(tmp_path, capsys, args, message):
    path = write_csv(tmp_path, "u1,cat\n")
    full = (["--output", str(tmp_path / "o")] + ([] if "--input" in args else ["--input", path])
            + args)  # each flag once (a repeated flag is an error of its own)
    code, err = run_job(full, capsys)
    assert code == 2
    lines = err.strip().splitlines()
    assert lines == [lines[-1]] and lines[0].startswith("error: "), err
    assert message in err, err
    assert not os.path.exists(tmp_path / "o")


@pytest.mark.parametrize("output,message", [
    ("/proc/beam_dpsu_out", "cannot write output folder '/proc/beam_dpsu_out'"),
    ("{file}/out", "is a file"),
    ("{file}", "it is a file, not a folder"),
])
def test_unwritable_output_fails_before_the_pipeline(tmp_path, capsys, output, message):
    path = write_csv(tmp_path, "u1,cat\n")
    code, err = run_job(["--input", path, "--format", "pairs", *BASE,
                         "--output", output.format(file=path)], capsys)
    assert code == 2 and message in err, err
    assert "reading" not in err  # nothing ran


def test_job_as_a_subprocess_prints_one_error_line(tmp_path):
    # The bad record is on line 2, so it is found inside the pipeline: Beam's
    # ERROR log and traceback must not reach the user, nor must the record.
    path = write_csv(tmp_path, "u1,cat\n,secret-item\n")
    out = tmp_path / "o"
    proc = subprocess.run(
        [sys.executable, "-m", "pipelines.vocabulary", "--input", path, "--format", "pairs",
         *BASE, "--output", str(out)], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 2
    lines = [line for line in proc.stderr.splitlines() if not line.startswith("[vocabulary")]
    assert lines == [f"error: {path}:2: field 1 (user id) is empty"], proc.stderr
    assert "secret-item" not in proc.stderr and proc.stdout == ""
    assert not out.exists()  # no output folder, no beam-temp-* left behind


def test_help_shows_one_spelling_defaults_and_an_example(capsys):
    with pytest.raises(SystemExit) as exit_:
        vocabulary.main(job_args(["--help"]))
    assert exit_.value.code == 0
    text = capsys.readouterr().out
    assert "--max-items-per-user N" in text and "--max_items_per_user" not in text.split(
        "examples:")[0]
    flat = " ".join(text.split())
    assert "(default: sips)" in flat and "(default: 1)" in flat
    assert "examples:\n  python -m pipelines.vocabulary --input" in text
    assert "msnbc" not in text  # the vocabulary job does not read it
    assert "--direct_num_workers" in text


def test_tiny_input_says_that_releasing_nothing_is_expected(tmp_path, capsys):
    src = write_lines(tmp_path / "tiny.csv", ["alice,cat", "bob,cat", "bob,dog"])
    out = tmp_path / "out"
    # Seeded: 'cat' (weight 1.7 against a threshold of 11.7, σ = 2.24) would
    # otherwise be released with probability Φ(−4.5) ≈ 4e-6.
    assert vocabulary.main(job_args(["--input", src, "--format", "pairs", "--rho", "0.1",
                            "--delta", "1e-5", "--seed", "1", "--output", str(out)])) == 0
    items, report = released_items_and_report(out)
    assert items == [] and report["released_items"] == 0
    assert "released 0 items" in (text := capsys.readouterr().out)
    assert "nothing cleared the release threshold" in text


# -- the budget in the start and summary lines ---------------------------------------------


@pytest.fixture(scope="module")
def rho_job(tmp_path_factory):
    """One zCDP job at a fixed Δ0: (start progress line, summary line)."""
    folder = tmp_path_factory.mktemp("rho_job")
    path = write_pairs(folder / "pairs.csv", ["cat", "dog"])
    proc = job_calls.vocabulary(["--input", path, "--format", "pairs", "--rho", "0.1",
                                 "--delta", "1e-5", "--max-items-per-user", "5",
                                 "--output", folder / "out"])
    assert_ran(proc)
    start = next(line for line in proc.stderr.splitlines() if "] reading " in line)
    return start, proc.stdout.strip().splitlines()[-1]


def _stated_budget(line: str) -> tuple[str, str]:
    """(the ε the line states, its wording around the numbers)."""
    budget = re.search(r"ρ = .*?\)-DP\)", line).group(0)
    epsilon = re.search(r"ε = ([\d.e+-]+)", budget).group(1)
    return epsilon, re.sub(r"\d+(?:\.\d+)?(?:e[+-]?\d+)?", "#", budget)


def test_start_and_summary_label_their_epsilon(rho_job):
    # The start line may state the zCDP conversion ("(≈ (ε = 1.91, δ = 2e-05)-DP)") and
    # the summary the selection's exact curve ("(≈ (ε = 1.76, δ = 2e-05)-DP)"): two ε
    # for one run, which must then be worded apart, not read as one claim.
    start, summary = rho_job
    start_epsilon, start_words = _stated_budget(start)
    summary_epsilon, summary_words = _stated_budget(summary)
    assert start_epsilon == summary_epsilon or start_words != summary_words, (start, summary)


def test_summary_names_max_items_per_user(rho_job):
    _, summary = rho_job
    assert re.search(r"max items per user\D{0,20}\b5\b", summary), summary


def test_rho_job_report_is_written(rho_job):
    # The shared run succeeds, so the two tests above fail, if they do, on their own
    # assertions.
    start, summary = rho_job
    assert "ρ = 0.1 zCDP" in start and "ρ = 0.1 zCDP" in summary


# -- --with-counts ----------------------------------------------------------------------


def read_counts(out_dir):
    return [line.split("\t") for line in shard_lines(out_dir, "counts-*.tsv")]


@pytest.mark.parametrize("budget,noise", [(["--epsilon", "4"], "discrete_laplace"),
                                          (["--rho", "2"], "discrete_gaussian")])
def test_job_with_counts_writes_one_count_per_released_item(tmp_path, budget, noise):
    src = tmp_path / "pairs.csv"
    lines = ([f"user{u},common" for u in range(300)] + [f"user{u},also" for u in range(120)]
             + [f"user{u},rare{u}" for u in range(40)])
    src.write_text("\n".join(reversed(lines)) + "\n")
    out = tmp_path / "out"
    code = vocabulary.main(job_args(["--input", str(src), "--format", "pairs", "--mechanism",
                            "weighted-gaussian", "--max-items-per-user", "3", *budget,
                            "--delta", "1e-6", "--with-counts", "--counts-max-items-per-user",
                            "2", "--output", str(out)]))
    assert code == 0
    items, report = released_items_and_report(out)
    counts = read_counts(out)
    # Every released item exactly once, no other, in the items' (sorted) order. Unseeded:
    # "also" (weight 80) and "common" miss ρ ≤ 8.6 (σ ≤ 1.6) w.p. < 1e-300.
    assert [item for item, _ in counts] == items == sorted(items)
    assert {"also", "common"} <= set(items) and all(len(row) == 2 for row in counts)
    by_item = {item: int(c) for item, c in counts}
    # Users hold ≤ 2 items, so the true counts are 300 and 120. The noise is
    # discrete Laplace of scale Δ0/ε = 2/1 or discrete Gaussian with σ² = 2/(2·0.5):
    # |error| ≥ 50 has probability < e^{-25} < 2e-11 per count.
    assert abs(by_item["common"] - 300) < 50 and abs(by_item["also"] - 120) < 50
    split = report["budget_split"]
    assert split["counts_share"] == 0.25
    assert report["total_budget"] == split["total"]
    assert report["budget"] == split["selection"] and split["selection"]["delta"] == 1e-6
    assert split["counts"]["delta"] == 0.0
    assert report["counts"]["noise"] == noise and report["counts"]["max_items_per_user"] == 2
    assert report["counts"]["budget"] == split["counts"]
    # The total as run, tightly accounted (beam_dpsu.core.composition): never above the sum.
    composed = split["composed_guarantee"]
    if noise == "discrete_laplace":
        # Budget(ε, δ): the split is tight, both parts scaled up by the same c
        # while the two as calibrated compose to the total.
        (tight,) = composed
        assert tight["delta"] == 1e-6 and tight["epsilon"] <= 4.0
        assert tight["basic_composition_epsilon"] == pytest.approx(4.0 * split["scale"])
        assert split["composition"].startswith("tight") and split["scale"] > 1.0
        assert split["selection"]["epsilon"] == pytest.approx(0.75 * 4.0 * split["scale"])
        assert split["counts"]["epsilon"] == pytest.approx(0.25 * 4.0 * split["scale"])
    else:
        assert [g["delta"] for g in composed] == pytest.approx([2e-6, 5e-6, 1e-5])
        assert all(g["epsilon"] < g["basic_composition_epsilon"] for g in composed)
    if noise == "discrete_gaussian":
        # The top-level equivalents are the whole run's (ρ = 2), not the selection's
        # share (ρ = 1.5).
        from beam_dpsu import ZCDPBudget
        total = ZCDPBudget(2.0, 1e-6)
        assert report["dp_equivalents"][0]["epsilon"] == pytest.approx(
            total.to_dp(2e-6).epsilon)
        assert (report["selection_dp_equivalents"][0]["epsilon"]
                < report["dp_equivalents"][0]["epsilon"])
    else:
        assert "dp_equivalents" not in report


def test_job_without_counts_writes_none(sips_run):
    out, _ = sips_run
    assert not glob.glob(os.path.join(out, "counts-*"))
    assert "counts" not in released_items_and_report(out)[1]


@pytest.mark.parametrize("share, code", [("1e-9", 0), ("1e-17", 2)])
def test_job_with_a_tiny_counts_share_ends_promptly(tmp_path, capsys, share, code):
    """A split stepping the counts' part down one ulp at a time (budgets.parts_within)
    would hang on --counts-share 1e-9. The split is exact at once: 1e-9 runs,
    and a share whose counts' part is no positive float (1e-17 of ε = 1) is one error line.
    An alarm fails the test rather than hang the suite."""
    import signal

    def expire(*_):
        raise TimeoutError("the job was still running after 300 s")

    path = write_csv(tmp_path, "u1,a\nu2,b\n")
    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(300)
    try:
        got, err = run_job(["--input", path, "--format", "pairs", "--mechanism",
                            "weighted-gaussian", "--epsilon", "1", "--delta", "1e-6",
                            "--with-counts", "--counts-share", share,
                            "--output", str(tmp_path / "out")], capsys)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    assert got == code
    if code == 2:
        lines = [line for line in err.splitlines() if line.startswith("error:")]
        assert len(lines) == 1 and "Traceback" not in err
        assert lines[0].startswith("error: --counts-share = 1e-17 is too small")
