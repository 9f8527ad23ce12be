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
δ_noise + δ_thr = δ split to minimise ρ_1 (the proof is in
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
  at the selection budget picks Δ_1 (``beam_dpsu.beam.ngram_level1``). The rule
  scores level 1 only: Δ_1's effect on σ_k (k ≥ 2) is a fraction of a
  percent (MSNBC, ε = 1, δ = 1e-7: σ* = 5.034 at Δ_1 = 1, 5.001 at 1000).

Everything is calibrated when the transform is built, at every candidate Δ_1
(``beam_dpsu.core.ngram_calibration.plan_level1``). When it runs, the choice
(drawn once, checkpointed) is read by one level 1, which runs at the chosen
Δ_1 and that candidate's calibration (``beam_dpsu.beam.max_items_choice.chosen``), and hands
levels k ≥ 2 that candidate's σ_k with their other
parameters: for each fixed choice the pipeline is DPNE at that Δ_1 and the
selection's budget, and sequential composition with the size histogram
gives the caller's budget. The chosen Δ_1 (``chosen_max_items_per_user``) is
a DP output.

This module holds the transform only. Its parts: the parameters
(``beam_dpsu.core.ngram_parameters``), the calibration
(``beam_dpsu.core.ngram_calibration``), the report
(``beam_dpsu.core.ngram_report``), the input checks
(``beam_dpsu.core.documents``); in Beam, the users' records and blocks
(``beam_dpsu.beam.user_blocks``), level 1 and the Δ_1 choice
(``beam_dpsu.beam.ngram_level1``), the levels k ≥ 2 and their figures
(``beam_dpsu.beam.ngram_levels``). The DPSU baselines are
``beam_dpsu.ngram_baselines``.
"""

from __future__ import annotations

import typing

import beam_dpsu.beam  # noqa: F401  (first: it imports Beam quietly)
import apache_beam as beam

from beam_dpsu.core import checks, ngram_calibration
from beam_dpsu.core.ngram_parameters import NgramParameters
from beam_dpsu.core.ngram_report import dpne_report
from beam_dpsu.beam.bounding import check_privacy_unit
from beam_dpsu.beam.input_types import DOCUMENT_ELEMENT
from beam_dpsu.beam.user_blocks import USERS_PER_BLOCK, PackUserBlocksFn, UserRecords
from beam_dpsu.beam.fields import input_fields, read_fields
from beam_dpsu.beam.ngram_level1 import Level1, Level1AtChosenMaxItems
from beam_dpsu.beam.ngram_levels import KgramLevel, LevelStats, released_as_keys
from beam_dpsu.beam.release_guard import ReleaseTransform, spend_from, warn_if_seeded
from beam_dpsu.beam.windowing import require_global_window

__all__ = ["ExtractNgrams"]


@beam.typehints.with_input_types(DOCUMENT_ELEMENT)
@beam.typehints.with_output_types(typing.Tuple[str, ...])
class ExtractNgrams(ReleaseTransform):
    """Releases n-grams of lengths 1..max_n under user-level DP (DPNE).

    Every argument after ``max_items_per_user`` is keyword-only.

    Args:
      max_n: T, the longest n-gram length, at most ``MAX_NGRAM_LENGTH`` (40;
        ``beam_dpsu.core.ngram_parameters``, where every parameter is checked).
      budget: ``Budget(ε, δ)`` or ``ZCDPBudget(ρ, δ)``, spent by the whole extraction.
      accountant: optional ``BudgetAccountant`` to spend ``budget`` from when
        this transform is built (``BudgetExceededError`` past its total).
      max_items_per_user: Δ_k, one value for every level or one per level;
        each an int, or ``"auto"`` / ``AutoMaxItems(share=..., candidates=...)``:
        at level 1 chosen privately when the pipeline runs
        (a share of the budget, default 5 %), at a level k ≥ 2 the largest
        candidate, for free ([beam_dpsu.extract_ngrams][]'s module notes say why).
      eta: η in (0, 1): expected spurious k-grams ≤ η·|S_{k−1}| per level.
      pruning: "both" (default) or "single" (see ``beam_dpsu.core.kgrams``).
      noise_schedule: "equal" (the same σ_k at every level, default) or a
        number c > 0 with σ_k = c·σ_{k−1} (dpne §3.1.1); either way
        1/σ*² = Σ 1/σ_k².
      level1: "weighted-gaussian" (default) or "policy-gaussian" (ℓ2-descent,
        with cutoff ρ_1 + alpha·σ_1, users in keyed-hash order).
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
      pre_threshold: k ≥ 1 (default 1, none): a unigram is released only if at
        least k distinct users hold it after bounding, on top of level 1's DP
        selection, whose threshold rises by k − 1 (docs/privacy.md,
        Pre-threshold). Level 1 only: the levels k ≥ 2 noise every valid
        k-gram and release spurious ones, so a longer n-gram may be held by
        fewer than k users (even none); every one is built from released
        unigrams.

    Raises:
      ValueError, TypeError, InvalidRecordError: for the field arguments and
        the elements, as ``SelectItems`` raises them.
      ValueError: a bad ``max_items_per_user`` or parameter; a tight split's
        part (``split_selection_and_counts(composition="tight")``, made for one
        ``SelectItems`` mechanism, never for DPNE); with "auto", a budget no
        candidate calibrates at.

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

    def __init__(self, max_n: int, budget, max_items_per_user=100, *, eta: float = 0.01,
                 pruning: str = "both", noise_schedule="equal",
                 level1: str = "weighted-gaussian", alpha: float = 3.0, seed=None, label=None,
                 non_private_stats: bool = False, privacy_unit: str = "user_id",
                 progress_logger: str | None = None, accountant=None,
                 user_field: str | None = None, tokens_field: str | None = None,
                 pre_threshold: int = 1):
        super().__init__(label)
        # A tight split's part is made for one SelectItems mechanism, never for DPNE.
        checks.no_tight_part(budget, "ExtractNgrams")
        self.privacy_unit = check_privacy_unit(privacy_unit)
        self.fields = input_fields(self.privacy_unit, user_field, tokens_field=tokens_field)
        self.progress_logger = progress_logger
        self.params = NgramParameters(max_n, max_items_per_user, eta, pruning, noise_schedule,
                                      level1, alpha, seed, pre_threshold)
        self.budget = budget
        # Everything the privacy guarantee rests on is fixed here: with Δ_1
        # "auto", the budget split and DPNE at every candidate Δ_1.
        self.auto_plan, self._calibrations = ngram_calibration.calibrate_extraction(
            self.params, budget)
        # Known only once Δ_1 is chosen if it is "auto": see report["calibration_by_candidate"].
        fixed = self._calibrations[0] if self.auto_plan is None else None
        self.sigma_total = None if fixed is None else fixed.sigma_total
        self.threshold_delta = None if fixed is None else fixed.threshold_delta
        self.delta_noise = None if fixed is None else fixed.delta_noise
        self.sigmas = None if fixed is None else fixed.sigmas
        self.level1_calibration = None if fixed is None else fixed.level1
        # Spent once calibration succeeded: a refused construction spends nothing.
        spend_from(accountant, budget, "ExtractNgrams")
        warn_if_seeded(self.seed, "ExtractNgrams")
        self.non_private_stats = bool(non_private_stats)
        self.chosen_max_items_per_user = None
        self.released_per_level: list = []
        self.level_stats = None
        self.non_private_level_stats = None

    # The parameters, as validated (``self.params``); Δ_k per level under the one name
    # Δ0 has everywhere (None: level 1's Δ_1 is "auto", chosen when the pipeline runs).
    max_n = property(lambda self: self.params.max_n)
    max_items_per_user = property(lambda self: list(self.params.max_items))
    eta = property(lambda self: self.params.eta)
    pruning = property(lambda self: self.params.pruning)
    noise_decay = property(lambda self: self.params.noise_decay)
    level1 = property(lambda self: self.params.level1)
    alpha = property(lambda self: self.params.alpha)
    seed = property(lambda self: self.params.seed)

    @property
    def report(self) -> dict:
        return dpne_report(self.params, self.budget, self.privacy_unit, self.auto_plan,
                           self._calibrations)

    def expand(self, documents):
        require_global_window(documents, "ExtractNgrams")
        documents = read_fields(documents, self.fields, "ExtractNgrams")
        params, seed = self.params, self.params.seed
        policy = params.level1 == "policy-gaussian"
        # First one record per user with all their documents (grouped by user id,
        # or each element one person's only document), and the users in blocks.
        # Only a seeded sample or the policy's order reads an id: unseeded
        # elements are blocked as they come, with no id, and a level-1 policy
        # draws their ids on its own branch, so that no draw feeds two steps
        # (invariant 11; with Δ_1 "auto" too, inside level 1 at the chosen Δ_1).
        unseeded_elements = self.privacy_unit == "element" and seed is None
        user_docs = None
        if not unseeded_elements or (policy and self.auto_plan is None):
            user_docs = (documents  # (user_id, (tokens, ...)), one per user
                         | "UserRecords" >> UserRecords(self.privacy_unit, seed))
        user_blocks = ((documents if unseeded_elements else user_docs)
                       | "UserBlocks" >> beam.ParDo(PackUserBlocksFn(
                           USERS_PER_BLOCK, keep_ids=seed is not None,
                           elements=unseeded_elements)))  # pickled DocumentBlocks
        # Then level 1: the unigrams, at the fixed Δ_1 or at the one chosen privately.
        chosen = None
        if self.auto_plan is None:
            unigrams = ((user_docs if policy else user_blocks)
                        | "Level1" >> Level1(self._calibrations[0], policy, seed))  # (token,)
        else:
            check_elements = policy and user_docs is None
            users = (documents if check_elements else user_docs) if policy else user_blocks
            level1 = Level1AtChosenMaxItems(self.auto_plan, self._calibrations, policy, seed,
                                            check_elements)
            unigrams = (users, user_blocks) | "Level1" >> level1  # (token,)
            chosen, self.chosen_max_items_per_user = level1.chosen, level1.chosen_max_items_per_user
        # Then the levels k ≥ 2, each from the one before (S_{k−1}) and S_1.
        self.released_per_level = [unigrams]
        levels = []
        unigram_keys = released_as_keys(unigrams, "UnigramsAsKeys") if params.max_n > 1 else None
        for k in range(2, params.max_n + 1):
            levels.append(KgramLevel(k, params, self._calibrations, self.released_per_level[-1],
                                     unigrams, unigram_keys, chosen, self.progress_logger,
                                     self.non_private_stats))
            self.released_per_level.append(
                user_blocks | f"Level{k}" >> levels[-1])  # (token, ..., token): k-grams
        # The levels' figures in one step, once the last level is counted.
        self.level_stats = self.released_per_level[-1] | "LevelStats" >> LevelStats(
            [level.parameters for level in levels], params, self.progress_logger)
        if self.non_private_stats:
            raw = [level.non_private_stats for level in levels]
            self.non_private_level_stats = (
                raw | "AllRawLevelStats" >> beam.Flatten() if raw
                else documents.pipeline | "NoRawLevelStats" >> beam.Create([]))
        # Finally the union of all levels.
        return self.released_per_level | "UnionOfLevels" >> beam.Flatten()
