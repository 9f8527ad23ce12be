"""Pre-threshold k (PipelineDP's ``pre_threshold``): the rule, and the calibrations it raises.

``rule``, the mathematics, is re-exported here; ``calibrations`` (k applied to a
calibration) reads ``beam_dpsu.core.calibration``, which reads ``rule``, so it is not
imported here (a cycle): import ``beam_dpsu.core.pre_threshold.calibrations``.
"""

from beam_dpsu.core.pre_threshold import rule
from beam_dpsu.core.pre_threshold.rule import *  # noqa: F403 (the names of rule.__all__)

__all__ = list(rule.__all__)
