"""Mechanism configurations: frozen dataclasses validated on construction.

A config names a set-union algorithm and its parameters, and knows how to
calibrate itself under a budget (pure math, no Beam). ``SelectItems`` takes a
config and a budget and builds the pipeline.

Parallel mechanisms (each user's update is independent of the others):

======================  ======================  ===============  =========================
config                  update per user         noise            source
======================  ======================  ===============  =========================
``CountLaplace``        +1 to ≤ Δ0 items        Lap(Δ0/ε)        dpsu §1.1
``CountGaussian``       +1 to ≤ Δ0 items        σ(ε, δ_n, √Δ0)   dpsu §1.1
``WeightedLaplace``     +1/|W|                  Lap(1/ε)         dpsu Thm B.1
``WeightedGaussian``    +1/√|W|                 σ(ε, δ_n, 1)     dpsu Thm B.2, dp-sips Thm 1
``TruncatedGeometric``  +1 to ≤ Δ0 items        keep w.p. π(n)   Desfontaines et al. Thm 1
======================  ======================  ===============  =========================

δ_n is the noise's share of δ under ``Budget(ε, δ)``, chosen to minimise the
threshold (``calibration.split_delta``; the proof is in ``beam_dpsu.core.calibration``).

Iterative: ``SIPS`` runs Weighted Gaussian for several rounds with a rising
budget, removing each round's released items from the users' sets (dp-sips §4).

Sequential (each user's update depends on the histogram so far; users are
visited in a keyed-hash order): ``PolicyLaplace`` (ℓ1-descent, dpsu §4),
``PolicyGaussian`` (ℓ2-descent, dpsu §5), ``GreedyWithoutSampling`` (GW and
GW-KT, gw §3–4, with the top-Δ0 cap, zero-weight keys noised and the
threshold of docs/privacy.md's GW fix that close the published proof's gap). Every one
bounds each user to a list of ≤ Δ0 items and noises every item of every list.
"""

from __future__ import annotations

import dataclasses
import math
import sys
from fractions import Fraction
from typing import ClassVar, Mapping, cast

import numpy as np

from beam_dpsu.core import budgets, checks

from beam_dpsu.core import max_items_choice

from beam_dpsu.core import policies

from beam_dpsu.core import thresholds
from beam_dpsu.core.exact_floats import nudged
from beam_dpsu.core.gaussian import sqrt_rounded_up
from beam_dpsu.core.budgets import Budget, ZCDPBudget
from beam_dpsu.core.checks import ParameterError, ParameterTypeError
from beam_dpsu.core.calibration import (Calibration, DeltaSplit, KeepProbabilityCalibration,
                                        RoundsCalibration, gaussian_calibration,
                                        laplace_calibration, split_delta,
                                        truncated_geometric_calibration)

__all__ = [
    "MechanismConfig",
    "CountLaplace",
    "CountGaussian",
    "WeightedLaplace",
    "WeightedGaussian",
    "SIPS",
    "PolicyLaplace",
    "PolicyGaussian",
    "GreedyWithoutSampling",
    "TruncatedGeometric",
    "MECHANISMS",
    "mechanism_from_name",
]


class MechanismConfig:
    """Base class of every mechanism config.

    Subclasses are frozen dataclasses with a kebab-case ``name`` (the CLI's
    ``--mechanism`` value) and a ``calibrate(budget)`` method.
    """

    name: ClassVar[str]
    # g(m), the weight a user keeping m items places, as a key of
    # ``max_items_choice.MASSES``: the mechanism's rule for max_items_per_user="auto".
    user_mass: ClassVar[str]

    def __post_init__(self):
        # Validates whichever of the shared parameters the config has.
        validators = {"max_items_per_user": max_items_choice.check_max_items_or_auto,
                      "alpha": lambda value: checks.non_negative("alpha", value),
                      "shards": lambda value: checks.integer("shards", value)}
        for field in dataclasses.fields(self):
            if field.name in validators:
                object.__setattr__(self, field.name,
                                   validators[field.name](getattr(self, field.name)))

    def calibrate(  # pragma: no cover - abstract
            self, budget) -> Calibration | KeepProbabilityCalibration | RoundsCalibration:
        raise NotImplementedError

    def _check_budget(self, budget):
        """The budget, if it is one and has δ > 0 (no set-union mechanism is pure)."""
        if max_items_choice.is_auto(getattr(self, "max_items_per_user", None)):
            raise ParameterError.worded(
                "max_items_per_user",
                f"{self.name}: max_items_per_user='auto' is chosen from the data when the "
                "pipeline runs, so this config has no calibration of its own; give it to "
                "SelectItems (its report shows every candidate's), or calibrate "
                "beam_dpsu.core.max_items_choice.with_max_items(config, n)")
        checks.instance("budget", budget, (Budget, ZCDPBudget), "a Budget or ZCDPBudget")
        return checks.require_delta(budget, f"mechanism {self.name!r}")

    def to_dict(self) -> dict:
        # Every subclass is a dataclass; the base, which mypy checks here, is not.
        out = {"name": self.name, **dataclasses.asdict(self)}  # type: ignore[call-overload]
        max_items = getattr(self, "max_items_per_user", None)
        if max_items_choice.is_auto(max_items):
            out["max_items_per_user"] = max_items.with_share(
                max_items_choice.default_share(self)).to_dict()
        return out


class ParallelMechanism(MechanismConfig):
    """A mechanism whose per-user update is a fixed weight per sampled item."""

    max_items_per_user: int
    # A staticmethod: a Callable class attribute would read as a method to mypy.
    item_weight: ClassVar[staticmethod[[int], float]]


@dataclasses.dataclass(frozen=True)
class CountLaplace(ParallelMechanism):
    """Count Laplace: each user adds 1 to each of ≤ Δ0 sampled items; Lap(Δ0/ε) noise.

    Attributes:
      max_items_per_user: Δ0, the number of distinct items sampled per user.
    """

    max_items_per_user: int = 100
    name: ClassVar[str] = "count-laplace"
    user_mass: ClassVar[str] = "m"
    item_weight = staticmethod(policies.count_weight)

    def calibrate(self, budget) -> Calibration:
        budget = self._check_budget(budget)
        return laplace_calibration(
            budget, self.max_items_per_user, float(self.max_items_per_user),
            thresholds.count_laplace_threshold,
            "dpsu (Gopi et al. 2020) §1.1; Korolova et al. 2009")


@dataclasses.dataclass(frozen=True)
class CountGaussian(ParallelMechanism):
    """Count Gaussian: +1 to each of ≤ Δ0 sampled items; Gaussian noise for L2 = √Δ0.

    Attributes:
      max_items_per_user: Δ0, the number of distinct items sampled per user.
    """

    max_items_per_user: int = 100
    name: ClassVar[str] = "count-gaussian"
    user_mass: ClassVar[str] = "m"
    item_weight = staticmethod(policies.count_weight)

    def calibrate(self, budget) -> Calibration:
        budget = self._check_budget(budget)
        return gaussian_calibration(
            budget, self.max_items_per_user, sqrt_rounded_up(self.max_items_per_user),
            thresholds.count_gaussian_threshold,
            "dpsu (Gopi et al. 2020) §1.1, Proposition 2.2 (analytic Gaussian)")


@dataclasses.dataclass(frozen=True)
class WeightedLaplace(ParallelMechanism):
    """Weighted Laplace: +1/|W| to each of ≤ Δ0 sampled items; Lap(1/ε) noise.

    Attributes:
      max_items_per_user: Δ0, the number of distinct items sampled per user.
    """

    max_items_per_user: int = 100
    name: ClassVar[str] = "weighted-laplace"
    user_mass: ClassVar[str] = "1"
    item_weight = staticmethod(policies.weighted_laplace_weight)

    def calibrate(self, budget) -> Calibration:
        budget = self._check_budget(budget)
        return laplace_calibration(
            budget, self.max_items_per_user, 1.0, thresholds.weighted_laplace_threshold,
            "dpsu (Gopi et al. 2020) Algorithm 9, Theorem B.1")


@dataclasses.dataclass(frozen=True)
class WeightedGaussian(ParallelMechanism):
    """Weighted Gaussian: +1/√|W| to each of ≤ Δ0 sampled items; Gaussian noise for L2 = 1.

    Under ``Budget(ε, δ)``: σ = analytic Gaussian(ε, δ_noise), threshold with
    δ_thr, δ_noise + δ_thr = δ split to minimise the threshold
    (``calibration.split_delta``; dpsu Theorem B.2 used δ/2 each). Under
    ``ZCDPBudget(ρ, δ)``: σ = 1/√(2ρ), threshold with δ (dp-sips Theorem 1).

    Attributes:
      max_items_per_user: Δ0, the number of distinct items sampled per user.
    """

    max_items_per_user: int = 100
    name: ClassVar[str] = "weighted-gaussian"
    user_mass: ClassVar[str] = "sqrt(m)"
    item_weight = staticmethod(policies.weighted_gaussian_weight)

    def calibrate(self, budget) -> Calibration:
        budget = self._check_budget(budget)
        return gaussian_calibration(
            budget, self.max_items_per_user, 1.0, thresholds.weighted_gaussian_threshold,
            "dpsu (Gopi et al. 2020) Algorithm 10, Theorem B.2; dp-sips Theorem 1")


@dataclasses.dataclass(frozen=True)
class TruncatedGeometric(ParallelMechanism):
    """Truncated geometric: the optimal partition selection for users holding one item.

    Desfontaines, Voss, Gipson & Mandayam 2022, PoPETs ("Differentially
    private partition selection", arXiv 2006.03684) Theorem 1: each user adds 1 to each of
    ≤ Δ0 sampled items, and an item held by n users is kept with probability
    π(n), π(0) = 0, π(n) = min(e^ε'·π(n−1) + δ', 1 − e^{−ε'}·(1 − π(n−1) − δ'), 1).
    With Δ0 = 1 this is the best (ε, δ)-DP selection there is; with Δ0 > 1
    each item's decision gets (ε' = ε/Δ0, δ' = δ/Δ0) and basic composition
    over the user's ≤ Δ0 items gives (ε, δ), as in PipelineDP (whose PyDP
    backend uses δ' = 1 − (1 − δ)^{1/Δ0}, larger by a factor 1 + O(δ)).
    The baseline the set-union papers are compared with, not a set-union
    mechanism of its own: it ignores how many items a user holds.

    (ε, δ)-DP only: it has no zCDP calibration, so a ``ZCDPBudget`` is refused.

    Attributes:
      max_items_per_user: Δ0, the number of distinct items sampled per user.
    """

    max_items_per_user: int = 100
    name: ClassVar[str] = "truncated-geometric"
    user_mass: ClassVar[str] = "m"
    item_weight = staticmethod(policies.count_weight)

    def calibrate(self, budget) -> KeepProbabilityCalibration:
        budget = self._check_budget(budget)
        if not isinstance(budget, Budget):
            raise ParameterError.worded(
                "budget",
                "mechanism 'truncated-geometric' is (ε, δ)-DP only (Desfontaines et al. 2022) "
                "and has no zCDP calibration: give it a Budget(epsilon, delta)")
        return truncated_geometric_calibration(budget, self.max_items_per_user)


@dataclasses.dataclass(frozen=True)
class SIPS(MechanismConfig):
    """DP-SIPS: iterative partition selection (dp-sips §4, Algorithm 3).

    Round i = 0..I−1 runs Weighted Gaussian with ρ_i = ρ·r^{I−i−1}(1−r)/(1−r^I)
    and δ_i likewise (even split at r = 1), σ_i = 1/√(2ρ_i) and the threshold
    max_{k≤Δ0} 1/√k + σ_i Φ⁻¹((1−δ_i)^{1/k}), on every user's items minus all
    items released in earlier rounds, re-sampled to Δ0 each round. The union
    is δ-approximate ρ-zCDP (dp-sips Theorem 1 and Lemma 6).

    Under a ``Budget(ε, δ)`` the rounds' noise is calibrated as ONE Gaussian
    mechanism (tight accounting, docs/privacy.md, Accounting): σ_total = analytic Gaussian at
    (ε, δ_noise), and round i gets μ_i² = w_i·μ² (σ_i = σ_total/√w_i, i.e.
    ρ_i ∝ w_i with ρ = 1/(2σ_total²)) and δ_i = w_i·δ_thr, w_i the geometric
    shares above. Privacy: the rounds are an adaptive composition of Gaussian
    mechanisms of ℓ2 sensitivity 1 on the keys both neighbours noise (items
    released earlier are removed alike on both sides), which is exactly the
    Gaussian mechanism with μ² = Σ μ_i² (Dong, Roth & Su 2022, Cor. 3.3), so
    (ε, δ_noise)-DP by the analytic Gaussian; the only other event is that an
    item only the extra user holds crosses a round's threshold, of probability
    ≤ Σ δ_i = δ_thr (dp-sips App. A per round, union bound), which costs
    δ_thr (proof in ``beam_dpsu.core.calibration``). Total:
    (ε, δ_noise + δ_thr) = (ε, δ). The split δ_noise/δ_thr
    minimises the last (largest) round's threshold (``split_delta``). The old
    route through zCDP (dp-sips Corollary 9 at δ/2 each) gave ρ = 0.0949 at
    (1.765, 4.96e-5); this gives an equivalent ρ of about 0.11.

    Attributes:
      max_items_per_user: Δ0, distinct items sampled per user in each round.
      rounds: I ≥ 1, the number of rounds (at most ``MAX_ROUNDS`` = 100).
      ratio: r in (0, 1], the ratio between consecutive rounds' budgets.
      removal: how earlier rounds' items are removed: "side_input" (default;
        the released set is broadcast to workers) or "join" (no memory bound,
        more shuffles); see ``beam_dpsu.beam.sips`` for where the cut-over lies.
        It changes only the execution, never the output distribution.
    """

    max_items_per_user: int = 100
    rounds: int = 3
    ratio: float = 1.0 / 3.0
    removal: str = "side_input"
    name: ClassVar[str] = "sips"
    user_mass: ClassVar[str] = "sqrt(m)"
    # "auto"'s default share of the budget (max_items_choice, "The share").
    auto_share: ClassVar[float] = max_items_choice.SIPS_SHARE
    # Rounds are unrolled when the pipeline is built: 100 run in ~40 s on the
    # DirectRunner; dp-sips uses 3 to 5 (§5).
    MAX_ROUNDS: ClassVar[int] = 100

    def __post_init__(self):
        super().__post_init__()
        checks.one_of("removal", self.removal, ("side_input", "join"),
                      "'side_input' or 'join'")
        if (isinstance(self.rounds, (int, np.integer)) and not isinstance(self.rounds, bool)
                and self.rounds > self.MAX_ROUNDS):
            raise ParameterError("rounds", f"must be at most {self.MAX_ROUNDS} (each round is a "
                                           f"stage of the pipeline), got {self.rounds!r}")
        budgets.geometric_split_weights(self.rounds, self.ratio)  # validates both
        object.__setattr__(self, "rounds", int(self.rounds))
        object.__setattr__(self, "ratio", float(self.ratio))

    def _delta_split(self, budget: Budget) -> DeltaSplit:
        """The δ split minimising the last round's threshold (see the class docstring)."""
        w_last = budgets.geometric_split_weights(self.rounds, self.ratio)[-1]
        d0 = self.max_items_per_user

        def last_threshold(sigma_total: float, threshold_delta: float) -> float:
            return thresholds.weighted_gaussian_threshold(
                sigma_total / math.sqrt(w_last), threshold_delta * w_last, d0)

        return split_delta(budget.epsilon, budget.delta, last_threshold)

    def _equivalent_zcdp(self, budget: Budget, split: DeltaSplit) -> ZCDPBudget:
        """ρ = μ²/2 of the composed Gaussian (μ = 1/σ_total) with δ = δ_thr, or a clear error."""
        rho = 0.5 * (1.0 / split.sigma_total) ** 2
        # Rounded down until 2ρ ≤ 1/σ_total² exactly: the rounds' σ_i are each rounded up
        # for their ρ_i, whose sum is at most ρ, so Σ 1/σ_i² ≤ 1/σ_total², the Gaussian
        # the analytic calibration paid for (to nearest, ρ could be an ulp above it).
        rho = nudged(rho, lambda r: not (r > 0.0 and math.isfinite(r))
                     or 2 * Fraction(r) * Fraction(split.sigma_total) ** 2 <= 1, 0.0)
        w_first = budgets.geometric_split_weights(self.rounds, self.ratio)[0]
        if not (math.isfinite(rho) and rho * w_first > 0.0):
            raise ParameterError(
                "epsilon", f"= {budget.epsilon:g} is too small for sips over {self.rounds} "
                           f"rounds: the rounds' noise (sigma_total = {split.sigma_total:g}) is "
                           "outside the float range; raise epsilon or use fewer rounds")
        return ZCDPBudget(rho, split.threshold_delta)

    def zcdp_budget(self, budget) -> ZCDPBudget:
        """The δ-approximate ρ-zCDP budget split over the rounds.

        Under ``Budget(ε, δ)``: ρ = 1/(2σ_total²) of the composed Gaussian
        (Gaussian noise of μ is μ²/2-zCDP) and δ = δ_thr, the rounds' threshold δ.
        """
        budget = self._check_budget(budget)
        if isinstance(budget, ZCDPBudget):
            return budget
        if isinstance(budget, Budget):
            return self._equivalent_zcdp(budget, self._delta_split(budget))
        raise ParameterTypeError("budget", f"must be a Budget or ZCDPBudget, got {budget!r}")

    def round_budgets(self, budget) -> list[ZCDPBudget]:
        """(ρ_i, δ_i) of each round; they sum to the total (dp-sips Thm 1 proof)."""
        total = self.zcdp_budget(budget)
        return total.split(budgets.geometric_split_weights(self.rounds, self.ratio))

    def calibrate(self, budget) -> RoundsCalibration:
        budget = self._check_budget(budget)
        delta_noise = None
        if isinstance(budget, Budget):
            split = self._delta_split(budget)
            total = self._equivalent_zcdp(budget, split)
            delta_noise = split.delta_noise
        else:
            total = budget
        # Each round is Weighted Gaussian on its share (dp-sips Algorithm 2):
        # σ_i = 1/√(2ρ_i) = σ_total/√w_i and its threshold at δ_i.
        round_mechanism = WeightedGaussian(self.max_items_per_user)
        parts = total.split(budgets.geometric_split_weights(self.rounds, self.ratio))
        rounds = tuple(round_mechanism.calibrate(part) for part in parts)
        return RoundsCalibration(rounds=rounds, budget=budget, zcdp_budget=total,
                                 delta_noise=delta_noise,
                                 source="dp-sips (Swanberg et al. 2023) §4, Algorithm 3, "
                                        "Theorem 1; under (ε, δ): one analytic Gaussian "
                                        "for all rounds (Dong, Roth & Su 2022, Cor. 3.3)")


class SequentialMechanism(MechanismConfig):
    """A mechanism whose users update the histogram one after another (a policy).

    Users are visited in the order of a keyed hash of their id; ``shards``
    splits them over that many independent orders whose histograms are summed
    (same sensitivity; see ``beam_dpsu.beam.sequential``).
    """

    alpha: float
    shards: int

    def _with_cutoff(self, calibration: Calibration) -> Calibration:
        cutoff = thresholds.policy_cutoff(calibration.release_threshold,
                                          calibration.noise_scale, self.alpha)
        return dataclasses.replace(calibration, cutoff=cutoff)


@dataclasses.dataclass(frozen=True)
class PolicyLaplace(SequentialMechanism):
    """Policy Laplace: ℓ1-descent toward Γ = ρ_Lap + α/ε, Lap(1/ε) noise (dpsu §4, Alg. 3–4).

    Attributes:
      max_items_per_user: Δ0, distinct items sampled per user.
      alpha: α ≥ 0 in the cutoff Γ = ρ + α·λ (the paper finds 2–6 works best).
      shards: P ≥ 1 independent user orders (1 = the paper's algorithm).
    """

    max_items_per_user: int = 100
    alpha: float = 3.0
    shards: int = 1
    name: ClassVar[str] = "policy-laplace"
    user_mass: ClassVar[str] = "m/(m+1)"

    def calibrate(self, budget) -> Calibration:
        budget = self._check_budget(budget)
        return self._with_cutoff(laplace_calibration(
            budget, self.max_items_per_user, 1.0, thresholds.weighted_laplace_threshold,
            "dpsu (Gopi et al. 2020) Algorithms 3-4, Theorem 4.1"))


@dataclasses.dataclass(frozen=True)
class PolicyGaussian(SequentialMechanism):
    """Policy Gaussian: ℓ2-descent toward Γ = ρ_Gauss + α·σ (dpsu §5, Alg. 5 and 7).

    Algorithm 5 prints Γ ← ρ_Lap + α·σ; the intent, used here, is ρ_Gauss + α·σ.
    The ℓ1-descent variant (Algorithm 8) is not private and is not offered.
    Under ``Budget(ε, δ)`` σ and ρ are Weighted Gaussian's (the δ split
    minimises ρ, the weight an item needs to be released with probability ½;
    Γ follows from it).

    Attributes:
      max_items_per_user: Δ0, distinct items sampled per user.
      alpha: α ≥ 0 in the cutoff Γ = ρ + α·σ.
      shards: P ≥ 1 independent user orders (1 = the paper's algorithm).
    """

    max_items_per_user: int = 100
    alpha: float = 3.0
    shards: int = 1
    name: ClassVar[str] = "policy-gaussian"
    user_mass: ClassVar[str] = "sqrt(m)"

    def calibrate(self, budget) -> Calibration:
        budget = self._check_budget(budget)
        return self._with_cutoff(gaussian_calibration(
            budget, self.max_items_per_user, 1.0, thresholds.weighted_gaussian_threshold,
            "dpsu (Gopi et al. 2020) Algorithms 5 and 7, Theorem 5.1"))


@dataclasses.dataclass(frozen=True)
class GreedyWithoutSampling(SequentialMechanism):
    """GW: greedy updates on each user's top-Δ0 items, Lap(1/ε) (gw §3 as fixed in docs/privacy.md).

    Each user keeps its Δ0 most frequent items (by its own counts; ties by a
    keyed hash of the item) and fills them toward Γ one at a time, most
    frequent first, until its budget of 1 is spent. With ``public_order`` it
    is GW-KT (gw §4): items are ranked by counts from public data (absent
    items count 1), given here as a mapping (``public_counts``) or, counted in
    the pipeline, to the transform (``SelectItems(..., public_counts=pcoll)``).
    Every item of every user's list is noised and thresholded, zero weight
    included, and the threshold ρ solves
    1 − (1 − p(1))·(1 − p(0))^{Δ0−1} = δ with p(w) = ½·e^{−(ρ−w)ε}
    (``thresholds.gw_threshold``; the proof is in ``beam_dpsu.core.policies``).

    This is not the published GW, which takes no Δ0, noises only items of
    positive weight and uses ρ_GW = 1 − λ·ln(2δ): that rule is not DP (users
    after the extra one can push other users' items from weight 0 to > 0;
    docs/privacy.md, GW fix). The fix costs utility: on IMDb at ε = 1.7 the published
    rule released about 3,400 items, this one about 2,650 at Δ0 = 30
    (``docs/benchmarks.md``).

    Attributes:
      max_items_per_user: Δ0, the number of a user's most frequent (GW) or
        most publicly frequent (GW-KT) items it may spend its budget on; all
        of them are noised. Smaller Δ0 lowers ρ; larger lets a user reach
        further down its list. None (the default) means 30 for GW and 300
        for GW-KT, the best of 10/30/100/300 (GW) and 30/100/300/1000
        (GW-KT) on IMDb at ε = 1.7: a GW-KT list starts with the most common
        public words, which reach Γ after a few users, so it needs to be
        longer to leave the user items to spend on.
      alpha: α ≥ 0 in Γ = ρ + α·λ; Γ must be ≥ 1 (gw Theorem 1).
      public_counts: None, or a mapping item → count (GW-KT with these
        counts). Counts held in a Beam ``PCollection`` of (item, count) pairs,
        e.g. counted from a public corpus in the same pipeline, go to the
        transform instead: ``SelectItems(..., public_counts=pcoll)``, with
        ``public_order=True`` here.
      shards: P ≥ 1 independent user orders (1 = the paper's algorithm).
      public_order: GW-KT: items are ranked by public counts (True whenever
        ``public_counts`` is given; set it when the counts come to the
        transform).
    """

    max_items_per_user: int | None = None
    alpha: float = 3.0
    public_counts: Mapping | None = None
    shards: int = 1
    public_order: bool = False
    name: ClassVar[str] = "gw"
    user_mass: ClassVar[str] = "m/(m+1)"

    DEFAULT_MAX_ITEMS: ClassVar[int] = 30
    DEFAULT_MAX_ITEMS_KT: ClassVar[int] = 300

    def __post_init__(self):
        pc = self.public_counts
        if _is_pcollection(pc):
            raise ParameterTypeError(
                "public_counts", "must be None or a mapping item -> count: a PCollection of "
                "(item, count) goes to the transform, SelectItems(GreedyWithoutSampling("
                "public_order=True), budget, public_counts=pcoll)")
        checks.instance("public_order", self.public_order, bool, "True or False")
        if pc is not None:
            object.__setattr__(self, "public_order", True)
        if self.max_items_per_user is None:
            object.__setattr__(self, "max_items_per_user",
                               self.DEFAULT_MAX_ITEMS_KT if self.public_order
                               else self.DEFAULT_MAX_ITEMS)
        super().__post_init__()
        if pc is not None and not isinstance(pc, Mapping):
            raise ParameterTypeError("public_counts", "must be None, a mapping item -> count or "
                                     f"a PCollection of (item, count), got {type(pc).__name__}")
        if isinstance(pc, Mapping):
            for count in pc.values():
                checks.public_count(count)

    def calibrate(self, budget) -> Calibration:
        budget = self._check_budget(budget)
        calibration = self._with_cutoff(laplace_calibration(
            budget, cast(int, self.max_items_per_user),  # set by __post_init__
            1.0, thresholds.gw_threshold,
            "gw (Carvalho et al. 2022) Algorithm 2, Lemma 1; §4 (KT); top-Δ0 lists with "
            "every held item noised and ρ for one key at 1 and Δ0−1 at 0 "
            "(docs/privacy.md, The GW cascade gap and its fix)"))
        assert calibration.cutoff is not None  # set by _with_cutoff
        if calibration.cutoff < 1.0:
            raise ParameterError.worded(
                "alpha",
                f"GW needs a cutoff Γ >= 1 (gw Theorem 1), got Γ = {calibration.cutoff!r}; "
                "raise alpha or lower delta")
        return calibration

    def to_dict(self) -> dict:
        pc = self.public_counts
        # Without a mapping here, GW-KT's counts come to the transform as a PCollection.
        public = (None if not self.public_order else
                  f"mapping of {len(pc)} items" if pc is not None else "PCollection")
        return {"name": "gw-kt" if self.public_order else self.name,
                "max_items_per_user": (self.max_items_per_user.with_share(
                                           max_items_choice.default_share(self)).to_dict()
                                       if max_items_choice.is_auto(self.max_items_per_user)
                                       else self.max_items_per_user), "alpha": self.alpha,
                "shards": self.shards, "public_counts": public}


def _is_pcollection(value) -> bool:
    """Whether ``value`` is a Beam PCollection, without importing Beam (the core
    needs none: if Beam is not loaded, nothing is a PCollection)."""
    pvalue = sys.modules.get("apache_beam.pvalue")
    return pvalue is not None and isinstance(value, pvalue.PCollection)


MECHANISMS: dict[str, type] = {
    cls.name: cls for cls in (CountLaplace, CountGaussian, WeightedLaplace, WeightedGaussian,
                              SIPS, PolicyLaplace, PolicyGaussian, GreedyWithoutSampling,
                              TruncatedGeometric)
}

_NOT_PRIVATE = {
    "policy-gaussian-l1": (
        "'policy-gaussian-l1' (Algorithm 8 of Gopi et al. 2020, ℓ1-descent under "
        "Gaussian noise) is not differentially private: the published corrigendum "
        "withdraws Proposition 5.1 (the policy is not ℓ2-contractive), so "
        "beam_dpsu does not offer it; use 'policy-gaussian' (ℓ2-descent, Algorithm 7)"),
}


def mechanism_from_name(name: str, ignore_unused: bool = False, **params) -> MechanismConfig:
    """Builds a config from its kebab-case name, e.g. ``"weighted-gaussian"``.

    Parameters that are None are ignored, so a CLI can pass every option it
    has. A parameter the mechanism does not take is an error, unless
    ``ignore_unused`` (for tools that run several mechanisms with one set of
    flags).

    Args:
      name: the mechanism's name, a key of ``MECHANISMS``.
      ignore_unused: drop parameters the mechanism does not take instead of
        refusing them.
      **params: the config's fields, e.g. ``max_items_per_user=100``.

    Returns:
      The mechanism config.

    Raises:
      ValueError: an unknown or non-private name, or a parameter the mechanism
        does not take.
    """
    if name in _NOT_PRIVATE:
        raise ParameterError.worded("mechanism", _NOT_PRIVATE[name])
    if name not in MECHANISMS:
        raise ParameterError.worded(
            "mechanism", f"unknown mechanism {name!r}; choose one of {sorted(MECHANISMS)}")
    cls = MECHANISMS[name]
    fields = {f.name for f in dataclasses.fields(cls)}
    unknown = {k for k, v in params.items() if k not in fields and v is not None}
    if unknown and not ignore_unused:
        raise ParameterError.worded("mechanism",
                                    f"mechanism {name!r} does not take {sorted(unknown)}")
    return cls(**{k: v for k, v in params.items() if k in fields and v is not None})
