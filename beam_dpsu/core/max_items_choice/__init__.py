"""Δ0 chosen privately: ``max_items_per_user="auto"`` (pure math, no Beam).

Every mechanism's utility hinges on Δ0, the number of distinct items kept per
user, and tuning it on the raw data is a leak no guarantee covers. With
``"auto"`` a stated share of the budget buys a DP estimate of how many
distinct items users hold, and Δ0 is then picked from that estimate alone,
by a rule derived for each mechanism. The pipeline (``SelectItems``) is:

1. each user's number of distinct items n_u falls into one bin of a fixed,
   data-independent set of size bins, and the users per bin are counted;
2. every bin count gets integer noise (one user is in one bin: sensitivity 1),
   discrete Laplace under ``Budget``, discrete Gaussian under ``ZCDPBudget``;
3. ``AutoPlan.choose`` maps the noisy counts to one Δ0 among ``candidates``
   (post-processing), and the selection runs with that Δ0 on the rest of the
   budget: by sequential composition the two cost the caller's budget.

The noise's guarantee, the composition and the rule:
docs/explanation/proofs.md#choosing-0-privately-the-mt-rule. The modules:

* ``option``: the option (``AutoMaxItems``, ``"auto"``), its defaults, its
  share, and the budget split (``split_budget``);
* ``size_histogram``: steps 1 and 2, the size bins and the integer noise;
* ``selection``: step 3 for a selection, the rule ``AutoPlan`` and
  ``plan_auto``, which calibrates every candidate;
* ``rounds``: SIPS's rule, a model of its rounds on the same histogram;
* ``counts``: ``CountReleased``'s Δ0, chosen the same way from the users'
  numbers of released items (``CountsAutoPlan``).

The names other modules use are re-exported here; ``rounds`` and ``counts`` are
read as modules (``max_items_choice.counts.plan_counts_auto``).
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
    "counts",
    "rounds",
]
