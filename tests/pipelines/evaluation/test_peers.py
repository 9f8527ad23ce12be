"""The peer benchmark: each selection in its own process, with its Δ0, items, time and memory.

PipelineDP is in the ``bench`` and ``test`` extras; without it these tests are skipped.
"""

import importlib.util
import json
import sys

import pytest

from pipelines.evaluation import peers
from tests.support.runner import job_args

pytestmark = pytest.mark.job

# Found, not imported: the benchmark itself loads PipelineDP only for its own rows.
pytestmark = pytest.mark.skipif(importlib.util.find_spec("pipeline_dp") is None,
                                reason="PipelineDP is in the test extra: "
                                       "pip install -e '.[test]'")


def _pairs(tmp_path):
    # 400 users, each holding "common" and one of w0..w3: five items, 100+ users each.
    path = tmp_path / "pairs.csv"
    path.write_text("".join(f"u{u},common\nu{u},w{u % 4}\n" for u in range(400)))
    return ["--input", str(path), "--format", "pairs", "--epsilon", "50", "--delta", "1e-5",
            "--workdir", str(tmp_path / "w")]


def _rows(out: str) -> list:
    return [[cell.strip() for cell in line.split("|")] for line in out.splitlines()[2:]]


def test_the_default_job_and_fixed_delta0_side_by_side_with_memory(tmp_path, capsys):
    code = peers.main(job_args([*_pairs(tmp_path), "--max-items-per-user", "5",
                       "--peer-strategies", "GAUSSIAN_THRESHOLDING",
                       "--mechanisms", "sips:auto,sips"]))
    captured = capsys.readouterr()
    assert code == 0, captured.err
    head = captured.out.splitlines()[:2]
    assert "Δ0 = 5" in head[0] and "ru_maxrss" in head[0]
    assert [c.strip() for c in head[1].split("|")] == [
        "selection", "Δ0", "released", "wall s", "peak MiB"]
    rows = _rows(captured.out)
    assert [r[0] for r in rows] == ["PipelineDP gaussian_thresholding",
                                    "beam_dpsu sips (default job)", "beam_dpsu sips"]
    # PipelineDP and sips keep the fixed Δ0; sips:auto shows the Δ0 it chose, one of its
    # candidates (a DP release).
    assert rows[0][1] == rows[2][1] == "5"
    assert rows[1][1].startswith("auto → ") and int(rows[1][1].split("→")[1]) >= 1
    # Unseeded: fails by chance w.p. at most 7e-24. Every item has >= 100 users, each
    # holding 2 items. PipelineDP's Gaussian thresholding (ρ = 2.6, σ = 0.34 at Δ0 = 5)
    # misses one w.p. 1e-17835; sips at Δ0 = 5 (rounds' ρ 3.7/2.5/1.8, σ 0.55/0.32/0.19,
    # weight ≥ 100/√2) w.p. 1e-43332; sips:auto (98.5% of ε) w.p. 1e-42422 at any
    # candidate Δ0 ≥ 2 and 1.8e-24 at Δ0 = 1 (weight Binomial(100, 1/2) in round 1),
    # for each of the 4 items of 100 users.
    assert [r[2] for r in rows] == ["5", "5", "5"]
    for row in rows:  # a wall time and a peak memory per process (no timing asserted)
        assert float(row[3]) > 0 and int(row[4].replace(",", "")) > 0
    for i in range(3):  # each selection ran in its own process, logged in the workdir
        assert (tmp_path / "w" / f"run{i}.log").exists()


def test_our_selections_process_loads_no_pipelinedp(tmp_path, monkeypatch):
    # The process of a beam_dpsu row (--selection 1 here) imports no PipelineDP, so
    # its peak memory and time hold none of it; PipelineDP's own rows load it.
    for name in [m for m in sys.modules if m.split(".")[0] == "pipeline_dp"]:
        monkeypatch.delitem(sys.modules, name)
    code = peers.main(job_args([*_pairs(tmp_path), "--peer-strategies", "TRUNCATED_GEOMETRIC",
                       "--mechanisms", "sips", "--selection", "1"]))
    assert code == 0
    # Unseeded: fails by chance w.p. about 1e-43332 (sips at Δ0 = 100: each of the 5
    # items has >= 100 users of 2 items, weight ≥ 100/√2 against the rounds' ρ < 3.7,
    # σ < 0.56; missed only if missed in all 3 rounds).
    assert json.loads((tmp_path / "w" / "run1.json").read_text())["released"] == 5
    assert "pipeline_dp" not in sys.modules


@pytest.mark.parametrize("flag,message", [
    (["--mechanisms", "sips:often"], "--mechanisms 'sips:often': expected an int or 'auto'"),
    (["--max-items-per-user", "auto"], "--mechanisms sips:auto"),
    (["--mechanisms", "sips:auto,sips", "--selection", "3"],
     "--selection must be in 0..2, got 3"),
    (["--mechanisms", "sipz:auto"], "did you mean sips"),
    (["--mechanisms", "sips,,gw"], "--mechanisms has an empty entry (entry 2 of 'sips,,gw')"),
    (["--mechanisms", "sips:auto,sips:auto"], "--mechanisms gives sips:auto twice"),
])
def test_bad_command_lines_are_one_error_line(flag, message, tmp_path, capsys):
    code = peers.main(job_args([*_pairs(tmp_path), "--peer-strategies", "TRUNCATED_GEOMETRIC",
                       *flag]))
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert code == 2 and err[-1].startswith("error:") and message in err[-1], err
    assert sum(line.startswith("error:") for line in err) == 1


@pytest.mark.parametrize("where", ["a file", "inside a file"])
def test_an_unusable_workdir_is_one_error_line_before_any_work(where, tmp_path, capsys,
                                                               monkeypatch):
    blocker = tmp_path / "blocker"
    blocker.write_text("not a folder\n", encoding="utf-8")
    workdir = blocker if where == "a file" else blocker / "sub"
    monkeypatch.setattr(peers, "time_process", lambda *a: pytest.fail("it ran"))
    argv = _pairs(tmp_path)
    argv[argv.index("--workdir") + 1] = str(workdir)
    code = peers.main(job_args([*argv, "--peer-strategies", "TRUNCATED_GEOMETRIC"]))
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert code == 2 and len(err) == 1, err
    assert err[0].startswith(f"error: --workdir {workdir} ")
    assert ("is a file, not a folder" if where == "a file" else "cannot be created") in err[0]


@pytest.mark.parametrize("twice", ["TRUNCATED_GEOMETRIC,TRUNCATED_GEOMETRIC",
                                   "TRUNCATED_GEOMETRIC, truncated_geometric "])
def test_a_strategy_given_twice_is_one_error_line(twice, tmp_path, capsys):
    code = peers.main(job_args([*_pairs(tmp_path), "--peer-strategies", twice]))
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert code == 2 and len(err) == 1
    assert err[0].startswith("error: --peer-strategies gives TRUNCATED_GEOMETRIC twice"), err


def test_strategy_and_mechanism_names_ignore_case_and_spaces_as_elsewhere(tmp_path):
    # PipelineDP's strategies are its enum's names, read as mechanism names are read.
    job = peers.prepare([*_pairs(tmp_path), "--peer-strategies", " Truncated_Geometric ",
                         "--mechanisms", "SIPS:AUTO, Weighted-Gaussian"])
    assert job.strategies == ["TRUNCATED_GEOMETRIC"]
    assert [m.name for m in job.mechanisms] == ["sips", "weighted-gaussian"]


def test_a_selection_process_gets_absolute_paths_its_workdir_and_index(tmp_path,
                                                                         monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "in.csv").write_text("u1,a\n")
    job = peers.prepare(["--input", "in.csv", "--format", "pairs", "--epsilon", "1",
                         "--delta", "1e-5", "--workdir", "w", "--selection=1",
                         "--peer-strategies", "TRUNCATED_GEOMETRIC", "--mechanisms", "sips"])
    assert peers._child_argv(job, 0) == [
        "--input", str(tmp_path / "in.csv"), "--format", "pairs", "--epsilon", "1",
        "--delta", "1e-5", "--peer-strategies", "TRUNCATED_GEOMETRIC", "--mechanisms",
        "sips", "--workdir", str(tmp_path / "w"), "--selection", "0"]
