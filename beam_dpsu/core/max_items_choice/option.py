"""``max_items_per_user="auto"``: the option (``AutoMaxItems``), its share and the budget split.

The default share is a public constant: 5 % (``DEFAULT_SHARE``), 1.5 % for SIPS
(``SIPS_SHARE``). Why: docs/explanation/proofs.md#choosing-0-privately-the-mt-rule.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable
from fractions import Fraction
from typing import Any, TypeGuard

import numpy as np

from beam_dpsu.core import checks
from beam_dpsu.core.checks import ParameterError, ParameterTypeError
from beam_dpsu.core.budgets import Budget, ZCDPBudget
from beam_dpsu.core.exact_floats import LARGEST_FLOAT, nudged

__all__ = ["AUTO", "CANDIDATES", "DEFAULT_SHARE", "SIPS_SHARE", "default_share", "AutoMaxItems",
           "is_auto", "check_max_items_or_auto", "with_max_items", "split_budget"]

AUTO = "auto"
# The Δ0 values "auto" chooses among by default: the grid users tune by hand.
CANDIDATES = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000)
# The share of the budget the size estimate spends by default, and SIPS's ``auto_share``.
DEFAULT_SHARE = 0.05
SIPS_SHARE = 0.015


def _check_share(share: Any) -> float:
    return checks.probability("share", share, types=(int, float, np.floating))


def default_share(mechanism) -> float:
    """The mechanism's ``auto_share`` (SIPS: ``SIPS_SHARE``), else ``DEFAULT_SHARE``."""
    return getattr(mechanism, "auto_share", DEFAULT_SHARE)


@dataclasses.dataclass(frozen=True, kw_only=True)
class AutoMaxItems:
    """``max_items_per_user`` chosen privately when the pipeline runs.

    ``max_items_per_user="auto"`` is ``AutoMaxItems()``; pass one as the same
    ``max_items_per_user`` to change the share or the candidates, by keyword:
    ``AutoMaxItems(share=0.02)``.

    Attributes:
      share: the part of ε (or ρ) spent on the DP histogram of users' sizes, 0 < share
        < 1; None: the spender's default (``default_share``). Public either way.
      candidates: the Δ0 values chosen among, ascending ints ≥ 1, fixed before the
        data is seen (default ``CANDIDATES``).
    """

    share: float | None = None
    candidates: tuple = CANDIDATES

    def __post_init__(self):
        if self.share is not None:
            object.__setattr__(self, "share", _check_share(self.share))
        if isinstance(self.candidates, (str, bytes)) or not isinstance(self.candidates, Iterable):
            raise ParameterTypeError(
                "candidates", f"must be a sequence of ints, got {checks.shown(self.candidates)}")
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


def with_max_items(mechanism, max_items_per_user: int | AutoMaxItems):
    """The same mechanism config with a fixed Δ0."""
    return dataclasses.replace(mechanism, max_items_per_user=max_items_per_user)


def _rest(total: float, part: float) -> float:
    """total − part, rounded down until part + rest ≤ total exactly (as Fractions)."""
    return nudged(total - part, lambda rest: Fraction(part) + Fraction(rest) <= Fraction(total),
                  0.0)


def _size_part(param: str, total: float, share: float, per: int) -> float:
    """total·share (ε: ``per`` = 1; ρ: 2), refused if its noise scale passes float range."""
    def fits(value: float) -> bool:
        part = value * share
        return part > 0.0 and 1 / (per * Fraction(part)) <= LARGEST_FLOAT

    if fits(total):
        return total * share
    least = nudged(float(1 / (per * LARGEST_FLOAT * Fraction(share))), fits, math.inf)
    raise ParameterError(param, f"= {total!r} is too small for max_items_per_user='auto': its "
                         f"share {share:g} for the estimate of users' distinct items gets a noise "
                         f"scale beyond the float range; raise {param} to at least {least!r}, or "
                         "fix max_items_per_user")


def split_budget(budget: Budget | ZCDPBudget, share: float):
    """(size_budget, selection_budget): the size histogram's part (pure: δ = 0, so all of δ
    goes to the selection) and the selection's, summing to ``budget`` exactly."""
    share = _check_share(share)
    for kind, field, per in ((Budget, "epsilon", 1), (ZCDPBudget, "rho", 2)):
        if type(budget) is kind:
            size = _size_part(field, getattr(budget, field), share, per)
            return kind(size, 0.0), kind(_rest(getattr(budget, field), size), budget.delta)
    if isinstance(budget, (Budget, ZCDPBudget)):
        # A tight split's part is bound to one Δ0; "auto" has none yet.
        raise ParameterError.worded(
            "budget", "max_items_per_user='auto' cannot take a part of a tight split "
                      "(split_selection_and_counts(composition='tight')): that part was "
                      "computed for one fixed max_items_per_user; fix it, or use "
                      "composition='basic'")
    raise ParameterTypeError("budget", f"must be a Budget or ZCDPBudget, got "
                                       f"{checks.shown(budget)}")
