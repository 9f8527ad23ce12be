"""DPNE's parameters: one frozen dataclass, validated on construction (pure, no Beam).

``ExtractNgrams``' mechanism arguments are checked here, once, in their order (its input
by ``beam_dpsu.beam.fields``, its budget by ``beam_dpsu.core.ngram_calibration``).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from beam_dpsu.core import checks, max_items_choice
from beam_dpsu.core.kgrams import PRUNINGS
from beam_dpsu.core.pre_threshold import check_pre_threshold

__all__ = ["NgramParameters", "LEVEL1_POLICIES", "MAX_NGRAM_LENGTH", "check_max_n",
           "max_items_per_level"]

LEVEL1_POLICIES = ("weighted-gaussian", "policy-gaussian")

# Levels are unrolled into a chain (16 steps each) that Beam's runners walk recursively
# at Python's 1000-frame limit: 100 levels hit RecursionError, 40 leave a quarter of it
# (tests/pipelines/test_pipeline_depth.py). DPNE's evaluation stops at T = 10 (dpne §4).
MAX_NGRAM_LENGTH = 40


def check_max_n(max_n) -> int:
    """Validates T: an int with 1 <= T <= ``MAX_NGRAM_LENGTH``."""
    if checks.integer("max_n", max_n) > MAX_NGRAM_LENGTH:
        raise checks.ParameterError("max_n", f"must be at most {MAX_NGRAM_LENGTH} (each length "
                                             f"is a stage of the pipeline), got {max_n!r}")
    return int(max_n)


def max_items_per_level(max_items_per_user, max_n: int):
    """(Δ_k per level, level 1's ``AutoMaxItems`` or None), from one value or one per level:
    an automatic Δ_k at k ≥ 2 is its largest candidate, an automatic Δ_1's entry None."""
    one = (isinstance(max_items_per_user, (str, int, np.integer, max_items_choice.AutoMaxItems))
           and not isinstance(max_items_per_user, bool))
    values = [max_items_per_user] * max_n if one else list(max_items_per_user)
    if len(values) != max_n:
        shown = ", ".join(checks.shown(v) for v in values)  # a str there may be data
        raise checks.ParameterError("max_items_per_user", f"needs one value per level (max_n = "
                                    f"{max_n}), got {len(values)}: [{shown}]")
    values = [max_items_choice.check_max_items_or_auto(v) for v in values]
    level1_auto = values[0] if max_items_choice.is_auto(values[0]) else None
    per_level = [max(v.candidates) if max_items_choice.is_auto(v) else v for v in values]
    if level1_auto is not None:
        per_level[0] = None
    return per_level, level1_auto


def _noise_decay(noise_schedule) -> float:
    """c of σ_k = c·σ_{k−1}: 1 for "equal" (its positivity is checked where σ_k are)."""
    if noise_schedule == "equal":
        return 1.0
    if isinstance(noise_schedule, (int, float)) and not isinstance(noise_schedule, bool):
        return float(noise_schedule)
    raise checks.ParameterError(
        "noise_schedule", "must be 'equal' or a decay factor c > 0, got "
                          f"{checks.shown(noise_schedule, names=True)}")


@dataclasses.dataclass(frozen=True)
class NgramParameters:
    """What DPNE extracts and how (dpne §2, §3.1.1), validated on construction.

    Attributes:
      max_n: T, the longest n-gram length: an int, 1 <= T <= ``MAX_NGRAM_LENGTH``.
      max_items_per_user: Δ_k: one value or one per level, each an int or ``"auto"``.
      eta: η in (0, 1): expected spurious k-grams ≤ η·|S_{k−1}| per level.
      pruning: "both" or "single" (which (k−1)-subgrams must be released; ``kgrams``).
      noise_schedule: "equal" or a decay factor c > 0 with σ_k = c·σ_{k−1}.
      level1: one of ``LEVEL1_POLICIES``: Weighted or Policy Gaussian at level 1.
      alpha: α of the level-1 policy cutoff ρ_1 + α·σ_1.
      seed: test-only seed, or None.
      pre_threshold: k ≥ 1: a unigram needs k holders after bounding (1 is none).
      max_items: derived: Δ_k per level, None at level 1 when it is "auto".
      level1_auto: derived: level 1's ``AutoMaxItems`` when Δ_1 is "auto", else None.
      noise_decay: derived: c as a float (1.0 for "equal").
    """

    max_n: int
    max_items_per_user: Any = 100
    eta: float = 0.01
    pruning: str = "both"
    noise_schedule: Any = "equal"
    level1: str = "weighted-gaussian"
    alpha: float = 3.0
    seed: int | None = None
    pre_threshold: int = 1
    max_items: tuple = dataclasses.field(init=False)
    level1_auto: max_items_choice.AutoMaxItems | None = dataclasses.field(init=False)
    noise_decay: float = dataclasses.field(init=False)

    def __post_init__(self):
        # In the order of ExtractNgrams' arguments: the first bad one is named.
        max_n = check_max_n(self.max_n)
        eta = checks.probability("eta", self.eta, strict=False, show_given=True)
        pruning = checks.one_name_of("pruning", self.pruning, PRUNINGS)
        level1 = checks.one_name_of("level1", self.level1, LEVEL1_POLICIES)
        max_items, level1_auto = max_items_per_level(self.max_items_per_user, max_n)
        normalised = {"max_n": max_n, "eta": eta, "pruning": pruning, "level1": level1,
                      "max_items": tuple(max_items), "level1_auto": level1_auto,
                      "noise_decay": _noise_decay(self.noise_schedule),
                      "alpha": checks.loose_number("alpha", self.alpha),
                      "seed": checks.seed(self.seed),
                      "pre_threshold": check_pre_threshold(self.pre_threshold)}
        for name, value in normalised.items():
            object.__setattr__(self, name, value)
