"""Noisy user counts of the released items, and the budget split that pays for them.

``CountReleased(released, budget, max_items_per_user)`` takes the
(user_id, item) records and the ``PCollection`` of released items and returns
``(item, noisy count of users holding it)`` for exactly the released items:
every released item gets one count (0 + noise if no bounded user holds it),
and no other item gets any.

Unlike the threshold decisions of a selection, these numbers are published,
so the noise must not be floating point (its low bits would leak the true
count; Mironov 2012): counts are integers plus exact discrete noise
(``beam_dpsu.core.discrete_noise``, Canonne, Kamath & Steinke 2020). The noisy
counts end in a ``Reshuffle``, so that whoever reads them twice reads one
draw (DESIGN §4, invariant 11; ``beam_dpsu.beam.randomness``); it moves one pair per
released item.

Privacy. First each user's records are deduplicated, restricted to the
released items and sampled uniformly down to at most Δ0 of them (OS
randomness). Then each user adds 1 to each kept item, so adding or removing
one user changes at most Δ0 counts by 1 each: ℓ1 sensitivity Δ0, ℓ2
sensitivity √Δ0. Finally:

* ``Budget(ε, δ)``: discrete Laplace noise of scale Δ0/ε, pure ε-DP
  (CKS §1.1, eq. (2); Ghosh, Roughgarden & Sundararajan 2009); δ is unused.
* ``ZCDPBudget(ρ, δ)``: discrete Gaussian noise with σ² = Δ0/(2ρ), pure
  ρ-zCDP (CKS Theorem 4 with Proposition 3 for the ℓ2 sensitivity √Δ0);
  δ is unused.

With ``max_items_per_user="auto"`` a share of the counts' budget first buys
a histogram of each user's number of distinct released items (one user in
one bin: sensitivity 1; discrete Laplace of scale 1/ε_s or discrete Gaussian
of σ² = 1/(2ρ_s), pure), Δ0 is chosen from it and the public number of
released items (post-processing, ``max_items_choice.CountsAutoPlan``), and the counts
run at that Δ0 on the rest: ε or ρ add (sequential composition), δ stays 0.

The released set is an earlier DP output, so counting on it is adaptive
composition: selection and counts together spend the sum of their budgets
(basic composition for (ε, δ), Dwork & Roth Thm 3.16; additive ρ and δ under
zCDP, dp-sips Lemma 6). ``split_selection_and_counts`` makes that split from
one total and records it in a ``BudgetAccountant``. The sum is an upper
bound: given both parts' calibrations, ``composed_guarantees`` states the
total as run with privacy-loss distributions (``beam_dpsu.core.composition``, proof in its
docstring), an ε at the same δ that is never above the sum.
"""

from __future__ import annotations

import dataclasses
import math
import random
import sys
from fractions import Fraction

import beam_dpsu.beam  # noqa: F401  (first: it imports Beam quietly)
import apache_beam as beam

from beam_dpsu import __version__

from beam_dpsu.core import max_items_choice

from beam_dpsu.core import hashing

from beam_dpsu.core import composition
from beam_dpsu.core import checks
from beam_dpsu.core.budgets import Budget, BudgetAccountant, ZCDPBudget
from beam_dpsu.core.checks import ParameterError, ParameterTypeError
from beam_dpsu.beam.max_items_routing import SizeHistogram
from beam_dpsu.beam.bounding import (InvalidRecordError, ItemCountsPerUser, SampleEachUser,
                                WholeItemCountsPerUser, check_pair, element_distinct_items)
from beam_dpsu.core.sampling import UserSampler
from beam_dpsu.beam.fields import input_fields, read_fields
from beam_dpsu.core.discrete_noise import DiscreteGaussian, DiscreteLaplace, os_random
from beam_dpsu.beam.randomness import draws_randomness
from beam_dpsu.beam.release_guard import ReleaseTransform, spend_from, warn_if_seeded
from beam_dpsu.core.report import GUARANTEES, SEEDED_NOTE
from beam_dpsu.core.wording import a_type
from beam_dpsu.beam.windowing import require_global_window

__all__ = [
    "CountsCalibration",
    "count_calibration",
    "SelectionAndCountsBudget",
    "TightSelectionBudget",
    "TightCountsBudget",
    "split_selection_and_counts",
    "composed_guarantees",
    "CountReleased",
    "check_ngram_pair",
]

DEFAULT_COUNTS_SHARE = 0.25


@dataclasses.dataclass(frozen=True)
class CountsCalibration:
    """The noise of the released items' counts, fixed when the transform is built.

    Attributes:
      noise: the exact discrete distribution added to each count.
      max_items_per_user: Δ0, the most released items a user is counted for.
      sensitivity_norm: 1 (discrete Laplace) or 2 (discrete Gaussian).
      sensitivity: Δ0 in ℓ1 or √Δ0 in ℓ2: how far one user moves the counts.
      budget: the budget the counts spend (its δ is not used).
      source: where the calibration comes from.
    """

    noise: DiscreteLaplace | DiscreteGaussian
    max_items_per_user: int
    sensitivity_norm: int
    sensitivity: float
    budget: Budget | ZCDPBudget
    source: str

    def to_dict(self) -> dict:
        return {"budget": self.budget.to_dict(), **self.noise.to_dict(),
                "max_items_per_user": self.max_items_per_user,
                "sensitivity_norm": self.sensitivity_norm, "sensitivity": self.sensitivity,
                "source": self.source}


_LARGEST_FLOAT = Fraction(sys.float_info.max)


def count_calibration(budget: Budget | ZCDPBudget, max_items_per_user: int) -> CountsCalibration:
    """The count noise under ``budget`` when each user counts on ≤ Δ0 items.

    * ``Budget(ε, δ)``: discrete Laplace with scale Δ0/ε — ℓ1 sensitivity Δ0,
      ε-DP (CKS §1.1, eq. (2)).
    * ``ZCDPBudget(ρ, δ)``: discrete Gaussian with σ² = Δ0/(2ρ) — ℓ2
      sensitivity √Δ0, ρ-zCDP (CKS Theorem 4, Proposition 3).

    Both are pure, so δ may be 0 (and is not spent). The scales are exact
    fractions of the float parameters.

    Args:
      budget: the counts' ``Budget`` or ``ZCDPBudget`` (δ may be 0).
      max_items_per_user: Δ0, the most released items one user is counted on.

    Returns:
      The counts' noise and its scale.
    """
    d0 = checks.max_items(max_items_per_user)
    if isinstance(budget, (Budget, ZCDPBudget)):
        scale = (Fraction(d0) / Fraction(budget.epsilon) if isinstance(budget, Budget)
                 else Fraction(d0) / (2 * Fraction(budget.rho)))
        if scale > _LARGEST_FLOAT:  # reported as a float; noise that large drowns every count
            param = "epsilon" if isinstance(budget, Budget) else "rho"
            raise ParameterError(
                param, f"= {getattr(budget, param):g} is too small for the counts at "
                       f"max_items_per_user = {d0}: the noise scale exceeds the float range")
    if isinstance(budget, Budget):
        return CountsCalibration(
            noise=DiscreteLaplace(Fraction(d0) / Fraction(budget.epsilon)),
            max_items_per_user=d0, sensitivity_norm=1, sensitivity=float(d0), budget=budget,
            source="Canonne, Kamath & Steinke 2020 §1.1 eq. (2), Algorithm 2 (discrete Laplace)")
    if isinstance(budget, ZCDPBudget):
        return CountsCalibration(
            noise=DiscreteGaussian(Fraction(d0) / (2 * Fraction(budget.rho))),
            max_items_per_user=d0, sensitivity_norm=2, sensitivity=math.sqrt(d0), budget=budget,
            source="Canonne, Kamath & Steinke 2020 Theorem 4, Proposition 3, Algorithm 3 "
                   "(discrete Gaussian)")
    raise ParameterTypeError("budget", f"must be a Budget or ZCDPBudget, got {budget!r}")


@dataclasses.dataclass(frozen=True)
class TightSelectionBudget(Budget):
    """The selection's part of a tight split: more ε than a plain sum would give it,
    valid only for the mechanism the split was computed for (``SelectItems``
    refuses it with any other: the composed total would exceed what was asked)."""

    for_mechanism: object = None


@dataclasses.dataclass(frozen=True)
class TightCountsBudget(Budget):
    """The counts' part of a tight split, valid only for the Δ0 the split was
    computed for (``CountReleased`` refuses it with any other)."""

    for_max_items_per_user: int | None = None


@dataclasses.dataclass(frozen=True)
class SelectionAndCountsBudget:
    """One total budget split between a selection and the counts of what it released.

    Attributes:
      total: the budget the two parts compose to.
      selection: the selection's part: (1 − share)·ε (or ·ρ) and all of δ.
      counts: the counts' part: share·ε (or ·ρ) and δ = 0 (the counts are pure).
      counts_share: the share of ε (or ρ) given to the counts.
      composed: the tight total guarantee(s) once the parts' calibrations are
        known (``composed_with``): ``composition.ComposedGuarantee`` each, ε ≤ the sum.
      scale: c > 1 for a tight split (both ε's scaled by c), else 1.
    """

    total: Budget | ZCDPBudget
    selection: Budget | ZCDPBudget
    counts: Budget | ZCDPBudget
    counts_share: float
    composed: tuple = ()
    scale: float = 1.0

    def composed_with(self, selection_calibration, counts_calibration
                      ) -> "SelectionAndCountsBudget":
        """This split with its tight total guarantee(s), for the calibrations the
        parts were given (see ``composed_guarantees``)."""
        return dataclasses.replace(self, composed=composed_guarantees(
            self, selection_calibration, counts_calibration))

    def to_dict(self) -> dict:
        if self.scale > 1.0:
            rule = (f"tight: both parts' epsilon scaled by {self.scale:.9g} so that the "
                    "selection and counts as calibrated compose to the total "
                    "(privacy-loss distributions, beam_dpsu.core.composition; "
                     "see composed_guarantee)")
        elif isinstance(self.total, Budget):
            rule = "basic composition: ε and δ add (Dwork & Roth Thm 3.16)"
        else:
            rule = "zCDP composition: ρ and δ add (dp-sips Lemma 6)"
        out = {"total": self.total.to_dict(), "selection": self.selection.to_dict(),
               "counts": self.counts.to_dict(), "counts_share": self.counts_share,
               "composition": rule}
        if self.scale > 1.0:
            out["scale"] = self.scale
        if self.composed:
            out["composed_guarantee"] = [g.to_dict() for g in self.composed]
            out["composed_note"] = (
                "the total (epsilon, delta) of the selection and counts as run, tightly "
                "accounted (privacy-loss distributions); never above basic composition")
        return out


def composed_guarantees(parts: SelectionAndCountsBudget, selection_calibration,
                        counts_calibration) -> tuple:
    """The tight (ε, δ) of a selection and its counts (``beam_dpsu.core.composition``),
    data-independent.

    Under ``Budget(ε, δ)``: one guarantee at the total δ, its ε ≤ the parts' ε
    sum (basic composition, which it is never above). Under ``ZCDPBudget(ρ, δ)``:
    at δ_DP = 2δ, 5δ, 10δ (as ``report.dp_equivalents``), each ≤ the zCDP
    conversion of the parts' sum (dp-sips Corollary 9). Empty when a part has
    no known privacy-loss pair (the plain sum then stands alone).
    """
    sel, cnt = parts.selection, parts.counts
    if isinstance(parts.total, Budget):
        assert isinstance(sel, Budget) and isinstance(cnt, Budget)  # the total's kind
        points = [(parts.total.delta, sel.epsilon + cnt.epsilon)]
    else:
        assert isinstance(sel, ZCDPBudget) and isinstance(cnt, ZCDPBudget)
        spent = ZCDPBudget(sel.rho + cnt.rho, sel.delta + cnt.delta)
        points = [(f * spent.delta, spent.to_dp(f * spent.delta).epsilon)
                  for f in (2.0, 5.0, 10.0) if f * spent.delta < 1.0]
    out = []
    for delta, basic in points:
        found = composition.composed_guarantee(selection_calibration, counts_calibration,
                                                delta, basic)
        if found is not None:
            out.append(found)
    return tuple(out)


def _tight_scale(total: Budget, share: float, selection_mechanism, d0: int) -> float:
    """The largest c ≥ 1 (to 1e-9) at which Budget(c(1−s)ε, δ) for the selection and
    Budget(c·s·ε, 0) for the counts compose, as calibrated, to ε at δ; 1 if none.

    Every accepted c is checked (the composed ε of the calibrations at c is
    ≤ ε), so the result meets the total whether or not the map c ↦ ε is
    monotone; bisection only makes it large.
    """
    eps, delta = total.epsilon, total.delta

    def fits(c: float) -> bool:
        try:  # a scaled part out of range (e.g. ε overflowing) does not fit
            sel = selection_mechanism.calibrate(Budget(c * (1.0 - share) * eps, delta))
            cnt = count_calibration(Budget(c * share * eps, 0.0), d0)
        except ValueError:
            return False
        found = composition.composed_guarantee(sel, cnt, delta)
        return (found is not None and found.tight_epsilon is not None
                and found.tight_epsilon <= eps)

    if not fits(1.0):
        return 1.0
    lo, hi = 1.0, 2.0
    while fits(hi):
        lo, hi = hi, 2.0 * hi
        if hi > 1024.0:
            return lo
    while hi - lo > 1e-9 * lo:
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    return lo


def split_selection_and_counts(total: Budget | ZCDPBudget,
                               counts_share: float = DEFAULT_COUNTS_SHARE,
                               accountant: BudgetAccountant | None = None,
                               selection_mechanism=None,
                               counts_max_items_per_user: int | None = None,
                               composition: str = "basic"
                               ) -> SelectionAndCountsBudget:
    """Splits ``total`` into a selection part and a counts part, and spends both.

    The counts get ``counts_share`` of ε (or ρ) and δ = 0, since their
    discrete noise is pure; the selection gets the rest of ε (or ρ) and all of
    δ. The parts compose to ``total``: basic composition for (ε, δ) (Dwork &
    Roth Thm 3.16), additive ρ and δ for approximate zCDP (dp-sips Lemma 6).

    Both parts are spent from ``accountant`` (by default a fresh one over
    ``total``): if it has less than ``total`` left, ``BudgetExceededError``
    is raised and nothing is returned.

    With ``selection_mechanism`` (the selection's config, e.g.
    ``WeightedGaussian(100)``) and ``counts_max_items_per_user`` (the Δ0 given
    to ``CountReleased``), both parts are calibrated now and the result's
    ``composed`` holds the tight total (ε, δ) of the two as run
    (``composed_guarantees``; ``beam_dpsu.core.composition``): the split itself is
    unchanged, the total is only stated more tightly (ε ≤ the sum).

    ``composition="tight"`` (a ``Budget`` total, with both of the above) uses
    that slack: both parts' ε are scaled by the largest c ≥ 1 at which the
    composed ε of the two *as calibrated* is still ≤ the total ε at the total
    δ (``_tight_scale``; c = 1 when there is none, e.g. a Laplace selection,
    whose δ all goes to its threshold). The parts' ε then add up to c·ε, more
    than the total: they are valid **only** for ``selection_mechanism`` and
    counts with ``counts_max_items_per_user`` (other mechanisms, or a smaller
    Δ0, can compose to more), and ``accountant`` is charged the total once.
    Under a ``ZCDPBudget`` the split stays additive in ρ (the papers' meaning).

    Args:
      total: the ``Budget`` or ``ZCDPBudget`` of selection and counts together.
      counts_share: s in (0, 1), the counts' share of ε (or ρ).
      accountant: the ``BudgetAccountant`` both parts are spent from; a fresh
        ``BudgetAccountant(total)`` by default.
      selection_mechanism: the selection's mechanism config, to state the total
        tightly (``composed``).
      counts_max_items_per_user: the Δ0 given to ``CountReleased``, with
        ``selection_mechanism``.
      composition: ``"basic"`` (default) or ``"tight"``.

    Returns:
      The two parts, with the total and, given the mechanisms, ``composed``.

    Raises:
      BudgetExceededError: ``accountant`` has less than ``total`` left.
    """
    share = checks.probability("counts_share", counts_share, types=(int, float),
                               show_given=True)
    checks.one_of("composition", composition, ("basic", "tight"), "'basic' or 'tight'")
    if (selection_mechanism is None) != (counts_max_items_per_user is None):
        raise ParameterError.worded(
            "selection_mechanism", "give both selection_mechanism and counts_max_items_per_user "
                                   "(to state the composed guarantee), or neither")
    if composition == "tight" and selection_mechanism is None:
        raise ParameterError.worded(
            "composition", "composition='tight' needs selection_mechanism and "
                           "counts_max_items_per_user: the split is valid for those only")
    scale = 1.0
    selection: Budget | ZCDPBudget
    counts: Budget | ZCDPBudget
    if isinstance(total, Budget):
        if composition == "tight":
            d0 = checks.max_items(counts_max_items_per_user)
            scale = _tight_scale(total, share, selection_mechanism, d0)
        if scale > 1.0:  # a tight split: each part bound to what it was computed for
            selection = TightSelectionBudget(scale * total.epsilon * (1.0 - share), total.delta,
                                             for_mechanism=selection_mechanism)
            counts = TightCountsBudget(scale * total.epsilon * share, 0.0,
                                       for_max_items_per_user=d0)
        else:
            selection = Budget(scale * total.epsilon * (1.0 - share), total.delta)
            counts = Budget(scale * total.epsilon * share, 0.0)
    elif isinstance(total, ZCDPBudget):
        selection = ZCDPBudget(total.rho * (1.0 - share), total.delta)
        counts = ZCDPBudget(total.rho * share, 0.0)
    else:
        raise ParameterTypeError("total", f"must be a Budget or ZCDPBudget, got {total!r}")
    tight = scale > 1.0
    parts = SelectionAndCountsBudget(total=total, selection=selection, counts=counts,
                                     counts_share=share, scale=scale)
    # Both or neither (checked above); calibrated before anything is spent.
    if selection_mechanism is not None and counts_max_items_per_user is not None:
        parts = parts.composed_with(selection_mechanism.calibrate(selection),
                                    count_calibration(counts, counts_max_items_per_user))
        # A tight split is only as good as its check: the composed total as run.
        if tight and isinstance(total, Budget) and not all(  # tight: a Budget total
                g.method != "basic" and g.tight_epsilon <= total.epsilon
                             for g in parts.composed):
            raise RuntimeError("tight split does not meet its total")  # pragma: no cover
    accountant = BudgetAccountant(total) if accountant is None else accountant
    if tight:
        accountant.spend(total, "selection and counts (tight composition)")
    else:
        accountant.spend_all(selection, counts)
    return parts


def _is_ngram(value) -> bool:
    """A non-empty tuple of non-empty str."""
    return (isinstance(value, tuple) and bool(value)
            and all(isinstance(token, str) and token for token in value))


def check_ngram_pair(record):
    """A (user_id, n-gram) pair, the n-gram a non-empty tuple of non-empty str; raises otherwise.

    User ids as in ``bounding.check_pair``. Errors name the field, never the values.
    """
    if not isinstance(record, tuple) or len(record) != 2:
        shape = (f"a tuple of {len(record)} fields" if isinstance(record, tuple)
                 else f"{a_type(record)}")
        raise InvalidRecordError(f"expected a (user_id, n-gram) pair, got {shape}")
    gram = record[1]
    if not _is_ngram(gram):
        raise InvalidRecordError("an n-gram item (field 1) must be a non-empty tuple of "
                                 f"non-empty str, got {a_type(gram)}")
    user_id, _ = check_pair((record[0], "n-gram"))  # the user id, canonical
    return user_id, tuple(str(token) for token in gram)


def _released_item(item, ngrams: bool):
    """A released item as a plain str/bytes (or n-gram: tuple of str); raises on the wrong kind.

    Released n-grams counted as text items (or the reverse) would match no
    user's items and get a zero count each, silently: refused instead.
    """
    if isinstance(item, tuple):
        if not ngrams:
            raise InvalidRecordError("a released item is an n-gram (a tuple): count n-grams "
                                     "with CountReleased(..., ngrams=True)")
        if not _is_ngram(item):
            raise InvalidRecordError("a released n-gram must be a non-empty tuple of "
                                     "non-empty str")
        return tuple(str(token) for token in item)
    if isinstance(item, (str, bytes)):
        if ngrams:
            raise InvalidRecordError("a released item is a str or bytes, not an n-gram: count "
                                     "text items with CountReleased(..., ngrams=False)")
        return str(item) if isinstance(item, str) else bytes(item)
    raise InvalidRecordError(f"released items must be str, bytes or n-grams (tuples of str), "
                             f"got {a_type(item)}")


class _KeepReleasedFn(beam.DoFn):
    """(user, {item: occurrences}) → (user, [released items it holds]); drops users with none."""

    def process(self, user_counts, released):
        user_id, counts = user_counts
        kept = [item for item in counts if item in released]
        if kept:
            yield user_id, kept


@draws_randomness
class _AddDiscreteNoiseFn(beam.DoFn):
    """(item, count) → (item, count + noise): ``noises[chosen]``, chosen 0 unless a side
    input (the chosen candidate's index, with max_items_per_user="auto") gives it."""

    def __init__(self, noises: tuple, seed: int | None):
        self._noises = tuple(noises)
        self._seed = seed
        self._rng = None

    def setup(self):
        self._rng = os_random()

    def process(self, item_count, chosen: int = 0):
        item, count = item_count
        rng = self._rng if self._seed is None else random.Random(
            hashing.stable_hash64(("count-noise", self._seed, item)))
        yield item, int(count) + self._noises[chosen].sample(rng)


def _released_size(element, released) -> int:
    """One element of privacy_unit="element" input → its number of distinct released items."""
    return sum(1 for item in element_distinct_items(element) if item in released)


@draws_randomness
def _noisy_counts_choice(counts, released_items: int, plan: max_items_choice.CountsAutoPlan,
                         seed: int | None) -> int:
    """The index (in plan.candidates) of the counts' Δ0, from the noisy size counts."""
    rng = None if seed is None else random.Random(hashing.stable_hash64(("count-sizes", seed)))
    noisy = max_items_choice.noisy_size_histogram(counts, plan.size_budget, rng)
    return plan.candidates.index(plan.choose(noisy, released_items))


@draws_randomness
class _SampleAtChosenFn(beam.DoFn):
    """(user, released items) → (user, ≤ Δ0 of them sampled uniformly), Δ0 the chosen
    candidate (a side input): as ``SampleEachUser`` at that Δ0, seeded samples alike."""

    def __init__(self, candidates: tuple, seed: int | None, salt: str):
        self._samplers = tuple(UserSampler(c, seed, salt) for c in candidates)

    def setup(self):
        for sampler in self._samplers:
            sampler.setup()

    def process(self, user_record, chosen: int):
        user_id, items = user_record
        if items:
            yield user_id, tuple(self._samplers[chosen](user_id, items))


class _ChooseCountsMaxItems(beam.PTransform):
    """Users' numbers of released items (≥ 1 each) → the chosen Δ0's index, checkpointed.

    K, the number of released items, is public (the released set is a DP
    output) and comes as a side input; the noise is drawn once, whoever reads it.
    """

    def __init__(self, plan: max_items_choice.CountsAutoPlan, released, seed: int | None):
        super().__init__()
        self._plan = plan
        self._released = released
        self._seed = seed

    def expand(self, sizes):
        released_items = (self._released
                          | "DistinctReleased" >> beam.Distinct()
                          | "NumberReleased" >> beam.combiners.Count.Globally())
        return (sizes
                | "SizeHistogram" >> SizeHistogram(self._plan.edges)
                | "AddNoiseAndChoose" >> beam.Map(
                    _noisy_counts_choice, beam.pvalue.AsSingleton(released_items),
                    self._plan, self._seed)
                | "Checkpoint" >> beam.Reshuffle())


class CountReleased(ReleaseTransform):
    """Users' items → (item, noisy user count) for exactly the released items.

    Its input is what ``SelectItems`` takes: ``(user_id, item)`` pairs and/or
    ``(user_id, items)`` per-user records of str/bytes items (a tuple is a
    record there), or Rows, NamedTuples or dicts with named fields. With
    ``ngrams=True`` the items are n-grams (tuples of str, as ``ExtractNgrams``
    releases) and the input is ``(user_id, n-gram)`` pairs. Released items of
    the other kind are refused, so that a mix-up cannot silently give every item
    a count of zero.

    The pipeline it builds: first check the records and count each user once
    per item (dedupe), keep only released items, sample ≤ Δ0 of them per user
    uniformly; then sum 1 per (user, item) and add a zero for every released
    item, so each released item has exactly one count; finally add exact
    discrete noise (see the module docstring for the calibration).

    Args:
      released: ``PCollection`` of released items (e.g. ``SelectItems``'
        output), a set: its items are public once released.
      budget: ``Budget(ε, δ)`` (discrete Laplace, scale Δ0/ε) or
        ``ZCDPBudget(ρ, δ)`` (discrete Gaussian, σ² = Δ0/(2ρ)); δ may be 0 and
        is not spent. Use ``split_selection_and_counts`` to pay for the
        selection and the counts from one total.
      accountant: optional ``BudgetAccountant`` to spend ``budget`` from when
        this transform is built (``BudgetExceededError`` past its total). Not
        with ``split_selection_and_counts(..., accountant)``, which spent
        both parts already.
      max_items_per_user: Δ0, the most released items each user is counted
        for (sampled uniformly among the released items the user holds), or
        ``"auto"`` / ``AutoMaxItems(share, candidates)``: a share of
        ``budget`` buys a DP histogram of users' numbers of released items,
        and Δ0 is the candidate of least expected total error
        (``max_items_choice.CountsAutoPlan``); the choice is
        ``chosen_max_items_per_user`` once the pipeline has run. Not with a
        tight split's part (bound to one Δ0).
      seed: test-only fixed seed; None (default) uses OS randomness. A seeded
        transform logs a WARNING when it is built.
      ngrams: the items are n-grams (see above).
      privacy_unit: ``"user_id"`` (default) or ``"element"``: each element is
        all of one person's items, as in ``SelectItems`` (not with ``ngrams``).
      user_field: read the input as ``beam.Row``s, NamedTuples or dicts, as
        ``SelectItems`` does: the field holding the user id (not with
        ``privacy_unit="element"``).
      item_field: the field holding one item per element (with ``ngrams``:
        one n-gram, a list or tuple of str).
      items_field: the field holding a list, tuple, set or array of items
        (with ``ngrams``: of n-grams); not with ``item_field``.

    Raises:
      ValueError, TypeError, InvalidRecordError: for the field arguments and
        the elements, as ``SelectItems`` raises them; ValueError for "auto"
        with a tight split's part.

    One object is one release of counts: applying it twice is refused
    (``AppliedTwiceError``) when the pipeline is built.

    The released set reaches the workers as a side input (it must fit in a
    worker's memory, as a vocabulary does).

    Example::

        parts = split_selection_and_counts(ZCDPBudget(0.2, 1e-5), counts_share=0.25)
        released = pairs | SelectItems(WeightedGaussian(100), parts.selection)
        counts = pairs | CountReleased(released, parts.counts, max_items_per_user=20)
        # or, instead, with Δ0 chosen privately from a share of the counts' budget:
        counter = CountReleased(released, parts.counts, max_items_per_user="auto")
        counts = pairs | counter  # counter.chosen_max_items_per_user: the Δ0 used
    """

    def __init__(self, released, budget: Budget | ZCDPBudget,
                 max_items_per_user: int | str | max_items_choice.AutoMaxItems = 100,
                 seed: int | None = None, ngrams: bool = False, label=None,
                 privacy_unit: str = "user_id", accountant=None, user_field: str | None = None,
                 item_field: str | None = None, items_field: str | None = None):
        super().__init__(label)
        checks.instance("released", released, beam.pvalue.PCollection,
                        "the PCollection of released items", lambda v: type(v).__name__)
        self.released = released
        self.budget = budget
        self.seed = checks.seed(seed)
        self.ngrams = bool(ngrams)
        self.privacy_unit = checks.privacy_unit(privacy_unit)
        if self.ngrams and self.privacy_unit != "user_id":
            raise ParameterError.worded(
                "privacy_unit", "CountReleased counts n-grams from (user_id, n-gram) pairs: "
                                "privacy_unit='element' is for items, not n-grams")
        self.fields = input_fields(self.privacy_unit, user_field, self.ngrams,
                                   item_field=item_field, items_field=items_field)
        # max_items_per_user="auto": a share of the budget picks Δ0 when the
        # pipeline runs; every candidate's noise is calibrated now.
        self.auto_plan = None
        self.calibrations_by_candidate: dict = {}
        self.chosen_max_items_per_user = None
        bound = max_items_choice.check_max_items_or_auto(max_items_per_user)
        if max_items_choice.is_auto(bound):
            # split_budget refuses a tight split's part: it is bound to one Δ0.
            self.auto_plan, self.calibrations_by_candidate = max_items_choice.plan_counts_auto(
                bound, budget, count_calibration)
            self.calibration = None
        else:
            checks.tight_part("max_items_per_user", bound,
                              getattr(budget, "for_max_items_per_user", None))
            self.calibration = count_calibration(budget, bound)
        # Spent once calibration succeeded: a refused construction spends nothing.
        spend_from(accountant, budget, "CountReleased")
        warn_if_seeded(self.seed, "CountReleased")

    @property
    def report(self) -> dict:
        """The privacy parameters of the counts (no data needed)."""
        report: dict = {
            "library": f"beam_dpsu {__version__}",
            "guarantee": GUARANTEES[self.privacy_unit],
            "privacy_unit": self.privacy_unit,
            "counted": "distinct users holding each released item, each user counted on at "
                       "most max_items_per_user released items (sampled uniformly)",
        }
        if self.auto_plan is None:
            assert self.calibration is not None  # a fixed Δ0 is calibrated when built
            report.update(self.calibration.to_dict())
        else:
            # The chosen Δ0 is a DP output, known once the pipeline has run
            # (chosen_max_items_per_user); everything here is parameters.
            report.update({
                "budget": self.budget.to_dict(),
                "composition": "sequential: the histogram of users' numbers of released "
                               "items, then the counts at the chosen max_items_per_user "
                               "(epsilon or rho add)",
                "max_items_per_user": self.auto_plan.to_dict(),
                "counts_by_candidate": {str(c): k.to_dict() for c, k in
                                        self.calibrations_by_candidate.items()}})
        report["seeded"] = self.seed is not None
        if self.seed is not None:
            report["seed"] = self.seed
            report["seeded_note"] = SEEDED_NOTE
        return report

    def expand(self, elements):
        # Bounding is global (DESIGN §4.7): both inputs must be in the global window.
        require_global_window(elements, "CountReleased (its users' items)")
        require_global_window(self.released, "CountReleased (its released items)")
        elements = read_fields(elements, self.fields, "CountReleased")
        # Released items as plain str/bytes/tuples of str (numpy.str_ and the
        # like cannot be encoded deterministically as keys), of the kind counted.
        ngrams = self.ngrams
        released = self.released | "CanonicalReleased" >> beam.Map(_released_item, ngrams)
        released_set = beam.pvalue.AsDict(
            released | "ReleasedAsKeys" >> beam.Map(lambda item: (item, None)))
        if ngrams:
            user_counts = (elements
                           | "ValidatePairs" >> beam.Map(check_ngram_pair)
                           | "DedupePerUser" >> WholeItemCountsPerUser())
        else:
            user_counts = elements | "DedupePerUser" >> ItemCountsPerUser(
                occurrences=False, privacy_unit=self.privacy_unit, seed=self.seed)
        user_released = user_counts | "KeepReleased" >> beam.ParDo(_KeepReleasedFn(),
                                                                   released_set)
        if self.auto_plan is None:
            user_items = user_released | "SampleItemsPerUser" >> SampleEachUser(
                self.calibration.max_items_per_user, self.seed, salt="counts")
            noises, chosen = (self.calibration.noise,), ()
        else:
            user_items, chosen = self._sample_at_chosen(elements, released, released_set,
                                                        user_released)
            noises = tuple(k.noise for k in self.calibrations_by_candidate.values())
            chosen = (beam.pvalue.AsSingleton(chosen),)
        ones = user_items | "OnePerUserItem" >> beam.FlatMap(
            lambda record: ((item, 1) for item in record[1]))
        zeros = released | "ZeroPerReleased" >> beam.Map(lambda item: (item, 0))
        return ((ones, zeros)
                | "FlattenCounts" >> beam.Flatten()
                | "CountPerItem" >> beam.CombinePerKey(sum)
                | "AddDiscreteNoise" >> beam.ParDo(
                    _AddDiscreteNoiseFn(noises, self.seed), *chosen)
                # The noisy counts are drawn once, whoever reads them (invariant 11).
                | "Checkpoint" >> beam.Reshuffle())

    def _sample_at_chosen(self, elements, released, released_set, user_released):
        """"auto": (every user's sample at the chosen Δ0, the chosen index).

        First each user's number of released items is binned and Δ0 chosen
        from the noisy bins (checkpointed); then every user is sampled at the
        chosen Δ0 (a side input).
        """
        if self.privacy_unit == "element":
            # The elements, not user_released: that carries the random element
            # ids, which must not be read twice (DESIGN §4, invariant 11).
            sizes = elements | "ReleasedPerUser" >> beam.Map(_released_size, released_set)
        else:
            sizes = user_released | "ReleasedPerUser" >> beam.Map(lambda r: len(r[1]))
        sizes = sizes | "HoldersOfReleased" >> beam.Filter(lambda n: n > 0)
        chosen = sizes | "ChooseMaxItemsPerUser" >> _ChooseCountsMaxItems(
            self.auto_plan, released, self.seed)
        candidates = self.auto_plan.candidates
        self.chosen_max_items_per_user = chosen | "ChosenMaxItemsPerUser" >> beam.Map(
            lambda index: candidates[index])
        sampled = user_released | "SampleItemsPerUser" >> beam.ParDo(
            _SampleAtChosenFn(candidates, self.seed, "counts"),
            beam.pvalue.AsSingleton(chosen))
        return sampled, chosen
