"""Mechanism configurations: frozen dataclasses validated on construction.

A config names a set-union algorithm and its parameters and calibrates itself under a
budget (no Beam): parallel (``parallel_mechanisms``: Count/Weighted Laplace and Gaussian,
SIPS, truncated geometric) or sequential (``sequential_mechanisms``: the policies, GW).
Each, its noise and its source: docs/explanation/mechanisms.md.
"""

from __future__ import annotations

import dataclasses

from beam_dpsu.core import checks
from beam_dpsu.core.checks import ParameterError
from beam_dpsu.core.mechanism_config import MechanismConfig
from beam_dpsu.core.parallel_mechanisms import (SIPS, CountGaussian, CountLaplace,
                                                ParallelMechanism, TruncatedGeometric,
                                                WeightedGaussian, WeightedLaplace)
from beam_dpsu.core.sequential_mechanisms import (GreedyWithoutSampling, PolicyGaussian,
                                                  PolicyLaplace, SequentialMechanism)

__all__ = ["MechanismConfig", "ParallelMechanism", "SequentialMechanism", "CountLaplace",
           "CountGaussian", "WeightedLaplace", "WeightedGaussian", "SIPS", "PolicyLaplace",
           "PolicyGaussian", "GreedyWithoutSampling", "TruncatedGeometric", "MECHANISMS",
           "mechanism_from_name"]


MECHANISMS: dict[str, type] = {cls.name: cls for cls in (
    CountLaplace, CountGaussian, WeightedLaplace, WeightedGaussian, SIPS, PolicyLaplace,
    PolicyGaussian, GreedyWithoutSampling, TruncatedGeometric)}

_NOT_PRIVATE = {"policy-gaussian-l1": (
    "'policy-gaussian-l1' (Algorithm 8 of Gopi et al. 2020, ℓ1-descent under Gaussian noise) is "
    "not differentially private: the published corrigendum withdraws Proposition 5.1 (the policy "
    "is not ℓ2-contractive), so beam_dpsu does not offer it; use 'policy-gaussian' (ℓ2-descent, "
    "Algorithm 7)")}


def mechanism_from_name(name: str, ignore_unused: bool = False, **params) -> MechanismConfig:
    """Builds a config from its kebab-case name, e.g. ``"weighted-gaussian"``.

    Parameters that are None are ignored, so a CLI can pass every option it has.

    Args:
      name: the mechanism's name, a key of ``MECHANISMS``.
      ignore_unused: drop parameters the mechanism does not take instead of refusing them.
      **params: the config's fields, e.g. ``max_items_per_user=100``.

    Returns:
      The mechanism config.

    Raises:
      ValueError: an unknown or non-private name, or a parameter it does not take.
    """
    name = checks.canonical_name(name)
    if name in _NOT_PRIVATE:
        raise ParameterError.worded("mechanism", _NOT_PRIVATE[name])
    if name not in MECHANISMS:
        raise ParameterError.worded(
            "mechanism", f"unknown mechanism {checks.shown(name, names=True)}; choose one of "
                         f"{sorted(MECHANISMS)}")
    cls = MECHANISMS[name]
    fields = {f.name for f in dataclasses.fields(cls)}
    unknown = {k for k, v in params.items() if k not in fields and v is not None}
    if unknown and not ignore_unused:
        raise ParameterError.worded("mechanism",
                                    f"mechanism {name!r} does not take {sorted(unknown)}")
    return cls(**{k: v for k, v in params.items() if k in fields and v is not None})
