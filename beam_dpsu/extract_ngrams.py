"""DPNE: differentially private n-gram extraction, level by level (dpne §2, App. A).

``ExtractNgrams``' input, output and what it holds after expansion:
docs/explanation/transforms.md#extractngrams. The levels, their privacy and
"auto": docs/explanation/proofs.md#dpne.
"""

from __future__ import annotations

import typing

import apache_beam as beam

from beam_dpsu.core import checks, ngram_calibration
from beam_dpsu.core.ngram_parameters import NgramParameters
from beam_dpsu.core.report import dpne_report
from beam_dpsu.beam.input_types import DOCUMENT_ELEMENT
from beam_dpsu.beam.user_blocks import USERS_PER_BLOCK, PackUserBlocksFn, UserRecords
from beam_dpsu.beam.fields import input_fields, read_fields
from beam_dpsu.beam.ngram_level1 import Level1, Level1AtChosenMaxItems
from beam_dpsu.beam.ngram_levels import KgramLevel, LevelStats, released_as_keys
from beam_dpsu.beam.release_guard import ReleaseTransform
from beam_dpsu.beam.windowing import require_global_window

__all__ = ["ExtractNgrams"]


@beam.typehints.with_input_types(DOCUMENT_ELEMENT)
@beam.typehints.with_output_types(typing.Tuple[str, ...])
class ExtractNgrams(ReleaseTransform):
    """Releases n-grams of lengths 1..max_n under user-level DP (DPNE).

    The output is a *set*: write it with ``WriteReleased``. One object is one
    release, applied once. What it holds after expansion:
    docs/explanation/transforms.md#extractngrams.

    Args:
      max_n: T, the longest n-gram length, at most ``MAX_NGRAM_LENGTH`` (40).
      budget: ``Budget(ε, δ)`` or ``ZCDPBudget(ρ, δ)``, spent by the whole extraction.
      accountant: optional ``BudgetAccountant`` that ``budget`` is spent from.
      max_items_per_user: Δ_k, one value for every level or one per level: an int, or
        ``"auto"`` / ``AutoMaxItems(...)`` (Δ_1 chosen privately; at k ≥ 2 for free).
      eta: η in (0, 1): expected spurious k-grams ≤ η·|S_{k−1}| per level.
      pruning: "both" (default) or "single" (see ``beam_dpsu.core.kgrams``).
      noise_schedule: "equal" (default) or c > 0 with σ_k = c·σ_{k−1} (dpne §3.1.1).
      level1: "weighted-gaussian" (default) or "policy-gaussian" (cutoff ρ_1 + alpha·σ_1).
      alpha: α of the level-1 policy cutoff.
      seed: test-only fixed seed (logs a WARNING); None (default) uses OS entropy.
      privacy_unit: "user_id" (default) or "element" (one person's token list).
      non_private_stats: also compute ``non_private_level_stats``, raw figures per level.
      progress_logger: a ``logging`` logger's name for one INFO line per level, or None.
      user_field: read ``beam.Row``s, NamedTuples or dicts: the user id's field.
      tokens_field: the field holding a document's tokens in order; alone with
        ``privacy_unit="element"``.
      pre_threshold: k ≥ 1 (default 1, none), level 1 only: a unigram needs k users.

    Raises:
      ValueError, TypeError, InvalidRecordError: as ``SelectItems`` raises them;
        ValueError for a tight split's part or a budget no candidate calibrates at.
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
        self.privacy_unit = checks.privacy_unit(privacy_unit)
        self.fields = input_fields(self.privacy_unit, user_field, tokens_field=tokens_field)
        self.progress_logger = progress_logger
        self.params = NgramParameters(max_n, max_items_per_user, eta, pruning, noise_schedule,
                                      level1, alpha, seed, pre_threshold)
        self.budget = budget
        # Everything the guarantee rests on is fixed here (under "auto": every candidate).
        self.auto_plan, self._calibrations = ngram_calibration.calibrate_extraction(
            self.params, budget)
        # None with Δ_1 "auto" (chosen when run): see report["calibration_by_candidate"].
        fixed = self._calibrations[0] if self.auto_plan is None else None
        self.sigma_total = None if fixed is None else fixed.sigma_total
        self.threshold_delta = None if fixed is None else fixed.threshold_delta
        self.delta_noise = None if fixed is None else fixed.delta_noise
        self.sigmas = None if fixed is None else fixed.sigmas
        self.level1_calibration = None if fixed is None else fixed.level1
        # Spent once calibration succeeded: a refused construction spends nothing.
        self._spend(accountant, budget, "ExtractNgrams")
        self.non_private_stats = bool(non_private_stats)
        self.chosen_max_items_per_user = self.level_stats = self.non_private_level_stats = None
        self.released_per_level: list = []

    # The validated parameters; Δ_k per level as max_items_per_user (None: Δ_1 is "auto").
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
        # One record per user, and the users in blocks; unseeded elements are blocked
        # with no id, so no draw feeds two steps (transforms.md#extractngrams).
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
            self.released_per_level.append(user_blocks | f"Level{k}" >> levels[-1])  # k-grams
        # The levels' figures in one step, once the last level is counted.
        self.level_stats = self.released_per_level[-1] | "LevelStats" >> LevelStats(
            [level.parameters for level in levels], params, self.progress_logger)
        if self.non_private_stats:
            raw = [level.non_private_stats for level in levels]
            self.non_private_level_stats = (
                raw | "AllRawLevelStats" >> beam.Flatten() if raw
                else documents.pipeline | "NoRawLevelStats" >> beam.Create([]))
        return self.released_per_level | "UnionOfLevels" >> beam.Flatten()
