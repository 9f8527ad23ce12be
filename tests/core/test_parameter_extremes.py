"""Every parameter either computes or is refused in one line (docs/privacy.md, invariant 5).

ε, ρ up to 1e300, δ down to 1e-300, Δ0 up to 2^63 − 1: each calibration gives
a finite noise scale and threshold, or a ValueError that names the parameter;
never a traceback from a solver, a NaN, a RuntimeWarning or an array of
length Δ0. The thresholds' bounded search equals the brute-force maximum and
is never below it (a lower threshold would break privacy).
"""

import dataclasses
import math
import re
import warnings

import mpmath
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy import special

from beam_dpsu.core import budgets, checks, gaussian

from beam_dpsu.core import mechanisms

from beam_dpsu.core import counts_budget

from beam_dpsu.core import thresholds
from beam_dpsu.core.budgets import Budget, ZCDPBudget
from beam_dpsu.core.ngram_parameters import MAX_NGRAM_LENGTH
from beam_dpsu.extract_ngrams import ExtractNgrams
from beam_dpsu.ngram_baselines import NgramsByDPSU
from tests.support.hypothesis_profiles import examples
from tests.support.runner import job_args

pytestmark = pytest.mark.job

HUGE_D0 = [10 ** 12, 2 ** 63 - 1]
WEIGHTED = [thresholds.weighted_laplace_threshold, thresholds.weighted_gaussian_threshold]
ALL_THRESHOLDS = WEIGHTED + [thresholds.count_laplace_threshold,
                             thresholds.count_gaussian_threshold, thresholds.gw_threshold]


# -- the failures seen at extreme parameters --------------------------------

@pytest.mark.parametrize("fn", ALL_THRESHOLDS)
@pytest.mark.parametrize("d0", HUGE_D0)
@pytest.mark.parametrize("delta", [1e-5, 1e-300])
def test_thresholds_at_huge_max_items_need_no_array_of_that_length(fn, d0, delta):
    # An array of length Δ0: "Unable to allocate 7.28 TiB" at Δ0 = 10^12 (WG, SIPS, PG,
    # WL, PL).
    rho = fn(0.5, delta, d0)
    assert math.isfinite(rho)
    # Thresholds grow with Δ0 (more items to hide among).
    assert rho >= fn(0.5, delta, 10 ** 5)


def test_max_items_above_int64_is_refused_with_the_limit():
    with pytest.raises(ValueError, match=r"max_items_per_user must be at most 2\*\*63 - 1"):
        checks.max_items(2 ** 63)
    with pytest.raises(ValueError, match=r"at most 2\*\*63 - 1"):
        mechanisms.WeightedGaussian(2 ** 63)


@pytest.mark.parametrize("name", sorted(mechanisms.MECHANISMS))
def test_every_mechanism_calibrates_at_max_items_10_to_12(name):
    budget = Budget(1.0, 1e-5) if name == "truncated-geometric" else ZCDPBudget(0.1, 1e-5)
    mechanism = mechanisms.mechanism_from_name(name, max_items_per_user=10 ** 12)
    try:
        mechanism.calibrate(budget)
    except ValueError as exc:  # truncated-geometric: δ/Δ0 below float resolution
        assert "max_items_per_user" in str(exc)


def test_rho_1e20_converts_to_dp():
    # Unguarded, `--rho 1e20` ends in scipy's "f(a) and f(b) must have different signs"
    # (the report's zCDP → DP line).
    dp = ZCDPBudget(1e20, 1e-5).to_dp(2e-5)
    assert math.isfinite(dp.epsilon) and dp.epsilon >= 1e20
    # Bun & Steinke 2016 Prop. 1.3 is never beaten by more than Lemma 8 allows.
    # (rounded up by a few ulps: the float sum is never below the exact bound)
    assert dp.epsilon <= (1e20 + 2 * math.sqrt(1e20 * math.log(1 / 1e-5))) * (1 + 1e-13)


def test_epsilon_1e300_gives_a_finite_sigma_without_warnings():
    # Unguarded, `--epsilon 1e300` gives a RuntimeWarning, then "The function value ...
    # is NaN".
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sigma = gaussian.analytic_gaussian_sigma(1e300, 5e-6)
        calibration = mechanisms.WeightedGaussian(100).calibrate(Budget(1e300, 1e-5))
    assert 0 < sigma < 1e-149
    assert math.isfinite(calibration.release_threshold)


@pytest.mark.parametrize("fn", ALL_THRESHOLDS)
def test_threshold_is_above_the_weight_when_the_noise_is_below_its_ulp(fn):
    # At λ = 1e-300, 1 + λ·q rounds to 1.0, the weight of a user's only item:
    # released with probability ½. The float threshold must lie above it.
    assert fn(1e-300, 1e-5, 1) > 1.0


def test_gw_threshold_at_tiny_scale_and_huge_max_items():
    # Before: "math domain error" (1 − Π(1 − p) underflowed to 0 inside the log).
    rho = thresholds.gw_threshold(1e-300, 1e-5, 10 ** 12)
    assert 1.0 < rho < 1.0 + 1e-12


def test_dp_to_zcdp_at_small_epsilon():
    # Before: the bracket [1e-12, …] missed the root for ε below ~1e-6.
    budget = budgets.dp_to_zcdp(1e-8, 1e-10, 5e-11)
    assert 0 < budget.rho < 1e-8 ** 2
    assert gaussian.zcdp_to_dp(budget.rho, 5e-11, 1e-10) <= 1e-8 * (1 + 1e-6)
    with pytest.raises(ValueError, match="epsilon = 1e-300 is too small"):
        budgets.dp_to_zcdp(1e-300, 1e-5, 5e-6)


def test_truncated_geometric_at_huge_epsilon_is_refused_not_an_overflow():
    with pytest.raises(ValueError, match="delta per item"):
        mechanisms.TruncatedGeometric(100).calibrate(Budget(1e300, 1e-5))


def test_counts_noise_beyond_float_range_is_refused():
    with pytest.raises(ValueError, match="epsilon = 1e-300 is too small for the counts"):
        counts_budget.count_calibration(Budget(1e-300), 10 ** 12)
    # A large but finite discrete Gaussian reports its std without a support array
    # of length 80σ (σ = 10^6 here: 8·10^7 entries before).
    calibration = counts_budget.count_calibration(ZCDPBudget(0.5), 10 ** 12)
    assert calibration.noise.to_dict()["std"] == pytest.approx(1e6)


@pytest.mark.parametrize("budget,param", [(Budget(1e-320, 1e-5), "epsilon"),
                                            (ZCDPBudget(1e-320, 1e-5), "rho")])
def test_auto_max_items_at_a_vanishing_budget_is_refused_naming_it(budget, param):
    # Was an OverflowError from the report: the distinct-count estimate's share of
    # ε (or ρ) gave a noise scale beyond the float range.
    from beam_dpsu.core import max_items_choice
    from beam_dpsu.core.checks import ParameterError
    mechanism = mechanisms.WeightedGaussian("auto")
    with pytest.raises(ParameterError, match=f"^{param} = 1e-320 is too small") as caught:
        max_items_choice.plan_auto(mechanism, budget)
    assert caught.value.param == param
    least = float(str(caught.value).split("at least ")[1].split(",")[0])
    # The bound it states works, and the float just below it is refused.
    works = dataclasses.replace(budget, **{param: least})
    max_items_choice.plan_auto(mechanism, works).to_dict()
    with pytest.raises(ParameterError, match="is too small"):
        max_items_choice.plan_auto(mechanism, dataclasses.replace(
            budget, **{param: math.nextafter(least, 0.0)}))


@pytest.mark.parametrize("name,budget,d0,alpha", [
    ("policy-gaussian", Budget(1.0, 1e-5), 100, 1e300),
    ("policy-gaussian", ZCDPBudget(0.1, 1e-5), 7, 1e160),
    ("policy-laplace", Budget(1.0, 1e-5), 10 ** 4, 1e305)])
def test_an_alpha_that_overflows_the_descent_is_refused_with_the_largest_that_works(
        name, budget, d0, alpha):
    # Was: Policy Gaussian at alpha = 1e160 summed squared gaps to inf, so every increment
    # was 0 and nothing was released (exit 0). The bound is thresholds.descent_cutoff_limit:
    # Δ0 gaps of at most Γ each, summed in floats.
    from beam_dpsu.core import policies
    from beam_dpsu.core.checks import ParameterError
    mechanism = mechanisms.MECHANISMS[name](d0, alpha=alpha)
    refusal = re.escape(f"alpha = {alpha:g} makes the cutoff")
    with pytest.raises(ParameterError, match=refusal) as caught:
        mechanism.calibrate(budget)
    assert caught.value.param == "alpha"
    largest = float(str(caught.value).split("the largest value that works here is ")[1])
    calibration = dataclasses.replace(mechanism, alpha=largest).calibrate(budget)
    update = policies.l2_descent if name == "policy-gaussian" else policies.l1_descent
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no overflow in the descent's sum
        # The worst case of the bound: every gap is Γ (a user's Δ0 items at weight 0).
        increments = update(np.zeros(d0), calibration.cutoff)
    assert np.all(np.isfinite(increments)) and np.all(increments > 0)
    assert math.fsum(increments ** (2 if name == "policy-gaussian" else 1)) == \
        pytest.approx(1.0)
    with pytest.raises(ParameterError, match="the largest value that works here is"):
        dataclasses.replace(mechanism, alpha=math.nextafter(largest, math.inf)).calibrate(budget)


def test_a_cutoff_that_overflows_the_descent_at_alpha_0_asks_for_more_budget():
    from beam_dpsu.core.checks import ParameterError
    from beam_dpsu.core import ngram_calibration
    with pytest.raises(ParameterError, match="^rho = 1e-320 is too small here: the release "
                                             "threshold .* alone .alpha = 0. is too large"):
        mechanisms.PolicyGaussian(3, alpha=0.0).calibrate(ZCDPBudget(1e-320, 1e-5))
    with pytest.raises(ParameterError, match="even at alpha = 0: raise epsilon"):
        thresholds.policy_cutoff(1e160, 1.0, 0.0, 3, 2)
    # DPNE's policy level 1 keeps its descent finite too.
    with pytest.raises(ParameterError, match="^alpha = 1e.300 makes the cutoff"):
        ngram_calibration.calibrate(Budget(1.0, 1e-5), 2, 1.0, 10, "policy-gaussian", 1e300)


# -- --max-n ------------------------------------------------------------------

def test_max_n_has_a_stated_limit():
    # Unbounded, `ngrams --max-n 1000` runs 142 s into a RecursionError.
    with pytest.raises(ValueError, match=f"max_n must be at most {MAX_NGRAM_LENGTH}"):
        ExtractNgrams(MAX_NGRAM_LENGTH + 1, Budget(1.0, 1e-6))
    with pytest.raises(ValueError, match=f"max_n must be at most {MAX_NGRAM_LENGTH}"):
        NgramsByDPSU("dpsu-all", 1000, Budget(1.0, 1e-6))
    ExtractNgrams(MAX_NGRAM_LENGTH, Budget(1.0, 1e-6))  # the limit itself is accepted
    # dpsu-all selects over all lengths at once, with Δ = T·Δ0: refused when built.
    with pytest.raises(ValueError, match=r"max_n \* max_items_per_user must be at most"):
        NgramsByDPSU("dpsu-all", 3, Budget(1.0, 1e-6), 2 ** 63 - 1)


def test_sips_rounds_have_a_stated_limit():
    # Rounds are unrolled like n-gram levels; the limit is accepted, more is refused.
    limit = mechanisms.SIPS.MAX_ROUNDS
    mechanisms.SIPS(rounds=limit).calibrate(ZCDPBudget(1.0, 1e-5))
    with pytest.raises(ValueError, match=f"rounds must be at most {limit}"):
        mechanisms.SIPS(rounds=limit + 1)
    with pytest.raises(ValueError, match=f"rounds must be at most {limit}"):
        mechanisms.SIPS(rounds=1000)
    # Before: "split weights must be finite and > 0, got [0.0, 0.0, …]".
    with pytest.raises(ValueError, match="ratio = 1e-300 over 3 rounds gives the first round"):
        mechanisms.SIPS(rounds=3, ratio=1e-300)


def test_noise_decay_outside_float_range_is_refused():
    with pytest.raises(ValueError, match="noise decay 1e-300 over 3 levels"):
        ExtractNgrams(3, Budget(1.0, 1e-6), noise_schedule=1e-300)


def test_ngrams_job_refuses_max_n_1000_in_one_line(capsys):
    from pipelines import ngrams as ngrams_job
    code = ngrams_job.main(job_args(["--input", "examples/msnbc_1k.seq", "--max-n", "1000",
                            "--epsilon", "1", "--delta", "1e-6", "--output", "unused-out"]))
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert err == [f"error: --max-n must be at most {MAX_NGRAM_LENGTH} (each length is a stage "
                   "of the pipeline), got 1000"]


# -- the bounded search equals brute force --------------------------------------

def _brute_force(fn, scale, delta, d0):
    """max over every t = 1..Δ0 of the published formula, in the stable form."""
    t = np.arange(1, d0 + 1, dtype=np.float64)
    q = -np.expm1(np.log1p(-delta) / t)
    if fn is thresholds.weighted_laplace_threshold:
        return float(np.max(1 / t + scale * -np.log(2 * q)))
    return float(np.max(1 / np.sqrt(t) + scale * -special.ndtri(q)))


@pytest.mark.parametrize("fn", WEIGHTED)
@pytest.mark.parametrize("scale", [1e-3, 0.3, 1.0, 4.0, 100.0])
@pytest.mark.parametrize("delta", [1e-300, 1e-20, 1e-6, 0.01, 0.5, 0.99])
@pytest.mark.parametrize("d0", [1, 2, 63, 64, 65, 100, 1000, 10 ** 5])
def test_bounded_search_equals_brute_force_on_a_grid(fn, scale, delta, d0):
    got, brute = fn(scale, delta, d0), _brute_force(fn, scale, delta, d0)
    assert got >= brute
    assert got == pytest.approx(brute, rel=1e-15, abs=1e-300)


@pytest.mark.parametrize("fn", WEIGHTED)
def test_bounded_search_is_never_below_brute_force_on_random_parameters(fn):
    rng = np.random.default_rng(25)
    for _ in range(200):
        scale = 10 ** rng.uniform(-4, 3)
        delta = 10 ** rng.uniform(-300, -0.001)
        d0 = int(10 ** rng.uniform(0, 4.5))
        assert fn(scale, delta, d0) >= _brute_force(fn, scale, delta, d0), (scale, delta, d0)


def test_gaussian_threshold_quasi_convexity_inequality():
    # The docstring of thresholds._candidate_items reduces the Gaussian case to
    # 1/(2x) < 1 + z·Φ(z)/φ(z) with x = −ln Φ(z), for every z; checked here on
    # a fine grid (both tails are covered by the asymptotics stated there).
    z = np.linspace(-37.0, 37.0, 200_001)
    log_cdf = special.log_ndtr(z)
    x = -log_cdf
    mills = np.exp(log_cdf + 0.5 * z * z + 0.5 * math.log(2 * math.pi))  # Φ(z)/φ(z)
    ok = np.isfinite(x) & (x > 0)
    assert np.all(1 / (2 * x[ok]) < 1 + z[ok] * mills[ok])


# -- the analytic Gaussian σ is never too small ----------------------------------

def _true_gaussian_delta(sigma, epsilon):
    with mpmath.workdps(700):
        s, e = mpmath.mpf(sigma), mpmath.mpf(epsilon)
        a, b = 1 / (2 * s), e * s
        return mpmath.ncdf(a - b) - mpmath.exp(e) * mpmath.ncdf(-a - b)


@pytest.mark.parametrize("epsilon", [1e-300, 1e-100, 1e-12, 1e-8, 1e-3, 1.0, 30.0, 1e6,
                                     1e12, 1e15, 1e20, 1e300])
@pytest.mark.parametrize("delta", [1e-300, 1e-100, 1e-10, 0.4])
def test_analytic_gaussian_sigma_meets_delta_exactly_evaluated(epsilon, delta):
    # Before: at ε = 1e-20, δ = 1e-100 the σ returned gave δ(σ) ≈ 1e-16 (cancellation
    # near Φ = ½), and at ε ≥ 1e20 about 1 (a − b cancelled): not private.
    sigma = gaussian.analytic_gaussian_sigma(epsilon, delta)
    assert _true_gaussian_delta(sigma, epsilon) <= delta * (1 + 1e-9)


@pytest.mark.parametrize("epsilon,delta", [(1.0, 1e-5), (3.0, math.exp(-10) / 2), (0.1, 1e-9),
                                           (10.0, 1e-12)])
def test_analytic_gaussian_sigma_is_tight_where_floats_resolve_it(epsilon, delta):
    sigma = gaussian.analytic_gaussian_sigma(epsilon, delta)
    assert _true_gaussian_delta(sigma, epsilon) == pytest.approx(delta, rel=1e-6)


# -- the sweep -------------------------------------------------------------------

def _log_uniform(lo, hi):
    return st.floats(math.log10(lo), math.log10(hi)).map(lambda e: 10.0 ** e)


CLEAN_WORDS = ("epsilon", "rho", "delta", "max_items_per_user", "mechanism", "decay")


def _computes_or_refuses(fn):
    """fn() under warnings-as-errors: its result, or None for a ValueError naming a parameter."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with np.errstate(over="warn", invalid="warn", divide="warn", under="ignore"):
            try:
                return fn()
            except ValueError as exc:
                message = str(exc)
                assert any(word in message for word in CLEAN_WORDS), message
                assert "\n" not in message
                return None


def _check_finite(value):
    if value is None:
        return
    if isinstance(value, (int, float)):
        assert math.isfinite(value)
        return
    for part in getattr(value, "rounds", None) or [value]:
        for field in ("noise_scale", "release_threshold", "cutoff", "epsilon_per_item",
                      "delta_per_item"):
            v = getattr(part, field, None)
            if v is not None:
                assert math.isfinite(v), (field, v)


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=st.sampled_from(sorted(mechanisms.MECHANISMS)),
       zcdp=st.booleans(),
       scale=_log_uniform(1e-300, 1e300),
       delta=st.one_of(_log_uniform(1e-300, 0.999), st.just(0.5)),
       d0=st.one_of(st.integers(1, 200), st.integers(1, 2 ** 63 - 1)))
def test_every_mechanism_computes_or_refuses(name, zcdp, scale, delta, d0):
    budget = ZCDPBudget(scale, delta) if zcdp else Budget(scale, delta)
    _check_finite(_computes_or_refuses(
        lambda: mechanisms.mechanism_from_name(name, max_items_per_user=d0).calibrate(budget)))
    _check_finite(_computes_or_refuses(lambda: counts_budget.count_calibration(budget, d0)))


@settings(max_examples=examples(150), deadline=None)
@given(rho=_log_uniform(1e-300, 1e300), delta=_log_uniform(1e-300, 0.4),
       epsilon=_log_uniform(1e-300, 1e300))
def test_conversions_compute_or_refuse(rho, delta, epsilon):
    _check_finite(_computes_or_refuses(lambda: gaussian.zcdp_to_dp(rho, delta, 2 * delta)))
    _check_finite(_computes_or_refuses(lambda: gaussian.zcdp_to_dp(rho, 0.0, delta)))
    result = _computes_or_refuses(lambda: budgets.dp_to_zcdp(epsilon, 2 * delta, delta))
    if result is not None:
        assert 0 < result.rho < math.inf
    _check_finite(_computes_or_refuses(
        lambda: gaussian.analytic_gaussian_sigma(epsilon, delta)))


@settings(max_examples=examples(60), deadline=None)
@given(epsilon=_log_uniform(1e-300, 1e300), delta=_log_uniform(1e-300, 0.9),
       max_n=st.integers(1, 5), d0=st.one_of(st.integers(1, 100), st.integers(1, 2 ** 63 - 1)),
       decay=st.one_of(st.just("equal"), _log_uniform(1e-300, 1e300)))
def test_dpne_computes_or_refuses(epsilon, delta, max_n, d0, decay):
    for budget in (Budget(epsilon, delta), ZCDPBudget(epsilon, delta)):
        transform = _computes_or_refuses(lambda budget=budget: ExtractNgrams(
            max_n, budget, d0, noise_schedule=decay))
        if transform is not None:
            assert all(math.isfinite(s) and s > 0 for s in transform.sigmas)
            assert math.isfinite(transform.level1_calibration.release_threshold)


# -- the jobs: one `error:` line or a release, never a traceback --------------------

def _run_vocabulary(tmp_path, capsys, *flags):
    from pipelines import vocabulary
    src = tmp_path / "pairs.csv"
    src.write_text("".join(f"user{u},common\nuser{u},item{u % 3}\n" for u in range(40)))
    code = vocabulary.main(job_args(["--input", str(src), "--format", "pairs", *flags,
                            "--output", str(tmp_path / "out")]))
    return code, capsys.readouterr().err.strip().splitlines()


@pytest.mark.parametrize("name", sorted(mechanisms.MECHANISMS))
def test_vocabulary_job_at_max_items_10_to_12(tmp_path, capsys, name):
    # An array of length Δ0: "Unable to allocate 7.28 TiB" for WG, SIPS, PG, WL, PL. Users hold
    # fewer items than Δ0, so bounding samples min(Δ0, |W|) of them.
    code, err = _run_vocabulary(tmp_path, capsys, "--mechanism", name,
                                "--max-items-per-user", "1000000000000",
                                "--epsilon", "1", "--delta", "1e-6", "--with-counts")
    if code == 2:  # truncated-geometric: δ/Δ0 is below float resolution
        assert len(err) == 1 and err[0].startswith("error: ") and "--max-items-per-user" in err[0]
    else:
        assert code == 0


@pytest.mark.parametrize("flags", [["--rho", "1e20"], ["--epsilon", "1e300"],
                                   ["--rho", "1e300", "--mechanism", "sips"],
                                   ["--epsilon", "1e300", "--mechanism", "sips"],
                                   # docs/privacy.md: SIPS under (ε, δ) is one analytic Gaussian,
                                   # finite (≈ (0, δ)-DP) as ε → 0; the zCDP route refused.
                                   ["--epsilon", "1e-300", "--mechanism", "sips"]])
def test_vocabulary_job_at_huge_budgets_runs(tmp_path, capsys, flags):
    # Unguarded: `--rho 1e20` (scipy traceback), `--epsilon 1e300` (NaN solver error).
    code, err = _run_vocabulary(tmp_path, capsys, *flags, "--delta", "1e-5")
    assert code == 0, err


@pytest.mark.parametrize("flags,message", [
    (["--epsilon", "1", "--max-items-per-user", str(2 ** 63)],
     "--max-items-per-user must be at most 2**63 - 1"),
    # The default Δ0 is auto: its distinct-count estimate's noise needs a float scale.
    (["--epsilon", "1e-320"], "--epsilon = 1e-320 is too small"),
    (["--rho", "1e-320"], "--rho = 1e-320 is too small"),
    (["--epsilon", "1", "--mechanism", "policy-gaussian", "--alpha", "1e160"],
     "--alpha = 1e+160 makes the cutoff"),
])
def test_vocabulary_job_refuses_out_of_range_parameters_in_one_line(tmp_path, capsys, flags,
                                                                     message):
    code, err = _run_vocabulary(tmp_path, capsys, *flags, "--delta", "1e-5")
    assert code == 2
    assert len(err) == 1 and err[0].startswith("error: ") and message in err[0]


def _zcdp_delta_upper(rho, epsilon):
    """An upper bound on δ*(ρ, ε) of dp-sips Lemma 8, evaluated in 60-digit arithmetic:
    the objective at the best α a golden-section search finds (every α gives a valid
    bound, so the search only decides how tight it is)."""
    with mpmath.workdps(60):
        r, e = mpmath.mpf(rho), mpmath.mpf(epsilon)

        def log_obj(log_u):
            u = mpmath.exp(log_u)
            return u * ((r - e) + u * r) - log_u + (1 + u) * mpmath.log1p(-1 / (1 + u))

        # The objective is unimodal in ln u (u = α − 1): a golden-section search over
        # twelve decades each side of the leading term's minimiser (or of 1 when
        # ε ≤ ρ), down to 1e-12 in ln u (the grid this replaced stopped at ~3e-8).
        centre = mpmath.log(max((e - r) / (2 * r), mpmath.mpf(1)))
        low, high = centre - 12 * mpmath.log(10), centre + 12 * mpmath.log(10)
        ratio = (mpmath.sqrt(5) - 1) / 2
        a, b = high - ratio * (high - low), low + ratio * (high - low)
        fa, fb = log_obj(a), log_obj(b)
        while high - low > mpmath.mpf("1e-12"):
            if fa <= fb:
                high, b, fb = b, a, fa
                a = high - ratio * (high - low)
                fa = log_obj(a)
            else:
                low, a, fa = a, b, fb
                b = low + ratio * (high - low)
                fb = log_obj(b)
        return mpmath.exp(min(fa, fb, 0))


@pytest.mark.parametrize("rho", [1e-300, 1e-20, 1e-3, 1.0, 1e6, 1e20, 1e300])
@pytest.mark.parametrize("delta", [1e-300, 1e-10, 0.4])
def test_zcdp_to_dp_epsilon_is_valid_in_exact_arithmetic(rho, delta):
    epsilon = gaussian.zcdp_to_dp(rho, 0.0, delta)
    classic = rho + 2 * math.sqrt(rho * math.log(1 / delta))  # Bun & Steinke Prop. 1.3
    assert epsilon >= classic * (1 - 1e-12) or _zcdp_delta_upper(rho, epsilon) <= delta * (1 + 1e-6)


@pytest.mark.parametrize("rho", [1e13, 3.3e17, 1e18, 1e20, 1e50, 1e100])
@pytest.mark.parametrize("delta_cdp,delta", [(0.0, 1e-300), (1e-6, 1e-5), (0.0, 0.4)])
def test_zcdp_to_dp_at_huge_rho_is_never_below_the_exact_classic_bound(rho, delta_cdp, delta):
    # Past ρ ≈ 3e17 the fallback's ρ + 2√(ρ L), rounded to nearest, is up to 33.6 below
    # the exact bound at ρ = 1e18 (its δ 1.0000004× δ).
    epsilon = gaussian.zcdp_to_dp(rho, delta_cdp, delta)
    with mpmath.workdps(200):
        target = (mpmath.mpf(delta) - delta_cdp) / (1 - mpmath.mpf(delta_cdp))
        exact = mpmath.mpf(rho) + 2 * mpmath.sqrt(mpmath.mpf(rho) * mpmath.log(1 / target))
        assert mpmath.mpf(epsilon) >= exact


@pytest.mark.parametrize("epsilon", [1e-100, 1e-8, 1e-3, 1.0, 1e6, 1e20, 1e300])
@pytest.mark.parametrize("delta", [1e-300, 1e-10, 0.4])
def test_dp_to_zcdp_rho_is_valid_in_exact_arithmetic(epsilon, delta):
    rho = budgets.dp_to_zcdp(epsilon, delta, delta / 2).rho
    target = (delta - delta / 2) / (1 - delta / 2)
    big_l = math.log(1 / target)
    classic = (math.sqrt(big_l + epsilon) - math.sqrt(big_l)) ** 2
    assert rho <= classic * (1 + 1e-9) or _zcdp_delta_upper(rho, epsilon) <= target * (1 + 1e-6)
