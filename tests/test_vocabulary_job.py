"""End-to-end tests of ``python -m pipelines.vocabulary`` on small files."""

import glob
import gzip
import json
import os
import re
import subprocess
import sys

import pytest

from pipelines import vocabulary

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLE = os.path.join(ROOT, "examples", "imdb_2k.csv.gz")


def read_output(out_dir):
    items = []
    for path in sorted(glob.glob(os.path.join(out_dir, "items-*.txt"))):
        with open(path, encoding="utf-8") as f:
            items += [line.rstrip("\n") for line in f if line.strip()]
    with open(os.path.join(out_dir, "report.json"), encoding="utf-8") as f:
        return items, json.load(f)


def run_job(args, capsys=None):
    code = vocabulary.main(args)
    err = capsys.readouterr().err if capsys else ""
    return code, err


def test_job_on_example_imdb_slice(tmp_path):
    out = tmp_path / "out"
    code = vocabulary.main([
        "--input", EXAMPLE, "--format", "csv", "--user-field", "user", "--text-field", "review",
        "--mechanism", "weighted-gaussian", "--rho", "0.5", "--delta", "1e-5",
        "--max-items-per-user", "50", "--output", str(out)])
    assert code == 0
    items, report = read_output(out)
    assert report["mechanism"] == {"name": "weighted-gaussian", "max_items_per_user": 50}
    assert report["budget"] == {"type": "approx-zcdp", "rho": 0.5, "delta": 1e-5}
    assert report["released_items"] == len(items) > 50
    counts = report["non_private_counts"]
    assert counts["users"] == 2000 and counts["pairs"] > 100_000
    assert counts["distinct_items"] > len(items)
    assert "NOT differentially private" in counts["note"]
    assert {"the", "movie", "film"} <= set(items)
    assert all(item == item.lower() and " " not in item for item in items)


@pytest.mark.parametrize("mechanism", ["count-laplace", "count-gaussian", "weighted-laplace",
                                       "weighted-gaussian"])
def test_job_every_mechanism_on_pairs(tmp_path, mechanism):
    src = tmp_path / "pairs.csv"
    lines = [f"user{u},common" for u in range(60)] + ["loner,secret"]
    src.write_text("user,item\n" + "\n".join(lines) + "\n")
    out = tmp_path / "out"
    code = vocabulary.main(["--input", str(src), "--skip-header-lines", "1",
                            "--mechanism", mechanism, "--max-items-per-user", "1",
                            "--epsilon", "50", "--delta", "1e-6", "--seed", "3",
                            "--output", str(out)])
    assert code == 0
    items, report = read_output(out)
    assert items == ["common"]
    assert report["seeded"] is True and report["seed"] == 3
    assert report["non_private_counts"]["users"] == 61
    assert report["non_private_counts"]["distinct_items"] == 2


def test_job_sips_reports_rounds(tmp_path):
    out = tmp_path / "out"
    code = vocabulary.main([
        "--input", EXAMPLE, "--format", "csv", "--user-field", "user", "--text-field", "review",
        "--mechanism", "sips", "--rounds", "2", "--ratio", "0.5", "--rho", "0.5",
        "--delta", "1e-5", "--max-items-per-user", "50", "--output", str(out)])
    assert code == 0
    items, report = read_output(out)
    assert report["mechanism"] == {"name": "sips", "max_items_per_user": 50, "rounds": 2,
                                   "ratio": 0.5, "removal": "side_input"}
    assert [r["round"] for r in report["rounds"]] == [0, 1]
    assert report["rounds"][1]["rho"] == pytest.approx(2 * report["rounds"][0]["rho"])
    by_stage = report["released_by_stage"]
    assert by_stage["round_0"] + by_stage["round_1"] == report["released_items"] == len(items)
    assert len(set(items)) == len(items)
    assert report["dp_equivalents"][0]["delta"] == pytest.approx(2e-5)


def test_job_sips_flags_are_refused_by_other_mechanisms(tmp_path, capsys):
    path = write_csv(tmp_path, "u1,cat\n")
    code, err = run_job(["--input", path, "--mechanism", "weighted-laplace", "--rounds", "2",
                         *BASE, "--output", str(tmp_path / "o")], capsys)
    assert code == 2 and "mechanism 'weighted-laplace' does not take ['rounds']" in err


@pytest.mark.parametrize("args", [
    ["--mechanism", "policy-laplace", "--alpha", "2"],
    ["--mechanism", "policy-gaussian", "--shards", "2"],
    ["--mechanism", "gw"],
])
def test_job_sequential_mechanisms(tmp_path, args):
    src = tmp_path / "pairs.csv"
    src.write_text("\n".join([f"user{u},common" for u in range(60)] + ["loner,secret"]) + "\n")
    out = tmp_path / "out"
    assert vocabulary.main(["--input", str(src), *args, "--max-items-per-user", "3",
                            "--epsilon", "5", "--delta", "1e-6", "--output", str(out)]) == 0
    items, report = read_output(out)
    assert items == ["common"]
    assert report["cutoff"] > report["release_threshold"]
    assert report["mechanism"]["max_items_per_user"] == 3


def test_job_gw_default_max_items(tmp_path):
    src = tmp_path / "pairs.csv"
    src.write_text("\n".join(f"user{u},common" for u in range(60)) + "\n")
    out = tmp_path / "out"
    assert vocabulary.main(["--input", str(src), "--mechanism", "gw", "--epsilon", "5",
                            "--delta", "1e-6", "--output", str(out)]) == 0
    items, report = read_output(out)
    assert items == ["common"] and report["mechanism"]["max_items_per_user"] == 30


def test_job_gw_kt_with_public_corpus(tmp_path):
    # Two users hold 'common' three times and 'rare' once. At ε = 20, δ = 1e-6:
    # ρ = 1.66 (Δ0 = 30 or 300; the zero-weight keys barely move it at this ε),
    # Γ = ρ + 3λ = 1.81. Plain GW spends each user's budget on
    # 'common' first (1 + 0.81 = Γ; 'rare' gets 0.19); GW-KT, whose public
    # corpus only has 'rare', spends it on 'rare' first. The item at Γ is
    # released w.p. 1 − ½e^{−3} ≈ 0.975 and the other never (seeded here).
    public = tmp_path / "public.txt"
    public.write_text("rare words here\n" * 5)
    src = tmp_path / "pairs.csv"
    src.write_text("".join(f"user{u},common\n" * 3 + f"user{u},rare\n" for u in range(2)))
    released = {}
    for name, extra in (("gw", []), ("gw-kt", ["--public-input", str(public)])):
        out = tmp_path / name
        assert vocabulary.main(["--input", str(src), "--mechanism", "gw", *extra,
                                "--epsilon", "20", "--delta", "1e-6", "--seed", "1",
                                "--output", str(out)]) == 0
        items, report = read_output(out)
        assert report["mechanism"]["name"] == name
        assert report["mechanism"]["max_items_per_user"] == {"gw": 30, "gw-kt": 300}[name]
        released[name] = items
    assert released == {"gw": ["common"], "gw-kt": ["rare"]}


def test_job_public_input_needs_gw(tmp_path, capsys):
    path = write_csv(tmp_path, "u1,cat\n")
    code, err = run_job(["--input", path, "--public-input", path, "--mechanism",
                         "weighted-gaussian", *BASE, "--output", str(tmp_path / "o")], capsys)
    assert code == 2 and "--public-input applies to --mechanism gw only" in err


def test_job_jsonl_and_text_formats(tmp_path):
    jsonl = tmp_path / "posts.jsonl.gz"
    with gzip.open(jsonl, "wt", encoding="utf-8") as f:
        for u in range(50):
            f.write(json.dumps({"author": u, "body": "Hello WORLD, see https://x.example/y"}) + "\n")
    out = tmp_path / "out_jsonl"
    assert vocabulary.main(["--input", str(jsonl), "--format", "jsonl", "--user-field", "author",
                            "--text-field", "body", "--epsilon", "50", "--delta", "1e-6",
                            "--max-items-per-user", "5", "--output", str(out)]) == 0
    items, report = read_output(out)
    assert sorted(items) == ["hello", "see", "world"]  # URL stripped, lower-cased
    assert report["non_private_counts"]["users"] == 50

    text = tmp_path / "lines.txt"
    text.write_text("\n".join(["Alpha beta"] * 40) + "\n")
    out = tmp_path / "out_text"
    assert vocabulary.main(["--input", str(text), "--format", "text", "--keep-case",
                            "--epsilon", "50", "--delta", "1e-6", "--output", str(out)]) == 0
    items, report = read_output(out)
    assert sorted(items) == ["Alpha", "beta"]
    assert report["non_private_counts"]["users"] == 40  # one user per line


def write_csv(tmp_path, body):
    path = tmp_path / "in.csv"
    path.write_text(body)
    return str(path)


BASE = ["--epsilon", "1", "--delta", "1e-5"]


@pytest.mark.parametrize("body,fields,message", [
    ("user,text\nu1,hello\n,world\n", ["--user-field", "user", "--text-field", "text"],
     r"in.csv:3: missing user id field 'user'"),
    ("user,body\nu1,hello\n", ["--user-field", "user", "--text-field", "text"],
     r"header has no field 'text'"),
    ("user,text\nu1\n", ["--user-field", "user", "--text-field", "text"],
     r"in.csv:2: missing text field 'text'"),
])
def test_job_bad_csv_records(tmp_path, capsys, body, fields, message):
    path = write_csv(tmp_path, body)
    code, err = run_job(["--input", path, "--format", "csv", *fields, *BASE,
                         "--output", str(tmp_path / "o")], capsys)
    assert code == 2
    assert re.search(message, err), err


def test_job_bad_pairs_record(tmp_path, capsys):
    path = write_csv(tmp_path, "u1,cat\nu2\n")
    code, err = run_job(["--input", path, *BASE, "--output", str(tmp_path / "o")], capsys)
    assert code == 2 and "in.csv:2: expected 2 fields 'user,item', got 1" in err


@pytest.mark.parametrize("args,message", [
    (["--input", "/nonexistent/*.csv", *BASE], "no input file matches '/nonexistent/*.csv'"),
    (["--epsilon", "-1", "--delta", "1e-5"], "epsilon must be a finite number > 0, got -1.0"),
    (["--epsilon", "1", "--rho", "0.1", "--delta", "1e-5"], "give exactly one of --epsilon"),
    (["--epsilon", "1", "--delta", "2"], "delta must satisfy 0 <= delta < 1, got 2.0"),
    (["--epsilon", "1", "--delta", "0"], "mechanism 'weighted-gaussian' needs delta > 0"),
    (["--counts-share", "0.5", *BASE], "--counts-share and --counts-max-items-per-user need "
                                       "--with-counts"),
    (["--with-counts", "--counts-share", "1.5", *BASE],
     "counts_share must lie strictly between 0 and 1, got 1.5"),
    (["--with-counts", "--counts-max-items-per-user", "0", *BASE],
     "max_items_per_user must be >= 1, got 0"),
    (["--mechanism", "magic", *BASE], "unknown mechanism 'magic'"),
    (["--mechanism", "policy-gaussian-l1", *BASE], "not differentially private"),
    (["--max-items-per-user", "0", *BASE], "max_items_per_user must be >= 1, got 0"),
    (["--format", "csv", *BASE], "--format csv needs --user-field and --text-field"),
])
def test_job_bad_parameters(tmp_path, capsys, args, message):
    path = write_csv(tmp_path, "u1,cat\n")
    full = ["--input", path, "--output", str(tmp_path / "o")] + args
    code, err = run_job(full, capsys)
    assert code == 2
    assert message in err, err
    assert not os.path.exists(tmp_path / "o")


def test_job_as_a_subprocess_exits_non_zero_on_bad_input(tmp_path):
    path = write_csv(tmp_path, "u1,cat\n,dog\n")
    proc = subprocess.run(
        [sys.executable, "-m", "pipelines.vocabulary", "--input", path, *BASE,
         "--output", str(tmp_path / "o")], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 2
    assert "error: " in proc.stderr and "in.csv:2: missing user id" in proc.stderr


def read_counts(out_dir):
    lines = []
    for path in sorted(glob.glob(os.path.join(out_dir, "counts-*.tsv"))):
        with open(path, encoding="utf-8") as f:
            lines += [line.rstrip("\n").split("\t") for line in f]
    return lines


@pytest.mark.parametrize("budget,noise", [(["--epsilon", "4"], "discrete_laplace"),
                                          (["--rho", "2"], "discrete_gaussian")])
def test_job_with_counts_writes_one_count_per_released_item(tmp_path, budget, noise):
    src = tmp_path / "pairs.csv"
    lines = ([f"user{u},common" for u in range(300)] + [f"user{u},also" for u in range(120)]
             + [f"user{u},rare{u}" for u in range(40)])
    src.write_text("\n".join(reversed(lines)) + "\n")
    out = tmp_path / "out"
    code = vocabulary.main(["--input", str(src), "--mechanism", "weighted-gaussian",
                            "--max-items-per-user", "3", *budget, "--delta", "1e-6",
                            "--with-counts", "--counts-max-items-per-user", "2",
                            "--output", str(out)])
    assert code == 0
    items, report = read_output(out)
    counts = read_counts(out)
    # Every released item exactly once, no other, in the items' (sorted) order.
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


def test_job_without_counts_writes_none(tmp_path):
    path = write_csv(tmp_path, "\n".join(f"u{i},cat" for i in range(50)) + "\n")
    out = tmp_path / "out"
    assert vocabulary.main(["--input", path, *BASE, "--output", str(out)]) == 0
    assert not glob.glob(os.path.join(out, "counts-*")) and "counts" not in read_output(out)[1]
