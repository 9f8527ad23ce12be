"""The exact discrete samplers (Canonne, Kamath & Steinke 2020) against their pmfs.

Statistical checks and their chance of failing on a correct sampler:
* each distribution check is a chi-square goodness-of-fit test on N draws,
  rejected at p < 1e-8;
* each Bernoulli(exp(−γ)) and sign check is an exact two-sided binomial test,
  rejected at p < 1e-8.
There are 14 such checks below, so the module fails by chance with
probability < 2e-7. The tests that must detect a wrong distribution use a
fixed seed, so they are deterministic.

The checks draw from ``fresh_rng``: a Mersenne Twister seeded from the OS on every
run (so each run is a new random test, and a failure names its seed), since the
samplers' OS generator (``random.SystemRandom``, a system call per draw) took
half of the module's time. The samplers ask any generator for the same uniform
integers; the OS default itself is tested in
``test_seeded_generators_are_reproducible_and_os_default_is_not``.
"""

import math
import random
import secrets
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from beam_dpsu.core.discrete_noise import DiscreteGaussian, DiscreteLaplace, bernoulli_exp
from beam_dpsu.core.checks import exact_positive
from tests.support.goodness_of_fit import chi_square_pvalue

N = 20_000
ALPHA = 1e-8


def fresh_rng() -> random.Random:
    """A generator seeded from the OS: a new test each run, reproducible from its seed."""
    seed = secrets.randbits(64)
    rng = random.Random(seed)
    rng.seed_for_failures = seed  # type: ignore[attr-defined]
    return rng


LAPLACE_SCALES = [Fraction(2, 5), 1, Fraction(5, 2), 100 / 0.1]
GAUSSIAN_VARIANCES = [Fraction(1, 4), 1, 100 / 0.2, 1e6]


@pytest.mark.parametrize("scale", LAPLACE_SCALES, ids=str)
def test_discrete_laplace_matches_its_pmf(scale):
    dist, rng = DiscreteLaplace(scale), fresh_rng()
    assert chi_square_pvalue(dist.samples(N, rng), dist) > ALPHA, rng.seed_for_failures


@pytest.mark.parametrize("sigma_squared", GAUSSIAN_VARIANCES, ids=str)
def test_discrete_gaussian_matches_its_pmf(sigma_squared):
    dist, rng = DiscreteGaussian(sigma_squared), fresh_rng()
    assert chi_square_pvalue(dist.samples(N, rng), dist) > ALPHA, rng.seed_for_failures


@pytest.mark.parametrize("dist", [DiscreteLaplace(3), DiscreteGaussian(9)],
                         ids=["laplace", "gaussian"])
def test_samples_are_symmetric(dist):
    rng = fresh_rng()
    draws = np.asarray(dist.samples(N, rng))
    positive, negative = int((draws > 0).sum()), int((draws < 0).sum())
    assert stats.binomtest(positive, positive + negative, 0.5).pvalue > ALPHA, \
        rng.seed_for_failures


def test_the_fit_test_has_teeth():
    # Draws of scale 1 (or σ² = 1) against the pmf of scale 1.1 (σ² = 1.21): the
    # probability of 0 differs by ≈ 10 standard errors. Seeded: deterministic.
    rng = random.Random(20240501)
    assert chi_square_pvalue(DiscreteLaplace(1).samples(N, rng), DiscreteLaplace(1.1)) < ALPHA
    assert chi_square_pvalue(DiscreteGaussian(1).samples(N, rng),
                             DiscreteGaussian(Fraction(121, 100))) < ALPHA


def test_pmfs_are_normalised_and_match_closed_forms():
    lap = DiscreteLaplace(Fraction(5, 2))
    x = np.arange(-400, 401)
    assert lap.pmf(x).sum() == pytest.approx(1.0, abs=1e-12)
    q = math.exp(-0.4)
    assert lap.pmf(3) == pytest.approx((1 - q) / (1 + q) * q ** 3, rel=1e-12)
    assert lap.cdf(-1) == pytest.approx(lap.pmf(np.arange(-400, 0)).sum(), rel=1e-12)
    assert lap.cdf(2) == pytest.approx(lap.pmf(np.arange(-400, 3)).sum(), rel=1e-12)
    assert lap.variance() == pytest.approx((lap.pmf(x) * x ** 2).sum(), rel=1e-9)
    # Golden: scale 1 → Var = 2e^{-1}/(1 − e^{-1})² = 1.841347188415584638 (mpmath, 30 digits)
    assert DiscreteLaplace(1).variance() == pytest.approx(1.8413471884155846, rel=1e-13)
    gauss = DiscreteGaussian(4)
    assert gauss.pmf(np.arange(-200, 201)).sum() == pytest.approx(1.0, abs=1e-12)
    # CKS Proposition 5: the variance is below σ² (by ≈ e^{-2π²σ²}·…, below float
    # resolution at σ² = 4), visibly so for small σ.
    assert gauss.variance() == pytest.approx(4, rel=1e-12)
    assert DiscreteGaussian(Fraction(1, 4)).variance() < 0.25 * 0.9


@pytest.mark.parametrize("gamma", [Fraction(1, 3), 1, Fraction(5, 2), 0.75])
def test_bernoulli_exp_probability(gamma):
    rng = fresh_rng()
    hits = sum(bernoulli_exp(gamma, rng) for _ in range(N))
    assert stats.binomtest(hits, N, math.exp(-float(gamma))).pvalue > ALPHA, \
        rng.seed_for_failures


def test_bernoulli_exp_edge_cases():
    assert all(bernoulli_exp(0) for _ in range(1000))
    # P[True] = e^{-50} per draw: a false failure has probability < 2e-19.
    assert not any(bernoulli_exp(50) for _ in range(1000))
    with pytest.raises(ValueError, match="gamma must be a finite number >= 0"):
        bernoulli_exp(-1)
    with pytest.raises(ValueError, match="gamma"):
        bernoulli_exp(float("inf"))
    with pytest.raises(TypeError, match="gamma must be a number"):
        bernoulli_exp("1")


def test_tiny_scales_give_zero_and_huge_scales_work():
    # P[X ≠ 0] < 2e^{-1000} (Laplace scale 1e-3) and < 2e^{-5000} (σ² = 1e-4).
    assert set(DiscreteLaplace(1e-3).samples(2000)) == {0}
    assert set(DiscreteGaussian(1e-4).samples(2000)) == {0}
    big = DiscreteLaplace(1e9).samples(200)
    assert len(set(big)) > 190 and max(abs(v) for v in big) > 1e8


def test_seeded_generators_are_reproducible_and_os_default_is_not():
    a = DiscreteGaussian(50).samples(100, random.Random(3))
    b = DiscreteGaussian(50).samples(100, random.Random(3))
    assert a == b
    assert DiscreteLaplace(50).samples(100) != DiscreteLaplace(50).samples(100)
    assert isinstance(DiscreteLaplace(2.0).sample(), int)
    assert isinstance(DiscreteGaussian(2.0).sample(), int)


def test_parameters_are_exact_and_validated():
    # A float is converted bit for bit: 0.1 is not 1/10.
    assert DiscreteLaplace(0.1).scale == Fraction(0.1) != Fraction(1, 10)
    assert exact_positive("x", np.float64(2.5)) == Fraction(5, 2)
    for bad in (0, -1, Fraction(-1, 2), float("nan"), float("inf")):
        with pytest.raises(ValueError, match="scale must be a finite number > 0"):
            DiscreteLaplace(bad)
    for bad in (True, "1", None):
        with pytest.raises(TypeError, match="sigma_squared must be a number"):
            DiscreteGaussian(bad)
