"""max_items_per_user="auto" runs ONE selection that reads the chosen Δ0
(beam_dpsu.beam.max_items_choice.chosen).

Every candidate is calibrated when ``SelectItems`` is built; when the pipeline
runs, each step whose parameter depends on Δ0 (the sample, the weights'
threshold, a policy's cutoff, the keep probabilities) reads the chosen
candidate's value from the choice, a side input. So the graph does not grow
with the number of candidates, and a seeded run whose choice is c releases
exactly what the fixed-Δ0 selection at c (on the same records, with the
selection's part of the budget) releases.
"""

import random

import apache_beam as beam
import pytest
from apache_beam.pipeline import PipelineVisitor

import beam_dpsu
import beam_dpsu.beam.max_items_choice.selection as auto_selection
from beam_dpsu.core import max_items_choice
from beam_dpsu.core.mechanisms import (SIPS, CountGaussian, GreedyWithoutSampling,
                                       PolicyGaussian, PolicyLaplace, TruncatedGeometric,
                                       WeightedGaussian, WeightedLaplace)
from tests.support.one_pipeline import run_cases

pytestmark = pytest.mark.pipeline

BUDGET = beam_dpsu.Budget(2.0, 1e-5)
MECHANISMS = [WeightedGaussian, WeightedLaplace, CountGaussian, TruncatedGeometric,
              PolicyGaussian, PolicyLaplace, GreedyWithoutSampling, SIPS]


class _LeafCount(PipelineVisitor):
    def __init__(self):
        self.leaves = 0

    def visit_transform(self, applied):
        self.leaves += 1


def _steps(mechanism_config) -> int:
    """The primitive steps of a pipeline reading pairs into one SelectItems."""
    p = beam.Pipeline()
    _ = p | beam.Create([("u", "cat")]) | beam_dpsu.SelectItems(mechanism_config, BUDGET)
    count = _LeafCount()
    p.visit(count)
    return count.leaves


@pytest.mark.parametrize("mechanism", MECHANISMS, ids=lambda m: m.__name__)
def test_auto_builds_one_selection_whatever_the_number_of_candidates(mechanism):
    # Before, auto built one SelectItems per candidate: SIPS's default job held
    # 365 primitive steps against 39 at a fixed Δ0, all built and scheduled.
    fixed = _steps(mechanism(max_items_per_user=10))
    four = _steps(mechanism(max_items_per_user=max_items_choice.AutoMaxItems(
        candidates=(1, 2, 5, 10))))
    ten = _steps(mechanism(max_items_per_user="auto"))
    assert four == ten, (four, ten)  # no step per candidate
    # The choice adds its own steps (pack, bin, noise, checkpoint, wait, unpack)
    # and nothing that grows with the selection.
    assert ten - fixed <= 22, (fixed, ten)


# 1,500 users of a Zipf-like vocabulary whose items straddle every candidate's
# threshold, so that the releases at different Δ0 differ.
_rng = random.Random(3)
USERS = [sorted({f"w{int(_rng.paretovariate(0.8))}" for _ in range(_rng.randint(1, 30))})
         for _ in range(1500)]


CHOICE_CANDIDATES = (1, 2, 20)


def _forced_selects(mechanism):
    """The auto selection and the fixed-Δ0 selections at 20 and 1 of one mechanism (same
    records, the selection's part of the budget, same seed), by tag."""
    auto = max_items_choice.AutoMaxItems(candidates=CHOICE_CANDIDATES)
    plan = max_items_choice.plan_auto(mechanism(max_items_per_user=auto), BUDGET, 1)
    return {
        "auto": beam_dpsu.SelectItems(mechanism(max_items_per_user=auto), BUDGET,
                                      privacy_unit="element", seed=5),
        **{f"fixed-{c}": beam_dpsu.SelectItems(mechanism(max_items_per_user=c),
                                                plan.selection_budget,
                                                privacy_unit="element", seed=5)
           for c in (1, 20)}}


@pytest.fixture(scope="module")
def forced(tmp_path_factory):
    """{mechanism name: {tag: released items, "chosen": the choice}}: every mechanism's
    auto selection, its choice forced to its last candidate (Δ0 = 20), next to the
    fixed-Δ0 selections at 20 and 1, in ONE pipeline on one input."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(auto_selection, "_noisy_choice", lambda counts, plan, seed: 2)

        def build(p):
            users = p | beam.Create(USERS)
            cases = {}
            for mechanism in MECHANISMS:
                name = mechanism.__name__
                selects = _forced_selects(mechanism)
                cases[name] = {tag: users | f"{tag} {name}" >> select
                               for tag, select in selects.items()}
                cases[name]["chosen"] = selects["auto"].chosen_max_items_per_user
            return cases

        return run_cases(tmp_path_factory.mktemp("forced"), build)


def _as_fixed_at_its_choice(released):
    joined = [(item, {tag for tag in ("auto", "fixed-20", "fixed-1") if item in released[tag]})
              for item in set().union(*(released[tag] for tag in ("auto", "fixed-20",
                                                                   "fixed-1")))]
    for item, tags in joined:
        assert ("auto" in tags) == ("fixed-20" in tags), (item, tags)
    # Δ0 = 1 (the first candidate) releases another set: had the selection read
    # the first candidate's values anywhere, the sets could differ.
    assert any(("fixed-1" in tags) != ("fixed-20" in tags) for _, tags in joined)


@pytest.mark.parametrize("mechanism", MECHANISMS, ids=lambda m: m.__name__)
def test_a_forced_choice_releases_what_the_fixed_selection_at_it_releases(
        mechanism, forced):
    # An auto selection whose choice is forced to its last candidate (Δ0 = 20),
    # next to the fixed-Δ0 selections at 20 and 1 (same records, the selection's
    # part of the budget, same seed), in one pipeline: the auto release must be
    # exactly the fixed one's at 20, so the one selection reads that candidate's
    # Δ0 and calibration everywhere.
    auto = max_items_choice.AutoMaxItems(candidates=CHOICE_CANDIDATES)
    plan = max_items_choice.plan_auto(mechanism(max_items_per_user=auto), BUDGET, 1)
    assert plan.candidates == (1, 2, 20)
    released = forced[mechanism.__name__]
    _as_fixed_at_its_choice(released)
    assert released["chosen"] == [20]
