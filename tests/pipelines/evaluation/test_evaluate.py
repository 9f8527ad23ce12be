"""End-to-end test of the evaluation job on a small file."""

import builtins
import csv
import os

import pytest

from pipelines.evaluation import evaluate
from tests.support.input_files import write_lines
from tests.support.runner import job_args

pytestmark = pytest.mark.job


@pytest.fixture
def pairs_file(tmp_path):
    path = tmp_path / "pairs.csv"
    lines = [f"user{u},w{(u * 3 + k) % 25}" for u in range(150) for k in range(6)]
    return write_lines(path, lines)


def test_evaluation_writes_results_summary_and_plot(pairs_file, tmp_path, capsys):
    out = tmp_path / "eval"
    code = evaluate.main(job_args(["--input", pairs_file, "--format", "pairs",
                          "--mechanisms", "weighted-gaussian,gw",
                          "--epsilons", "1,4", "--delta", "1e-5", "--trials", "2",
                          "--max-items-per-user", "6", "--k-anonymity", "5",
                          "--dataset", "toy pairs", "--output", str(out)]))
    assert code == 0
    # No raw data in the output folder: the per-user cache lived in a temporary folder.
    assert sorted(os.listdir(out)) == ["results.csv", "summary.md", "utility.png"]
    with open(out / "results.csv", newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 2 * 2 * 2
    assert {r["mechanism"] for r in rows} == {"weighted-gaussian", "gw"}
    assert {r["budget"] for r in rows} == {"eps=1", "eps=4"}
    assert all(int(r["released"]) <= 25 and float(r["wall_seconds"]) > 0 for r in rows)
    assert all(0.0 <= float(r["k_anonymity_coverage"]) <= 1.0 for r in rows)
    # Every item is held by 36 of the 150 users: the missing mass is the share of items
    # not released.
    assert all(abs(float(r["missing_mass"]) - (1 - int(r["released"]) / 25)) < 1e-6
               for r in rows)
    # More budget releases at least as much (25 items held by 36 users each, all of a
    # user's 6 items kept: weight 36/√6 = 14.7). Unseeded: fails by chance w.p. 1.4e-57
    # (at ε = 4, ρ = 5.9 and σ = 1.1: each of the 50 item-trials misses w.p. 2.3e-15; at
    # ε = 1, ρ = 19 and σ = 3.9: each is released w.p. 0.13).
    wg = {b: sum(int(r["released"]) for r in rows
                 if r["mechanism"] == "weighted-gaussian" and r["budget"] == b)
          for b in ("eps=1", "eps=4")}
    assert wg["eps=4"] >= wg["eps=1"]
    summary = (out / "summary.md").read_text(encoding="utf-8")
    assert "**For evaluation only.**" in summary
    assert "releases from the same data once per mechanism, budget and trial" in summary
    assert f"* Data set: toy pairs (`{pairs_file}`), 150 users (raw count)" in summary
    assert "(ε, δ)-DP with ε ∈ {1, 4}, δ = 1e-05; 2 trials each" in summary
    assert "* `weighted-gaussian`: Δ0 = 6" in summary
    assert "* `gw`: alpha = 3, shards = 1, Δ0 = 6" in summary
    assert "| weighted-gaussian | eps=4 | 2 |" in summary
    assert "NOT differentially private" in summary
    assert ("It and the coverage (the share of the items held by ≥ 5 users that the run "
            "released) use raw (non-private) counts") in summary
    with open(out / "utility.png", "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    assert os.path.getsize(out / "utility.png") > 10_000
    captured = capsys.readouterr()
    assert "[8/8] gw eps=4 trial 2/2" in captured.err  # progress per mechanism and trial
    assert captured.out.startswith("evaluated 8 runs (2 mechanisms × 2 budgets × 2 trials) "
                                   "on toy pairs; wrote results.csv, summary.md, utility.png")


def test_evaluation_keeps_the_cache_only_where_asked(pairs_file, tmp_path):
    out, cache = tmp_path / "eval", tmp_path / "cache"
    assert evaluate.main(job_args(["--input", pairs_file, "--format", "pairs", "--mechanisms",
                          "weighted-gaussian", "--rhos", "1", "--delta", "1e-5", "--no-plot",
                          "--cache-dir", str(cache), "--output", str(out)])) == 0
    assert sorted(os.listdir(out)) == ["results.csv", "summary.md"]
    [kept] = [n for n in os.listdir(cache) if n.startswith("cache-")]
    assert [n for n in os.listdir(cache / kept) if n.startswith("users-")]
    summary = (out / "summary.md").read_text(encoding="utf-8")
    assert "* Data set: pairs.csv" in summary and "ρ-zCDP with ρ ∈ {1}" in summary


def test_missing_matplotlib_is_reported_before_any_work(pairs_file, tmp_path, capsys,
                                                        monkeypatch):
    real_import = builtins.__import__

    def no_matplotlib(name, *args, **kwargs):
        if name.startswith("matplotlib"):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    code = evaluate.main(job_args(["--input", pairs_file, "--format", "pairs", "--epsilons",
                          "1",
                          "--delta", "1e-5", "--output", str(tmp_path / "o")]))
    err = capsys.readouterr().err
    assert code == 2 and "utility.png needs matplotlib" in err and "--no-plot" in err
    assert "reading" not in err and not (tmp_path / "o").exists()


def test_every_tool_passes_max_items_to_gw(pairs_file):
    # evaluate and the benchmarks build their mechanisms with mechanism_from_args:
    # GW gets --max-items-per-user like the mechanisms that sample.
    from beam_dpsu import GreedyWithoutSampling, WeightedGaussian
    from pipelines.settings import mechanism_from_args
    args, _ = evaluate.build_parser().parse_known_args([
        "--input", pairs_file, "--mechanisms", "gw,weighted-gaussian", "--epsilons", "1",
        "--delta", "1e-5", "--max-items-per-user", "6", "--output", "o"])
    assert mechanism_from_args(args, "gw", ignore_unused=True) == GreedyWithoutSampling(6)
    assert mechanism_from_args(args, "weighted-gaussian", ignore_unused=True) == WeightedGaussian(6)


def test_evaluation_rejects_bad_grid(pairs_file, tmp_path, capsys):
    code = evaluate.main(job_args(["--input", pairs_file, "--format", "pairs", "--epsilons",
                          "1",
                          "--rhos", "0.1", "--delta", "1e-5", "--output", str(tmp_path / "o")]))
    assert code == 2 and "give exactly one of --epsilons or --rhos" in capsys.readouterr().err
    code = evaluate.main(job_args(["--input", pairs_file, "--format", "pairs", "--epsilons",
                          "1,-2",
                          "--delta", "1e-5", "--output", str(tmp_path / "o")]))
    assert code == 2
    assert "--epsilons must be a finite number > 0, got -2.0" in capsys.readouterr().err


def test_the_cache_holds_only_users_holding_items(tmp_path):
    # A user whose rows tokenise to nothing must not be cached as [user, []] and
    # counted in the summary's raw user count.
    import os
    from types import SimpleNamespace

    from apache_beam.options.pipeline_options import PipelineOptions

    from pipelines.evaluation.evaluate import build_cache, count_users
    path = tmp_path / "in.csv"
    path.write_text("user,text\nu1,hello world\nu2,<br /> http://x.y ...\n", encoding="utf-8")
    args = SimpleNamespace(input=str(path), format="csv", user_field="user", text_field="text",
                           skip_header_lines=0, files=[str(path)], keep_case=False,
                           keep_urls=False)
    cache = tmp_path / "cache"
    os.makedirs(cache)
    build_cache(args, PipelineOptions([]), str(cache))
    assert count_users(str(cache)) == 1


def _evaluate_with_cache(path, cache, out, *extra):
    return evaluate.main(job_args(["--input", str(path), "--format", "pairs", "--mechanisms",
                          "weighted-gaussian", "--rhos", "1", "--delta", "1e-5", "--no-plot",
                          "--cache-dir", str(cache), "--output", str(out), *extra]))


def test_a_kept_cache_serves_only_the_input_it_was_made_from(pairs_file, tmp_path, capsys):
    cache = tmp_path / "cache"
    other = write_lines(tmp_path / "other.csv",
                        [f"person{u},w{u % 7}" for u in range(40)])
    assert _evaluate_with_cache(pairs_file, cache, tmp_path / "e1") == 0
    assert "using the cache" not in capsys.readouterr().err
    # Another input with the same --cache-dir: read and cached anew, its own users counted.
    assert _evaluate_with_cache(other, cache, tmp_path / "e2") == 0
    assert "using the cache" not in capsys.readouterr().err
    summary = (tmp_path / "e2" / "summary.md").read_text(encoding="utf-8")
    assert "* Data set: other.csv" in summary and "40 users (raw count)" in summary
    # The first input again: its cache is reused.
    assert _evaluate_with_cache(pairs_file, cache, tmp_path / "e3") == 0
    assert "using the cache in" in capsys.readouterr().err
    summary = (tmp_path / "e3" / "summary.md").read_text(encoding="utf-8")
    assert "150 users (raw count)" in summary


def test_the_cache_key_covers_contents_and_reading_flags(tmp_path, capsys):
    cache = tmp_path / "cache"
    path = write_lines(tmp_path / "in.csv", [f"u{u},W{u % 5}" for u in range(30)])
    assert _evaluate_with_cache(path, cache, tmp_path / "e1") == 0
    capsys.readouterr()
    # Same path, other contents: not the old cache.
    write_lines(tmp_path / "in.csv", [f"v{u},W{u % 5}" for u in range(30)][:20])
    assert _evaluate_with_cache(path, cache, tmp_path / "e2") == 0
    assert "using the cache" not in capsys.readouterr().err
    assert "20 users (raw count)" in (tmp_path / "e2" / "summary.md").read_text("utf-8")
    # Same contents, another tokenizer option: not the old cache either.
    assert _evaluate_with_cache(path, cache, tmp_path / "e3", "--keep-case") == 0
    assert "using the cache" not in capsys.readouterr().err
    # Same everything: reused.
    assert _evaluate_with_cache(path, cache, tmp_path / "e4", "--keep-case") == 0
    assert "using the cache in" in capsys.readouterr().err


@pytest.mark.parametrize("where", ["a file", "inside a file"])
def test_an_unusable_cache_dir_is_one_error_line_before_any_work(pairs_file, tmp_path, capsys,
                                                                 where):
    blocker = tmp_path / "blocker"
    blocker.write_text("not a folder\n", encoding="utf-8")
    cache = blocker if where == "a file" else blocker / "sub"
    code = _evaluate_with_cache(pairs_file, cache, tmp_path / "o")
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    [line] = [line for line in err.splitlines() if line.strip()]
    assert line.startswith("error: --cache-dir ") and str(cache) in line
    assert ("is a file, not a folder" if where == "a file" else "cannot be created") in line
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("flag, value, problem", [
    ("--epsilons", "1,,2", "--epsilons has an empty entry (entry 2 of '1,,2')"),
    ("--epsilons", "1,2,", "--epsilons has an empty entry (entry 3 of '1,2,')"),
    ("--epsilons", "1,2,1.0", "--epsilons gives 1 twice"),
    ("--rhos", "0.1, ,0.2", "--rhos has an empty entry (entry 2 of '0.1, ,0.2')"),
    ("--epsilons", "1,x", "--epsilons: expected comma-separated numbers, got '1,x'"),
    ("--mechanisms", "sips,sips", "--mechanisms gives sips twice"),
    ("--mechanisms", "sips,,gw", "--mechanisms has an empty entry (entry 2 of 'sips,,gw')"),
    ("--mechanisms", ",", "--mechanisms has an empty entry (entry 1 of ',')"),
])
def test_list_flags_refuse_empty_and_repeated_entries(pairs_file, tmp_path, capsys, flag, value,
                                                      problem):
    grid = {"--epsilons": "1", "--mechanisms": "weighted-gaussian"}
    grid.pop(flag, None)
    if flag == "--rhos":
        grid.pop("--epsilons")
    argv = ["--input", pairs_file, "--format", "pairs", "--delta", "1e-5", "--no-plot",
            "--output", str(tmp_path / "o"), flag, value]
    for k, v in grid.items():
        argv += [k, v]
    code = evaluate.main(job_args([*argv]))
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    [line] = [line for line in err.splitlines() if line.strip()]
    assert line.startswith(f"error: {problem}")
    assert not (tmp_path / "o").exists()


def test_every_run_reports_its_missing_mass_labelled_raw(tmp_path):
    # 100 users, each holding "common" (twice: distinct pairs count once) and an item of
    # its own. Only "common" is released, so half of the 200 distinct pairs are missing
    # (while 100 of 101 items are). Unseeded: fails by chance w.p. <= 1e-8 (each user's
    # own item is released w.p. <= δ = 1e-10; "common", weight 100/√2 = 70.7 against a
    # threshold near 5.5 with σ = 0.71, is missed w.p. far below that).
    path = write_lines(tmp_path / "in.csv", [line for u in range(100) for line in
                                             (f"u{u},common", f"u{u},common", f"u{u},own{u}")])
    out = tmp_path / "eval"
    assert evaluate.main(job_args(["--input", path, "--format", "pairs", "--mechanisms",
                          "weighted-gaussian,sips", "--rhos", "1", "--delta", "1e-10",
                          "--no-plot", "--output", str(out)])) == 0
    with open(out / "results.csv", newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert [(r["mechanism"], r["released"], float(r["missing_mass"])) for r in rows] == [
        ("weighted-gaussian", "1", 0.5), ("sips", "1", 0.5)]
    summary = (out / "summary.md").read_text(encoding="utf-8")
    assert "| missing mass (raw) |" in summary
    assert "| weighted-gaussian | rho=1 | 1 | 1.0 ± 0.0 |" in summary
    assert "| 50.0% ± 0.0% |" in summary
    assert "Missing mass: the share of the input's distinct (user, item) pairs" in summary


def test_a_cache_made_under_other_reading_rules_is_made_again(tmp_path, capsys, monkeypatch):
    # What a kept cache holds depends on how ids, items and texts are read (a user id's
    # surrounding whitespace stripped or not is one user or two): a cache made by a reader
    # of other rules is never reused, whatever the files and flags.
    from pipelines.io import formats
    cache = tmp_path / "cache"
    path = write_lines(tmp_path / "in.csv", [f"u{u},W{u % 5}" for u in range(30)])
    monkeypatch.setattr(formats, "READING_RULES_VERSION", formats.READING_RULES_VERSION - 1)
    assert _evaluate_with_cache(path, cache, tmp_path / "e1") == 0
    capsys.readouterr()
    monkeypatch.undo()
    assert _evaluate_with_cache(path, cache, tmp_path / "e2") == 0
    assert "using the cache" not in capsys.readouterr().err
    assert len(os.listdir(cache)) == 2
    # Under the same rules, reused.
    assert _evaluate_with_cache(path, cache, tmp_path / "e3") == 0
    assert "using the cache in" in capsys.readouterr().err


def test_items_the_release_escapes_count_as_released(tmp_path):
    # The release escapes a backslash and line breaks and keeps a tab or a space as is:
    # the figures compare the items themselves, not their lines. 100 users each hold the
    # four items; unseeded: each (weight 100/√4 = 50 against a threshold near 5.5 with
    # σ = 0.71) is missed w.p. far below 1e-8.
    from tests.support.input_files import write_pairs
    path = write_pairs(tmp_path / "in.csv", ["back\\slash", "two\nlines", "\t", "plain"],
                       users=100)
    out = tmp_path / "eval"
    assert evaluate.main(job_args(["--input", path, "--format", "pairs", "--mechanisms",
                          "weighted-gaussian", "--rhos", "1", "--delta", "1e-10",
                          "--k-anonymity", "50", "--no-plot", "--output", str(out)])) == 0
    with open(out / "results.csv", newline="", encoding="utf-8") as f:
        [row] = list(csv.DictReader(f))
    assert (row["released"], float(row["missing_mass"]),
            float(row["k_anonymity_coverage"])) == ("4", 0.0, 1.0)
