"""DPNE pure core: exact |V_k|, validity, spurious sampling, σ schedules and ρ_k."""

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import special, stats

from beam_dpsu.core import thresholds
from beam_dpsu.core.gaussian import analytic_gaussian_sigma, gaussian_noise_schedule
from beam_dpsu.core.kgrams import ValidKgramSampler, is_valid, kgrams_of, valid_kgram_count
from beam_dpsu.beam.ngram_levels import SpuriousFn
from tests.support.hypothesis_profiles import examples
from tests.support.kgram_sets import TOKENS, released_sets
from tests.support.gaussian_delta import gaussian_mechanism_delta


def brute_force_valid(previous, unigrams, k, pruning):
    prev, uni = set(previous), set(unigrams)
    return {w for w in itertools.product(TOKENS, repeat=k)
            if w[:-1] in prev and ((w[1:] in prev) if pruning == "both" else ((w[-1],) in uni))}


@settings(max_examples=examples(300), deadline=None)
@given(released_sets(), st.sampled_from(["both", "single"]))
def test_exact_valid_count_and_enumeration_match_brute_force(sets, pruning):
    k, unigrams, previous = sets
    if k == 2:
        previous = unigrams  # S_{k−1} = S_1 at level 2
    brute = brute_force_valid(previous, unigrams, k, pruning)
    assert valid_kgram_count(previous, unigrams, pruning) == len(brute)
    sampler = ValidKgramSampler(previous, unigrams, pruning)
    assert sampler.size == len(brute) and set(sampler.all()) == brute
    assert all(is_valid(w, set(previous), set(unigrams), pruning) for w in brute)


def test_kgrams_never_cross_documents():
    assert kgrams_of(("a", "b", "c"), 2) == [("a", "b"), ("b", "c")]
    assert kgrams_of(("a",), 2) == []


def test_level_two_count_is_unigrams_squared():
    s1 = [(t,) for t in "abcde"]
    assert valid_kgram_count(s1, s1, "both") == 25 == valid_kgram_count(s1, s1, "single")


def test_spurious_samples_are_uniform_valid_and_outside_support():
    # Chi-square test of uniformity over V_k ∖ supp: 40 valid candidates, 20,000
    # draws of 3. The test fails by chance with probability 1e-8 (its p-value cut).
    previous = [("a", "b"), ("b", "c"), ("c", "a"), ("b", "a"), ("a", "a"), ("c", "b"),
                ("a", "c"), ("b", "b")]
    unigrams = [(t,) for t in "abc"]
    sampler = ValidKgramSampler(previous, unigrams, "both")
    valid = set(sampler.all())
    support = set(sorted(valid)[:3])
    candidates = sorted(valid - support)
    rng = np.random.default_rng()
    counts = dict.fromkeys(candidates, 0)
    for _ in range(20_000):
        draw = sampler.sample(3, support, rng)
        assert len(set(draw)) == 3 and not set(draw) & support and set(draw) <= valid
        for w in draw:
            counts[w] += 1
    assert stats.chisquare(list(counts.values())).pvalue > 1e-8


def test_rejection_path_is_uniform_too():
    # A large V_3 (about 800 random bigrams over 40 tokens give ~16,000 valid
    # trigrams), so draws of 5 take the rejection path, not the enumeration.
    # Every draw is valid and outside the support; a chi-square over the first
    # token (40 bins) against its frequency in V_k ∖ supp fails by chance with
    # probability 1e-8.
    toks = [f"t{i}" for i in range(40)]
    rng = np.random.default_rng(5)
    previous = {(a, b) for a, b in itertools.product(toks, toks) if rng.random() < 0.5}
    sampler = ValidKgramSampler(previous, [(t,) for t in toks], "both")
    support = set(sampler.all()[:50])
    assert sampler.size - len(support) > 4 * 5 + 10_000  # the rejection path
    draws = [w for _ in range(4000) for w in sampler.sample(5, support, np.random.default_rng())]
    assert not set(draws) & support
    assert all(w[:2] in previous and w[1:] in previous for w in draws)
    candidates = [w for w in sampler.all() if w not in support]
    observed = [sum(w[0] == t for w in draws) for t in toks]
    expected = np.array([sum(w[0] == t for w in candidates) for t in toks], dtype=float)
    expected *= len(draws) / expected.sum()
    assert stats.chisquare(observed, expected).pvalue > 1e-8


def test_spurious_count_follows_the_binomial():
    # The spurious draw of the pipeline (SpuriousFn) on a level where no user
    # holds a valid k-gram: each run releases B ~ Binomial(|V_k|, Φ(−ρ/σ)). The
    # sum of 3,000 runs is Binomial(3,000·|V_k|, p); it must lie in the central
    # 1 − 1e-8 interval, so a correct draw fails by chance w.p. ≤ 1e-8.
    unigrams = [(t,) for t in "abcdefghij"]
    sigma, rho = 2.0, 4.0
    fn = SpuriousFn(2, "both", seed=None)
    p = special.ndtr(-rho / sigma)
    n_valid, runs = 100, 3000
    parameters = {"n_previous": len(unigrams), "n_valid": n_valid, "rho": rho,
                  "sigma": sigma}
    total = sum(len(list(fn.process(None, unigrams, unigrams, [], parameters)))
                for _ in range(runs))
    lo, hi = stats.binom.ppf([0.5e-8, 1 - 0.5e-8], runs * n_valid, p)
    assert lo <= total <= hi, (total, lo, hi)


def test_noise_schedule_golden():
    # dpne Theorem 2.1: σ* from the analytic Gaussian at (ε, δ/2) and
    # 1/σ*² = Σ 1/σ_k². MSNBC setting: ε = 1, δ = 1e-7, T = 6.
    sigma_star = analytic_gaussian_sigma(1.0, 0.5e-7)
    assert gaussian_mechanism_delta(sigma_star, 1.0) == pytest.approx(0.5e-7, rel=1e-9)
    assert sigma_star == pytest.approx(4.808702, abs=1e-6)
    equal = gaussian_noise_schedule(sigma_star, 6)
    assert equal == pytest.approx([sigma_star * math.sqrt(6)] * 6, rel=1e-12)
    assert equal[0] == pytest.approx(11.778867, abs=1e-6)
    for decay in (0.5, 0.9, 1.0, 1.3):
        sched = gaussian_noise_schedule(sigma_star, 6, decay)
        assert 1 / math.sqrt(sum(1 / s ** 2 for s in sched)) == pytest.approx(sigma_star, rel=1e-12)
        assert all(b == pytest.approx(decay * a, rel=1e-12) for a, b in zip(sched, sched[1:]))
    assert gaussian_noise_schedule(2.0, 1) == [2.0]


def test_level_thresholds_golden():
    # ρ_1 = max_t 1/√t + σ_1 Φ⁻¹((1 − δ/2)^{1/t}) with Δ_1 = 10 (dpne Theorem 2.1).
    sigma_1 = gaussian_noise_schedule(analytic_gaussian_sigma(1.0, 0.5e-7), 6)[0]
    t = np.arange(1, 11)
    naive = np.max(1 / np.sqrt(t) + sigma_1 * stats.norm.ppf((1 - 0.5e-7) ** (1 / t)))
    assert (thresholds.weighted_gaussian_threshold(sigma_1, 0.5e-7, 10)
            == pytest.approx(naive, rel=1e-7))
    # ρ_k = σ_k Φ⁻¹(1 − η min(1, |S_{k−1}|/|V_k|)) (dpne §2): MSNBC level 2 (17 unigrams).
    rho_2 = thresholds.dpne_level_threshold(sigma_1, 0.01, 17, 17 * 17)
    assert rho_2 == pytest.approx(sigma_1 * stats.norm.isf(0.01 * 17 / 289), rel=1e-12)
    # Expected spurious count ≤ η·min(|S|, |V|) (Proposition 2.2).
    assert 289 * special.ndtr(-rho_2 / sigma_1) == pytest.approx(0.01 * 17, rel=1e-9)
    assert thresholds.dpne_level_threshold(1.0, 0.01, 5, 0) == math.inf
    with pytest.raises(ValueError, match="eta must lie strictly between 0 and 1"):
        thresholds.dpne_level_threshold(1.0, 1.5, 5, 5)


@pytest.mark.parametrize("levels", [2, 3, 5])
@pytest.mark.parametrize("decay", [0.9, 1.0, 1.3])
def test_noise_schedule_composes_within_sigma_star_exactly(levels, decay):
    # σ* is rounded up for its budget (zCDP: zcdp_gaussian_sigma); the levels' σ_k
    # must be too: rounded to nearest, Σ 1/σ_k² passes 1/σ*² by an ulp for about half
    # of all σ*, and the levels spend a few ulps more than the budget.
    from fractions import Fraction
    for k in range(1, 40):
        sigma_star = 0.37 * k
        sigmas = gaussian_noise_schedule(sigma_star, levels, decay)
        assert sum(1 / Fraction(s) ** 2 for s in sigmas) <= 1 / Fraction(sigma_star) ** 2, k
