"""Δ0 chosen privately: ``max_items_per_user="auto"`` (pure math, no Beam).

A share of the budget buys a noisy histogram of users' numbers of distinct items
(``size_histogram``); Δ0 is picked from it by a rule per mechanism (``selection``,
``rounds`` for SIPS, ``counts``); the selection spends the rest (``option``).
Why: docs/explanation/bounding.md#choosing-0, docs/explanation/proofs.md.
"""

from beam_dpsu.core.max_items_choice import counts, rounds
from beam_dpsu.core.max_items_choice.option import (AUTO, CANDIDATES, DEFAULT_SHARE, SIPS_SHARE,
                                                    AutoMaxItems, check_max_items_or_auto,
                                                    default_share, is_auto, split_budget,
                                                    with_max_items)
from beam_dpsu.core.max_items_choice.selection import (MASSES, AutoPlan, calibrate_candidates,
                                                       plan_auto, user_mass, weight_threshold)
from beam_dpsu.core.max_items_choice.size_histogram import (noisy_size_histogram, size_bin_edges,
                                                            size_counts, size_noise)

__all__ = ["AUTO", "CANDIDATES", "DEFAULT_SHARE", "SIPS_SHARE", "default_share", "AutoMaxItems",
           "AutoPlan", "is_auto", "check_max_items_or_auto", "split_budget", "size_bin_edges",
           "size_counts", "size_noise", "noisy_size_histogram", "MASSES", "user_mass",
           "weight_threshold", "with_max_items", "calibrate_candidates", "plan_auto", "counts",
           "rounds"]
