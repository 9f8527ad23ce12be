"""The in-memory evaluator of the Δ0 benchmark against the Beam transforms, and its job."""

import csv
import os

import apache_beam as beam
import numpy as np
import pytest
from tests.support.runner import TestPipeline
from apache_beam.testing.util import assert_that

from beam_dpsu import SelectItems

from beam_dpsu.core import max_items_choice
from beam_dpsu.core.budgets import ZCDPBudget
from beam_dpsu.core.mechanisms import SIPS, PolicyGaussian, WeightedGaussian
from beam_dpsu.core.tokenizer import Tokenizer
from pipelines.evaluation import max_items as bench

from pipelines.io.errors import InputFormatError
from tests.support.input_files import csv_gzip_corrupted_mid_stream
from tests.support.paths import ROOT

pytestmark = [pytest.mark.job, pytest.mark.pipeline]
IMDB_2K = os.path.join(ROOT, "examples", "imdb_2k.csv.gz")


@pytest.fixture(scope="module")
def imdb_2k():
    return (bench.read_user_items(IMDB_2K, "user", "review", Tokenizer()),)


def test_a_corrupt_compressed_input_is_reported_as_corruption_not_as_a_bad_field(tmp_path):
    # The garbage a damaged deflate stream decompresses into fails the CSV parser before
    # the checksum does; the error must say the file is corrupt, as the jobs' readers do.
    path = str(csv_gzip_corrupted_mid_stream(tmp_path / "texts.csv.gz"))
    with pytest.raises(InputFormatError,
                       match=rf"^{path}: cannot be decompressed as gzip \(zlib.error\)"):
        bench.read_user_items(path, "user", "text", Tokenizer())


def test_user_item_arrays_hold_each_users_distinct_items():
    data = bench.UserItemArrays.from_item_lists([["a", "b", "a"], [], ["b", "c"]])
    assert data.num_users == 2 and data.num_items == 3
    assert [a.tolist() for a in data.user_arrays()] == [[0, 1], [1, 2]]
    assert data.users_of_entries().tolist() == [0, 0, 1, 1]


def test_sample_keeps_min_size_delta0_distinct_items_of_each_user_uniformly():
    sizes = np.array([3, 8, 1, 8])
    data = bench.UserItemArrays.from_sizes(sizes, np.arange(20) % 11, 11)
    rng = np.random.default_rng(1)
    trials, hits = 4000, np.zeros(20)
    for _ in range(trials):
        sampled = bench.sample(data, 2, rng)
        assert sampled.sizes.tolist() == [2, 2, 1, 2]
        for own, got in zip(data.user_arrays(), sampled.user_arrays()):
            assert len(set(got.tolist())) == len(got) and set(got.tolist()) <= set(own.tolist())
        # Which entries were kept: users' items are distinct, so (user, item) names one.
        users = sampled.users_of_entries()
        for u, item in zip(users, sampled.items):
            entry = data.offsets[u] + np.flatnonzero(data.user_arrays()[u] == item)[0]
            hits[entry] += 1
    expected = np.repeat(np.minimum(2 / sizes, 1.0), sizes)
    # Each entry is kept in a trial w.p. p = min(Δ0/n, 1): Binomial(4000, p), sd ≤ 31.7;
    # 6 sd is a false failure w.p. < 2e-9 per entry (Chernoff), < 1e-7 over 20 entries.
    assert np.all(np.abs(hits - trials * expected) <= 6 * np.sqrt(trials * expected
                                                                  * (1 - expected)) + 1e-9)


# Each mechanism's released count from one seeded SelectItems run on the first 1,000
# users of imdb_2k, against K = 30 in-memory runs (mean m, sd s): with X and the runs
# independent and the counts close to normal (sums of many weakly dependent
# indicators), (X − m)/(s·√(1 + 1/K)) is Student-t with 29 df, beyond 7 with
# probability 1.1e-7: 3.2e-7 over the 3 mechanisms (< 1e-6). Δ0 = 10 is below most
# reviews' sizes, so the sampling is exercised. One pipeline runs all three.
BUDGET = ZCDPBudget(1.0, 1e-5)
RUNS = 30
USERS = 1000
MECHANISMS = (WeightedGaussian(10), PolicyGaussian(10), SIPS(max_items_per_user=10))


def _bound(counts) -> tuple:
    return np.mean(counts), 7 * np.std(counts, ddof=1) * np.sqrt(1 + 1 / len(counts))


def test_evaluator_releases_as_many_items_as_select_items(imdb_2k):
    users = dict(list(imdb_2k[0].items())[:USERS])
    data = bench.UserItemArrays.from_item_lists(users.values())
    rng = np.random.default_rng(7)
    with TestPipeline() as p:
        records = p | beam.Create([(u, tuple(items)) for u, items in users.items()])
        for mechanism in MECHANISMS:
            mean, bound = _bound([bench.released_count(data, mechanism, BUDGET, rng)
                                  for _ in range(RUNS)])
            assert bound > 0

            def close(released, mean=mean, bound=bound, name=mechanism.name):
                [count] = released
                assert abs(count - mean) <= bound, (name, count, mean, bound)

            released = (records | f"Select{mechanism.name}" >> SelectItems(mechanism, BUDGET,
                                                                            seed=11)
                        | f"Count{mechanism.name}" >> beam.combiners.Count.Globally())
            assert_that(released, close, label=f"Check{mechanism.name}")


def test_a_wrong_weight_would_be_caught(imdb_2k):
    """The check above has power: Weighted Gaussian at Δ0 = 10 against Δ0 = 100 differ by
    far more than its bound."""
    data = bench.UserItemArrays.from_item_lists(list(imdb_2k[0].values())[:USERS])
    rng = np.random.default_rng(3)
    mean, bound = _bound([bench.released_count(data, WeightedGaussian(10), BUDGET, rng)
                          for _ in range(RUNS)])
    at_100 = np.mean([bench.released_count(data, WeightedGaussian(100), BUDGET, rng)
                      for _ in range(5)])
    assert abs(at_100 - mean) > bound


def test_job_writes_the_grid_table_and_csv(tmp_path, capsys):
    out = tmp_path / "out"
    code = bench.main(["--output", str(out), "--datasets", "imdb,zipf-b", "--imdb", IMDB_2K,
                       "--synthetic-users", "300", "--grid", "5,50", "--grid-trials", "1",
                       "--auto-trials", "1"])
    assert code == 0
    with open(out / "results.csv", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    grid = [r for r in rows if r["arm"] == "grid"]
    auto = [r for r in rows if r["arm"] == "auto"]
    assert len(grid) == 2 * 3 * 2 and len(auto) == 2 * 3
    assert {r["max_items_per_user"] for r in grid} == {"5", "50"}
    assert {int(r["max_items_per_user"]) for r in auto} <= set(max_items_choice.CANDIDATES)
    table = (out / "results.md").read_text(encoding="utf-8")
    assert "| imdb | sips | " in table and "Δ0=50" in table and " %" in table
    assert "imdb sips grid Δ0=50 trial 0" in capsys.readouterr().err


def test_job_refuses_an_unknown_data_set_with_one_error_line(tmp_path, capsys):
    assert bench.main(["--output", str(tmp_path / "o"), "--datasets", "imdb,nope"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: --datasets")


@pytest.mark.parametrize("flags, message", [
    (["--grid", "5,,50"], "--grid has an empty entry (entry 2 of '5,,50')"),
    (["--grid", "5,50,5"], "--grid gives 5 twice"),
    (["--mechanisms", "sips,sips"], "--mechanisms gives sips twice"),
    # Read as mechanism names are elsewhere: case and spaces ignored.
    (["--mechanisms", "sips, SIPS"], "--mechanisms gives sips twice"),
    (["--datasets", "imdb,"], "--datasets has an empty entry (entry 2 of 'imdb,')"),
])
def test_job_refuses_empty_and_repeated_list_entries(tmp_path, capsys, flags, message):
    assert bench.main(["--output", str(tmp_path / "o"), *flags]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: {message}"), err
