"""Findings of the privacy audit on the Beam transforms, reproduced as tests.

Open findings are ``xfail(strict=True)``: the fix must remove the marker. The
tests without a marker pass today and guard what the fix must keep.

* D1: a part of a ``composition="tight"`` split is valid only for the
  mechanism it was computed for (docs/privacy.md, "Selection plus counts").
  ``SelectItems`` and ``CountReleased`` check it; ``ExtractNgrams`` and
  ``NgramsByDPSU`` take it for any configuration and can spend past the total.
* C1: DPNE's ``level1_calibration`` is level 1 alone (σ_1); composed with
  counts it states μ = 1/σ_1 instead of DPNE's μ = 1/σ* (docs/privacy.md,
  DPNE: the levels compose to σ*), so the stated ε is below the true one.
* The thresholds' δ charge (docs/privacy.md, Accounting): DPNE's split too.
* The release guard (docs/privacy.md, invariant 9): ``NoisyThreshold`` and
  ``KeepWithProbability`` are public release steps that can be applied any
  number of times.
"""

from __future__ import annotations

import copy
import math
from fractions import Fraction

import apache_beam as beam
import pytest

import beam_dpsu
from beam_dpsu.core import composition
from beam_dpsu.core.calibration import Calibration
from beam_dpsu.beam.noisy_threshold import KeepWithProbability, NoisyThreshold
from beam_dpsu.count_released import count_calibration

pytestmark = pytest.mark.pipeline

try:  # the n-gram baselines may move to a module of their own
    from beam_dpsu.ngram_baselines import NgramsByDPSU  # type: ignore[import-not-found]
except ImportError:
    from beam_dpsu.extract_ngrams import NgramsByDPSU


# --- D1: tight-split parts outside SelectItems and CountReleased -----------------------

TOTAL = beam_dpsu.Budget(10.0, 1e-3)


def tight_split(selection_max_items: int, counts_max_items: int):
    """A tight split of TOTAL for Weighted Gaussian at Δ = ``selection_max_items`` and
    counts at Δ0 = ``counts_max_items``, half of ε each before scaling."""
    parts = beam_dpsu.split_selection_and_counts(
        TOTAL, 0.5, selection_mechanism=beam_dpsu.WeightedGaussian(selection_max_items),
        counts_max_items_per_user=counts_max_items, composition="tight")
    assert parts.scale > 1.0  # a tight split indeed: the parts' ε sum past the total
    return parts


# (WG Δ of the split, counts Δ0, DPNE levels T, DPNE Δ_1) and the δ at ε = 10 of
# DPNE's levels composed with the counts, measured today:
D1_CASES = {
    # a part for WG(1000) given to DPNE at Δ_1 = 1: δ = 1.0616e-3, 1.062× the total
    "WG(1000) part, DPNE T=1 at 1": (1000, 10, 1, 1),
    # the same Δ, but three levels: δ = 1.000093e-3, 9.3e-5 relative over the total
    "WG(100) part, DPNE T=3 at 100": (100, 1, 3, 100),
}


@pytest.mark.parametrize("case", sorted(D1_CASES))
def test_d1_extract_ngrams_refuses_a_tight_part_made_for_another_mechanism(case):
    selection_max_items, counts_max_items, levels, level1_max_items = D1_CASES[case]
    parts = tight_split(selection_max_items, counts_max_items)
    with pytest.raises(ValueError, match="tight"):
        beam_dpsu.ExtractNgrams(levels, parts.selection, max_items_per_user=level1_max_items)


@pytest.mark.parametrize("variant", ["dpsu-even", "dpsu-all"])
def test_d1_ngrams_by_dpsu_refuses_a_tight_part_made_for_another_mechanism(variant):
    parts = tight_split(100, 1)
    with pytest.raises(ValueError, match="tight"):
        NgramsByDPSU(variant, 3, parts.selection, max_items_per_user=100)


def dpne_as_one_gaussian(extract, budget) -> Calibration:
    """DPNE's selection as what its levels compose to: one Gaussian of σ* with level 1's
    threshold event (docs/privacy.md, DPNE)."""
    return Calibration(
        noise="gaussian", noise_scale=extract.sigma_total,
        release_threshold=extract.level1_calibration.release_threshold,
        threshold_delta=extract.threshold_delta, sensitivity_norm=2, sensitivity=1.0,
        budget=budget, source="test: DPNE's levels composed to sigma*")


@pytest.mark.parametrize("case", sorted(D1_CASES))
def test_d1_dpne_with_counts_stays_within_the_total_or_is_refused(case):
    """What the refusal prevents: ExtractNgrams + CountReleased on the two parts spend
    more δ at the total ε than the total (the numbers in D1_CASES)."""
    selection_max_items, counts_max_items, levels, level1_max_items = D1_CASES[case]
    parts = tight_split(selection_max_items, counts_max_items)
    try:
        extract = beam_dpsu.ExtractNgrams(levels, parts.selection,
                                          max_items_per_user=level1_max_items)
    except ValueError:
        return  # refused: nothing is spent
    counts = count_calibration(parts.counts, counts_max_items)
    spent = composition.composed_delta(dpne_as_one_gaussian(extract, parts.selection), counts,
                                       TOTAL.epsilon)
    assert spent <= TOTAL.delta


def test_d1_select_items_and_count_released_do_refuse_another_configuration():
    """The guard the finding asks for everywhere: present in these two today."""
    parts = tight_split(100, 10)
    with pytest.raises(ValueError, match="tight"):
        beam_dpsu.SelectItems(beam_dpsu.WeightedGaussian(1000), parts.selection)
    pipeline = beam.Pipeline()
    released = pipeline | beam.Create(["a"])
    with pytest.raises(ValueError, match="tight"):
        beam_dpsu.CountReleased(released, parts.counts, max_items_per_user=5)


# --- C1: DPNE's level-1 calibration composed with counts -------------------------------

C1_TOTAL = beam_dpsu.Budget(1.765, 4.96e-5)


def c1_setting():
    parts = beam_dpsu.split_selection_and_counts(C1_TOTAL, 0.25)
    extract = beam_dpsu.ExtractNgrams(3, parts.selection)
    counts = count_calibration(parts.counts, 10)
    truth = composition.composed_guarantee(dpne_as_one_gaussian(extract, parts.selection),
                                           counts, C1_TOTAL.delta)
    return parts, extract, counts, truth.epsilon


def test_c1_the_true_composed_epsilon():
    """Golden: DPNE (T = 3) on 3/4 of (1.765, 4.96e-5) with counts (Δ0 = 10) on 1/4
    composes, as one Gaussian of σ* plus discrete Laplace counts, to ε ≈ 1.4231."""
    *_, truth = c1_setting()
    assert truth == pytest.approx(1.4231, abs=5e-4)
    assert truth < C1_TOTAL.epsilon




def test_c1_composed_with_dpne_level1_is_refused_or_not_below_the_truth():
    """Today: stated ε = 0.8668 against the true 1.4231."""
    parts, extract, counts, truth = c1_setting()
    try:
        stated = parts.composed_with(extract.level1_calibration, counts)
    except (ValueError, TypeError):
        return
    assert all(g.epsilon >= truth * (1 - 1e-9) for g in stated.composed)


def test_c1_composed_guarantee_of_dpne_level1_is_refused_or_not_below_the_truth():
    parts, extract, counts, truth = c1_setting()
    try:
        stated = composition.composed_guarantee(extract.level1_calibration, counts,
                                                C1_TOTAL.delta)
    except (ValueError, TypeError):
        return
    assert stated is None or stated.epsilon >= truth * (1 - 1e-9)


# --- the thresholds' δ charge in DPNE ---------------------------------------------------

def test_dpne_split_never_spends_past_its_delta():
    budget = beam_dpsu.Budget(1.0, 0.1)
    extract = beam_dpsu.ExtractNgrams(2, budget)
    spent = Fraction(extract.delta_noise) + Fraction(extract.threshold_delta)
    assert spent <= Fraction(budget.delta)


def test_dpne_split_spends_all_of_its_delta():
    budget = beam_dpsu.Budget(1.0, 0.1)
    extract = beam_dpsu.ExtractNgrams(2, budget)
    wasted = (Fraction(budget.delta) - Fraction(extract.delta_noise)
              - Fraction(extract.threshold_delta))
    assert 0 <= wasted <= 2 * Fraction(math.ulp(budget.delta))


# --- the release guard on the public release steps -------------------------------------

def noisy_threshold():
    return NoisyThreshold(beam_dpsu.WeightedGaussian(10).calibrate(beam_dpsu.Budget(1.0, 1e-5)))


def keep_with_probability():
    return KeepWithProbability(
        beam_dpsu.TruncatedGeometric(1).calibrate(beam_dpsu.Budget(1.0, 1e-5)))


RELEASE_STEPS = {"NoisyThreshold": noisy_threshold,
                 "KeepWithProbability": keep_with_probability}


def histogram(pipeline):
    return pipeline | "Histogram" >> beam.Create([("a", 3.0), ("b", 1.0)])


@pytest.mark.parametrize("step", sorted(RELEASE_STEPS))
def test_a_release_step_applied_twice_is_refused(step):
    pipeline = beam.Pipeline()
    weights = histogram(pipeline)
    release = RELEASE_STEPS[step]()
    _ = weights | "First" >> release
    with pytest.raises(beam_dpsu.AppliedTwiceError):
        _ = weights | "Second" >> release


@pytest.mark.parametrize("step", sorted(RELEASE_STEPS))
def test_a_copy_of_an_applied_release_step_is_refused(step):
    pipeline = beam.Pipeline()
    weights = histogram(pipeline)
    release = RELEASE_STEPS[step]()
    _ = weights | "First" >> release
    with pytest.raises(beam_dpsu.AppliedTwiceError):
        _ = weights | "Second" >> copy.deepcopy(release)


@pytest.mark.parametrize("step", sorted(RELEASE_STEPS))
def test_two_release_steps_each_applied_once_are_fine(step):
    """What the guard must keep allowing (each object is its own release)."""
    pipeline = beam.Pipeline()
    weights = histogram(pipeline)
    _ = weights | "First" >> RELEASE_STEPS[step]()
    _ = weights | "Second" >> RELEASE_STEPS[step]()
