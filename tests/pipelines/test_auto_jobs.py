"""--max-items-per-user auto in the jobs: the chosen Δ0 in the report and the summary."""

import pytest

from pipelines import flags, vocabulary
from pipelines.evaluation import peers as benchmark_peers
from tests.support.job_output import read_report
from tests.support.runner import job_args

pytestmark = pytest.mark.job

BASE = ["--input", "examples/imdb_2k.csv.gz", "--user-field", "user", "--text-field",
        "review", "--rho", "0.1", "--delta", "1e-5"]


def test_the_vocabulary_job_chooses_max_items_privately_and_reports_it(tmp_path, capsys):
    out = tmp_path / "out"
    code = vocabulary.main(job_args([*BASE, "--mechanism", "weighted-gaussian",
                            "--max-items-per-user",
                            "auto", "--output", str(out)]))
    captured = capsys.readouterr()
    assert code == 0
    report = read_report(out)
    chosen = report["chosen_max_items_per_user"]
    assert chosen in report["max_items_per_user"]["candidates_calibrated"]
    assert report["max_items_per_user"]["share"] == 0.05
    assert report["budget"] == {"type": "approx-zcdp", "rho": 0.1, "delta": 1e-5}
    summary = (captured.out + captured.err).strip().splitlines()
    assert any(line.startswith("released ") and
               f"(max items per user {chosen:,}, chosen privately)" in line for line in summary)


@pytest.mark.parametrize("value,message", [
    ("automatic", "expected an int or 'auto', got 'automatic'"),
    ("1.5", "expected an int or 'auto'"),
])
def test_a_bad_value_is_one_error_line(value, message, capsys):
    code = vocabulary.main(job_args([*BASE, "--max-items-per-user", value, "--output",
                            "/tmp/x"]))
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and err[0].startswith("error:") and message in err[0]


def test_int_or_auto():
    assert flags.int_or_auto(" AUTO ") == "auto" and flags.int_or_auto("12") == 12


def test_auto_with_counts_chooses_the_counts_bound_too(tmp_path, capsys):
    # Without --counts-max-items-per-user the counts choose their own Δ0 as well.
    out = tmp_path / "o"
    code = vocabulary.main(job_args([*BASE, "--max-items-per-user", "auto", "--with-counts",
                            "--output", str(out)]))
    captured = capsys.readouterr()
    assert code == 0, captured.err
    report = read_report(out)
    assert report["chosen_max_items_per_user"] in report["max_items_per_user"]["candidates"]
    counts_plan = report["counts"]["max_items_per_user"]
    chosen = report["counts_chosen_max_items_per_user"]
    # The job's default SIPS spends its own 1.5 % of the selection's part,
    # the counts 5 % of theirs; each histogram's budget is that share of its part.
    split = report["budget_split"]
    selection_plan = report["max_items_per_user"]
    assert report["mechanism"]["name"] == "sips"
    assert selection_plan["share"] == 0.015 == report["mechanism"]["max_items_per_user"]["share"]
    assert counts_plan["share"] == 0.05
    for plan, part, rest in ((selection_plan, split["selection"], "selection_budget"),
                             (counts_plan, split["counts"], "counts_budget")):
        size = plan["size_histogram"]["budget"]
        assert size["rho"] == part["rho"] * plan["share"] and size["delta"] == 0.0
        assert size["rho"] + plan[rest]["rho"] <= part["rho"]
        assert plan[rest]["delta"] == part["delta"]
    assert chosen in counts_plan["candidates_calibrated"]
    summary = [line for line in (captured.out + captured.err).splitlines()
               if line.startswith("released ")]
    assert f"their noisy counts (each user counted on at most {chosen:,}, chosen " \
           "privately)" in summary[0]


def test_auto_with_counts_uses_the_basic_split(tmp_path, capsys):
    out = tmp_path / "o"
    code = vocabulary.main(job_args([*BASE[:-4], "--epsilon", "2", "--delta", "1e-5",
                            "--max-items-per-user", "auto", "--with-counts",
                            "--counts-max-items-per-user", "20", "--output", str(out)]))
    assert code == 0, capsys.readouterr().err
    report = read_report(out)
    assert report["budget_split"]["composition"].startswith("basic composition")
    assert report["total_budget"]["epsilon"] == 2


def test_the_peer_benchmark_refuses_auto(capsys):
    pytest.importorskip("pipeline_dp")
    code = benchmark_peers.main(job_args([*BASE[:-4], "--epsilon", "1", "--delta", "1e-5",
                                 "--max-items-per-user", "auto"]))
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and "fixed int" in err[-1]


def _pairs(tmp_path):
    path = tmp_path / "pairs.csv"
    path.write_text("".join(f"u{u},common\nu{u},w{u % 4}\n" for u in range(400)))
    return ["--input", str(path), "--format", "pairs", "--rho", "1", "--delta", "1e-5"]


def test_the_default_job_runs_sips_with_auto_and_says_why(tmp_path, capsys):
    # Neither --mechanism nor --max-items-per-user: SIPS with Δ0 chosen privately, and
    # report and summary say these were the job's defaults.
    out = tmp_path / "out"
    assert vocabulary.main(job_args([*_pairs(tmp_path), "--output", str(out)])) == 0
    summary = [line for line in capsys.readouterr().out.splitlines()
               if line.startswith("released ")]
    report = read_report(out)
    assert report["mechanism"]["name"] == "sips"
    assert report["mechanism"]["max_items_per_user"]["method"] == "auto"
    defaults = report["job_defaults"]
    assert {k: v for k, v in defaults.items() if k != "note"} == {
        "mechanism": "sips", "max_items_per_user": "auto"}
    assert "max_items_per_user.rule" in defaults["note"]
    assert "max_items_choice" in report["max_items_per_user"]["rule"]
    chosen = report["chosen_max_items_per_user"]
    assert summary == [line for line in summary if line.startswith(
        f"released {report['released_items']:,} item") and
        f"with sips (the default) (max items per user {chosen:,}, chosen privately)" in line]
    assert len(summary) == 1


def test_a_mechanism_given_is_not_reported_as_a_default(tmp_path, capsys):
    out = tmp_path / "out"
    assert vocabulary.main(job_args([*_pairs(tmp_path), "--mechanism", "sips",
                            "--max-items-per-user", "5", "--output", str(out)])) == 0
    assert "(the default)" not in capsys.readouterr().out
    assert "job_defaults" not in read_report(out)
