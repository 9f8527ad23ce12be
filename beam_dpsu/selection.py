"""The release step of a selection as Beam PTransforms.

``NoisyThreshold``: each (item, weight) of a histogram gets independent noise
from the calibration, and the item is released iff weight + noise > ρ. The
decision is ``calibration.release_mask``, the same pure function the
statistical tests run.

``KeepWithProbability``: each (item, count) is released with probability
π(count) (truncated geometric; ``KeepProbabilityCalibration.keep_mask``).
"""

from __future__ import annotations

import apache_beam as beam
import numpy as np

from beam_dpsu import noise
from beam_dpsu.calibration import Calibration, KeepProbabilityCalibration, release_mask
from beam_dpsu.windowing import require_global_window

__all__ = ["NoisyThreshold", "KeepWithProbability"]


class _NoisyThresholdFn(beam.DoFn):

    def __init__(self, calibration: Calibration, seed: int | None, salt: str):
        self._calibration = calibration
        self._seed = seed
        self._salt = salt
        self._rng = None

    def setup(self):
        self._rng = noise.os_rng()

    def process(self, item_weight):
        item, weight = item_weight
        rng = self._rng if self._seed is None else noise.derived_rng(
            self._seed, "noise", self._salt, item)
        if release_mask(np.float64(weight), self._calibration, rng):
            yield item


class NoisyThreshold(beam.PTransform):
    """(item, weight) → item for each item whose noisy weight exceeds the release threshold.

    Args:
      calibration: noise distribution, scale and threshold.
      seed: test-only; None draws noise from OS entropy.
      salt: distinguishes seeded noise of several selections in one pipeline
        (e.g. the rounds of SIPS), so they do not reuse the same draws.
    """

    def __init__(self, calibration: Calibration, seed: int | None = None, salt: str = ""):
        super().__init__()
        self._calibration = calibration
        self._seed = noise.check_seed(seed)
        self._salt = salt

    def expand(self, histogram):
        require_global_window(histogram, "NoisyThreshold")
        return histogram | "AddNoiseAndThreshold" >> beam.ParDo(
            _NoisyThresholdFn(self._calibration, self._seed, self._salt))


class _KeepWithProbabilityFn(beam.DoFn):

    def __init__(self, calibration: KeepProbabilityCalibration, seed: int | None):
        self._calibration = calibration
        self._seed = seed
        self._rng = None

    def setup(self):
        self._rng = noise.os_rng()

    def process(self, item_count):
        item, count = item_count
        rng = self._rng if self._seed is None else noise.derived_rng(self._seed, "keep", item)
        if self._calibration.keep_mask(np.float64(count), rng):
            yield item


class KeepWithProbability(beam.PTransform):
    """(item, users holding it) → item, kept independently with probability π(count).

    Args:
      calibration: the keep probabilities (``TruncatedGeometric.calibrate``).
      seed: test-only; None draws from OS entropy.
    """

    def __init__(self, calibration: KeepProbabilityCalibration, seed: int | None = None):
        super().__init__()
        self._calibration = calibration
        self._seed = noise.check_seed(seed)

    def expand(self, histogram):
        require_global_window(histogram, "KeepWithProbability")
        return histogram | "KeepWithProbability" >> beam.ParDo(
            _KeepWithProbabilityFn(self._calibration, self._seed))
