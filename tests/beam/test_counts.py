"""Noisy counts of released items: calibration, budget split, and the Beam transform."""

import math
import random
from fractions import Fraction

import apache_beam as beam
import numpy as np
import pytest
from tests.support.one_pipeline import run_cases
from tests.support.runner import TestPipeline
from apache_beam.testing.test_stream import TestStream
from apache_beam.transforms import window

from beam_dpsu import (Budget, BudgetAccountant, BudgetExceededError, CountReleased,
                       DiscreteGaussian, DiscreteLaplace, InvalidRecordError, SelectItems,
                       WeightedGaussian, ZCDPBudget, count_calibration,
                       split_selection_and_counts)
from beam_dpsu.beam.windowing import NonGlobalWindowError
from beam_dpsu.core.hashing import stable_hash64
from tests.support.goodness_of_fit import chi_square_pvalue
from tests.support.text_subclasses import EXAMPLES

pytestmark = pytest.mark.pipeline

# Noise of scale ≤ 20/1e6: P[any of ≤ 1,000 counts gets nonzero noise] < 1e-20 000.
EXACT = Budget(1e6)


# --- calibration (golden) ------------------------------------------------------------

def test_counts_under_dp_budget_get_discrete_laplace_of_scale_d0_over_epsilon():
    # ℓ1 sensitivity Δ0 (one user counted once on ≤ Δ0 items): scale Δ0/ε (CKS §1.1 eq. (2)).
    cal = count_calibration(Budget(0.5, 1e-6), 10)
    assert cal.noise == DiscreteLaplace(20) and cal.noise.scale == Fraction(20)
    assert (cal.sensitivity_norm, cal.sensitivity) == (1, 10.0)
    assert count_calibration(Budget(1.0, 0), 1).noise.scale == 1
    # A float ε is used exactly: scale = 100 / (the double nearest 0.1).
    assert count_calibration(Budget(0.1), 100).noise.scale == Fraction(100) / Fraction(0.1)
    assert float(count_calibration(Budget(0.1), 100).noise.scale) == pytest.approx(1000.0)


def test_counts_under_zcdp_budget_get_discrete_gaussian_with_sigma2_d0_over_2rho():
    # ℓ2 sensitivity √Δ0: σ² = Δ0/(2ρ) gives ρ-zCDP (CKS Theorem 4).
    cal = count_calibration(ZCDPBudget(0.5, 1e-5), 4)
    assert cal.noise == DiscreteGaussian(4) and cal.noise.sigma_squared == Fraction(4)
    assert (cal.sensitivity_norm, cal.sensitivity) == (2, 2.0)
    assert count_calibration(ZCDPBudget(0.125), 1).noise.sigma_squared == 4
    assert float(count_calibration(ZCDPBudget(0.1, 0), 100).noise.sigma_squared) == \
        pytest.approx(500.0)


def test_count_calibration_rejects_bad_parameters():
    with pytest.raises(ValueError, match="max_items_per_user must be >= 1, got 0"):
        count_calibration(Budget(1.0), 0)
    with pytest.raises(TypeError, match="budget must be a Budget or ZCDPBudget"):
        count_calibration((1.0, 0.0), 5)


# --- composition ---------------------------------------------------------------------

def test_split_gives_counts_a_pure_share_and_selection_all_of_delta():
    parts = split_selection_and_counts(Budget(2.0, 1e-6), counts_share=0.25)
    assert parts.selection == Budget(1.5, 1e-6) and parts.counts == Budget(0.5, 0.0)
    zparts = split_selection_and_counts(ZCDPBudget(0.2, 1e-5), counts_share=0.5)
    assert zparts.selection == ZCDPBudget(0.1, 1e-5) and zparts.counts == ZCDPBudget(0.1, 0)
    assert zparts.to_dict()["composition"].startswith("zCDP composition")
    assert parts.to_dict()["counts"] == {"type": "approx-dp", "epsilon": 0.5, "delta": 0.0}


def test_split_spends_from_the_accountant_and_overspending_is_an_error():
    total = ZCDPBudget(0.2, 1e-5)
    accountant = BudgetAccountant(total)
    split_selection_and_counts(total, 0.3, accountant)
    assert accountant.remaining()["rho"] == pytest.approx(0.0, abs=1e-15)
    with pytest.raises(BudgetExceededError, match="would exceed the total rho=0.2"):
        accountant.spend(ZCDPBudget(0.001))
    # An accountant that already spent part of its total refuses the whole split
    # and spends nothing of it.
    accountant = BudgetAccountant(Budget(1.0, 1e-6))
    accountant.spend(Budget(0.5, 0))
    with pytest.raises(BudgetExceededError, match="epsilon=1.0 in 2 parts would exceed"):
        split_selection_and_counts(Budget(1.0, 1e-6), 0.25, accountant)
    assert accountant.spent() == {"epsilon": 0.5, "delta": 0.0}
    split_selection_and_counts(Budget(0.5, 1e-6), 0.25, accountant)  # the rest fits
    with pytest.raises(TypeError, match="cannot spend a ZCDPBudget from a Budget total"):
        split_selection_and_counts(ZCDPBudget(0.1, 1e-6), 0.25, BudgetAccountant(Budget(1, 1e-5)))


@pytest.mark.parametrize("share", [0, 1, -0.5, 1.5])
def test_split_rejects_bad_shares(share):
    with pytest.raises(ValueError, match="counts_share must lie strictly between 0 and 1"):
        split_selection_and_counts(Budget(1.0, 1e-6), share)


def test_selection_refuses_the_pure_counts_part():
    parts = split_selection_and_counts(Budget(1.0, 1e-6))
    with pytest.raises(ValueError, match="'weighted-gaussian' needs delta > 0"):
        SelectItems(WeightedGaussian(5), parts.counts)


def test_a_tight_split_selection_part_is_refused_by_the_counts():
    # Each part of a tight split composes to the total only with the calibration it was
    # made for: the selection part spent on counts would spend that part twice.
    parts = split_selection_and_counts(Budget(1.0, 1e-5), 0.25,
                                       selection_mechanism=WeightedGaussian(20),
                                       counts_max_items_per_user=20, composition="tight")
    p = beam.Pipeline()
    released = p | beam.Create(["a"])
    for max_items in (20, 5):
        with pytest.raises(ValueError, match="tight split.*not for CountReleased"):
            CountReleased(released, parts.selection, max_items_per_user=max_items)
    CountReleased(released, parts.counts, max_items_per_user=20)  # the part made for these counts


# --- the Beam transform --------------------------------------------------------------

def synthetic_counts(n_items=1500):
    """Items i0…; item i is held by i % 5 users, each holding that item only (so
    no sampling: the bounded count is the true count), some with repeats."""
    pairs, truth = [], {}
    for i in range(n_items):
        truth[f"i{i}"] = i % 5
        for j in range(i % 5):
            pairs += [(f"u{i}-{j}", f"i{i}")] * (1 + j % 2)
    return pairs, truth


NOISES = [
    (Budget(1.0, 0), DiscreteLaplace(3)),             # scale Δ0/ε = 3
    (ZCDPBudget(0.5, 1e-6), DiscreteGaussian(3)),     # σ² = Δ0/(2ρ) = 3
]
NOISE_IDS = ["discrete-laplace", "discrete-gaussian"]
EXACTLY_ONE_PAIRS = [("u1", "a"), ("u1", "a"), ("u2", "a"), ("u3", "a"), ("u3", "b"),
                     ("u4", "c"), ("u5", "c")]  # 'c' is held but not released; 'ghost' by nobody
AT_MOST_PAIRS = [("heavy", f"w{i}") for i in range(50)] + [("light", "w0"), ("light", "zz")]
RECORDS = ([(f"u{i}", ("apple", "pear", "apple")) for i in range(20)]
           + [("v1", "apple"), ("v1", ["pear"]), ("v2", {"pear", "fig"})])
NGRAM_PAIRS = [("u1", ("new", "york")), ("u2", ("new", "york")), ("u2", ("york",))]


def _noise_cases(p, calibrations):
    pairs, truth = synthetic_counts()
    released = p | "Noise released" >> beam.Create(sorted(truth))
    users = p | "Noise pairs" >> beam.Create(pairs)
    cases = {}
    for name, (budget, _) in zip(NOISE_IDS, NOISES):
        select = CountReleased(released, budget, max_items_per_user=3, seed=12345)
        calibrations[name] = select.calibration
        cases[name] = users | f"Count {name}" >> select
    return cases


def _seeded_cases(p):
    pairs, truth = synthetic_counts(40)
    budget, seed = Budget(0.5), 7
    released = p | "Seeded released" >> beam.Create(sorted(truth))
    seeded = (p | "Seeded pairs" >> beam.Create(pairs)
              | "Seeded" >> CountReleased(released, budget, max_items_per_user=2, seed=seed))
    unseeded = (p | "Unseeded pairs" >> beam.Create(pairs)
                | "Unseeded" >> CountReleased(released, budget, max_items_per_user=2))
    return {"seeded": seeded, "unseeded": unseeded}


@pytest.fixture(scope="module")
def counted(tmp_path_factory):
    """The counts the tests below check, built in ONE pipeline (module fixture; a
    TestPipeline per test cost a run each); each test reads its own case. Counts
    that must fail run their own."""
    calibrations: dict = {}

    def build(p):
        return {
            "exactly one": (p | "Exactly one pairs" >> beam.Create(EXACTLY_ONE_PAIRS)
                            | "Exactly one" >> CountReleased(
                                p | "Exactly one released" >> beam.Create(["a", "b", "ghost"]),
                                EXACT, max_items_per_user=5)),
            "at most": (p | "At most pairs" >> beam.Create(AT_MOST_PAIRS)
                        | "At most" >> CountReleased(
                            p | "At most released" >> beam.Create([f"w{i}" for i in range(50)]),
                            EXACT, max_items_per_user=7)),
            **_noise_cases(p, calibrations),
            **_seeded_cases(p),
            # Released numpy.str_ items would fail in Beam's deterministic key coder.
            "numpy str": (p | "Numpy pairs" >> beam.Create([("u1", "a"), ("u2", "a")])
                          | "Numpy" >> CountReleased(
                              p | "Numpy released" >> beam.Create([np.str_("a")]),
                              Budget(1e6, 0), max_items_per_user=1)),
            "records": (p | "Records" >> beam.Create(RECORDS)
                        | "Count records" >> CountReleased(
                            p | "Records released" >> beam.Create(["apple", "pear"]),
                            EXACT, max_items_per_user=5)),
            "ngrams": (p | "Ngram pairs" >> beam.Create(NGRAM_PAIRS)
                       | "Count ngrams" >> CountReleased(
                           p | "Ngrams released" >> beam.Create([("new", "york"), ("york",)]),
                           EXACT, max_items_per_user=5, ngrams=True)),
        }

    runs = run_cases(tmp_path_factory.mktemp("counts"), build)
    return {**runs, "calibrations": calibrations}


def test_every_released_item_gets_exactly_one_count_and_no_other_item_does(counted):
    assert sorted(counted["exactly one"]) == [("a", 3), ("b", 1), ("ghost", 0)]


def test_each_user_is_counted_on_at_most_max_items_released_items(counted):
    rows = counted["at most"]
    released = [f"w{i}" for i in range(50)]
    assert sorted(item for item, _ in rows) == sorted(released)
    # 'heavy' adds 1 to exactly 7 of its 50 released items, 'light' 1 to w0
    # ('zz' is not released, so it does not use up light's Δ0).
    assert sum(c for _, c in rows) == 8 and max(c for _, c in rows) <= 2
    assert all(isinstance(c, int) for _, c in rows)


@pytest.mark.parametrize("budget,dist", NOISES, ids=NOISE_IDS)
def test_count_errors_follow_the_stated_noise(counted, budget, dist):
    # Chi-square goodness of fit of the 1,500 errors (noisy − true count) to the
    # calibration's pmf, rejected at p < 1e-8: with a random seed, a correct
    # implementation fails with probability < 1e-8 (each draw comes from its own
    # seeded generator). Seeded here, so deterministic.
    _, truth = synthetic_counts()
    name = NOISE_IDS[[d for _, d in NOISES].index(dist)]
    assert counted["calibrations"][name].noise == dist
    rows = dict(counted[name])
    assert len(rows) == len(counted[name]) and rows.keys() == truth.keys()
    errors = np.array([rows[item] - truth[item] for item in truth])
    assert chi_square_pvalue(errors, dist, n_bins=12) > 1e-8
    # and the test can tell: the errors are not those of half the scale.
    half = (DiscreteLaplace(Fraction(3, 2)) if isinstance(dist, DiscreteLaplace)
            else DiscreteGaussian(Fraction(3, 4)))
    assert chi_square_pvalue(errors, half, n_bins=12) < 1e-8


def test_seeded_counts_equal_the_pure_core_and_unseeded_are_noisy(counted):
    # A seeded run draws each item's noise from its own generator seeded by
    # (seed, item), so the Beam result is the pure computation, whatever the bundling.
    _, truth = synthetic_counts(40)
    budget, seed = Budget(0.5), 7
    dist = count_calibration(budget, 2).noise
    expected = [(item, c + dist.sample(random.Random(stable_hash64(("count-noise", seed, item)))))
                for item, c in truth.items()]
    assert sorted(counted["seeded"]) == sorted(expected)
    rows = counted["unseeded"]
    # Scale 4 noise on 40 counts: P[all 40 errors are 0] = tanh(1/8)^40 < 1e-36.
    assert sorted(item for item, _ in rows) == sorted(truth)
    assert any(c != truth[item] for item, c in rows)


def test_report_is_computed_at_construction():
    # Built, never run.
    released = TestPipeline() | beam.Create(["a"])
    report = CountReleased(released, ZCDPBudget(0.1, 0), max_items_per_user=20).report
    seeded = CountReleased(released, Budget(0.5), max_items_per_user=10, seed=3).report
    assert report["noise"] == "discrete_gaussian"
    assert report["sigma_squared"] == pytest.approx(100.0) and report["sigma"] == pytest.approx(10)
    assert report["sensitivity"] == pytest.approx(math.sqrt(20))
    assert report["budget"] == {"type": "approx-zcdp", "rho": 0.1, "delta": 0.0}
    assert report["seeded"] is False and "Theorem 4" in report["source"]
    assert seeded["noise"] == "discrete_laplace" and seeded["scale"] == 20.0
    assert seeded["seeded"] is True and "NOT differentially private" in seeded["seeded_note"]


def test_windowed_input_is_refused():
    p = TestPipeline()
    released = p | "Released" >> beam.Create(["a"])
    windowed = (p | "Pairs" >> beam.Create([("u", "a")])
                | beam.WindowInto(window.FixedWindows(60)))
    with pytest.raises(NonGlobalWindowError,
                       match=r"CountReleased \(its users' items\) needs its input in "
                             "the global window, but it is windowed by FixedWindows"):
        _ = windowed | "Count1" >> CountReleased(released, Budget(1.0), max_items_per_user=5)
    with pytest.raises(NonGlobalWindowError,
                       match=r"CountReleased \(its released items\) needs its input in the "
                             "global window"):
        _ = (p | "Pairs2" >> beam.Create([("u", "a")])
             | "Count2" >> CountReleased(
                 released | "W" >> beam.WindowInto(window.FixedWindows(5)), Budget(1.0),
                 max_items_per_user=5))


def test_unbounded_input_is_refused():
    p = TestPipeline()
    released = p | "Released" >> beam.Create(["a"])
    stream = p | TestStream().add_elements([("u", "a")]).advance_watermark_to_infinity()
    with pytest.raises(NonGlobalWindowError, match="needs a bounded \\(batch\\) input"):
        _ = stream | CountReleased(released, Budget(1.0), max_items_per_user=5)


def test_bad_arguments_and_records():
    with pytest.raises(TypeError, match="released must be the PCollection of released items"):
        CountReleased(["a"], Budget(1.0), max_items_per_user=5)
    with pytest.raises(InvalidRecordError, match="missing user id"):
        with TestPipeline() as p:
            _ = (p | "Pairs" >> beam.Create([(None, "a")])
                 | CountReleased(p | "Released" >> beam.Create(["a"]), Budget(1.0),
                                 max_items_per_user=5))


def test_released_items_of_another_pipeline_are_refused_when_built():
    # Before: Beam's "{<Pipeline object at 0x…>} != {…}" from deep inside the build.
    other = beam.Pipeline()
    released = other | "Released" >> beam.Create(["a"])
    p = beam.Pipeline()
    pairs = p | "Pairs" >> beam.Create([("u", "a")])
    with pytest.raises(ValueError, match=r"^released must come from the same pipeline as the "
                                         r"users' items"):
        _ = pairs | CountReleased(released, Budget(1.0), max_items_per_user=5)


def test_numpy_str_released_items_are_counted(counted):
    # Released numpy.str_ items failed in Beam's deterministic
    # key coder; they are counted as the plain str they equal.
    rows = counted["numpy str"]
    assert [(type(item), item, count) for item, count in rows] == [(str, "a", 2)]


@pytest.mark.parametrize("value,held", EXAMPLES)
def test_a_released_item_of_a_subclass_is_what_it_holds_as_bounding_keys_items(value, held):
    # Not its own __str__ / __bytes__: it must meet the users' items, keyed as
    # bounding keys them, or it would be counted 0.
    from beam_dpsu.beam.bounding import check_pair
    from beam_dpsu.count_released import _released_item, check_ngram_pair
    item = _released_item(value, ngrams=False)
    assert item == held == check_pair(("u", value))[1] and type(item) is type(held)
    if isinstance(value, str):
        assert _released_item((value, "b"), ngrams=True) == (held, "b")
        assert check_ngram_pair(("u", (value,))) == ("u", (held,))


def test_records_and_pairs_are_counted_alike(counted):
    # (user, tuple of tokens) records, which SelectItems takes, are records of
    # items: read as one n-gram each, every count would come out 0, silently.
    assert sorted(counted["records"]) == [("apple", 21), ("pear", 22)]


def test_ngrams_are_counted_with_ngrams_true_and_a_mix_up_is_refused(counted):
    assert sorted(counted["ngrams"]) == sorted([(("new", "york"), 2), (("york",), 1)])
    # Released n-grams counted as text items (or the reverse) would all get 0.
    with pytest.raises(InvalidRecordError, match=r"released item is an n-gram .* ngrams=True"):
        with TestPipeline() as p:
            _ = (p | "Pairs" >> beam.Create([("u1", ["new"])])
                 | CountReleased(p | "Released" >> beam.Create([("new", "york")]), EXACT,
                                 max_items_per_user=5))
    # The released items' step, on its own (the run above checks that its refusal
    # fails the pipeline; a pipeline per refusal would cost a run each).
    from beam_dpsu.count_released import _released_item
    with pytest.raises(InvalidRecordError, match=r"released item is a str .* ngrams=False"):
        _released_item("new", ngrams=True)
    # A released "n-gram" with non-str tokens was turned into
    # strings and silently counted 0.
    with pytest.raises(InvalidRecordError, match=r"released n-gram must be a non-empty tuple"):
        _released_item(("new", 1), ngrams=True)
    with pytest.raises(InvalidRecordError, match=r"n-gram item \(field 1\) must be a non-empty "
                                                 r"tuple of non-empty str, got a str"):
        with TestPipeline() as p:
            _ = (p | "Pairs" >> beam.Create([("u1", "new")])
                 | CountReleased(p | "Released" >> beam.Create([("new",)]), EXACT,
                                 max_items_per_user=5, ngrams=True))
