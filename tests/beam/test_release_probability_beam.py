"""Statistical tests through Beam: what a lone user or an unseen k-gram risks.

``test_release_probability.py`` checks the noise-and-threshold core; these
tests run the whole transforms (bounding, histogram, sequential order, SIPS
rounds, DPNE levels) on the DirectRunner with OS randomness, so a bug in the
data movement (a user bounded twice, a weight doubled, a round reusing noise)
shows up too.

* ``SelectItems``: N users each hold items nobody else holds. Their items do
  not interact, so the users are N independent trials of the worst case of the
  proofs; the number of users with any item released is Binomial(N, p) with
  p ≤ the δ the mechanism gives its thresholds.
* ``ExtractNgrams``: lone users (per user id or per element) risk their
  n-grams with probability at most level 1's threshold δ; and, with users
  holding single tokens (every unigram certainly released) and a few
  two-token documents, every valid bigram nobody holds is released
  independently with probability Φ(−ρ_2/σ_2) (dpne App. A).

False-failure rate: each one-sided check uses the 1 − 1e-8 quantile, the
two-sided DPNE check 1e-8 in each tail; the 16 checks below fail by chance
with probability < 2e-7 in all (15 one-sided and one two-sided: 1.7e-7).
"""

import apache_beam as beam
import pytest
from scipy import special, stats

from beam_dpsu import SelectItems

from beam_dpsu.core import mechanisms
from beam_dpsu.core.budgets import Budget
from beam_dpsu.extract_ngrams import ExtractNgrams
from tests.support.one_pipeline import run_cases

pytestmark = pytest.mark.pipeline

QUANTILE = 1 - 1e-8
N_USERS = 2_000
MAX_ITEMS = 4
BUDGET = Budget(1.0, 0.2)  # δ large enough to measure a rate

MECHANISMS = [
    mechanisms.CountLaplace(MAX_ITEMS), mechanisms.CountGaussian(MAX_ITEMS),
    mechanisms.WeightedLaplace(MAX_ITEMS), mechanisms.WeightedGaussian(MAX_ITEMS),
    mechanisms.SIPS(MAX_ITEMS, rounds=3),
    mechanisms.PolicyLaplace(MAX_ITEMS), mechanisms.PolicyGaussian(MAX_ITEMS),
    mechanisms.GreedyWithoutSampling(), mechanisms.TruncatedGeometric(MAX_ITEMS),
]


def lone_users():
    """N users, user u holding 1..Δ0+1 items only it holds (the last size is sampled down)."""
    return [(f"user{u}", f"item{u}.{j}")
            for u in range(N_USERS) for j in range(1 + u % (MAX_ITEMS + 1))]


def threshold_delta(select) -> float:
    """The δ a mechanism spends on its thresholds (for SIPS, summed over its rounds)."""
    calibration = select.calibration
    if hasattr(calibration, "rounds"):
        return sum(c.threshold_delta for c in calibration.rounds)
    return calibration.threshold_delta


# privacy_unit="element" (one person per element, nothing merged): the
# parallel, SIPS and sequential paths.
ELEMENT_MECHANISMS = [mechanisms.WeightedGaussian(MAX_ITEMS), mechanisms.SIPS(MAX_ITEMS, rounds=3),
                      mechanisms.PolicyGaussian(MAX_ITEMS), mechanisms.GreedyWithoutSampling()]


def lone_elements():
    """The lone users, each one element (a list of its items)."""
    by_user = {}
    for user, item in lone_users():
        by_user.setdefault(user, []).append(item)
    return list(by_user.values())


LONE_CASES = ([(m, "user_id") for m in MECHANISMS]
              + [(m, "element") for m in ELEMENT_MECHANISMS])


def lone_documents(privacy_unit):
    """Each user's one document holds tokens nobody else holds (1..Δ1+1 of them)."""
    docs = [[f"user{u}.{j}" for j in range(1 + u % (MAX_ITEMS + 1))] for u in range(N_USERS)]
    return docs if privacy_unit == "element" else [(f"u{u}", tuple(d))
                                                    for u, d in enumerate(docs)]


def ngram_extract(privacy_unit):
    return ExtractNgrams(2, BUDGET, max_items_per_user=MAX_ITEMS, privacy_unit=privacy_unit)


def _owners_released(released, label):
    """The number of distinct users (the prefix before '.') some released item names."""
    return (released
            | f"Owners {label}" >> beam.FlatMap(
                lambda item: {t.split(".")[0] for t in (item if isinstance(item, tuple)
                                                         else (item,))})
            | f"Distinct {label}" >> beam.Distinct()
            | f"Count {label}" >> beam.combiners.Count.Globally())


@pytest.fixture(scope="module")
def users_with_a_release(tmp_path_factory):
    """{case: [the number of users with some item (n-gram) released]}: every
    mechanism's and both n-gram cases in ONE pipeline (a TestPipeline each cost
    seconds), on shared inputs; and "unseen kgrams", the counts of the spurious-rate
    test (``_unseen_kgrams``) with its ExtractNgrams."""
    def build(p):
        data = {"user_id": p | "Users" >> beam.Create(lone_users()),
                "element": p | "Elements" >> beam.Create(lone_elements())}
        cases = {}
        for mechanism, privacy_unit in LONE_CASES:
            label = f"{mechanism.name} {privacy_unit}"
            released = data[privacy_unit] | f"Select {label}" >> SelectItems(
                mechanism, BUDGET, privacy_unit=privacy_unit)
            cases[label] = _owners_released(released, label)
        for privacy_unit in ("user_id", "element"):
            label = f"ngrams {privacy_unit}"
            released = (p | f"Create {label}" >> beam.Create(lone_documents(privacy_unit))
                        | f"Extract {label}" >> ngram_extract(privacy_unit))
            cases[label] = _owners_released(released, label)
        cases["unseen kgrams"] = _unseen_kgrams(p, extracts)
        return cases

    extracts: dict = {}
    released = run_cases(tmp_path_factory.mktemp("lone"), build)
    released["unseen kgrams"]["extract"] = extracts["unseen kgrams"]
    return released


@pytest.mark.parametrize("mechanism, privacy_unit", LONE_CASES,
                         ids=lambda v: getattr(v, "name", v))
def test_a_lone_users_items_are_released_with_probability_at_most_delta(
        users_with_a_release, mechanism, privacy_unit):
    select = SelectItems(mechanism, BUDGET, privacy_unit=privacy_unit)
    delta = threshold_delta(select)
    assert delta <= BUDGET.delta
    bound = stats.binom.ppf(QUANTILE, N_USERS, delta)
    (count,) = users_with_a_release[f"{mechanism.name} {privacy_unit}"]
    assert count <= bound, (mechanism.name, count, bound, delta)


@pytest.mark.parametrize("privacy_unit", ["user_id", "element"])
def test_a_lone_users_ngrams_are_released_with_probability_at_most_delta(
        users_with_a_release, privacy_unit):
    # Each user's one document holds tokens nobody else holds (1..Δ1+1 of
    # them, so some are sampled down): any n-gram of it needs one of its
    # unigrams, released with probability ≤ level 1's threshold δ.
    delta = ngram_extract(privacy_unit).threshold_delta
    bound = stats.binom.ppf(QUANTILE, N_USERS, delta)
    (count,) = users_with_a_release[f"ngrams {privacy_unit}"]
    assert count <= bound, (privacy_unit, count, bound, delta)


UNSEEN_TOKENS, UNSEEN_ETA = 150, 0.9
TOKENS = [f"w{i}" for i in range(UNSEEN_TOKENS)]
# A few users hold bigrams; those are in supp H_2 and excluded from the count.
HELD = {(TOKENS[i], TOKENS[i + 1]) for i in range(0, 60, 2)}


def _unseen_kgrams(p, extracts):
    """{"unseen": [the number of unseen bigrams released], "unigrams": [the number of
    unigrams released], "level": [level 2's stats]} (one pipeline with the rest)."""
    # 40 single-token documents per token: S_1 is every token (weight 40 ≫ ρ_1).
    docs = [(f"u{t}.{j}", (tok,)) for t, tok in enumerate(TOKENS) for j in range(40)]
    docs += [(f"h{i}", g) for i, g in enumerate(sorted(HELD))]
    extract = ExtractNgrams(2, Budget(3.0, 1e-5), max_items_per_user=2, eta=UNSEEN_ETA)
    extracts["unseen kgrams"] = extract
    released = p | "Create unseen" >> beam.Create(docs) | "Extract unseen" >> extract
    return {"unseen": (released
                       | "Bigrams" >> beam.Filter(lambda g: len(g) == 2 and g not in HELD)
                       | "CountUnseen" >> beam.combiners.Count.Globally()),
            "unigrams": (released
                         | "Unigrams" >> beam.Filter(lambda g: len(g) == 1)
                         | "CountUnigrams" >> beam.combiners.Count.Globally()),
            "level": extract.level_stats}


def test_unseen_valid_kgrams_are_released_at_the_spurious_rate(users_with_a_release):
    out = users_with_a_release["unseen kgrams"]
    sigma = out["extract"].sigmas[1]
    (n_unseen,), (n_unigrams,), (level,) = out["unseen"], out["unigrams"], out["level"]
    # Unseeded: a unigram (weight ≥ 40, ρ_1 = 10, σ_1 = 2.0) is missed w.p. 1.9e-47
    # in all (150 of them).
    assert n_unigrams == UNSEEN_TOKENS
    n_valid = level["valid_kgrams"]
    assert n_valid == UNSEEN_TOKENS ** 2
    p = float(special.ndtr(-level["release_threshold"] / sigma))
    # ρ_2 = σ_2 Φ⁻¹(1 − η·|S_1|/|V_2|): p is η/|S_1| (dpne §2).
    assert p == pytest.approx(UNSEEN_ETA / UNSEEN_TOKENS, rel=1e-9)
    candidates = n_valid - len(HELD)
    low = stats.binom.ppf(1e-8, candidates, p)
    high = stats.binom.ppf(QUANTILE, candidates, p)
    assert low <= n_unseen <= high, (n_unseen, low, high)
