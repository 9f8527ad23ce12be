"""The benchmark job: the read-only pipeline and a job timed in fresh processes."""

import json

import pytest

from pipelines.evaluation import benchmark


pytestmark = pytest.mark.job

JOB = ["--input", "examples/imdb_2k.csv.gz", "--user-field", "user", "--text-field", "review",
       "--rho", "0.1", "--delta", "1e-5", "--max-items-per-user", "20"]


def test_benchmark_times_the_job_against_reading_and_labels_raw_figures(capsys, monkeypatch):
    monkeypatch.chdir(benchmark.ROOT)
    assert benchmark.main(["--job", "vocabulary", "--mechanisms", "weighted-gaussian",
                           "--json", "--", *JOB]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line]
    read, job = lines
    assert read["mechanism"] == "read-only" and read["pairs"] == 448_001
    assert job["mechanism"] == "weighted-gaussian" and job["code"] == "this"
    assert job["pairs"] == read["pairs"] and job["released"] >= 0
    # Both times are rounded to 0.01 s in the output.
    assert abs(job["ratio_to_read"] - job["wall_seconds"] / read["wall_seconds"]) < 0.02
    assert job["peak_mib"] > 0 and all(line["non_private"] for line in lines)


def test_bad_benchmark_command_lines_fail_with_one_error_line(capsys):
    assert benchmark.main(["--job", "vocabulary"]) == 2
    assert capsys.readouterr().err.startswith("error: give the job's own flags after --")
    assert benchmark.main(["--before", "/nonexistent", "--", *JOB]) == 2
    assert "is not a checkout of this project" in capsys.readouterr().err
    assert benchmark.main(["--", *JOB, "--output", "x"]) == 2
    assert "leave --output out" in capsys.readouterr().err
    assert benchmark.main(["--mechanisms", "sips,sips", "--", *JOB]) == 2
    assert capsys.readouterr().err.startswith("error: --mechanisms gives sips twice")
    assert benchmark.main(["--mechanisms", "sips,,gw", "--", *JOB]) == 2
    assert capsys.readouterr().err.startswith(
        "error: --mechanisms has an empty entry (entry 2 of 'sips,,gw')")
    assert benchmark.main(["--max-items-values", "100,100", "--", *JOB[:-2]]) == 2
    assert capsys.readouterr().err.startswith("error: --max-items-values gives 100 twice")


@pytest.mark.parametrize("where", ["a file", "inside a file", "remote"])
def test_an_unusable_workdir_is_one_error_line_before_any_work(where, tmp_path, capsys,
                                                               monkeypatch):
    # It ended in a traceback (FileExistsError, NotADirectoryError) once the run began.
    blocker = tmp_path / "blocker"
    blocker.write_text("not a folder\n", encoding="utf-8")
    workdir = {"a file": str(blocker), "inside a file": str(blocker / "sub"),
               "remote": "gs://bucket/scratch"}[where]
    monkeypatch.setattr(benchmark, "time_process", lambda *a: pytest.fail("it ran"))
    monkeypatch.chdir(benchmark.ROOT)
    assert benchmark.main(["--workdir", workdir, "--", *JOB]) == 2
    err = capsys.readouterr().err
    [line] = [line for line in err.splitlines() if line.strip()]
    assert line.startswith(f"error: --workdir {workdir}" if where != "remote" else
                           f"error: --workdir must be a local folder, got '{workdir}'"), err
    if where != "remote":
        assert ("is a file, not a folder" if where == "a file" else "cannot be created") in line


def test_input_paths_are_made_absolute_for_every_checkout(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    argv = ["--input", "data/x.csv", "--public-input=pub/*.txt", "--input", "gs://b/x.csv",
            "--rho", "0.1"]
    assert benchmark.absolute_inputs(argv) == [
        "--input", str(tmp_path / "data" / "x.csv"), f"--public-input={tmp_path}/pub/*.txt",
        "--input", "gs://b/x.csv", "--rho", "0.1"]


def test_a_failing_job_is_one_error_line_not_a_traceback(capsys, monkeypatch, tmp_path):
    # A --before checkout whose job cannot run: the benchmark names it and exits 2. Its
    # job runs in a real process; the read-only pipeline and this checkout's job, which
    # run before it in each round, are timed as above (the first test), not here.
    real_time_process = benchmark.time_process

    def time_only_before(command, cwd, log_path):
        if cwd != benchmark.ROOT:
            return real_time_process(command, cwd, log_path)
        with open(log_path, "w", encoding="utf-8") as log:
            log.write(json.dumps({"pairs": 1000}) + "\n")
        return 10.0, 100.0

    monkeypatch.setattr(benchmark, "time_process", time_only_before)
    monkeypatch.setattr(benchmark, "_released", lambda job, output: 7)
    (tmp_path / "pipelines").mkdir()
    monkeypatch.chdir(benchmark.ROOT)
    assert benchmark.main(["--before", str(tmp_path), "--", *JOB]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("error: ") and "failed (exit 1)" in err[-1]
    assert not any("Traceback" in line for line in err)


def test_every_round_runs_each_pipeline_once_and_ratios_use_the_fastest(capsys, monkeypatch,
                                                                         tmp_path):
    # Interleaved rounds (read-only, job, before; then again): a machine that drifts
    # during the run weighs on all of them alike.
    ran = []
    walls = iter([10.0, 14.0, 16.0, 8.0, 12.0, 20.0, 9.0, 13.0, 15.0])

    def fake_time_process(command, cwd, log_path):
        ran.append("read" if "--read-only" in command else
                   "this" if cwd == benchmark.ROOT else "before")
        with open(log_path, "w", encoding="utf-8") as log:
            log.write(json.dumps({"pairs": 1000}) + "\n")
        return next(walls), 100.0

    monkeypatch.setattr(benchmark, "time_process", fake_time_process)
    monkeypatch.setattr(benchmark, "_released", lambda job, output: 7)
    (tmp_path / "pipelines").mkdir()  # the --before checkout
    assert benchmark.main(["--mechanisms", "weighted-gaussian", "--repeats", "3",
                           "--before", str(tmp_path), "--json", "--", *JOB]) == 0
    assert ran == ["read", "this", "before"] * 3
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line]
    assert [(r["code"], r["wall_seconds"], r["median_seconds"]) for r in lines] == [
        ("read-only", 8.0, 9.0), ("this", 12.0, 13.0), ("before", 15.0, 16.0)]
    assert [r["ratio_to_read"] for r in lines] == [1.0, 1.5, 1.88]
    # Each round's ratio to its own read-only run (10, 8, 9 s), the median of them:
    # this 14/10, 12/8, 13/9; before 16/10, 20/8, 15/9.
    assert [r["median_round_ratio_to_read"] for r in lines] == [1.0, 1.44, 1.67]


def test_max_items_values_time_each_mechanism_at_each_value_in_one_run(capsys, monkeypatch):
    commands = []

    def fake_time_process(command, cwd, log_path):
        commands.append(command)
        with open(log_path, "w", encoding="utf-8") as log:
            log.write(json.dumps({"pairs": 1000}) + "\n")
        return 10.0, 100.0

    monkeypatch.setattr(benchmark, "time_process", fake_time_process)
    monkeypatch.setattr(benchmark, "_released", lambda job, output: 7)
    job = JOB[:-2]  # without --max-items-per-user
    assert benchmark.main(["--mechanisms", "sips", "--max-items-values", "100,auto", "--json",
                           "--", *job]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line]
    assert [r["mechanism"] for r in lines] == ["read-only", "sips Δ0=100", "sips Δ0=auto"]
    assert [c[c.index("--max-items-per-user") + 1] for c in commands[1:]] == ["100", "auto"]
    # the job's own --max-items-per-user and the option together are refused
    assert benchmark.main(["--max-items-values", "100,auto", "--", *JOB]) == 2
    assert "--max-items-values" in capsys.readouterr().err
