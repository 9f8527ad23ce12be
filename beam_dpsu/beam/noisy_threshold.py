"""The release step of a selection as Beam PTransforms: ``NoisyThreshold`` (weight + noise
> ρ, ``release_mask``) and ``KeepWithProbability`` (kept with probability π(count),
``keep_mask``), each ending in a ``Reshuffle`` so that every reader sees one draw
(docs/privacy.md, invariant 11). Details: docs/explanation/transforms.md#the-noisy-threshold.
"""

from __future__ import annotations

import apache_beam as beam
import numpy as np

from beam_dpsu.core import checks, hashing
from beam_dpsu.core.calibration import Calibration, KeepProbabilityCalibration, release_mask
from beam_dpsu.beam.max_items_choice.chosen import Chosen
from beam_dpsu.beam.input_types import KEYED, ReadsContainers
from beam_dpsu.beam.randomness import draws_randomness
from beam_dpsu.beam.release_guard import ReleaseTransform, warn_if_seeded
from beam_dpsu.beam.windowing import in_global_window, require_global_window
from beam_dpsu.beam.output_types import opaque_output

__all__ = ["NOISE_BATCH", "NoisyThreshold", "KeepWithProbability"]


# How many (item, weight) pairs share one vectorised noise draw.
NOISE_BATCH = 4096


@draws_randomness
@opaque_output
class BatchedDecisionFn(beam.DoFn):
    """(item, weight) → item if ``decide`` keeps it; ``NOISE_BATCH`` pairs share one draw.

    Internal (global window only). Seeded (tests only), each item's generator is derived
    from (seed, stage, salt, item), whatever the bundles.
    """

    def __init__(self, stage: str, seed: int | None, salt: str | None):
        self._seed = seed
        self._derivation = (stage,) if salt is None else (stage, salt)
        self._rng: np.random.Generator | None = None
        self._items: list = []
        self._weights: list = []

    def decide(self, weights: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """The boolean keep-mask of a batch of weights (the pure decision)."""
        raise NotImplementedError

    def setup(self):
        self._rng = hashing.os_rng()

    def start_bundle(self):
        self._items, self._weights = [], []

    def process(self, item_weight):
        item, weight = item_weight
        if self._seed is not None:
            if self._seeded_keeps(item, weight):
                yield in_global_window(item)
            return
        self._items.append(item)
        self._weights.append(weight)
        if len(self._items) >= NOISE_BATCH:
            yield from self._flush()

    def finish_bundle(self):
        yield from self._flush()

    def decide_histogram(self, histogram: dict) -> list:
        """The items of a whole {item: weight} histogram that ``decide`` keeps, in one draw."""
        if self._seed is not None:
            return [in_global_window(item) for item, weight in histogram.items()
                    if self._seeded_keeps(item, weight)]
        items = list(histogram)
        return self._kept(items, np.fromiter(histogram.values(), dtype=np.float64,
                                             count=len(items)))

    def _seeded_keeps(self, item, weight) -> bool:
        assert self._seed is not None, "only seeded items are decided one at a time"
        rng = hashing.derived_rng(self._seed, *self._derivation, item)
        return bool(self.decide(np.array([weight], dtype=np.float64), rng)[0])

    def _kept(self, items: list, weights: np.ndarray) -> list:
        # Every output gets the same window and timestamp, whichever batch decided it.
        assert self._rng is not None, "setup() makes the generator"
        return [in_global_window(items[i]) for i in np.flatnonzero(self.decide(weights, self._rng))]

    def _flush(self) -> list:
        if not self._items:
            return []
        items, weights = self._items, np.asarray(self._weights, dtype=np.float64)
        self._items, self._weights = [], []
        return self._kept(items, weights)


@draws_randomness
@opaque_output
class _ChosenDecisionFn(beam.DoFn):
    """(item, weight) → item if the ``chosen`` candidate's ``BatchedDecisionFn`` keeps it."""

    def __init__(self, decisions: tuple):
        self._decisions = decisions

    def setup(self):
        for decision in self._decisions:
            decision.setup()

    def start_bundle(self):
        for decision in self._decisions:
            decision.start_bundle()

    def process(self, item_weight, chosen=0):
        yield from self._decisions[chosen].process(item_weight)

    def finish_bundle(self):
        for decision in self._decisions:
            yield from decision.finish_bundle()


@draws_randomness
@opaque_output
class _PerShardFn(_ChosenDecisionFn):
    """(shard, {item: weight}) → the items the chosen candidate's decision keeps."""

    def process(self, shard_histogram, chosen=0):
        yield from self._decisions[chosen].decide_histogram(shard_histogram[1])


def _decide_each(decisions: Chosen) -> beam.ParDo:
    """The ParDo deciding (item, weight) pairs one by one with ``decisions``' chosen one."""
    if decisions.index is None:
        return beam.ParDo(decisions.first)
    return beam.ParDo(_ChosenDecisionFn(decisions.values), **decisions.side_inputs())


def _release(pcoll, name: str, label: str, decide: beam.ParDo):
    """``pcoll`` decided by ``decide``, then checkpointed (one draw for all)."""
    require_global_window(pcoll, name)
    return pcoll | label >> decide | "Checkpoint" >> beam.Reshuffle()


class _PerShard(ReleaseTransform):
    """A release step on (shard, {item: weight}) dicts; one object is one release."""

    def __init__(self, decisions: Chosen, name: str):
        super().__init__()
        self._decisions, self._name = decisions, name

    def expand(self, shard_histograms):
        return _release(shard_histograms, self._name, "DecidePerShard", beam.ParDo(
            _PerShardFn(self._decisions.values), **self._decisions.side_inputs()))


def _per_shard(name: str, calibration, seed: int | None, decision) -> _PerShard:
    """A ``per_shard`` release: ``decision(calibration, seed)`` for each candidate."""
    warn_if_seeded(seed, name)
    seed = checks.seed(seed)
    return _PerShard(Chosen.of(calibration).map(lambda c: decision(c, seed)), name)


def _thresholded(calibration) -> Calibration:
    """``calibration`` if it is a noise-and-threshold one (a wrong kind would run its rule)."""
    return checks.instance("calibration", calibration, Calibration,
                           "a Calibration (a thresholded mechanism's calibrate())")


def _keep_probabilities(calibration) -> KeepProbabilityCalibration:
    """``calibration`` if it is a keep-probability one."""
    return checks.instance("calibration", calibration, KeepProbabilityCalibration,
                           "a KeepProbabilityCalibration (TruncatedGeometric.calibrate())")


class _NoisyThresholdFn(BatchedDecisionFn):

    def __init__(self, calibration: Calibration, seed: int | None, salt: str):
        super().__init__("noise", seed, salt)
        self._calibration = _thresholded(calibration)

    def decide(self, weights, rng):
        return release_mask(weights, self._calibration, rng)


@beam.typehints.with_input_types(KEYED)
class NoisyThreshold(ReadsContainers, ReleaseTransform):
    """(item, weight) → item for each item whose noisy weight exceeds the release threshold.

    One object is one release (docs/privacy.md, invariant 9): applying it (or a copy)
    twice raises ``AppliedTwiceError`` when the pipeline is built.

    Args:
      calibration: noise distribution, scale and threshold; or a ``Chosen`` of them.
      seed: test-only; None draws noise from OS entropy.
      salt: separates the seeded noise of several selections in one pipeline.
    """

    def __init__(self, calibration: Calibration | Chosen, *, seed: int | None = None,
                 salt: str = ""):
        super().__init__()
        self._calibration = Chosen.of(calibration).map(_thresholded)
        self._seed = checks.seed(seed)
        warn_if_seeded(self._seed, "NoisyThreshold")
        self._salt = salt

    @staticmethod
    def per_shard(calibration: Calibration | Chosen, seed: int | None = None,
                  salt: str = "") -> beam.PTransform:
        """The same release for (shard, {item: weight}) dicts, each item in one; a new
        object (one release) at each call."""
        return _per_shard("NoisyThreshold", calibration, seed,
                          lambda c, seed: _NoisyThresholdFn(c, seed, salt))

    def expand(self, histogram):
        decisions = self._calibration.map(lambda c: _NoisyThresholdFn(c, self._seed, self._salt))
        return _release(histogram, "NoisyThreshold", "AddNoiseAndThreshold",
                        _decide_each(decisions))


class _KeepWithProbabilityFn(BatchedDecisionFn):

    def __init__(self, calibration: KeepProbabilityCalibration, seed: int | None):
        super().__init__("keep", seed, None)
        self._calibration = _keep_probabilities(calibration)

    def decide(self, counts, rng):
        return self._calibration.keep_mask(counts, rng)


class KeepWithProbability(ReleaseTransform):
    """(item, users holding it) → item, kept independently with probability π(count).

    One object is one release, as for ``NoisyThreshold``.

    Args:
      calibration: the keep probabilities (``TruncatedGeometric.calibrate``).
      seed: test-only; None draws from OS entropy.
    """

    def __init__(self, calibration: KeepProbabilityCalibration, seed: int | None = None):
        super().__init__()
        self._calibration = _keep_probabilities(calibration)
        self._seed = checks.seed(seed)
        warn_if_seeded(self._seed, "KeepWithProbability")

    @staticmethod
    def per_shard(calibration: KeepProbabilityCalibration | Chosen,
                  seed: int | None = None) -> beam.PTransform:
        """The same release for (shard, {item: count}) dicts (as ``NoisyThreshold.per_shard``)."""
        return _per_shard("KeepWithProbability", calibration, seed, _KeepWithProbabilityFn)

    def expand(self, histogram):
        return _release(histogram, "KeepWithProbability", "KeepWithProbability",
                        beam.ParDo(_KeepWithProbabilityFn(self._calibration, self._seed)))
