"""The budget of the released items' counts: their noise, and the split that pays for them.

``CountReleased`` draws the counts, each user on ≤ Δ0 released items, with pure discrete
noise. ``split_selection_and_counts`` splits one total; ``composed_guarantees`` states
the tighter total as run. Proof: docs/explanation/proofs.md#counts-of-released-items.
"""

from __future__ import annotations

import dataclasses
import math
from fractions import Fraction

from beam_dpsu.core import checks, composition, max_items_choice
from beam_dpsu.core.budgets import Budget, BudgetAccountant, ZCDPBudget, parts_within
from beam_dpsu.core.checks import ParameterError
from beam_dpsu.core.discrete_noise import DiscreteGaussian, DiscreteLaplace
from beam_dpsu.core.exact_floats import LARGEST_FLOAT
from beam_dpsu.core.report import dp_equivalents

__all__ = ["DEFAULT_COUNTS_SHARE", "CountsCalibration", "count_calibration",
           "SelectionAndCountsBudget", "TightSelectionBudget", "TightCountsBudget",
           "split_selection_and_counts", "composed_guarantees"]

# The counts' default share; split_selection_and_counts's default is written out as
# 0.25 so that its signature shows the number (tests/core/test_pld.py checks they agree).
DEFAULT_COUNTS_SHARE = 0.25


@dataclasses.dataclass(frozen=True)
class CountsCalibration:
    """The noise of the released items' counts, fixed when the transform is built.

    Attributes:
      noise: the exact discrete distribution added to each count.
      max_items_per_user: Δ0, the most released items a user is counted for.
      sensitivity_norm: 1 (discrete Laplace) or 2 (discrete Gaussian).
      sensitivity: Δ0 in ℓ1 or √Δ0 in ℓ2: how far one user moves the counts.
      budget: the budget the counts spend (its δ is not used).
      source: where the calibration comes from.
    """

    noise: DiscreteLaplace | DiscreteGaussian
    max_items_per_user: int
    sensitivity_norm: int
    sensitivity: float
    budget: Budget | ZCDPBudget
    source: str

    def to_dict(self) -> dict:
        return {"budget": self.budget.to_dict(), **self.noise.to_dict(),
                "max_items_per_user": self.max_items_per_user,
                "sensitivity_norm": self.sensitivity_norm, "sensitivity": self.sensitivity,
                "source": self.source}


def count_calibration(budget: Budget | ZCDPBudget, max_items_per_user: int) -> CountsCalibration:
    """The count noise under ``budget`` when each user counts on ≤ Δ0 items.

    ``Budget``: discrete Laplace of scale Δ0/ε (CKS §1.1, eq. (2)); ``ZCDPBudget``: discrete
    Gaussian of σ² = Δ0/(2ρ) (CKS Theorem 4, Proposition 3). Pure; exact-fraction scales.

    Args:
      budget: the counts' ``Budget`` or ``ZCDPBudget`` (δ may be 0).
      max_items_per_user: Δ0, the most released items one user is counted on.

    Returns:
      The counts' noise and its scale.
    """
    d0 = checks.max_items(max_items_per_user)
    checks.instance("budget", budget, (Budget, ZCDPBudget), "a Budget or ZCDPBudget")
    scale = (Fraction(d0) / Fraction(budget.epsilon) if isinstance(budget, Budget)
             else Fraction(d0) / (2 * Fraction(budget.rho)))
    if scale > LARGEST_FLOAT:  # reported as a float; noise that large drowns every count
        param = "epsilon" if isinstance(budget, Budget) else "rho"
        raise ParameterError(
            param, f"= {getattr(budget, param):g} is too small for the counts at "
                   f"max_items_per_user = {d0}: the noise scale exceeds the float range")
    if isinstance(budget, Budget):
        return CountsCalibration(
            noise=DiscreteLaplace(scale), max_items_per_user=d0, sensitivity_norm=1,
            sensitivity=float(d0), budget=budget,
            source="Canonne, Kamath & Steinke 2020 §1.1 eq. (2), Algorithm 2 (discrete Laplace)")
    return CountsCalibration(
        noise=DiscreteGaussian(scale), max_items_per_user=d0, sensitivity_norm=2,
        sensitivity=math.sqrt(d0), budget=budget,
        source="Canonne, Kamath & Steinke 2020 Theorem 4, Proposition 3, Algorithm 3 "
               "(discrete Gaussian)")


@dataclasses.dataclass(frozen=True)
class TightSelectionBudget(Budget):
    """The selection's part of a tight split, valid only for its mechanism (``SelectItems``)."""

    for_mechanism: object = None


@dataclasses.dataclass(frozen=True)
class TightCountsBudget(Budget):
    """The counts' part of a tight split, valid only for its Δ0 (``CountReleased`` checks)."""

    for_max_items_per_user: int | None = None


@dataclasses.dataclass(frozen=True)
class SelectionAndCountsBudget:
    """One total budget split between a selection and the counts of what it released.

    Attributes:
      total: the budget the two parts compose to.
      selection: the selection's part: (1 − share)·ε (or ·ρ) and all of δ.
      counts: the counts' part: share·ε (or ·ρ) and δ = 0 (the counts are pure).
      counts_share: the share of ε (or ρ) given to the counts.
      composed: a ``composition.ComposedGuarantee`` each, once calibrated (``composed_with``).
      scale: c > 1 for a tight split (both ε's scaled by c), else 1.
    """

    total: Budget | ZCDPBudget
    selection: Budget | ZCDPBudget
    counts: Budget | ZCDPBudget
    counts_share: float
    composed: tuple = ()
    scale: float = 1.0

    def composed_with(self, selection_calibration, counts_calibration
                      ) -> "SelectionAndCountsBudget":
        """This split with its tight total guarantee(s) for these calibrations."""
        return dataclasses.replace(self, composed=composed_guarantees(
            self, selection_calibration, counts_calibration))

    def to_dict(self) -> dict:
        if self.scale > 1.0:
            rule = (f"tight: both parts' epsilon scaled by {self.scale:.9g} so that the selection "
                    "and counts as calibrated compose to the total (privacy-loss distributions, "
                    "beam_dpsu.core.composition; see composed_guarantee)")
        elif isinstance(self.total, Budget):
            rule = "basic composition: ε and δ add (Dwork & Roth Thm 3.16)"
        else:
            rule = "zCDP composition: ρ and δ add (dp-sips Lemma 6)"
        out = {"total": self.total.to_dict(), "selection": self.selection.to_dict(),
               "counts": self.counts.to_dict(), "counts_share": self.counts_share,
               "composition": rule, **({"scale": self.scale} if self.scale > 1.0 else {})}
        if self.composed:
            out["composed_guarantee"] = [g.to_dict() for g in self.composed]
            out["composed_note"] = (
                "the total (epsilon, delta) of the selection and counts as run, tightly "
                "accounted (privacy-loss distributions); never above basic composition")
        return out


def composed_guarantees(parts: SelectionAndCountsBudget, selection_calibration,
                        counts_calibration) -> tuple:
    """The tight, data-independent (ε, δ) of a selection and its counts, ε ≤ basic composition.

    At the total δ of a ``Budget``, or at the δ_DP of ``report.dp_equivalents`` (dp-sips
    Corollary 9) of a ``ZCDPBudget``; empty when a part has no known privacy-loss pair.
    """
    sel, cnt = parts.selection, parts.counts
    if isinstance(parts.total, Budget):
        assert isinstance(sel, Budget) and isinstance(cnt, Budget)  # the total's kind
        points = [(parts.total.delta, sel.epsilon + cnt.epsilon)]
    else:
        assert isinstance(sel, ZCDPBudget) and isinstance(cnt, ZCDPBudget)
        spent = ZCDPBudget(sel.rho + cnt.rho, sel.delta + cnt.delta)
        points = [(d["delta"], d["epsilon"]) for d in dp_equivalents(spent)]
    found = composition.composed_guarantees_at(selection_calibration, counts_calibration, points)
    return tuple(g for g in found if g is not None)


def _solve_tight_scale(total: Budget, share: float, selection_mechanism, d0: int) -> float:
    """The largest c ≥ 1 (to 1e-9) at which the parts c(1−s)ε and c·s·ε compose to ≤ ε
    (every accepted c is checked: the result holds even if c ↦ ε is not monotone)."""
    eps, delta = total.epsilon, total.delta

    def fits(c: float) -> bool:
        try:  # a scaled part out of range (e.g. ε overflowing) does not fit
            sel = selection_mechanism.calibrate(Budget(c * (1.0 - share) * eps, delta))
            cnt = count_calibration(Budget(c * share * eps, 0.0), d0)
        except ValueError:
            return False
        found = composition.composed_guarantee(sel, cnt, delta)
        return (found is not None and found.tight_epsilon is not None
                and found.tight_epsilon <= eps)

    if not fits(1.0):
        return 1.0
    lo, hi = 1.0, 2.0
    while fits(hi):
        lo, hi = hi, 2.0 * hi
        if hi > 1024.0:
            return lo
    while hi - lo > 1e-9 * lo:
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    return lo


def _is_auto(max_items_per_user) -> bool:
    """Δ0 "auto" (chosen privately when the pipeline runs), as a string or AutoMaxItems."""
    return max_items_choice.is_auto(max_items_per_user) or (
        isinstance(max_items_per_user, str) and max_items_per_user.strip().lower() == "auto")


def split_selection_and_counts(total: Budget | ZCDPBudget,
                               counts_share: float = 0.25,  # DEFAULT_COUNTS_SHARE
                               accountant: BudgetAccountant | None = None,
                               selection_mechanism=None,
                               counts_max_items_per_user: int | None = None,
                               composition: str | None = None
                               ) -> SelectionAndCountsBudget:
    """Splits ``total`` into a selection part and a counts part, and spends both.

    Basic composition (Dwork & Roth Thm 3.16; dp-sips Lemma 6). ``composition="tight"``
    scales both ε by the largest c ≥ 1 at which the two as calibrated still compose to
    ≤ the total: the parts are then valid **only** for that mechanism and that Δ0.
    Derivation: docs/explanation/proofs.md#selection-composed-with-its-counts.

    Args:
      total: the ``Budget`` or ``ZCDPBudget`` of selection and counts together.
      counts_share: s in (0, 1), the counts' share of ε (or ρ); they get δ = 0, the selection all.
      accountant: the ``BudgetAccountant`` both are spent from (default: a fresh one).
      selection_mechanism: the selection's config, to state the total (``composed``).
      counts_max_items_per_user: the Δ0 given to ``CountReleased``, with the above.
      composition: ``"basic"``, ``"tight"`` or None (default: tight for a ``Budget``
        total with both of the above at a fixed Δ0; basic otherwise).

    Returns:
      The two parts, with the total and, given the mechanisms, ``composed``.

    Raises:
      BudgetExceededError: ``accountant`` has less than ``total`` left.
    """
    checks.no_tight_part(total, "split_selection_and_counts (splitting it again)")
    share = checks.probability("counts_share", counts_share, types=(int, float), show_given=True)
    if composition is not None:
        checks.one_of("composition", composition, ("basic", "tight"), "'basic' or 'tight'")
    if (selection_mechanism is None) != (counts_max_items_per_user is None):
        raise ParameterError.worded(
            "selection_mechanism", "give both selection_mechanism and counts_max_items_per_user "
                                   "(to state the composed guarantee), or neither")
    if composition is None:
        composition = ("tight" if isinstance(total, Budget) and selection_mechanism is not None
                       and not _is_auto(getattr(selection_mechanism, "max_items_per_user", None))
                       and not _is_auto(counts_max_items_per_user) else "basic")
    if composition == "tight" and selection_mechanism is None:
        raise ParameterError.worded(
            "composition", "composition='tight' needs selection_mechanism and "
                           "counts_max_items_per_user: the split is valid for those only")
    checks.instance("total", total, (Budget, ZCDPBudget), "a Budget or ZCDPBudget")
    kind, field = (Budget, "epsilon") if isinstance(total, Budget) else (ZCDPBudget, "rho")
    whole = getattr(total, field)
    # The counts' part is the one rounded down, if need be.
    values = parts_within(
        whole, [whole * (1.0 - share), whole * share], rounded=[1], name="counts_share",
        problem=f"= {share!r} is too small: the counts' part of {field} = {whole!r} is not a "
                "positive float once the selection's part is taken; raise the share")
    scale = 1.0
    if composition == "tight" and isinstance(total, Budget):
        d0 = checks.max_items(counts_max_items_per_user)
        scale = _solve_tight_scale(total, share, selection_mechanism, d0)
    tight = scale > 1.0  # a tight split: each part bound to what it was computed for
    selection, counts = ((TightSelectionBudget(values[0] * scale, total.delta,
                                               for_mechanism=selection_mechanism),
                          TightCountsBudget(values[1] * scale, 0.0, for_max_items_per_user=d0))
                         if tight else (kind(values[0], total.delta), kind(values[1], 0.0)))
    parts = SelectionAndCountsBudget(total=total, selection=selection, counts=counts,
                                     counts_share=share, scale=scale)
    # Both or neither (checked above); calibrated before anything is spent.
    if selection_mechanism is not None and counts_max_items_per_user is not None:
        parts = parts.composed_with(selection_mechanism.calibrate(selection),
                                    count_calibration(counts, counts_max_items_per_user))
        # A tight split is only as good as its check: the composed total as run.
        if tight and isinstance(total, Budget) and not all(  # tight: a Budget total
                g.method != "basic" and g.tight_epsilon <= total.epsilon for g in parts.composed):
            raise RuntimeError("tight split does not meet its total")  # pragma: no cover
    accountant = BudgetAccountant(total) if accountant is None else accountant
    if tight:
        accountant.spend(total, "selection and counts (tight composition)")
    else:
        accountant.spend_all(selection, counts)
    return parts
