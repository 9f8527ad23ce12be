"""The release steps refuse a calibration of the other rule when they are built.

``NoisyThreshold`` adds noise and compares with a release threshold (a ``Calibration``);
``KeepWithProbability`` keeps with π(count) (a ``KeepProbabilityCalibration``). Given the
other kind, either would fail only once the pipeline ran, or run a rule it was not built
for; each names the parameter and the type it got instead.
"""

import pytest

from beam_dpsu import Budget, TruncatedGeometric, WeightedGaussian
from beam_dpsu.beam.max_items_choice.chosen import Chosen
from beam_dpsu.beam.noisy_threshold import KeepWithProbability, NoisyThreshold
from beam_dpsu.core.checks import ParameterError

BUDGET = Budget(1.0, 1e-5)
THRESHOLDED = WeightedGaussian(10).calibrate(BUDGET)
KEEP = TruncatedGeometric(10).calibrate(BUDGET)

NOISY_MESSAGE = ("calibration must be a Calibration (a thresholded mechanism's calibrate()), "
                 "got a KeepProbabilityCalibration")
KEEP_MESSAGE = ("calibration must be a KeepProbabilityCalibration (TruncatedGeometric"
                ".calibrate()), got a Calibration")


@pytest.mark.parametrize("build", [
    lambda: NoisyThreshold(KEEP),
    lambda: NoisyThreshold(KEEP, seed=1),
    lambda: NoisyThreshold.per_shard(KEEP),
    lambda: NoisyThreshold.per_shard(Chosen((THRESHOLDED, KEEP), index=object())),
], ids=["transform", "seeded", "per_shard", "a chosen candidate"])
def test_noisy_threshold_refuses_a_keep_probability_calibration(build):
    with pytest.raises(ParameterError) as error:
        build()
    assert str(error.value) == NOISY_MESSAGE
    assert error.value.param == "calibration"


@pytest.mark.parametrize("build", [
    lambda: KeepWithProbability(THRESHOLDED),
    lambda: KeepWithProbability.per_shard(THRESHOLDED),
    lambda: KeepWithProbability.per_shard(Chosen((KEEP, THRESHOLDED), index=object())),
], ids=["transform", "per_shard", "a chosen candidate"])
def test_keep_with_probability_refuses_a_thresholded_calibration(build):
    with pytest.raises(ParameterError) as error:
        build()
    assert str(error.value) == KEEP_MESSAGE
    assert error.value.param == "calibration"


def test_each_accepts_its_own_calibration():
    NoisyThreshold(THRESHOLDED)
    NoisyThreshold.per_shard(Chosen((THRESHOLDED, THRESHOLDED), index=object()))
    KeepWithProbability(KEEP)
    KeepWithProbability.per_shard(KEEP)
