"""The base of every mechanism config (``beam_dpsu.core.mechanisms`` lists them)."""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from beam_dpsu.core import checks, max_items_choice
from beam_dpsu.core.budgets import Budget, ZCDPBudget
from beam_dpsu.core.checks import ParameterError
from beam_dpsu.core.calibration import Calibration, KeepProbabilityCalibration, RoundsCalibration

__all__ = ["MechanismConfig"]


class MechanismConfig:
    """Base class of every mechanism config: a frozen dataclass with a kebab-case ``name``
    (the CLI's ``--mechanism`` value) and ``calibrate(budget)``."""

    name: ClassVar[str]
    # g(m), the weight a user keeping m items places, as a key of
    # ``max_items_choice.MASSES``: the mechanism's rule for max_items_per_user="auto".
    user_mass: ClassVar[str]

    def __post_init__(self):
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
            raise ParameterError.worded("max_items_per_user", (
                f"{self.name}: max_items_per_user='auto' is chosen from the data when the pipeline "
                "runs, so this config has no calibration of its own; give it to SelectItems (its "
                "report shows every candidate's), or calibrate "
                "beam_dpsu.core.max_items_choice.with_max_items(config, n)"))
        checks.instance("budget", budget, (Budget, ZCDPBudget), "a Budget or ZCDPBudget")
        return checks.require_delta(budget, f"mechanism {self.name!r}")

    def to_dict(self) -> dict:
        # Every subclass is a dataclass; the base, which mypy checks here, is not.
        return {"name": self.name, **dataclasses.asdict(self),  # type: ignore[call-overload]
                "max_items_per_user": self._reported_max_items()}

    def _reported_max_items(self):
        """Δ0 as reports show it: an automatic one with its default share of the budget."""
        max_items = getattr(self, "max_items_per_user", None)
        if max_items_choice.is_auto(max_items):
            return max_items.with_share(max_items_choice.default_share(self)).to_dict()
        return max_items
