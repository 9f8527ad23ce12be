"""Δ0 chosen privately: ``max_items_per_user="auto"`` (pure math, no Beam).

Every mechanism's utility hinges on Δ0, the number of distinct items kept per
user, and tuning it on the raw data is a leak no guarantee covers. With
``"auto"`` a stated share of the budget buys a DP estimate of how many
distinct items users hold, and Δ0 is then picked from that estimate alone,
by a rule derived for each mechanism. The pipeline (``SelectItems``) is:

1. first, each user's number of distinct items n_u (after merging all of the
   user's rows) falls into one bin of a fixed, data-independent set of size
   bins (``size_bin_edges``), and the users per bin are counted;
2. then integer noise is added to every bin count (``noisy_size_histogram``):
   one user is in exactly one bin, so a neighbouring dataset moves the
   count vector by 1 in ℓ1 and in ℓ2 (sensitivity 1). Under ``Budget(ε, δ)``
   the noise is discrete Laplace of scale 1/ε_s, which is ε_s-DP; under
   ``ZCDPBudget(ρ, δ)`` it is discrete Gaussian of σ² = 1/(2ρ_s), which is
   ρ_s-zCDP (Canonne, Kamath & Steinke 2020, Theorem 4). Integer noise on
   integer counts: no floating-point leak (Mironov 2012);
3. finally ``AutoPlan.choose`` maps the noisy counts to one Δ0 among
   ``candidates`` (post-processing), and the selection runs with that Δ0
   on the rest of the budget.

Privacy: the size release is (ε_s, 0)-DP or ρ_s-zCDP; the selection, for
every fixed Δ0, is DP with the remaining budget; adaptive sequential
composition (Dwork & Roth 2014, Thm 3.16 for (ε, δ); Bun & Steinke 2016,
Lemma 2.3 for zCDP, δ-approximate in dp-sips Lemma 6) gives the sum, which is
the caller's budget (``split_budget``).

The rule (``AutoPlan``). Say user u keeps m_u = min(n_u, Δ0) of its items,
sampled uniformly, and gives each the mechanism's weight w(m_u); call
g(m) = m·w(m) the user's mass. If an item's chance of being among a user's
items is proportional to the user's size (n_u·q_i for popularity q_i,
independent of the user), its expected weight is

    E[W_i] = Σ_u n_u q_i · (m_u/n_u) · w(m_u) = q_i · M(Δ0),
    M(Δ0) = Σ_u g(min(n_u, Δ0)),

so every item's expected weight scales with the same factor M(Δ0), and an
item is released (about half the time or more) when q_i·M(Δ0) ≥ T(Δ0), the
release threshold in weight units. The released items are those with
q_i ≥ T(Δ0)/M(Δ0); whatever the popularity profile, their number is
largest where M(Δ0)/T(Δ0) is largest. That ratio is computed from the noisy
size histogram (M, taken two noise standard deviations low, see
``AutoPlan.proxy``) and the calibrations (T, data-independent, computed
when the transform is built), and the rule takes the candidate that
maximises it (ties go to the smaller Δ0).

The mass per mechanism (``user_mass``):

* count mechanisms (``CountLaplace``, ``CountGaussian``,
  ``TruncatedGeometric``): w = 1, g(m) = m; their threshold grows about
  linearly (Laplace) or as √Δ0 (Gaussian) in Δ0, so the rule favours the Δ0
  most users reach;
* ℓ2 mechanisms (``WeightedGaussian``, ``PolicyGaussian``; ``SIPS``'s
  rounds): g(m) = √m. For the policy, the ℓ2 update spends norm 1 on the items still
  below the cutoff; if a fraction f of a user's items are, its mass there is
  √(f·m), proportional to √m for every Δ0 (uniform sampling keeps f);
* ``WeightedLaplace``: w = 1/m, g = 1: every Δ0 gives the same mass, so the
  smallest threshold wins (exact in expectation for this mechanism);
* ℓ1 policies (``PolicyLaplace``, ``GreedyWithoutSampling``): the budget of
  1 goes to items below the cutoff, all of it as soon as one of the m items
  is, which happens with probability 1 − (1 − f)^m. With nothing private to
  tell f, a uniform prior on f gives E = m/(m + 1) = g(m).

For truncated geometric T is the number of users at which an item is kept
with probability ½. SIPS is scored otherwise: its later rounds read each
user's items minus those earlier rounds released, which M/T cannot see
(scored so, it took a Δ0 one grid step above its best); ``max_items_rounds``
models the rounds on the same histogram (``AutoPlan.round_thresholds``).

The share. The histogram's part buys nothing the selection can use, and the
selection's items fall about in proportion to its ρ near the best Δ0 (on
AskReddit's 3,486 users, SIPS at Δ0 = 100: 2 % less ρ, 2.6 % fewer items,
±0.5 %); the noise on each bin count, σ = 1/√(2ρ_s), grows as the share falls
and makes the choice noisier where there are few users. The default is a
public constant fixed before any data is seen (the budget split stays the
sequential composition above, whatever its value): 5 % (``DEFAULT_SHARE``)
for every mechanism but SIPS, 1.5 % for SIPS (``SIPS_SHARE``, its
``auto_share``). SIPS's curve is flat over the grid steps around its best
(its rounds' model, ``max_items_rounds``, caps the choice at the M/T rule's),
so a noisier choice costs it less than the ρ a larger share takes: on
AskReddit the rule keeps, over the noise of the histogram alone (400 draws,
each choice scored by the grid's curve), 98.7 %, 99.2 %, 99.5 % and 99.7 %
of the best step's items at shares of 1 %, 1.5 %, 2 % and 5 %; less the
share's ρ, about 97.7 %, 97.7 %, 97.5 % and 94.7 %; 1.5 % is the less noisy
of the two best
(docs/benchmarks.md, "Choosing Δ0 privately", measures it with the
selections); on the 50,000-user data sets the choice is the same at 1.5 %
as at 5 % but on zipf-a (200, within 0.6 % of 100 there, in 8 draws of 100).

What it does not model: the noise on each item (the rule compares expected
weights with T) and a popularity profile that changes with user size. The
benchmark (docs/benchmarks.md, "Choosing Δ0 privately") measures the rule
against the best Δ0 of a grid on real and synthetic data.
"""

from __future__ import annotations

import dataclasses
import math
import random
import sys
from collections.abc import Callable, Iterable, Sequence
from fractions import Fraction
from typing import Any, TypeGuard

import numpy as np

from beam_dpsu.core import checks, max_items_rounds
from beam_dpsu.core.pre_threshold import calibrations as pre_threshold_calibrations
from beam_dpsu.core.checks import ParameterError, ParameterTypeError

from beam_dpsu.core.budgets import Budget, ZCDPBudget
from beam_dpsu.core.discrete_noise import DiscreteGaussian, DiscreteLaplace
from beam_dpsu.core.exact_floats import nudged

__all__ = [
    "AUTO",
    "CANDIDATES",
    "DEFAULT_SHARE",
    "SIPS_SHARE",
    "default_share",
    "AutoMaxItems",
    "AutoPlan",
    "is_auto",
    "check_max_items_or_auto",
    "split_budget",
    "size_bin_edges",
    "size_counts",
    "size_noise",
    "noisy_size_histogram",
    "MASSES",
    "user_mass",
    "weight_threshold",
    "with_max_items",
    "calibrate_candidates",
    "plan_auto",
]

AUTO = "auto"
# The Δ0 values "auto" chooses among by default: the grid users tune by hand.
CANDIDATES = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000)
# The share of the budget the size estimate spends by default (a mechanism may state
# its own, ``auto_share``: SIPS's is ``SIPS_SHARE``).
DEFAULT_SHARE = 0.05
# SIPS's default share (see "The share" in the module docstring).
SIPS_SHARE = 0.015


def _check_share(share: Any) -> float:
    return checks.probability("share", share, types=(int, float, np.floating))


def default_share(mechanism) -> float:
    """The share "auto" spends when none is given: the mechanism's ``auto_share``
    (a class attribute; SIPS states ``SIPS_SHARE``), else ``DEFAULT_SHARE``."""
    return getattr(mechanism, "auto_share", DEFAULT_SHARE)


@dataclasses.dataclass(frozen=True, kw_only=True)
class AutoMaxItems:
    """``max_items_per_user`` chosen privately when the pipeline runs.

    ``max_items_per_user="auto"`` is ``AutoMaxItems()``; pass one of these, as the
    same ``max_items_per_user`` (of a mechanism config, ``CountReleased`` or
    ``ExtractNgrams``), to change the share or the candidates, by keyword:
    ``AutoMaxItems(share=0.02)``.

    Attributes:
      share: the part of the budget (0 < share < 1) spent on the DP histogram
        of users' distinct-item counts: ε·share under ``Budget``, ρ·share
        under ``ZCDPBudget`` (δ all goes to the selection). None (the
        default): the spender's default, ``DEFAULT_SHARE`` (5 %) but for SIPS,
        ``SIPS_SHARE`` (1.5 %; ``default_share``). A public parameter either way.
      candidates: the Δ0 values chosen among, ascending ints ≥ 1 (default
        ``CANDIDATES``). They are fixed before the data is seen.
    """

    share: float | None = None
    candidates: tuple = CANDIDATES

    def __post_init__(self):
        if self.share is not None:
            object.__setattr__(self, "share", _check_share(self.share))
        if isinstance(self.candidates, (str, bytes)) or not isinstance(
                self.candidates, Iterable):
            raise ParameterTypeError("candidates", f"must be a sequence of ints, got "
                                                   f"{self.candidates!r}")
        values = tuple(checks.max_items(c, "each candidate max_items_per_user", "candidates")
                       for c in self.candidates)
        if not values:
            raise ParameterError("candidates", "must hold at least one max_items_per_user")
        if list(values) != sorted(set(values)):
            raise ParameterError("candidates", f"must be strictly ascending, got {list(values)}")
        object.__setattr__(self, "candidates", values)

    def with_share(self, default: float) -> "AutoMaxItems":
        """The same, with ``default`` as the share if none was given."""
        return self if self.share is not None else dataclasses.replace(self, share=default)

    @property
    def spent(self) -> float:
        """The share (``DEFAULT_SHARE`` if none was given and none resolved it)."""
        return DEFAULT_SHARE if self.share is None else self.share

    def to_dict(self) -> dict:
        return {"method": AUTO, "share": self.share if self.share is not None else "default",
                "candidates": list(self.candidates)}


def is_auto(max_items_per_user: Any) -> TypeGuard[AutoMaxItems]:
    """Whether a ``max_items_per_user`` value asks for the private choice."""
    return isinstance(max_items_per_user, AutoMaxItems)


def check_max_items_or_auto(value: Any, name: str = "max_items_per_user"):
    """An int Δ0 (validated), or ``AutoMaxItems`` for ``"auto"`` / an ``AutoMaxItems``."""
    if isinstance(value, str):
        if checks.canonical_name(value) == AUTO:
            return AutoMaxItems()
        raise ParameterError(name, f"must be an int or 'auto', got {value!r}")
    if isinstance(value, AutoMaxItems):
        return value
    return checks.max_items(value, name)


def _rest(total: float, part: float) -> float:
    """total − part, rounded down until part + rest ≤ total exactly (as Fractions), with
    ``part`` the exact value the noise spends (``size_noise`` scales by it exactly)."""
    return nudged(total - part, lambda rest: Fraction(part) + Fraction(rest) <= Fraction(total),
                  0.0)


_LARGEST_FLOAT = Fraction(sys.float_info.max)


def _size_part(param: str, total: float, share: float, per: int) -> float:
    """total·share, the size histogram's ε (``per`` = 1: scale 1/ε) or ρ (``per`` = 2:
    σ² = 1/(2ρ)), refused where that noise scale is beyond the float range (it is
    reported as a float), stating the least total that works."""
    def fits(value: float) -> bool:
        part = value * share
        return part > 0.0 and 1 / (per * Fraction(part)) <= _LARGEST_FLOAT

    if fits(total):
        return total * share
    least = nudged(float(1 / (per * _LARGEST_FLOAT * Fraction(share))), fits, math.inf)
    raise ParameterError(
        param, f"= {total!r} is too small for max_items_per_user='auto': its share "
               f"{share:g} for the estimate of users' distinct items gets a noise scale "
               f"beyond the float range; raise {param} to at least {least!r}, or fix "
               "max_items_per_user")


def split_budget(budget: Budget | ZCDPBudget, share: float):
    """(size_budget, selection_budget): the size histogram's part and the selection's.

    The size histogram is pure (δ = 0: Laplace, or zCDP Gaussian), so all of δ
    goes to the selection. The parts sum to ``budget`` (ε and ρ add under
    sequential composition; DP of the composed pair is the module docstring's).
    """
    share = _check_share(share)
    if type(budget) is Budget:
        size = _size_part("epsilon", budget.epsilon, share, 1)
        return Budget(size, 0.0), Budget(_rest(budget.epsilon, size), budget.delta)
    if type(budget) is ZCDPBudget:
        size = _size_part("rho", budget.rho, share, 2)
        return ZCDPBudget(size, 0.0), ZCDPBudget(_rest(budget.rho, size), budget.delta)
    if isinstance(budget, (Budget, ZCDPBudget)):
        # A tight split's part is bound to one Δ0; "auto" has none yet.
        raise ParameterError.worded(
            "budget", "max_items_per_user='auto' cannot take a part of a tight split "
                      "(split_selection_and_counts(composition='tight')): that part was "
                      "computed for one fixed max_items_per_user; fix it, or use "
                      "composition='basic'")
    raise ParameterTypeError("budget", f"must be a Budget or ZCDPBudget, got {budget!r}")


def size_bin_edges(candidates: Sequence[int]) -> np.ndarray:
    """The lower edges of the size bins: 1, every candidate, and steps of ~√2 between.

    Bin k holds the sizes in [edges[k], edges[k+1]); the last bin is
    [max(candidates), ∞), since a user above the largest candidate keeps
    that many items whichever candidate is chosen. Every candidate is an
    edge, so the users at or above a candidate are counted exactly, and
    the √2 steps place the users below it to within a factor √2.
    """
    top = max(candidates)
    steps = {int(round(2 ** (k / 2))) for k in range(0, 2 * max(1, top.bit_length()) + 2)}
    edges = sorted({1, *candidates, *(s for s in steps if s <= top)})
    return np.asarray(edges, dtype=np.int64)


def size_counts(sizes: Iterable[int], edges: np.ndarray) -> np.ndarray:
    """Users per size bin (raw, NOT private): the query the noise is added to.

    A user holding no item is in no bin (it adds nothing at any Δ0), so one
    user moves the counts by at most 1.
    """
    sizes = np.fromiter(sizes, dtype=np.int64)
    sizes = sizes[sizes > 0]
    bins = np.searchsorted(edges, sizes, side="right") - 1
    return np.bincount(bins, minlength=len(edges)).astype(np.int64)


def size_noise(size_budget: Budget | ZCDPBudget) -> DiscreteLaplace | DiscreteGaussian:
    """The noise of each bin count: sensitivity 1 in ℓ1 and ℓ2 (one user, one bin).

    Discrete Laplace of scale 1/ε is ε-DP (CKS §1.1); discrete Gaussian of
    σ² = 1/(2ρ) is ρ-zCDP (CKS Theorem 4).
    """
    # Exact scales (Fractions): a float 1/ε rounded down would spend more than ε.
    if isinstance(size_budget, ZCDPBudget):
        return DiscreteGaussian(1 / (2 * Fraction(size_budget.rho)))
    return DiscreteLaplace(1 / Fraction(size_budget.epsilon))


def noisy_size_histogram(counts: np.ndarray, size_budget: Budget | ZCDPBudget,
                         rng: random.Random | None = None) -> np.ndarray:
    """The DP release: every bin count plus independent integer noise (OS randomness
    unless ``rng`` is given, in tests), as floats.

    The sums are exact Python ints, then held within ±1e300 (post-processing):
    at a vanishing budget a draw can be far beyond int64 and float range.
    """
    draws = size_noise(size_budget).samples(len(counts), rng)
    noisy = [int(c) + d for c, d in zip(np.asarray(counts).tolist(), draws)]
    return np.asarray([float(max(min(x, _NOISY_LIMIT), -_NOISY_LIMIT)) for x in noisy])


# Noisy counts beyond this carry no information a float could keep.
_NOISY_LIMIT = 10 ** 300


def _linear_mass(m: np.ndarray) -> np.ndarray:
    return m


def _constant_mass(m: np.ndarray) -> np.ndarray:
    return np.ones_like(m)


def _sqrt_mass(m: np.ndarray) -> np.ndarray:
    return np.sqrt(m)


def _uniform_prior_mass(m: np.ndarray) -> np.ndarray:
    return m / (m + 1.0)


# g(m) by name (names, not lambdas: a plan travels to the workers pickled).
MASSES = {"m": _linear_mass, "1": _constant_mass, "sqrt(m)": _sqrt_mass,
          "m/(m+1)": _uniform_prior_mass}


def user_mass(mechanism) -> str:
    """The name, in ``MASSES``, of g(m): the weight a user keeping m items places
    (see the module docstring). Each mechanism config states its own
    (``user_mass``, a class attribute)."""
    mass = getattr(mechanism, "user_mass", None)
    if mass not in MASSES:
        raise TypeError(f"no Δ0 rule for {type(mechanism).__name__}")
    return mass


def weight_threshold(calibration) -> float:
    """T: the weight at which an item is released with probability ½ (each
    calibration computes its own, ``weight_threshold()``)."""
    threshold = getattr(calibration, "weight_threshold", None)
    if threshold is None:
        raise TypeError(f"no release threshold for {type(calibration).__name__}")
    return threshold()


def with_max_items(mechanism, max_items_per_user: int | AutoMaxItems):
    """The same mechanism config with a fixed Δ0."""
    return dataclasses.replace(mechanism, max_items_per_user=max_items_per_user)


@dataclasses.dataclass(frozen=True)
class AutoPlan:
    """Everything "auto" needs, fixed when the transform is built (no data).

    Attributes:
      auto: the share and the candidates asked for.
      size_budget: what the size histogram spends.
      selection_budget: what the selection spends (any Δ0).
      candidates: the candidates the mechanism calibrates at under
        ``selection_budget`` (a candidate it refuses, e.g. truncated geometric
        at δ/Δ0 too small, is left out, before any data is seen).
      weight_thresholds: T(Δ0) of each candidate.
      edges: the lower edges of the size bins.
      mechanism_name: the mechanism the rule is for.
      user_mass: g(m), a key of ``MASSES``.
      round_thresholds: for a mechanism made of rounds (SIPS), each candidate's
        rounds' thresholds T_r: the rule is then ``max_items_rounds``' model of
        the rounds; empty for the others (the M/T rule).
      calibrations: each candidate's calibration (with the pre-threshold), computed
        once here for the selection to use.
    """

    auto: AutoMaxItems
    size_budget: Any
    selection_budget: Any
    candidates: tuple
    weight_thresholds: tuple
    edges: tuple
    mechanism_name: str
    user_mass: str
    round_thresholds: tuple = ()
    calibrations: tuple = dataclasses.field(default=(), compare=False, repr=False)

    def proxy(self, noisy_counts: np.ndarray) -> np.ndarray:
        """(M(Δ0) − 2·sd(M(Δ0)))/T(Δ0) for each candidate, from the noisy counts.

        The counts are used as they are, negatives included: the noise has mean
        0, so M is unbiased (clipping at 0 would add about half a noise scale
        of users to every empty bin, the large sizes included). M is then taken
        two noise standard deviations low, sd(M) = s·√(Σ_b g(m_b)²) with s the
        noise's standard deviation: on small data the noise, not the users,
        would otherwise decide between candidates whose masses are close, and
        the largest of several noisy masses leans to the candidates that read
        the most noisy bins, the large ones. On 50,000 users the margin is
        about 0.2 % of M.

        With ``round_thresholds`` (SIPS) the score is instead the items the
        rounds release in ``max_items_rounds``' model, from the same counts and
        bin sizes, for the candidates up to the one M/T picks (0 above it), unless
        no candidate's mass stands above the noise (then all 0).
        """
        counts = np.asarray(noisy_counts, dtype=np.float64)
        if counts.shape != (len(self.edges),):
            raise ValueError(f"expected {len(self.edges)} bin counts, got {counts.shape}")
        lower = np.asarray(self.edges, dtype=np.float64)
        upper = np.append(lower[1:] - 1.0, np.inf)
        # A bin's users sit at the geometric middle of its sizes (the last,
        # open bin is only ever read at its lower edge, the largest candidate).
        middle = np.sqrt(lower * np.where(np.isfinite(upper), upper, lower))
        mass = MASSES[self.user_mass]
        noise_sd = math.sqrt(size_noise(self.size_budget).variance())
        out = []
        for c, t in zip(self.candidates, self.weight_thresholds):
            g = mass(np.where(lower >= c, float(c), np.minimum(middle, float(c))))
            lower_mass = float(np.dot(counts, g)) - 2.0 * noise_sd * math.sqrt(float(np.dot(g, g)))
            # No mass to speak of: 0 for every candidate, and a tie goes to the smallest
            # (a negative mass over T would favour the largest T).
            out.append(max(lower_mass, 0.0) / t)
        if self.round_thresholds and max(out) > 0.0:
            # Only where some mass stands above the noise (else all 0: the smallest), and
            # up to the M/T choice (``max_items_rounds``, "Noise"); 0 above it.
            cap = int(np.argmax(out))
            holding = max_items_rounds.holding_probabilities(middle)
            return np.asarray([
                max_items_rounds.expected_released(counts, middle, t, c, holding) if i <= cap
                else 0.0
                for i, (c, t) in enumerate(zip(self.candidates, self.round_thresholds))])
        return np.asarray(out)

    def choose(self, noisy_counts: np.ndarray) -> int:
        """The candidate with the largest score, M/T or the rounds' items (the smaller on a
        tie): post-processing."""
        return int(self.candidates[int(np.argmax(self.proxy(noisy_counts)))])

    def _rule(self) -> dict:
        if self.round_thresholds:
            return {"rule": max_items_rounds.RULE, "user_mass": f"g(m) = {self.user_mass}",
                    "round_thresholds": [list(t) for t in self.round_thresholds]}
        return {"rule": "argmax over candidates of M(Δ0)/T(Δ0): M = Σ_users g(min(size, Δ0)) "
                        "from the noisy size histogram, T = the release threshold in weight "
                        "units (beam_dpsu.core.max_items_choice)",
                "user_mass": f"g(m) = {self.user_mass}"}

    def to_dict(self) -> dict:
        return {
            **self.auto.to_dict(),
            **self._rule(),
            "size_histogram": {"budget": self.size_budget.to_dict(),
                               "noise": size_noise(self.size_budget).to_dict(),
                               "bin_lower_edges": list(self.edges),
                               "sensitivity": 1},
            "selection_budget": self.selection_budget.to_dict(),
            "candidates_calibrated": list(self.candidates),
            "weight_thresholds": list(self.weight_thresholds),
        }


def calibrate_candidates(auto: AutoMaxItems, calibrate: Callable[[int], Any], who: str,
                         part: str) -> dict:
    """{Δ0: calibrate(Δ0)} for every candidate that calibrates, in order; a candidate
    whose ``calibrate`` raises ValueError is left out (before any data is seen).

    Raises:
      ValueError: no candidate calibrates, naming the first refusal (``who``, e.g.
        "sips calibrates", and ``part``, the part of the budget, word the message).
    """
    calibrations, refusals, errors = {}, [], []
    for c in auto.candidates:
        try:
            calibrations[c] = calibrate(c)
        except ValueError as e:
            refusals.append(f"{c}: {e}")
            errors.append(e)
    if not calibrations and all(getattr(e, "param", None) == "alpha" for e in errors):
        # Every candidate refuses the policy's alpha (its cutoff): that flag is the one to
        # change, by the first (smallest) candidate's bound, the loosest.
        raise errors[0]
    if not calibrations:
        raise ParameterError.worded(
            "max_items_per_user",
            f"max_items_per_user='auto': {who} at none of the {len(refusals)} candidates under "
            f"{part} ({1 - auto.spent:g} of it); at max_items_per_user={refusals[0]}")
    return calibrations


def plan_auto(mechanism, budget: Budget | ZCDPBudget, pre_threshold: int = 1) -> AutoPlan:
    """Splits the budget and calibrates every candidate Δ0 (eagerly; no data), each
    with the selection's pre-threshold k (``pre_threshold.calibrations``)."""
    auto = mechanism.max_items_per_user
    if not is_auto(auto):
        raise ParameterError.worded("max_items_per_user",
                                    "plan_auto is for max_items_per_user='auto'")
    auto = auto.with_share(default_share(mechanism))
    size_budget, selection_budget = split_budget(budget, auto.spent)

    def thresholds_at(c: int) -> tuple:
        calibration = pre_threshold_calibrations.calibrate(
            with_max_items(mechanism, c), selection_budget, pre_threshold)
        t = weight_threshold(calibration)
        if not (math.isfinite(t) and t > 0):
            raise ValueError(f"threshold {t!r}")
        return t, max_items_rounds.round_thresholds(calibration), calibration

    thresholds_by_candidate = calibrate_candidates(
        auto, thresholds_at, f"{mechanism.name} calibrates",
        "the selection's part of the budget")
    candidates = tuple(thresholds_by_candidate)
    weights = tuple(t for t, _, _ in thresholds_by_candidate.values())
    rounds = tuple(r for _, r, _ in thresholds_by_candidate.values())
    return AutoPlan(auto=auto, size_budget=size_budget, selection_budget=selection_budget,
                    candidates=candidates, weight_thresholds=weights,
                    edges=tuple(int(e) for e in size_bin_edges(auto.candidates)),
                    mechanism_name=mechanism.name, user_mass=user_mass(mechanism),
                    round_thresholds=rounds if all(r is not None for r in rounds) else (),
                    calibrations=tuple(c for _, _, c in thresholds_by_candidate.values()))
