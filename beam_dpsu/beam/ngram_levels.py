"""DPNE's levels k ≥ 2 in Beam (dpne §2, App. A): the valid k-grams' histogram, its
noisy threshold ρ_k, the spurious draws (part of the guarantee) and the levels' figures.

Proof: docs/explanation/proofs.md#dpne; steps: docs/explanation/transforms.md#the-n-gram-levels.
"""

from __future__ import annotations

import functools
import logging
import math

import apache_beam as beam

from beam_dpsu.core.user_blocks import document_blocks
from beam_dpsu.core import hashing, policies, thresholds
from beam_dpsu.core.kgrams import ValidKgramSampler, valid_kgram_count
from beam_dpsu.core.ngram_calibration import spurious_probability
from beam_dpsu.core.ngram_parameters import NgramParameters
from beam_dpsu.core.checks import plural
from beam_dpsu.beam.user_blocks import BlockHistogramFn
from beam_dpsu.beam.noisy_threshold import BatchedDecisionFn
from beam_dpsu.beam.randomness import draws_randomness
from beam_dpsu.beam.windowing import in_global_window
from beam_dpsu.beam.output_types import opaque_output

__all__ = ["KgramLevel", "LevelStats", "LevelThresholdFn", "SpuriousFn", "released_as_keys",
           "level_logger"]


def released_as_keys(grams, label: str):
    """A released set as a dict side input (constant-time lookups in the level blocks)."""
    return beam.pvalue.AsDict(grams | label >> beam.Map(lambda g: (g, None)))


def _level_sums(block, previous, unigrams, *, k, pruning, max_items, seed, salt, rng):
    """``document_blocks.level_sums`` with the side inputs S_{k−1}, S_1 in call order."""
    return document_blocks.level_sums(block, k, pruning, previous, unigrams, max_items,
                                policies.weighted_gaussian_weight, rng, seed, salt)


class LevelThresholdFn(BatchedDecisionFn):
    """Noise N(0, σ_k²) and the data-dependent threshold ρ_k (σ_k and ρ_k: a side input)."""

    def __init__(self, seed, salt: str):
        super().__init__("noise", seed, salt)
        self._sigma = self._rho = None

    def decide(self, weights, rng):
        return weights + rng.normal(0.0, self._sigma, weights.shape) > self._rho

    def process(self, item_weight, parameters):
        # One value per pipeline, the same in every call.
        self._rho, self._sigma = parameters["rho"], parameters["sigma"]
        yield from super().process(item_weight)


def level_logger(name: str | None, k: int, max_n: int):
    """A function logging level k's release size to logger ``name`` (none if None)."""
    if name is None:
        return lambda n: None

    def log(n: int) -> None:
        logging.getLogger(name).info(
            f"DPNE level {k} of {max_n}: released {plural(n, f'{k}-gram')}")

    return log


@draws_randomness
@opaque_output
class SpuriousFn(beam.DoFn):
    """Draws the zero-weight valid k-grams that cross ρ_k (dpne App. A, Algorithm 2)."""

    def __init__(self, k: int, pruning: str, seed):
        self._k, self._pruning, self._seed = k, pruning, seed

    def process(self, _, previous, unigrams, support, parameters):
        n_valid, rho, sigma = parameters["n_valid"], parameters["rho"], parameters["sigma"]
        rng = (hashing.os_rng() if self._seed is None
               else hashing.derived_rng(self._seed, "spurious", self._k))
        support = set(support)
        p = spurious_probability(rho, sigma)
        n = int(rng.binomial(n_valid - len(support), p)) if n_valid > len(support) else 0
        sampler = ValidKgramSampler(previous, unigrams, self._pruning)
        # Stamped like the k-grams released from users' weight, so nothing
        # about an output tells whether it was spurious (docs/privacy.md, invariant 6).
        yield from map(in_global_window, sampler.sample(n, support, rng))


class KgramLevel(beam.PTransform):
    """Blocks of users → level k's release S_k (k ≥ 2), spurious draws included, checkpointed.

    ``previous`` (S_{k−1}) and ``unigrams`` (S_1) are side inputs; σ_k is the ``chosen``
    Δ_1's. After expansion ``parameters`` holds a singleton dict (|S_{k−1}|, |V_k|, σ_k,
    ρ_k) and ``non_private_stats`` a dict of raw figures (if asked; else None).
    """

    def __init__(self, k: int, params: NgramParameters, calibrations: list, previous,
                 unigrams, unigram_keys, chosen=None, progress_logger: str | None = None,
                 non_private_stats: bool = False):
        super().__init__()
        self._k, self._params, self._calibrations = k, params, calibrations
        self._previous, self._unigrams, self._unigram_keys = previous, unigrams, unigram_keys
        self._chosen, self._logger, self._raw = chosen, progress_logger, non_private_stats
        self.parameters = self.non_private_stats = None

    def expand(self, user_blocks):
        k, params, seed, L = self._k, self._params, self._params.seed, f"Level{self._k}"
        previous, unigrams, pipeline = self._previous, self._unigrams, user_blocks.pipeline
        single, as_list = beam.pvalue.AsSingleton, beam.pvalue.AsList
        histogram = (user_blocks
                     | "SumUsersPerBundle" >> beam.ParDo(
                         BlockHistogramFn(functools.partial(
                             _level_sums, k=k, pruning=params.pruning,
                             max_items=params.max_items[k - 1], seed=seed, salt=L)),
                         released_as_keys(previous, "PreviousAsKeys"), self._unigram_keys)
                     | "SumPerItem" >> beam.CombinePerKey(sum)  # (k-gram, Σ weights)
                     # Read by the noise and by the spurious draws: one H_k (invariant 11).
                     | "CheckpointHistogram" >> beam.Reshuffle())
        # ρ_k from |S_{k−1}| and the exact |V_k| (S_{k−1} is held in memory anyway:
        # the spurious draw samples V_k from it).
        chosen_index = [] if self._chosen is None else [single(self._chosen)]
        self.parameters = (pipeline
                           | "ParametersOnce" >> beam.Create([None])
                           | "Parameters" >> beam.Map(
                               self._level_parameters(), as_list(previous), as_list(unigrams),
                               *chosen_index))  # {n_previous, n_valid, sigma, rho}
        parameters = single(self.parameters)
        released = histogram | "NoisyThreshold" >> beam.ParDo(
            LevelThresholdFn(seed, L), parameters)  # k-gram
        support = histogram | "Support" >> beam.Keys()
        # The spurious k-grams of V_k ∖ supp H_k, from a root of its own: fused with the
        # parameters' step, it would wait for the support, which waits for ρ_k.
        spurious = (pipeline
                    | "Once" >> beam.Create([None])
                    | "DrawSpurious" >> beam.ParDo(
                        SpuriousFn(k, params.pruning, seed),
                        as_list(previous), as_list(unigrams), as_list(support), parameters))
        # The level feeds the output, the next level and its stats: checkpointed before it
        # fans out (invariant 11); with raw stats, each of its two parts is.
        if not self._raw:
            return ((released, spurious)
                    | "WithSpurious" >> beam.Flatten()
                    | "Checkpoint" >> beam.Reshuffle())
        released = released | "CheckpointReleased" >> beam.Reshuffle()
        spurious = spurious | "CheckpointSpurious" >> beam.Reshuffle()
        self.non_private_stats = self._raw_stats(support, released, spurious, parameters)
        return (released, spurious) | "WithSpurious" >> beam.Flatten()

    def _level_parameters(self):
        """σ_k and ρ_k from S_{k−1}, S_1 (and the chosen index); logs level k−1's size."""
        eta, pruning = self._params.eta, self._params.pruning
        sigmas = [c.sigmas[self._k - 1] for c in self._calibrations]
        log_previous = level_logger(self._logger, self._k - 1, self._params.max_n)

        def level_parameters(_, prev, uni, index=0):
            n_prev, n_val = len(prev), valid_kgram_count(prev, uni, pruning)
            log_previous(n_prev)
            sigma = sigmas[index]
            return {"n_previous": n_prev, "n_valid": n_val, "sigma": sigma,
                    "rho": thresholds.dpne_level_threshold(sigma, eta, n_prev, n_val)}

        return level_parameters

    def _raw_stats(self, support, released, spurious, parameters):
        """Raw figures (opt-in; NOT private): what came from users' weight, what was spurious."""
        k, count = self._k, beam.combiners.Count.Globally
        single = beam.pvalue.AsSingleton

        def raw_stats(_, params, n_support, n_released, n_spurious):
            p = spurious_probability(params["rho"], params["sigma"])
            return {"k": k, "support": n_support,
                    "expected_spurious": max(params["n_valid"] - n_support, 0) * p,
                    "spurious": n_spurious, "released_from_users": n_released}

        return (support.pipeline
                | "RawStatsOnce" >> beam.Create([None])
                | "RawStats" >> beam.Map(
                    raw_stats, parameters,
                    single(support | "CountSupport" >> count()),
                    single(released | "CountReleased" >> count()),
                    single(spurious | "CountSpurious" >> count())))


def _level_stats(n_last: int, parameters: tuple, params: NgramParameters,
                 progress_logger: str | None) -> list:
    """Levels 2..T's figures from their parameters and |S_T| (DP-safe)."""
    max_n = params.max_n
    level_logger(progress_logger, max_n, max_n)(n_last)
    released = [p["n_previous"] for p in parameters[1:]] + [n_last]
    return [{"k": k, "max_items_per_user": params.max_items[k - 1], "sigma": level["sigma"],
             "release_threshold": level["rho"] if math.isfinite(level["rho"]) else None,
             "previous_released": level["n_previous"], "valid_kgrams": level["n_valid"],
             "spurious_bound": params.eta * min(level["n_previous"], level["n_valid"]),
             "released": n_level}
            for k, level, n_level in zip(range(2, max_n + 1), parameters, released)]


class LevelStats(beam.PTransform):
    """The last level's release → one dict per level k ≥ 2 (Δ_k, σ_k, ρ_k, |S_{k−1}|,
    |V_k|, the bound η·min(|S_{k−1}|, |V_k|) on expected spurious k-grams, |S_k|)."""

    def __init__(self, parameters: list, params: NgramParameters,
                 progress_logger: str | None = None):
        super().__init__()
        self._parameters, self._params, self._logger = parameters, params, progress_logger

    def expand(self, last_level):
        single, params, logger = beam.pvalue.AsSingleton, self._params, self._logger

        def level_stats(_, n_last, *parameters):
            return _level_stats(n_last, parameters, params, logger)

        return (last_level.pipeline
                | "LevelStatsOnce" >> beam.Create([None])
                | "LevelStats" >> beam.FlatMap(
                    level_stats,
                    single(last_level | "CountLastLevel" >> beam.combiners.Count.Globally()),
                    *[single(p) for p in self._parameters]))
