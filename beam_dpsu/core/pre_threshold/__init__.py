"""Pre-threshold k (PipelineDP's ``pre_threshold``): the rule, and the calibrations it raises.

``rule``, the mathematics, is re-exported here; ``calibrations`` (k applied to a
calibration) reads ``beam_dpsu.core.calibration``, which reads ``rule``, so it is not
imported here (a cycle): import ``beam_dpsu.core.pre_threshold.calibrations``.
"""

from beam_dpsu.core.pre_threshold.rule import (
    MAX_USER_WEIGHT, check_cutoff, check_pre_threshold, describe_pre_threshold, eligible,
    keep_probability_with_pre_threshold, max_user_weight, own_weights_equal, pre_threshold_shift,
    release_threshold, shifted_counts)

__all__ = ["MAX_USER_WEIGHT", "check_pre_threshold", "eligible", "shifted_counts",
           "keep_probability_with_pre_threshold", "max_user_weight", "pre_threshold_shift",
           "own_weights_equal", "release_threshold", "check_cutoff", "describe_pre_threshold"]
