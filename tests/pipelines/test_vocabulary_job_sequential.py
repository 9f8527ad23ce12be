"""End-to-end tests of ``python -m pipelines.vocabulary`` with the sequential
mechanisms (the policies and GW, GW-KT with a public corpus), unseeded and seeded."""

import pytest
import scipy.stats

from pipelines import vocabulary
from tests.support.job_output import released_items_and_report
from tests.support.input_files import write_lines
from tests.support.runner import job_args

pytestmark = pytest.mark.job


# ½e^{−3} = 2.5% for Laplace (these tests failed by chance). α = 25 makes it
# ½e^{−25} < 1e-10 (Laplace) and Φ(−25) < 1e-100 (Gaussian). The loner's item is
# released with probability about δ per case: δ = 1e-9 (at 1e-6: 2.5e-6 in all).
SURE = ["--alpha", "25"]
SEQUENTIAL_ARGS = [
    ["--mechanism", "policy-laplace", *SURE],
    ["--mechanism", "policy-gaussian", "--shards", "2", *SURE],
    ["--mechanism", "gw", *SURE],
]
SEQUENTIAL_BUDGET = ["--max-items-per-user", "3", "--epsilon", "5", "--delta", "1e-9"]


def _sequential_job(tmp_path, args):
    src = write_lines(tmp_path / "pairs.csv",
                      [f"user{u},common" for u in range(60)] + ["loner,secret"])
    return ["--input", src, "--format", "pairs", *args, *SEQUENTIAL_BUDGET,
            "--output", str(tmp_path / "out")]


def test_the_sequential_jobs_fail_by_chance_below_one_in_a_million(tmp_path):
    # The unseeded test below fails by chance w.p. 2.5e-9 (its 3 cases): "common"
    # reaches Γ ≤ 60 (each of 2 shards stops at Γ) and is missed when its noise falls
    # below −(Γ − ρ); the loner's item (weight 1) is released when it passes ρ − 1.
    rate = 0.0
    for args in SEQUENTIAL_ARGS:
        job = vocabulary.prepare(_sequential_job(tmp_path, args))
        c = job.mechanism.calibrate(job.budget)
        tail = scipy.stats.norm if c.noise == "gaussian" else scipy.stats.laplace
        assert c.cutoff <= 60
        rate += (tail.sf((c.cutoff - c.release_threshold) / c.noise_scale)
                 + tail.sf((c.release_threshold - 1) / c.noise_scale))
    assert rate < 1e-6, rate


@pytest.mark.parametrize("args", SEQUENTIAL_ARGS)
def test_job_sequential_mechanisms(tmp_path, args):
    assert vocabulary.main(job_args([*_sequential_job(tmp_path, args)])) == 0
    items, report = released_items_and_report(tmp_path / "out")
    assert items == ["common"]
    assert report["cutoff"] > report["release_threshold"]
    assert report["mechanism"]["max_items_per_user"] == 3


def test_job_gw_default_max_items(tmp_path):
    src = write_lines(tmp_path / "pairs.csv", [f"user{u},common" for u in range(60)])
    out = tmp_path / "out"
    assert vocabulary.main(job_args(["--input", src, "--format", "pairs", "--mechanism", "gw",
                            *SURE,
                            "--epsilon", "5", "--delta", "1e-6", "--output", str(out)])) == 0
    items, report = released_items_and_report(out)
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
        assert vocabulary.main(job_args(["--input", str(src), "--format", "pairs",
                                "--mechanism", "gw",
                                *extra, "--epsilon", "20", "--delta", "1e-6", "--seed", "1",
                                "--output", str(out)])) == 0
        items, report = released_items_and_report(out)
        assert report["mechanism"]["name"] == name
        assert report["mechanism"]["max_items_per_user"] == {"gw": 30, "gw-kt": 300}[name]
        released[name] = items
    assert released == {"gw": ["common"], "gw-kt": ["rare"]}
