"""The peer benchmark: each selection in its own process, with its Δ0, items, time and memory.

PipelineDP is in the ``bench`` and ``test`` extras; without it these tests are skipped.
"""

import importlib.util
import json
import sys

import pytest

from pipelines.evaluation import peers

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
    code = peers.main([*_pairs(tmp_path), "--max-items-per-user", "5",
                       "--peer-strategies", "GAUSSIAN_THRESHOLDING",
                       "--mechanisms", "sips:auto,sips"])
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
    # Unseeded. Every item has >= 100 users (>= 50 after any Δ0 >= 1 bounds each user's
    # 2 items); at ε = 50 PipelineDP keeps an item of 20 users with probability 1 in
    # float64, and our thresholds (Δ0 <= 5, or auto's candidates at 95% of ε) are below
    # 15 with σ < 2: a missed item has probability far below 1e-6.
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
    code = peers.main([*_pairs(tmp_path), "--peer-strategies", "TRUNCATED_GEOMETRIC",
                       "--mechanisms", "sips", "--selection", "1"])
    assert code == 0
    # Unseeded; all 5 items are released but with probability far below 1e-6 (as in
    # the first test: every item has >= 100 users at ε = 50).
    assert json.loads((tmp_path / "w" / "run1.json").read_text())["released"] == 5
    assert "pipeline_dp" not in sys.modules


@pytest.mark.parametrize("flag,message", [
    (["--mechanisms", "sips:often"], "--mechanisms 'sips:often': expected an int or 'auto'"),
    (["--max-items-per-user", "auto"], "--mechanisms sips:auto"),
    (["--mechanisms", "sips:auto,sips", "--selection", "3"],
     "--selection must be in 0..2, got 3"),
    (["--mechanisms", "sipz:auto"], "did you mean sips"),
])
def test_bad_command_lines_are_one_error_line(flag, message, tmp_path, capsys):
    code = peers.main([*_pairs(tmp_path), "--peer-strategies", "TRUNCATED_GEOMETRIC", *flag])
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert code == 2 and err[-1].startswith("error:") and message in err[-1], err
    assert sum(line.startswith("error:") for line in err) == 1


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
