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

The modules, by what they hold:

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
