"""Δ0 chosen privately: ``max_items_per_user="auto"`` (pure math, no Beam).

A share of the budget buys a noisy histogram of users' numbers of distinct items
(``size_histogram``); Δ0 is picked from it by a rule per mechanism (``selection``,
``rounds`` for SIPS, ``counts``); the selection spends the rest (``option``).
Why: docs/explanation/bounding.md#choosing-0, docs/explanation/proofs.md.
"""

from beam_dpsu.core.max_items_choice import counts, option, rounds, selection, size_histogram
# The names of each module's __all__:
from beam_dpsu.core.max_items_choice.option import *  # noqa: F403
from beam_dpsu.core.max_items_choice.selection import *  # noqa: F403
from beam_dpsu.core.max_items_choice.size_histogram import *  # noqa: F403

__all__ = [*option.__all__, *size_histogram.__all__, *selection.__all__, "counts", "rounds"]
