"""Privacy budgets: (ε, δ)-DP and δ-approximate ρ-zCDP, their splits and the accountant.

Pure Python; the conversions' mathematics is ``beam_dpsu.core.gaussian``. A
``ZCDPBudget``'s ``delta`` is δ_CDP (Bun & Steinke 2016, Def. 8.1; dp-sips Definition
5), *not* the δ of a converted (ε, δ)-DP guarantee.
"""

from __future__ import annotations

import dataclasses
from fractions import Fraction
from typing import Sequence

from beam_dpsu.core import checks
from beam_dpsu.core.checks import ParameterError, ParameterTypeError, a_type, plural
from beam_dpsu.core.exact_floats import rounded_down
from beam_dpsu.core.gaussian import _largest_zcdp_rho, zcdp_to_dp

__all__ = ["Budget", "ZCDPBudget", "BudgetAccountant", "BudgetExceededError",
           "geometric_split_weights", "dp_to_zcdp", "parts_within"]


def parts_within(total: float, parts: Sequence[float],
                 rounded: Sequence[int] | None = None, name: str = "parts",
                 problem: str | None = None) -> list[float]:
    """``parts``, those at ``rounded`` (default: all) scaled down to an exact sum ≤ ``total``.

    Parts already within are returned as given (docs/privacy.md, invariant 4).
    Derivation: docs/explanation/accounting.md#parts-within-a-total.

    Raises:
      ParameterError: about ``name``, saying ``problem``, if a positive part would
        fall to 0 or below (no valid split).
    """
    fitted = [float(part) for part in parts]
    indices = list(range(len(fitted)) if rounded is None else rounded)
    excess = sum(map(Fraction, fitted)) - Fraction(total)
    if excess <= 0:
        return fitted
    room = sum(Fraction(fitted[i]) for i in indices)
    factor = 1 - excess / room if room > excess else Fraction(0)
    for i in indices:
        part = fitted[i]
        fitted[i] = rounded_down(Fraction(part) * factor)
        if part > 0.0 and not fitted[i] > 0.0:
            raise ParameterError(
                name, problem or f"leaves part {i} of the total {total!r} no positive float: "
                                 f"the other parts' exact sum already reaches the total")
    return fitted


def geometric_split_weights(rounds: int, ratio: float) -> list[float]:
    """The DP-SIPS round shares: round i of I gets r^{I−i−1}(1−r)/(1−r^I), even at r = 1.

    dp-sips Algorithm 3 (its box is missing; docs/privacy.md, DP-SIPS) and Theorem 1's proof.

    Args:
      rounds: I, the number of rounds (≥ 1).
      ratio: r in (0, 1], the ratio of one round's share to the next one's.

    Returns:
      The I shares, in round order, summing to 1.

    Raises:
      ValueError: ``rounds`` < 1, ``ratio`` outside (0, 1], or a share would underflow.
    """
    checks.integer("rounds", rounds)
    ratio = checks.ratio("ratio", ratio)
    if ratio == 1.0:
        return [1.0 / rounds] * rounds
    norm = (1.0 - ratio) / (1.0 - ratio ** rounds)
    weights = [ratio ** (rounds - i - 1) * norm for i in range(rounds)]
    if weights[0] < 1e-300:  # the first round's share r^{I−1}·(1−r)/(1−r^I) underflows
        raise ParameterError("ratio", f"= {ratio:g} over {rounds} rounds gives the first round "
                             f"a share of {weights[0]:g} of the budget (below 1e-300); raise "
                             "ratio or use fewer rounds")
    return weights


class BudgetExceededError(ValueError):
    """Raised when a computation would spend more privacy budget than it has."""


@dataclasses.dataclass(frozen=True)
class Budget:
    """A user-level (ε, δ)-differential-privacy budget.

    Attributes:
      epsilon: ε > 0, the multiplicative privacy loss bound.
      delta: 0 <= δ < 1, the additive slack (0, pure ε-DP, suits only the counts).
    """

    epsilon: float
    delta: float = 0.0

    def __post_init__(self):
        object.__setattr__(self, "epsilon", checks.positive("epsilon", self.epsilon))
        object.__setattr__(self, "delta", checks.probability_or_zero("delta", self.delta))

    def split(self, weights: Sequence[float]) -> list["Budget"]:
        """Parts proportional to ``weights``, summing exactly to ≤ this budget (Dwork & Roth,
        Thm 3.16); rounded by ``parts_within``."""
        # A tight split's part is bound to one calibration: its pieces would not be.
        checks.no_tight_part(self, "Budget.split (splitting it again)")
        return [Budget(e, d) for e, d in _split(self.epsilon, self.delta, weights)]

    def to_zcdp(self) -> "ZCDPBudget":
        """The zCDP budget of a pure ε-DP budget: ρ = ε²/2 (Bun & Steinke 2016, Prop. 1.4)."""
        # A tight split's counts part (δ = 0) converted would be a plain ZCDPBudget.
        checks.no_tight_part(self, "Budget.to_zcdp (converting it)")
        if self.delta != 0:
            raise ParameterError.worded("delta", "only a pure budget (delta = 0) converts to zCDP: "
                                        f"ε-DP implies (ε²/2)-zCDP; got delta = {self.delta!r}")
        return ZCDPBudget(self.epsilon ** 2 / 2.0, 0.0)

    def to_dict(self) -> dict:
        return {"type": "approx-dp", "epsilon": self.epsilon, "delta": self.delta}


@dataclasses.dataclass(frozen=True)
class ZCDPBudget:
    """A user-level δ-approximate ρ-zCDP budget (dp-sips Definition 5).

    Attributes:
      rho: ρ > 0, the zero-concentrated DP parameter.
      delta: 0 <= δ < 1, δ_CDP: the chance of the event outside which it is ρ-zCDP.
    """

    rho: float
    delta: float = 0.0

    def __post_init__(self):
        object.__setattr__(self, "rho", checks.positive("rho", self.rho))
        object.__setattr__(self, "delta", checks.probability_or_zero("delta", self.delta))

    def split(self, weights: Sequence[float]) -> list["ZCDPBudget"]:
        """Parts proportional to ``weights``, composing to within this budget (dp-sips Lemma 6:
        δ + δ' − δδ' ≤ δ + δ'); rounded by ``parts_within``."""
        return [ZCDPBudget(r, d) for r, d in _split(self.rho, self.delta, weights)]

    def to_dp(self, delta_dp: float) -> Budget:
        """The (ε, δ_DP)-DP guarantee this budget implies (dp-sips Corollary 9)."""
        return Budget(zcdp_to_dp(self.rho, self.delta, delta_dp), delta_dp)

    def to_dict(self) -> dict:
        return {"type": "approx-zcdp", "rho": self.rho, "delta": self.delta}


def _split(first: float, delta: float, weights: Sequence[float]):
    w = checks.split_weights(weights)
    return zip(parts_within(first, [first * x for x in w]),
               parts_within(delta, [delta * x for x in w]))


def _exact_sum(budgets, field: str) -> Fraction:
    return sum((Fraction(getattr(b, field)) for b in budgets), Fraction(0))


def _budget_kind(budget) -> type:
    """Budget or ZCDPBudget (subclasses, e.g. a tight split's parts, count as their base)."""
    return next((k for k in (Budget, ZCDPBudget) if isinstance(budget, k)), type(budget))


class BudgetAccountant:
    """Tracks spending against a total budget; overspending is an error.

    Parts of the total's kind add (basic composition; dp-sips Lemma 6), summed exactly as
    Fractions, with no tolerance (docs/privacy.md, invariant 4).

    Args:
      total: the ``Budget`` or ``ZCDPBudget`` that every part spent counts against.

    Raises:
      TypeError: ``total`` is not a ``Budget`` or ``ZCDPBudget``.
    """

    def __init__(self, total: Budget | ZCDPBudget):
        checks.instance("total", total, (Budget, ZCDPBudget), "a Budget or ZCDPBudget")
        # Parts spent from a tight split's part would be plain budgets, of any mechanism.
        checks.no_tight_part(total, "a BudgetAccountant's total")
        self.total = total
        self._spent: list = []

    def _fields(self):
        return ("epsilon", "delta") if isinstance(self.total, Budget) else ("rho", "delta")

    def _exact_remaining(self, field: str) -> Fraction:
        return Fraction(getattr(self.total, field)) - _exact_sum(self._spent, field)

    def spent(self) -> dict:
        """What the parts spent, per field: their exact sum, to the nearest float."""
        return {f: float(_exact_sum(self._spent, f)) for f in self._fields()}

    def remaining(self) -> dict:
        """What is left, per field: the largest float at most the exact remainder (it fits)."""
        return {f: rounded_down(self._exact_remaining(f)) for f in self._fields()}

    def _record(self, param: str, parts, asked) -> None:
        """Spends ``parts`` if all of them fit, exactly; else raises, saying ``asked(field)``."""
        for part in parts:
            if _budget_kind(part) is not _budget_kind(self.total):
                raise ParameterTypeError.worded(
                    param, f"cannot spend {a_type(part)} from {a_type(self.total)} total")
        for f in self._fields():
            if _exact_sum(parts, f) > self._exact_remaining(f):
                raise BudgetExceededError(
                    f"{asked(f)} would exceed the total {f}={getattr(self.total, f)!r} (already "
                    f"spent {self.spent()[f]!r}): at most {f}={self.remaining()[f]!r} remains, "
                    "the parts' floats summed exactly (the parts of Budget.split fit whole)")
        self._spent.extend(parts)

    def spend(self, part: Budget | ZCDPBudget, what: str | None = None) -> Budget | ZCDPBudget:
        """Records ``part`` as spent and returns it; raises, naming ``what`` (e.g.
        ``"SelectItems (sips)"``), if it does not fit."""
        asks = "" if what is None else f"{what} asks for {part!r}: "
        self._record("part", [part], lambda f: f"{asks}spending {f}={getattr(part, f)!r}")
        return part

    def spend_all(self, *parts):
        """Spends every part, or none of them if together they do not fit."""
        self._record("parts", parts, lambda f: f"spending {f}={float(_exact_sum(parts, f))!r} "
                                               f"in {plural(len(parts), 'part')}")
        return parts

    def __repr__(self) -> str:
        def fmt(values: dict, spec: str) -> str:  # spec "" is repr: a float in full
            return ", ".join(f"{k}={format(v, spec) if spec else repr(v)}"
                             for k, v in values.items())

        # What remains in full: 0.01 shown for 0.0099…9 would read as spendable.
        return (f"BudgetAccountant(total={self.total!r}, spent=({fmt(self.spent(), '.6g')}), "
                f"remaining=({fmt(self.remaining(), '')}), parts={len(self._spent)})")


def dp_to_zcdp(epsilon: float, delta_dp: float, delta_cdp: float) -> ZCDPBudget:
    """The ``ZCDPBudget`` of the largest ρ whose δ_CDP-approximate zCDP implies (ε, δ_DP)-DP.

    The inverse of ``zcdp_to_dp`` (dp-sips Corollary 9; App. B, Table 5).

    Args:
      epsilon: ε > 0 of the (ε, δ)-DP target.
      delta_dp: δ_DP of the target.
      delta_cdp: δ_CDP of the zCDP budget, smaller than ``delta_dp``.

    Returns:
      ``ZCDPBudget(rho, delta_cdp)`` with the largest such ρ.
    """
    return ZCDPBudget(_largest_zcdp_rho(epsilon, delta_dp, delta_cdp), delta_cdp)
