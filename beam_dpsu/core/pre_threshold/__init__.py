"""Pre-threshold k (PipelineDP's ``pre_threshold``): the rule, and the calibrations it raises.

Two modules, one layer apart:

* ``rule``: the mathematics (which keep probability and which release threshold
  make a selection with a pre-threshold as private as without, with the proof),
  re-exported here. ``beam_dpsu.core.calibration`` reads it (truncated
  geometric's keep probability).
* ``calibrations``: a mechanism's calibration with k applied
  (``calibrations.calibrate(mechanism, budget, k)``). It reads
  ``beam_dpsu.core.calibration``'s classes, so this package does not import it
  (that would be an import cycle): import ``beam_dpsu.core.pre_threshold.calibrations``.
"""

from beam_dpsu.core.pre_threshold.rule import (MAX_USER_WEIGHT, check_cutoff,
                                               check_pre_threshold,
                                               describe_pre_threshold, eligible,
                                               keep_probability_with_pre_threshold,
                                               max_user_weight, own_weights_equal,
                                               pre_threshold_shift, release_threshold,
                                               shifted_counts)

__all__ = [
    "MAX_USER_WEIGHT",
    "check_pre_threshold",
    "eligible",
    "shifted_counts",
    "keep_probability_with_pre_threshold",
    "max_user_weight",
    "pre_threshold_shift",
    "own_weights_equal",
    "release_threshold",
    "check_cutoff",
    "describe_pre_threshold",
]
