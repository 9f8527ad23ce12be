"""DPNE: differentially private n-gram extraction, level by level (dpne §2, App. A).

``ExtractNgrams(max_n, budget)`` takes ``PCollection[(user_id, tokens)]``
(one element per document; n-grams never cross documents) and returns
``PCollection[tuple[str, ...]]``: the released n-grams of lengths 1..T. With
``privacy_unit="element"`` it takes ``PCollection[list[str]]`` instead: each
element one document holding all the data of one person (no user id).
Either form may be read from named fields of ``beam.Row``s, NamedTuples or
dicts (``user_field``, ``tokens_field``; ``beam_dpsu.beam.fields``).

The levels are unrolled when the pipeline is built. First each user's
documents are grouped into one record (with ``privacy_unit="element"`` each
element already is one). Level 1 is Weighted Gaussian (or
Policy Gaussian) over the users' tokens with σ_1 and ρ_1 (Theorem 2.1). Then
for each k ≥ 2: every user's valid k-grams (both (k−1)-subgrams released,
or the prefix only with ``pruning="single"``; S_1 and S_{k−1} arrive as side
inputs) are sampled to Δ_k and weighted 1/√|U|; the sums get N(0, σ_k²) noise
and are kept above ρ_k = σ_k Φ⁻¹(1 − η·min(1, |S_{k−1}|/|V_k|)), where |V_k| is
counted exactly from S_{k−1} (``kgrams.valid_kgram_count``: its pairs that
share a (k−2)-token overlap).
Finally the zero-weight valid k-grams the histogram over all of V_k would
have released are drawn: B_k ~ Binomial(|V_k| − |supp H_k|, Φ(−ρ_k/σ_k))
k-grams sampled uniformly from V_k ∖ supp H_k. This spurious sampling is part
of the privacy guarantee, not cosmetic: without it, which zero-weight k-grams
are missing from the output depends on the data (docs/privacy.md, DPNE's spurious k-grams).

Drawn once (docs/privacy.md, invariant 11; ``beam_dpsu.beam.randomness``): each level's
release feeds the output, the next level and the level stats, and H_k's
sampled sums feed both the noise and the support the spurious draws avoid. So
H_k and each level (its release with its spurious draws) are checkpointed with
a ``Reshuffle`` before they fan out (one more move of |supp H_k| sums and of
the level per level); an unseeded element's random id is drawn only on the
level-1 policy's branch, the one that reads it.

Privacy (Theorem 2.1): the levels are Gaussian mechanisms of ℓ2 sensitivity 1
whose σ_k compose to σ* (1/σ*² = Σ 1/σ_k²; exactly one Gaussian mechanism,
Dong, Roth & Su 2022, Cor. 3.3), σ* being the analytic Gaussian at
(ε, δ_noise), plus the threshold event of level 1 (probability ≤ δ_thr; the
only non-Gaussian part, levels k ≥ 2 noise all of V_k), with
δ_noise + δ_thr/(1 − δ_thr) = δ split to minimise ρ_1 (the proof is in
``beam_dpsu.core.calibration``). Under ``ZCDPBudget(ρ, δ)`` σ* = 1/√(2ρ) and
level 1's threshold gets all of δ.

``max_items_per_user="auto"`` (docs/privacy.md, Choosing Δ0 privately; the SelectItems rule is
``beam_dpsu.core.max_items_choice``). Per level, by what Δ_k changes:

* Levels k ≥ 2: σ_k is calibrated for ℓ2 sensitivity 1 (weights 1/√|U_i|)
  whatever Δ_k, and ρ_k = σ_k Φ⁻¹(1 − η·min(1, |S_{k−1}|/|V_k|)) does not
  read Δ_k: Δ_k moves neither the guarantee nor T (the release threshold).
  It only moves the users' weight: a user holding n valid k-grams gives each
  an expected √min(n, Δ_k)/n (sampled to Δ_k, weight 1/√min(n, Δ_k)), which
  never falls as Δ_k grows; so M(Δ_k) = Σ_u √min(n_u, Δ_k) is non-decreasing
  and the M/T rule of ``delta0`` picks the largest candidate for every
  histogram of sizes. A histogram of users' distinct k-gram counts would
  cost budget and could not change that answer: "auto" at k ≥ 2 is the
  largest candidate (1000 by default), fixed when the transform is built,
  with no data read and nothing spent. What it costs is work: a level reads
  up to Δ_k k-grams per user (pass an int to bound it). What the rule leaves
  out: more of S_k also moves ρ_{k+1} (through |S_k|/|V_{k+1}|), either way.
* Level 1: Δ_1 sets the union bound of ρ_1 and, through the δ split that
  minimises ρ_1, σ* and so every σ_k. Δ_1 is chosen as SelectItems chooses
  Δ0 for Weighted/Policy Gaussian: ``max_items_choice.split_budget`` gives a share of
  ε (or ρ) to a discrete-noise histogram of users' distinct-token counts
  (one user in one bin: sensitivity 1), and M/T with g(m) = √m and T = ρ_1
  at the selection budget picks Δ_1 (``_ChooseLevel1MaxItems``). The rule
  scores level 1 only: Δ_1's effect on σ_k (k ≥ 2) is a fraction of a
  percent (MSNBC, ε = 1, δ = 1e-7: σ* = 5.034 at Δ_1 = 1, 5.001 at 1000).

Everything is calibrated when the transform is built, at every candidate Δ_1
(``_plan_level1``). When it runs, the choice (drawn once, checkpointed)
routes the users to level 1 built for the chosen Δ_1 (one level 1 per
candidate; the others get no user and release nothing), and hands levels
k ≥ 2 that candidate's σ_k with their other parameters: for each fixed
choice the pipeline is DPNE at that Δ_1 and the selection's budget, and
sequential composition with the size histogram gives the caller's budget.
The chosen Δ_1 (``chosen_max_items_per_user``) is a DP output.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
import math
import pickle
import typing
from typing import Sequence

import beam_dpsu.beam  # noqa: F401  (first: it imports Beam quietly)
import apache_beam as beam
import numpy as np
from scipy import special

from beam_dpsu.core import budgets

from beam_dpsu.core import max_items_choice

from beam_dpsu.core import docblocks

from beam_dpsu.core import hashing

from beam_dpsu.core import policies

from beam_dpsu.core import thresholds
from beam_dpsu.core.budgets import Budget, ZCDPBudget
from beam_dpsu.core.gaussian import gaussian_noise_schedule
from beam_dpsu.beam.max_items_routing import ChooseFromSizeCounts, _to_chosen
from beam_dpsu.beam.bounding import (InvalidRecordError, SampleEachUser, WholeItemCountsPerUser,
                                canonical_user_id, check_privacy_unit)
from beam_dpsu.core.calibration import GAUSSIAN, Calibration, gaussian_dp_equivalents, split_delta
from beam_dpsu.core.wording import a_type, plural
from beam_dpsu.core.mechanisms import WeightedGaussian
from beam_dpsu.beam.fields import input_fields, read_fields
from beam_dpsu.beam.histograms import HISTOGRAM_SHARDS, PARTIAL_HISTOGRAM_KEYS, WeightedHistogram
from beam_dpsu.core.kgrams import PRUNINGS, ValidKgramSampler, kgrams_of, valid_kgram_count
from beam_dpsu.select_items import SelectItems
from beam_dpsu.beam.randomness import draws_randomness
from beam_dpsu.beam.release_guard import ReleaseTransform, spend_from, warn_if_seeded
from beam_dpsu.core.report import GUARANTEES, SEEDED_NOTE, dp_equivalents
from beam_dpsu.beam.noisy_threshold import BatchedDecisionFn, NoisyThreshold
from beam_dpsu.beam.sequential import SequentialPolicyHistogram, run_order_key
from beam_dpsu.beam.windowing import in_global_window, require_global_window

__all__ = ["ExtractNgrams", "NgramsByDPSU", "check_document", "element_document", "LEVEL1_POLICIES",
           "BASELINES"]

LEVEL1_POLICIES = ("weighted-gaussian", "policy-gaussian")
BASELINES = ("dpsu-all", "dpsu-even", "dpsu-single")

# The longest n-gram length a transform takes. Levels are unrolled when the
# pipeline is built (a few stages each): 100 levels build in ~8 s and run on
# the DirectRunner; 1000 levels exhausted Python's recursion limit after
# minutes. DPNE's evaluation stops at T = 10 (dpne §4).
MAX_NGRAM_LENGTH = 100


def check_max_n(max_n) -> int:
    """Validates T: an int with 1 <= T <= ``MAX_NGRAM_LENGTH``."""
    if isinstance(max_n, bool) or not isinstance(max_n, (int, np.integer)) or max_n < 1:
        raise ValueError(f"max_n must be an int >= 1, got {max_n!r}")
    if max_n > MAX_NGRAM_LENGTH:
        raise ValueError(f"max_n must be at most {MAX_NGRAM_LENGTH} (each length is a stage "
                         f"of the pipeline), got {max_n!r}")
    return int(max_n)


def _plain_tokens(tokens) -> bool:
    """Plain str tokens, none empty and none with whitespace: exactly when
    splitting them joined by spaces gives them back (C calls, the common case)."""
    return set(map(type, tokens)) <= {str} and " ".join(tokens).split() == list(tokens)


def _plain_token(token) -> bool:
    """One token as ``_plain_tokens`` wants it: a plain, non-empty str without whitespace."""
    return type(token) is str and token.split() == [token]


def _checked_tokens(tokens, where: str) -> tuple:
    """``tokens`` as a tuple of plain str; raises naming the position and type, never a value."""
    if _plain_tokens(tokens):
        return tuple(tokens)
    for position, t in enumerate(tokens):
        if not isinstance(t, str) or not t:
            raise InvalidRecordError(
                f"token {position} of {where} must be a non-empty str, got "
                + ("an empty str" if isinstance(t, str) else f"{a_type(t)}"))
        # Released n-grams are written as tokens joined by a space: a token
        # with whitespace would make ("new york",) and ("new", "york") one line.
        if any(c.isspace() for c in t):
            raise InvalidRecordError(
                f"token {position} of {where} contains whitespace; tokens are "
                "written space-separated, so split them first")
    # Plain str (not e.g. numpy.str_), so Beam can key by n-grams deterministically.
    return tuple(str(t) for t in tokens)


def check_document(record):
    """Returns a (user_id, tuple of tokens) document; raises naming what is wrong.

    The error names the field, the token position and the type found, never
    the user id or the text (runner logs keep error messages).
    """
    if type(record) is tuple and len(record) == 2:  # the common case first
        user_id, tokens = record
        if type(user_id) is str and user_id and type(tokens) is tuple and _plain_tokens(tokens):
            return record
    if not isinstance(record, tuple) or len(record) != 2:
        shape = (f"a tuple of {len(record)} fields" if isinstance(record, tuple)
                 else f"{a_type(record)}")
        raise InvalidRecordError(f"expected a (user_id, tokens) document, got {shape}")
    user_id, tokens = record
    if user_id is None or (isinstance(user_id, (str, bytes)) and not user_id):
        raise InvalidRecordError("a (user_id, tokens) document has a missing user id "
                                 "(None or empty) in field 0")
    user_id = canonical_user_id(user_id, "(user_id, tokens) document")
    if isinstance(tokens, (str, bytes)) or not isinstance(tokens, Sequence):
        raise InvalidRecordError(
            f"tokens (field 1) must be a sequence of str, got {a_type(tokens)}")
    return user_id, _checked_tokens(tokens, "a document (field 1)")


def element_document(element, seed: int | None = None) -> tuple:
    """One element of ``privacy_unit="element"`` input → (element id, tuple of tokens).

    ``element`` is a list of str tokens: one document holding all the data of
    one person. A tuple is refused (a ``(user_id, tokens)`` document is one),
    and so is a str (an untokenised text). The id only orders the element
    (a policy-gaussian level 1) and seeds its samples inside the pipeline;
    it is never written: 128 bits of OS randomness, or, with a test-only
    ``seed``, a hash of the tokens (equal documents are interchangeable).
    Errors name the token's position and type, never a value.
    """
    tokens = element_tokens(element)
    if seed is None:
        return hashing.random_id128(), tokens
    return hashing.stable_hash64(("document", tokens)), tokens


def element_tokens(element) -> tuple:
    """``element_document`` without the id: the checked tokens, as a tuple of str."""
    if not isinstance(element, list):  # a Tokenizer's Tokens too
        hint = ""
        if isinstance(element, tuple):
            hint = ("; a tuple could be a (user_id, tokens) document: give each person's "
                    "tokens as a list, or use privacy_unit='user_id' for keyed documents")
        elif isinstance(element, (str, bytes)):
            hint = "; tokenise the text into a list of tokens first"
        raise InvalidRecordError("with privacy_unit='element' each element must be a list of "
                                 f"one person's tokens, got {a_type(element)}{hint}")
    return _checked_tokens(element, "an element")


def _max_items_per_level(max_items_per_user, max_n: int):
    """(Δ_k per level, level 1's ``AutoMaxItems`` or None).

    One value for every level or one per level; each an int or ``"auto"`` /
    ``AutoMaxItems``. An automatic Δ_k at k ≥ 2 is its largest candidate,
    fixed here without data (``ExtractNgrams``' docstring says why); an
    automatic Δ_1 is chosen privately when the pipeline runs, and its entry
    here is None.
    """
    one = (isinstance(max_items_per_user, (str, int, np.integer, max_items_choice.AutoMaxItems))
           and not isinstance(max_items_per_user, bool))
    values = [max_items_per_user] * max_n if one else list(max_items_per_user)
    if len(values) != max_n:
        raise ValueError(f"max_items_per_user needs one value per level (max_n = {max_n}), "
                         f"got {len(values)}: {values!r}")
    values = [max_items_choice.check_max_items_or_auto(v) for v in values]
    level1_auto = values[0] if max_items_choice.is_auto(values[0]) else None
    per_level = [max(v.candidates) if max_items_choice.is_auto(v) else v for v in values]
    if level1_auto is not None:
        per_level[0] = None
    return per_level, level1_auto


def _total_sigma(budget, threshold_of) -> tuple[float, float, float | None]:
    """(σ*, δ_thr for the thresholds, δ_noise) under a budget (dpne Theorem 2.1; dp-sips Def. 12).

    Under ``Budget(ε, δ)`` σ* is the analytic Gaussian at (ε, δ_noise) and
    δ_noise + δ_thr/(1 − δ_thr) = δ is split to minimise
    ``threshold_of(σ*, δ_thr)`` (``calibration.split_delta``, whose docstring
    has the proof); under ``ZCDPBudget(ρ, δ)`` σ* = 1/√(2ρ), δ_thr = δ and
    δ_noise is None.
    """
    if isinstance(budget, (Budget, ZCDPBudget)):
        budgets.require_delta(budget, "DPNE n-gram extraction")
    if isinstance(budget, Budget):
        split = split_delta(budget.epsilon, budget.delta, threshold_of)
        return split.sigma_total, split.threshold_delta, split.delta_noise
    if isinstance(budget, ZCDPBudget):
        return 1.0 / math.sqrt(2.0 * budget.rho), budget.delta, None
    raise TypeError(f"budget must be a Budget or ZCDPBudget, got {budget!r}")


def _gaussian(budget, sigma: float, threshold: float, threshold_delta: float, source: str,
              cutoff=None, delta_noise=None) -> Calibration:
    return Calibration(noise=GAUSSIAN, noise_scale=sigma, release_threshold=threshold,
                       threshold_delta=threshold_delta, sensitivity_norm=2, sensitivity=1.0,
                       budget=budget, source=source, cutoff=cutoff, delta_noise=delta_noise)


@dataclasses.dataclass(frozen=True)
class _DPNECalibration:
    """What DPNE's guarantee rests on for one Δ_1: σ*, the δ split, σ_1..σ_T and
    level 1's calibration (levels k ≥ 2 take no other parameter from Δ_1)."""

    max_items_1: int
    sigma_total: float
    threshold_delta: float
    delta_noise: float | None
    sigmas: list
    level1: Calibration

    def to_dict(self) -> dict:
        return {"sigma_total": self.sigma_total,
                **({} if self.delta_noise is None else {"delta_noise": self.delta_noise}),
                "sigmas": list(self.sigmas),
                "level1": {"release_threshold": self.level1.release_threshold,
                           "threshold_delta": self.threshold_delta,
                           **({} if self.level1.cutoff is None
                              else {"cutoff": self.level1.cutoff})}}


def _calibrate(budget, max_n: int, noise_decay: float, max_items_1: int, level1: str,
               alpha: float) -> _DPNECalibration:
    """DPNE's calibration at Δ_1 = ``max_items_1`` (dpne Theorem 2.1; see ``_total_sigma``)."""
    def level1_threshold(sigma_total: float, threshold_delta: float) -> float:
        sigma_1 = gaussian_noise_schedule(sigma_total, max_n, noise_decay)[0]
        return thresholds.weighted_gaussian_threshold(sigma_1, threshold_delta, max_items_1)

    # Only level 1 has a threshold event (levels k ≥ 2 noise all of V_k):
    # the δ split minimises ρ_1.
    sigma_total, threshold_delta, delta_noise = _total_sigma(budget, level1_threshold)
    sigmas = gaussian_noise_schedule(sigma_total, max_n, noise_decay)
    rho_1 = thresholds.weighted_gaussian_threshold(sigmas[0], threshold_delta, max_items_1)
    cutoff = (thresholds.policy_cutoff(rho_1, sigmas[0], alpha)
              if level1 == "policy-gaussian" else None)
    return _DPNECalibration(
        max_items_1, sigma_total, threshold_delta, delta_noise, sigmas,
        _gaussian(budget, sigmas[0], rho_1, threshold_delta, "dpne Theorem 2.1", cutoff,
                  delta_noise))


def _plan_level1(auto: max_items_choice.AutoMaxItems, budget, max_n: int, noise_decay: float,
                 level1: str, alpha: float) -> tuple[max_items_choice.AutoPlan, list]:
    """Δ_1 = "auto": the budget split, and DPNE calibrated at every candidate Δ_1 under
    the selection's part (eagerly; no data). Returns (the plan, the calibrations)."""
    if isinstance(budget, (Budget, ZCDPBudget)):
        budgets.require_delta(budget, "DPNE n-gram extraction")
    size_budget, selection_budget = max_items_choice.split_budget(budget, auto.share)
    calibrations = list(max_items_choice.calibrate_candidates(
        auto, lambda c: _calibrate(selection_budget, max_n, noise_decay, c, level1, alpha),
        "DPNE calibrates", "the selection's part of the budget").values())
    plan = max_items_choice.AutoPlan(
        auto=auto, size_budget=size_budget, selection_budget=selection_budget,
        candidates=tuple(c.max_items_1 for c in calibrations),
        weight_thresholds=tuple(c.level1.release_threshold for c in calibrations),
        edges=tuple(int(e) for e in max_items_choice.size_bin_edges(auto.candidates)),
        mechanism_name=f"dpne level 1 ({level1})", user_mass="sqrt(m)")
    return plan, calibrations


def _block_size_counts(block: bytes, edges: tuple) -> np.ndarray:
    """A pickled block → its users per size bin, a user's size being its number of
    distinct tokens (level 1's items). Raw: the noise is added to the sum."""
    sizes = docblocks.distinct_items_per_user(pickle.loads(block))
    return max_items_choice.size_counts(sizes[sizes > 0], np.asarray(edges, dtype=np.int64))


def _sum_counts(n_bins: int, counts) -> np.ndarray:
    return functools.reduce(np.add, counts, np.zeros(n_bins, dtype=np.int64))


class _ChooseLevel1MaxItems(beam.PTransform):
    """Blocks of users → the index, in ``plan.candidates``, of Δ_1 chosen privately.

    Each user's number of distinct tokens falls into one size bin (one user,
    one bin: sensitivity 1); the bin counts get integer noise and the M/T rule
    picks Δ_1 (``beam_dpsu.core.max_items_choice``). A singleton, checkpointed: the noise is
    drawn once, whoever reads it.
    """

    def __init__(self, plan: max_items_choice.AutoPlan, seed: int | None):
        super().__init__()
        self._plan, self._seed = plan, seed

    def expand(self, user_blocks):
        edges = self._plan.edges
        return (user_blocks
                | "UsersPerSizeBin" >> beam.Map(_block_size_counts, edges)
                | "SumSizeBins" >> beam.CombineGlobally(
                    functools.partial(_sum_counts, len(edges)))
                | "Choose" >> ChooseFromSizeCounts(self._plan, self._seed))


# Blocks of users in the levels: a level's per-user work (its items, the
# sample, the weights) runs as array operations over a block of users
# (``beam_dpsu.core.docblocks``), not as one Beam element per user and step
# (MSNBC has a million users). A block ends at whichever comes first of
# USERS_PER_BLOCK users or TOKENS_PER_BLOCK tokens: large enough that a
# level's fixed cost per block (the released set's keys, one pickle) is
# spread over many users, small enough to keep a block's arrays to tens of MB.
USERS_PER_BLOCK = 1 << 16
TOKENS_PER_BLOCK = 1 << 20


def _distinct_tokens(docs) -> list:
    """A user's distinct tokens (level 1 of policy-gaussian)."""
    return list({t for doc in docs for t in doc})


def _one_document(id_tokens: tuple) -> tuple:
    """(element id, tokens) → (element id, (tokens,)): a person with one document."""
    return id_tokens[0], (id_tokens[1],)


@draws_randomness  # the element's id (unseeded)
def _element_as_user(element, seed) -> tuple:
    """An element as (element id, (tokens,)) (``element_document``)."""
    return _one_document(element_document(element, seed))


class _UserBlocksFn(beam.DoFn):
    """(user, documents) → blocks of users, as pickled ``DocumentBlock``s.

    A block holds up to ``size`` users and ends once it holds ``max_tokens``
    tokens; it is built user by user (``docblocks.BlockBuilder``). It is one
    ``bytes`` value: every level re-reads all blocks (a stage each, after the
    level before), and Beam decodes one bytes value many times faster than a
    list of tuples of str. Unseeded, the user ids are left out (only seeded
    samples read them).

    With ``elements`` its input is ``privacy_unit="element"`` elements
    themselves (lists of tokens, no id): their type is checked here (the
    rule of ``element_tokens``), and each token the first time the block
    meets it (``_plain_token``); an element with a token that fails is
    re-checked whole, which raises naming the token or makes it plain str.
    One Beam step per element instead of two.

    Not ``beam.BatchElements``: that logs how many elements it has batched,
    which here is the number of users (docs/privacy.md, invariant 6). Every block is stamped
    like the other outputs (``in_global_window``).
    """

    def __init__(self, size: int, keep_ids: bool, max_tokens: int = TOKENS_PER_BLOCK,
                 elements: bool = False):
        self._size = size
        self._keep_ids = keep_ids
        self._max_tokens = max_tokens
        self._elements = elements
        self._builder = None

    def _new_builder(self):
        return docblocks.BlockBuilder(self._keep_ids,
                                      _plain_token if self._elements else None)

    def start_bundle(self):
        self._builder = self._new_builder()

    def process(self, user_docs):
        builder = self._builder
        if self._elements:
            if not isinstance(user_docs, list):
                element_tokens(user_docs)  # raises naming the type
            try:
                builder.add_document(None, user_docs)
            except (docblocks.BadToken, TypeError):
                builder.add_document(None, element_tokens(user_docs))
        else:
            builder.add(*user_docs)
        if builder.users >= self._size or builder.tokens >= self._max_tokens:
            yield self._flush()

    def finish_bundle(self):
        if self._builder.users:
            yield self._flush()

    def _flush(self):
        block, self._builder = self._builder.build(), self._new_builder()
        return in_global_window(pickle.dumps(block, protocol=pickle.HIGHEST_PROTOCOL))


@draws_randomness
class _BlockHistogramFn(beam.DoFn):
    """Pickled ``DocumentBlock``s → partial sums of the users' weighted level items.

    ``level_sums(block, *side inputs, rng=…)`` gives the block's
    [(item, Σ weights)]: each user's items at this level sampled to Δ_k and
    weighted 1/√|sample| (``beam_dpsu.core.docblocks``). The partial sums of a
    bundle are added up per item and flushed at ``max_keys`` items (bounding
    a worker's memory) and at the bundle's end. The input has one element per
    user before blocking (after the ``GroupByKey``, or one element per
    person), so each user is bounded once.
    """

    def __init__(self, level_sums, max_keys: int = PARTIAL_HISTOGRAM_KEYS):
        self._level_sums = level_sums
        self._max_keys = max_keys
        self._partial: dict = {}
        self._rng = None

    def setup(self):
        self._rng = hashing.os_rng()  # a fresh OS-seeded generator per worker

    def start_bundle(self):
        self._partial = {}

    def process(self, block, *side_inputs):
        partial = self._partial
        get = partial.get
        for item, weight in self._level_sums(pickle.loads(block), *side_inputs, rng=self._rng):
            partial[item] = get(item, 0.0) + weight
        if len(partial) >= self._max_keys:
            yield from self._flush()

    def finish_bundle(self):
        yield from self._flush()

    def _flush(self):
        partial, self._partial = self._partial, {}
        # Bounding is global, so every partial sum belongs to the global window.
        return map(in_global_window, partial.items())


def _as_keys(grams, label: str):
    """A released set as a dict side input (constant-time lookups in the level blocks)."""
    return beam.pvalue.AsDict(grams | label >> beam.Map(lambda g: (g, None)))


def _level_sums(block, previous, unigrams, *, k, pruning, max_items, seed, salt, rng):
    """``docblocks.level_sums`` with the side inputs S_{k−1}, S_1 in call order."""
    return docblocks.level_sums(block, k, pruning, previous, unigrams, max_items,
                                policies.weighted_gaussian_weight, rng, seed, salt)


class _LevelThresholdFn(BatchedDecisionFn):
    """Noise N(0, σ_k²) and the data-dependent threshold ρ_k (σ_k and ρ_k: a side input)."""

    def __init__(self, seed, salt: str):
        super().__init__("noise", seed, salt)
        self._sigma = None
        self._rho = None

    def decide(self, weights, rng):
        return weights + rng.normal(0.0, self._sigma, weights.shape) > self._rho

    def process(self, item_weight, parameters):
        # One value per pipeline, the same in every call.
        self._rho, self._sigma = parameters["rho"], parameters["sigma"]
        yield from super().process(item_weight)


def _level_logger(name: str | None, k: int, max_n: int):
    """A function logging level k's release size to logger ``name`` (none if None)."""
    if name is None:
        return lambda n: None

    def log(n: int) -> None:
        logging.getLogger(name).info(
            f"DPNE level {k} of {max_n}: released {plural(n, f'{k}-gram')}")

    return log


@draws_randomness
class _SpuriousFn(beam.DoFn):
    """Draws the zero-weight valid k-grams that cross ρ_k (dpne App. A, Algorithm 2)."""

    def __init__(self, k: int, pruning: str, seed):
        self._k = k
        self._pruning = pruning
        self._seed = seed

    def process(self, _, previous, unigrams, support, parameters):
        n_valid, rho, sigma = parameters["n_valid"], parameters["rho"], parameters["sigma"]
        rng = (hashing.os_rng() if self._seed is None
               else hashing.derived_rng(self._seed, "spurious", self._k))
        support = set(support)
        p = float(special.ndtr(-rho / sigma)) if math.isfinite(rho) else 0.0
        n = int(rng.binomial(n_valid - len(support), p)) if n_valid > len(support) else 0
        sampler = ValidKgramSampler(previous, unigrams, self._pruning)
        # Stamped like the k-grams released from users' weight, so nothing
        # about an output tells whether it was spurious (docs/privacy.md, invariant 6).
        yield from map(in_global_window, sampler.sample(n, support, rng))


class ExtractNgrams(ReleaseTransform):
    """Releases n-grams of lengths 1..max_n under user-level DP (DPNE).

    Args:
      max_n: T, the longest n-gram length, at most ``MAX_NGRAM_LENGTH`` (100).
      budget: ``Budget(ε, δ)`` or ``ZCDPBudget(ρ, δ)``, spent by the whole extraction.
      accountant: optional ``BudgetAccountant`` to spend ``budget`` from when
        this transform is built (``BudgetExceededError`` past its total).
      max_items_per_user: Δ_k, one value for every level or one per level;
        each an int, or ``"auto"`` / ``max_items_choice.AutoMaxItems`` (the share and
        the candidates): at level 1 chosen privately when the pipeline runs
        (a share of the budget, default 5 %), at a level k ≥ 2 the largest
        candidate, for free (the module docstring says why).
      eta: η in (0, 1): expected spurious k-grams ≤ η·|S_{k−1}| per level.
      pruning: "both" (default) or "single" (see ``beam_dpsu.core.kgrams``).
      noise_schedule: "equal" (the same σ_k at every level, default) or a
        number c > 0 with σ_k = c·σ_{k−1} (dpne §3.1.1); either way
        1/σ*² = Σ 1/σ_k².
      level1: "weighted-gaussian" (default) or "policy-gaussian" (ℓ2-descent,
        with cutoff ρ_1 + alpha·σ_1, in a stateful DoFn).
      alpha: α of the level-1 policy cutoff.
      seed: test-only seed (logs a WARNING when the transform is built).
      privacy_unit: "user_id" (default): neighbours differ by one user id's
        documents, grouped per user first; or "element": each element is a
        list of str tokens, one document holding all the data of one person
        (e.g. one session per visitor), and neighbours differ by one element.
        Nothing is grouped, so the per-user shuffle is left out
        (``element_document``).
      non_private_stats: also compute, per level, raw-data figures that are
        NOT differentially private (support of H_k, k-grams released from
        users' weight, spurious draws, expected spurious count) as
        ``non_private_level_stats``. Off by default: they cost extra passes
        and must stay out of anything published.
      progress_logger: the name of a ``logging`` logger that gets one INFO
        line per level as soon as the level after it knows the release's size
        ("DPNE level k of T: released n k-grams"; the last at the end), or
        None (default) for none. A level's size is a function of its release.
      user_field: read the input as ``beam.Row``s, NamedTuples or dicts
        (``beam_dpsu.beam.fields``): the field holding the user id. Not with
        ``privacy_unit="element"``.
      tokens_field: the field holding a document's tokens in order (a list,
        tuple or 1-D array of str), as in a ``(user_id, tokens)`` document;
        alone with ``privacy_unit="element"``.

    Raises:
      ValueError, TypeError, InvalidRecordError: for the field arguments and
        the elements, as ``SelectItems`` raises them.
      ValueError: a bad ``max_items_per_user`` or parameter; with "auto", a
        tight split's part (``split_selection_and_counts(composition=
        "tight")``, bound to one Δ) or a budget no candidate calibrates at.

    One object is one release: applying the same ``ExtractNgrams`` twice is
    refused (``AppliedTwiceError``) when the pipeline is built.

    The output PCollection means a *set*: held and spurious k-grams are
    indistinguishable in it, and it carries no order. Write it with
    ``beam_dpsu.beam.output.WriteReleased`` (sorted lines), never in the order a
    runner produces it (the spurious draws arrive as one block).

    With Δ_1 "auto", ``auto_plan`` holds the split and the candidates, and
    after expansion ``chosen_max_items_per_user`` the chosen Δ_1 (a singleton
    PCollection, a DP output); ``sigmas`` and the other single-Δ_1
    attributes are None (the report lists every candidate's).

    After expansion ``released_per_level`` holds each level's PCollection and
    ``level_stats`` a PCollection of one dict per level k ≥ 2 holding only
    parameters and functions of the released set: Δ_k, σ_k, ρ_k, |S_{k−1}|,
    |V_k|, the bound η·min(|S_{k−1}|, |V_k|) on expected spurious k-grams,
    and the number released.
    """

    def __init__(self, max_n: int, budget, max_items_per_user=100, eta: float = 0.01,
                 pruning: str = "both", noise_schedule="equal",
                 level1: str = "weighted-gaussian", alpha: float = 3.0, seed=None, label=None,
                 non_private_stats: bool = False, privacy_unit: str = "user_id",
                 progress_logger: str | None = None, accountant=None,
                 user_field: str | None = None, tokens_field: str | None = None):
        super().__init__(label)
        self.privacy_unit = check_privacy_unit(privacy_unit)
        self.fields = input_fields(self.privacy_unit, user_field, tokens_field=tokens_field)
        self.progress_logger = progress_logger
        max_n = check_max_n(max_n)
        if not 0.0 < float(eta) < 1.0:
            raise ValueError(f"eta must lie strictly between 0 and 1, got {eta!r}")
        if pruning not in PRUNINGS:
            raise ValueError(f"pruning must be one of {PRUNINGS}, got {pruning!r}")
        if level1 not in LEVEL1_POLICIES:
            raise ValueError(f"level1 must be one of {LEVEL1_POLICIES}, got {level1!r}")
        self.max_n = int(max_n)
        self.budget = budget
        self.max_items, auto = _max_items_per_level(max_items_per_user, self.max_n)
        self.eta = float(eta)
        self.pruning = pruning
        if noise_schedule == "equal":
            self.noise_decay = 1.0
        elif isinstance(noise_schedule, (int, float)) and not isinstance(noise_schedule, bool):
            self.noise_decay = float(noise_schedule)
        else:
            raise ValueError(
                f"noise_schedule must be 'equal' or a decay factor c > 0, got {noise_schedule!r}")
        self.level1 = level1
        self.alpha = float(alpha)
        self.seed = hashing.check_seed(seed)
        # Everything the privacy guarantee rests on is fixed here: with Δ_1
        # "auto", the budget split and DPNE at every candidate Δ_1.
        self.auto_plan = None
        self.chosen_max_items_per_user = None
        if auto is None:
            self._calibrations = [_calibrate(budget, self.max_n, self.noise_decay,
                                             self.max_items[0], level1, self.alpha)]
            calibration = self._calibrations[0]
            self.sigma_total: float | None = calibration.sigma_total
            self.threshold_delta: float | None = calibration.threshold_delta
            self.delta_noise = calibration.delta_noise
            self.sigmas: list | None = calibration.sigmas
            self.level1_calibration: Calibration | None = calibration.level1
        else:
            self.auto_plan, self._calibrations = _plan_level1(
                auto, budget, self.max_n, self.noise_decay, level1, self.alpha)
            # Known only once Δ_1 is chosen: see report["calibration_by_candidate"].
            self.sigma_total = self.threshold_delta = self.delta_noise = None
            self.sigmas = self.level1_calibration = None
        # Spent once calibration succeeded: a refused construction spends nothing.
        spend_from(accountant, budget, "ExtractNgrams")
        warn_if_seeded(self.seed, "ExtractNgrams")
        self.non_private_stats = bool(non_private_stats)
        self.released_per_level: list = []
        self.level_stats = None
        self.non_private_level_stats = None

    @property
    def report(self) -> dict:
        from beam_dpsu import __version__
        report = {
            "library": f"beam_dpsu {__version__}",
            "guarantee": GUARANTEES[self.privacy_unit],
            "privacy_unit": self.privacy_unit,
            "mechanism": {"name": "dpne", "max_n": self.max_n, "eta": self.eta,
                          "pruning": self.pruning, "noise_decay": self.noise_decay,
                          "level1": self.level1},
            "budget": self.budget.to_dict(),
            "source": "dpne (Kim et al. 2021) §2, Theorem 2.1, Algorithm 2",
            "levels": [{"k": k + 1, "max_items_per_user": self.max_items[k]}
                       for k in range(self.max_n)],
            "seeded": self.seed is not None,
        }
        if self.auto_plan is not None:
            # Δ_1 is chosen when the pipeline runs (chosen_max_items_per_user, a
            # DP output): here the split, the rule and DPNE at every candidate.
            report["levels"][0]["max_items_per_user"] = max_items_choice.AUTO
            report["composition"] = (
                "sequential: the size histogram of users' distinct tokens, then DPNE at the "
                "chosen level-1 max_items_per_user (epsilon or rho add; delta is DPNE's)")
            report["max_items_per_user"] = {
                **self.auto_plan.to_dict(),
                "levels_2_to_T": "an automatic max_items_per_user at level k >= 2 is its "
                                 "largest candidate, fixed without data: sigma_k and rho_k "
                                 "do not depend on it (beam_dpsu.extract_ngrams.ExtractNgrams)"}
            report["calibration_by_candidate"] = {
                str(c.max_items_1): c.to_dict() for c in self._calibrations}
            if isinstance(self.budget, ZCDPBudget):
                report["dp_equivalents"] = dp_equivalents(self.budget)
        else:
            only = self._calibrations[0]
            report["sigma_total"] = only.sigma_total
            if only.delta_noise is not None:
                report["delta_noise"] = only.delta_noise
            for level, sigma in zip(report["levels"], only.sigmas):
                level["sigma"] = sigma
            report["levels"][0]["release_threshold"] = only.level1.release_threshold
            report["levels"][0]["threshold_delta"] = only.threshold_delta
            if only.level1.cutoff is not None:
                report["levels"][0]["cutoff"] = only.level1.cutoff
            # The levels compose to one Gaussian with σ* plus level 1's threshold event.
            report["dp_equivalents"] = gaussian_dp_equivalents(
                1.0 / only.sigma_total, only.threshold_delta, self.budget.delta)
        if self.seed is not None:
            report["seed"] = self.seed
            report["seeded_note"] = SEEDED_NOTE
        return report

    def _level1(self, user_docs, user_blocks, calibration: _DPNECalibration,
                L: str = "Level1"):
        """Level 1 at Δ_1 = ``calibration.max_items_1``: the released unigrams."""
        max_items, level1 = calibration.max_items_1, calibration.level1
        if self.level1 == "policy-gaussian":
            # A sequential policy visits users one by one, in keyed-hash order.
            key = run_order_key(self.seed)
            assert level1.cutoff is not None  # (_calibrate sets it for the policy)
            released = (user_docs
                        | f"{L}/DistinctTokens" >> beam.MapTuple(
                            lambda user, docs: (user, tuple(_distinct_tokens(docs))))
                        | f"{L}/SampleItemsPerUser" >> SampleEachUser(
                            max_items, self.seed, "level1")
                        | f"{L}/PolicyHistogram" >> SequentialPolicyHistogram(
                            policies.l2_descent, level1.cutoff, key,
                            item_shards=HISTOGRAM_SHARDS)
                        | f"{L}/NoisyThreshold" >> NoisyThreshold.per_shard(
                            level1, self.seed, "level1"))
        else:
            histogram = (user_blocks
                         | f"{L}/SumUsersPerBundle" >> beam.ParDo(_BlockHistogramFn(
                             functools.partial(docblocks.level1_sums,
                                               max_items=max_items,
                                               item_weight=policies.weighted_gaussian_weight,
                                               seed=self.seed, salt="level1")))
                         | f"{L}/SumPerItem" >> beam.CombinePerKey(sum))
            released = histogram | f"{L}/NoisyThreshold" >> NoisyThreshold(
                level1, self.seed, "level1")
        return released | f"{L}/AsUnigrams" >> beam.Map(lambda t: (t,)).with_output_types(
            typing.Any)

    def _auto_level1(self, documents, user_docs, user_blocks):
        """Level 1 with Δ_1 = "auto": (the released unigrams, the chosen index).

        The size histogram's noisy choice (drawn once) routes every user to
        level 1 built for the chosen Δ_1; the other candidates' level 1 gets
        no user and releases nothing. A policy reads user records: unseeded
        elements get their random ids after the routing, so that the draw
        feeds one step.
        """
        chosen = user_blocks | "ChooseLevel1MaxItems" >> _ChooseLevel1MaxItems(self.auto_plan,
                                                                              self.seed)
        candidates = self.auto_plan.candidates
        self.chosen_max_items_per_user = chosen | "ChosenMaxItemsPerUser" >> beam.Map(
            lambda index: candidates[index])
        policy = self.level1 == "policy-gaussian"
        elements_unchecked = policy and user_docs is None
        routed = ((documents if elements_unchecked else user_docs if policy else user_blocks)
                  | "ToChosenLevel1" >> beam.Partition(
                      _to_chosen, len(candidates), chosen=beam.pvalue.AsSingleton(chosen)))
        releases = []
        for i, calibration in enumerate(self._calibrations):
            L = f"Level1MaxItems{calibration.max_items_1}"
            records = routed[i]
            if elements_unchecked:
                records = records | f"{L}/CheckElements" >> beam.Map(_element_as_user,
                                                                     self.seed)
            releases.append(self._level1(records if policy else None,
                                         None if policy else records, calibration, L))
        return releases | "Level1OfChosen" >> beam.Flatten(), chosen

    def _level(self, k: int, user_blocks, previous, unigrams, unigram_keys, chosen):
        """Level k ≥ 2: returns (released k-grams, its parameters (one dict: |S_{k−1}|,
        |V_k|, σ_k, ρ_k), raw stats or None). ``chosen``: Δ_1's index, if "auto"."""
        L = f"Level{k}"
        # σ_k by candidate Δ_1 (one, unless Δ_1 is "auto"; then the chosen one's).
        sigmas = [c.sigmas[k - 1] for c in self._calibrations]
        max_items = self.max_items[k - 1]
        count = beam.combiners.Count.Globally
        # First the users' valid k-grams, sampled to Δ_k and summed.
        histogram = (user_blocks
                     | f"{L}/SumUsersPerBundle" >> beam.ParDo(
                         _BlockHistogramFn(functools.partial(
                             _level_sums, k=k, pruning=self.pruning, max_items=max_items,
                             seed=self.seed, salt=L)),
                         _as_keys(previous, f"{L}/PreviousAsKeys"), unigram_keys)
                     | f"{L}/SumPerItem" >> beam.CombinePerKey(sum)
                     # Its samples are read twice (the noise and the support the
                     # spurious draws avoid): one H_k for both (invariant 11).
                     | f"{L}/CheckpointHistogram" >> beam.Reshuffle())
        # Then ρ_k from |S_{k−1}| and the exact |V_k| (S_{k−1} is held in
        # memory anyway: the spurious draw below samples V_k from it).
        eta, pruning = self.eta, self.pruning
        single, as_list = beam.pvalue.AsSingleton, beam.pvalue.AsList

        # (The step that first knows |S_{k−1}| also reports level k−1's release.)
        log_previous = _level_logger(self.progress_logger, k - 1, self.max_n)

        def level_parameters(_, prev, uni, index=0):
            n_prev, n_val = len(prev), valid_kgram_count(prev, uni, pruning)
            log_previous(n_prev)
            sigma = sigmas[index]
            return {"n_previous": n_prev, "n_valid": n_val, "sigma": sigma,
                    "rho": thresholds.dpne_level_threshold(sigma, eta, n_prev, n_val)}

        chosen_index = [] if chosen is None else [single(chosen)]
        parameters_once = (previous.pipeline
                           | f"{L}/ParametersOnce" >> beam.Create([None])
                           | f"{L}/Parameters" >> beam.Map(
                               level_parameters, as_list(previous), as_list(unigrams),
                               *chosen_index))
        parameters = single(parameters_once)
        released = histogram | f"{L}/NoisyThreshold" >> beam.ParDo(
            _LevelThresholdFn(self.seed, L), parameters)
        # Finally the spurious k-grams of V_k ∖ supp H_k.
        support = histogram | f"{L}/Support" >> beam.Keys()
        # (From a root of its own, not from the parameters' step: fused with it,
        # this step would wait for the support, which waits for ρ_k.)
        spurious = (previous.pipeline
                    | f"{L}/Once" >> beam.Create([None])
                    | f"{L}/DrawSpurious" >> beam.ParDo(
                        _SpuriousFn(k, self.pruning, self.seed),
                        as_list(previous), as_list(unigrams), as_list(support), parameters))
        # The level feeds the output, the next level and its stats: it is
        # checkpointed before it fans out (invariant 11); the raw stats also
        # count its two parts, each checkpointed then.
        if not self.non_private_stats:
            level = ((released, spurious)
                     | f"{L}/WithSpurious" >> beam.Flatten()
                     | f"{L}/Checkpoint" >> beam.Reshuffle())
            return level, parameters_once, None
        released = released | f"{L}/CheckpointReleased" >> beam.Reshuffle()
        spurious = spurious | f"{L}/CheckpointSpurious" >> beam.Reshuffle()
        level = (released, spurious) | f"{L}/WithSpurious" >> beam.Flatten()

        # Raw figures (opt-in): which part came from users' weight, which was spurious.
        def raw_stats(_, params, n_support, n_released, n_spurious):
            n_val, rho_k = params["n_valid"], params["rho"]
            p = float(special.ndtr(-rho_k / params["sigma"])) if math.isfinite(rho_k) else 0.0
            return {"k": k, "support": n_support,
                    "expected_spurious": max(n_val - n_support, 0) * p,
                    "spurious": n_spurious, "released_from_users": n_released}

        raw = (previous.pipeline
               | f"{L}/RawStatsOnce" >> beam.Create([None])
               | f"{L}/RawStats" >> beam.Map(
                   raw_stats, parameters,
                   single(support | f"{L}/CountSupport" >> count()),
                   single(released | f"{L}/CountReleased" >> count()),
                   single(spurious | f"{L}/CountSpurious" >> count())))
        return level, parameters_once, raw

    def _level_stats(self, _, n_last: int, *parameters) -> list:
        """Levels 2..T's figures, from each level's parameters and |S_k| (all DP-safe:
        functions of the released sets and the parameters)."""
        _level_logger(self.progress_logger, self.max_n, self.max_n)(n_last)
        released = [p["n_previous"] for p in parameters[1:]] + [n_last]
        stats = []
        for k, params, n_level in zip(range(2, self.max_n + 1), parameters, released):
            rho_k, n_prev, n_val = params["rho"], params["n_previous"], params["n_valid"]
            stats.append({"k": k, "max_items_per_user": self.max_items[k - 1],
                          "sigma": params["sigma"],
                          "release_threshold": rho_k if math.isfinite(rho_k) else None,
                          "previous_released": n_prev, "valid_kgrams": n_val,
                          "spurious_bound": self.eta * min(n_prev, n_val),
                          "released": n_level})
        return stats

    def expand(self, documents):
        require_global_window(documents, "ExtractNgrams")
        documents = read_fields(documents, self.fields, "ExtractNgrams")
        # First one record per user with all their documents: grouped by user
        # id, or each element one person's only document.
        unseeded_elements = self.privacy_unit == "element" and self.seed is None
        user_docs = None
        if unseeded_elements:
            # Only a seeded sample or the policy's order reads an id: the blocks
            # get none, and the elements are checked as they are blocked. A
            # level-1 policy draws its ids on its own branch, so that no draw
            # feeds two steps (invariant 11).
            user_blocks = documents | "UserBlocks" >> beam.ParDo(
                _UserBlocksFn(USERS_PER_BLOCK, keep_ids=False, elements=True))
        # (With Δ_1 "auto", the unseeded elements' ids are drawn after the
        # routing, on the chosen level 1's branch.)
        if not unseeded_elements or (self.level1 == "policy-gaussian"
                                     and self.auto_plan is None):
            if self.privacy_unit == "element":
                user_docs = documents | "CheckElements" >> beam.Map(_element_as_user, self.seed)
            else:
                user_docs = (documents
                             | "CheckDocuments" >> beam.Map(check_document)
                             | "DocumentsPerUser" >> beam.GroupByKey()
                             | "AsTuples" >> beam.MapTuple(
                                 lambda user, docs: (user, tuple(docs))))
        if not unseeded_elements:
            user_blocks = user_docs | "UserBlocks" >> beam.ParDo(
                _UserBlocksFn(USERS_PER_BLOCK, keep_ids=self.seed is not None))
        # Then level 1 (unigrams) and the levels k ≥ 2, each from the one before.
        chosen = None
        if self.auto_plan is None:
            unigrams = self._level1(user_docs, user_blocks, self._calibrations[0])
        else:
            unigrams, chosen = self._auto_level1(documents, user_docs, user_blocks)
        self.released_per_level = [unigrams]
        all_parameters, all_raw = [], []
        previous = unigrams
        unigram_keys = _as_keys(unigrams, "UnigramsAsKeys") if self.max_n > 1 else None
        for k in range(2, self.max_n + 1):
            previous, parameters, raw = self._level(k, user_blocks, previous, unigrams,
                                                    unigram_keys, chosen)
            self.released_per_level.append(previous)
            all_parameters.append(parameters)
            all_raw.append(raw)
        # The levels' figures in one step, once the last level is counted:
        # level k's release is |S_k|, which level k+1's parameters hold.
        self.level_stats = (
            documents.pipeline
            | "LevelStatsOnce" >> beam.Create([None])
            | "LevelStats" >> beam.FlatMap(
                self._level_stats,
                beam.pvalue.AsSingleton(previous | "CountLastLevel"
                                        >> beam.combiners.Count.Globally()),
                *[beam.pvalue.AsSingleton(p) for p in all_parameters]))
        if self.non_private_stats:
            self.non_private_level_stats = (
                all_raw | "AllRawLevelStats" >> beam.Flatten() if all_raw
                else documents.pipeline | "NoRawLevelStats" >> beam.Create([]))
        # Finally the union of all levels.
        return self.released_per_level | "UnionOfLevels" >> beam.Flatten()


class NgramsByDPSU(ReleaseTransform):
    """The DPSU baselines of dpne Table 3, on (user_id, tokens) documents.

    * "dpsu-all": Weighted Gaussian once over the n-grams of every length
      1..T, with Δ = T·Δ0.
    * "dpsu-even": one Weighted Gaussian per length k, the budget split
      evenly: σ_k = √T·σ* (Gaussian composition, dpne Prop. 2.3) and each
      threshold with 1/T of level 1's δ share.
    * "dpsu-single": the whole budget on the n-grams of one length ``n``.

    ``accountant``: optional ``BudgetAccountant`` to spend ``budget`` from when
    this transform is built (``BudgetExceededError`` past its total).
    """

    def __init__(self, variant: str, max_n: int, budget, max_items_per_user: int = 100,
                 n: int | None = None, seed=None, accountant=None):
        super().__init__()
        if variant not in BASELINES:
            raise ValueError(f"variant must be one of {BASELINES}, got {variant!r}")
        max_n = check_max_n(max_n)
        if variant == "dpsu-single" and (n is None or not 1 <= n <= max_n):
            raise ValueError(f"dpsu-single needs 1 <= n <= max_n, got n={n!r}")
        if isinstance(budget, (Budget, ZCDPBudget)):  # refused when built, not when run
            budgets.require_delta(budget, f"n-gram baseline {variant!r}")
        self.variant, self.max_n, self.budget = variant, int(max_n), budget
        self.max_items, self.n, self.seed = int(max_items_per_user), n, seed
        if variant == "dpsu-all":  # one selection over all lengths: Δ = T·Δ0
            thresholds.check_max_items(self.max_n * self.max_items,
                                       "max_n * max_items_per_user")
        spend_from(accountant, budget, f"NgramsByDPSU ({variant})")
        warn_if_seeded(seed, "NgramsByDPSU")

    def _ngram_pairs(self, docs, lengths, label, as_text=False):
        # SelectItems takes str items: n-grams travel as JSON lists, decoded after.
        encode = (lambda g: json.dumps(g)) if as_text else (lambda g: g)
        return docs | label >> beam.FlatMap(
            lambda d: ((d[0], encode(g)) for k in lengths for g in set(kgrams_of(d[1], k))))

    def expand(self, documents):
        require_global_window(documents, "NgramsByDPSU")
        docs = documents | "CheckDocuments" >> beam.Map(check_document)
        decode = beam.Map(lambda text: tuple(json.loads(text)))
        if self.variant == "dpsu-all":
            pairs = self._ngram_pairs(docs, range(1, self.max_n + 1), "AllNgrams", True)
            return (pairs
                    | "SelectAll" >> SelectItems(WeightedGaussian(self.max_n * self.max_items),
                                                 self.budget, seed=self.seed)
                    | "Decode" >> decode)
        if self.variant == "dpsu-single":
            pairs = self._ngram_pairs(docs, [self.n], "Ngrams", True)
            return (pairs
                    | "SelectSingle" >> SelectItems(WeightedGaussian(self.max_items),
                                                    self.budget, seed=self.seed)
                    | "Decode" >> decode)
        # T equal Gaussian selections composing to σ* (each σ = √T·σ*), each
        # threshold with δ_thr/T; the δ split minimises that (common) threshold.
        max_n, max_items = self.max_n, self.max_items

        def level_threshold(sigma_total: float, threshold_delta: float) -> float:
            return thresholds.weighted_gaussian_threshold(
                sigma_total * math.sqrt(max_n), threshold_delta / max_n, max_items)

        sigma_total, threshold_delta, delta_noise = _total_sigma(self.budget, level_threshold)
        sigma = sigma_total * math.sqrt(self.max_n)
        delta_k = threshold_delta / self.max_n
        calibration = _gaussian(
            self.budget, sigma,
            thresholds.weighted_gaussian_threshold(sigma, delta_k, self.max_items), delta_k,
            "dpne Table 3 (DPSU-even); Proposition 2.3", delta_noise=delta_noise)
        outputs = []
        for k in range(1, self.max_n + 1):
            pairs = self._ngram_pairs(docs, [k], f"Ngrams{k}")
            outputs.append(
                pairs
                | f"Level{k}/Bound" >> _BoundPairs(self.max_items, self.seed, f"even{k}")
                | f"Level{k}/Histogram" >> WeightedHistogram(policies.weighted_gaussian_weight)
                | f"Level{k}/NoisyThreshold" >> NoisyThreshold(calibration, self.seed,
                                                               f"even{k}"))
        return outputs | "Union" >> beam.Flatten()


class _BoundPairs(beam.PTransform):
    """(user, n-gram) pairs → (user, ≤ Δ sampled distinct n-grams)."""

    def __init__(self, max_items, seed, salt):
        super().__init__()
        self._max_items, self._seed, self._salt = max_items, seed, salt

    def expand(self, pairs):
        return (pairs
                | "PerUser" >> WholeItemCountsPerUser()  # n-grams are tuples, taken whole
                | "Sample" >> SampleEachUser(self._max_items, self._seed, self._salt))
