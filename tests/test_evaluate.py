"""End-to-end test of the evaluation job on a small file."""

import csv
import os

import pytest

from pipelines import evaluate


@pytest.fixture
def pairs_file(tmp_path):
    path = tmp_path / "pairs.csv"
    lines = [f"user{u},w{(u * 3 + k) % 25}" for u in range(150) for k in range(6)]
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def test_evaluation_writes_results_summary_and_plot(pairs_file, tmp_path, capsys):
    out = tmp_path / "eval"
    code = evaluate.main(["--input", pairs_file, "--mechanisms", "weighted-gaussian,gw",
                          "--epsilons", "1,4", "--delta", "1e-5", "--trials", "2",
                          "--max-items-per-user", "6", "--k-anonymity", "5",
                          "--output", str(out)])
    assert code == 0
    with open(out / "results.csv", newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 2 * 2 * 2
    assert {r["mechanism"] for r in rows} == {"weighted-gaussian", "gw"}
    assert {r["budget"] for r in rows} == {"eps=1", "eps=4"}
    assert all(int(r["released"]) <= 25 and float(r["wall_seconds"]) > 0 for r in rows)
    assert all(0.0 <= float(r["k_anonymity_coverage"]) <= 1.0 for r in rows)
    # More budget releases at least as much on average (25 items held by ~36 users each).
    wg = {b: sum(int(r["released"]) for r in rows
                 if r["mechanism"] == "weighted-gaussian" and r["budget"] == b) for b in ("eps=1", "eps=4")}
    assert wg["eps=4"] >= wg["eps=1"]
    summary = (out / "summary.md").read_text(encoding="utf-8")
    assert "| weighted-gaussian | eps=4 | 2 |" in summary
    assert "NOT differentially private" in summary
    with open(out / "utility.png", "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    assert os.path.getsize(out / "utility.png") > 10_000
    err = capsys.readouterr().err
    assert "[8/8] gw eps=4 trial 2/2" in err  # progress per mechanism and trial


def test_every_tool_passes_max_items_to_gw(pairs_file):
    # evaluate and the benchmarks build their mechanisms with mechanism_from_args:
    # GW gets --max-items-per-user like the mechanisms that sample.
    from beam_dpsu import GreedyWithoutSampling, WeightedGaussian
    from pipelines.vocabulary import mechanism_from_args
    args, _ = evaluate.build_parser().parse_known_args([
        "--input", pairs_file, "--mechanisms", "gw,weighted-gaussian", "--epsilons", "1",
        "--delta", "1e-5", "--max-items-per-user", "6", "--output", "o"])
    assert mechanism_from_args(args, "gw", ignore_unused=True) == GreedyWithoutSampling(6)
    assert mechanism_from_args(args, "weighted-gaussian", ignore_unused=True) == WeightedGaussian(6)


def test_evaluation_rejects_bad_grid(pairs_file, tmp_path, capsys):
    code = evaluate.main(["--input", pairs_file, "--epsilons", "1", "--rhos", "0.1",
                          "--delta", "1e-5", "--output", str(tmp_path / "o")])
    assert code == 2 and "give exactly one of --epsilons or --rhos" in capsys.readouterr().err
    code = evaluate.main(["--input", pairs_file, "--epsilons", "1,-2", "--delta", "1e-5",
                          "--output", str(tmp_path / "o")])
    assert code == 2 and "epsilon must be a finite number > 0, got -2.0" in capsys.readouterr().err
