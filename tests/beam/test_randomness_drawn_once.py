"""A random draw is seen once (docs/privacy.md, invariant 11).

A runner may retry a bundle or (Spark) recompute a lost partition, drawing
again. A random decision with two consumers — a SIPS round's release feeding
the output and the next round, a DPNE level's release feeding the output and
the next level, a selection's release feeding the written items and
``CountReleased`` — must be checkpointed with ``beam.Reshuffle`` before it fans
out, or the consumers can see two different draws.

These tests build every public transform (every mechanism in both privacy
units, SIPS with both removals, DPNE in its variants, the DPSU n-gram
baselines, CountReleased, and the two jobs' pipelines) on a small input, read
each output twice as a user would (write it, count it), and walk the
pipeline graph with ``beam_dpsu.beam.randomness.random_fanouts``: every collection
downstream of a step marked ``DRAWS_RANDOMNESS`` that two steps read must have
passed a Reshuffle. Nothing runs; only the graph is built.
"""

import inspect
import re

import apache_beam as beam
import pytest

import beam_dpsu
from beam_dpsu import (Budget, CountReleased, ExtractNgrams, NoisyThreshold, SelectItems,
                       ZCDPBudget)
from beam_dpsu.beam import randomness
from beam_dpsu.core import mechanisms
from beam_dpsu.core.calibration import KeepProbabilityCalibration
from beam_dpsu.ngram_baselines import NgramsByDPSU
from beam_dpsu.beam.randomness import draws_randomness, random_fanouts
from beam_dpsu.beam.noisy_threshold import KeepWithProbability

pytestmark = pytest.mark.pipeline

BUDGET = ZCDPBudget(0.5, 1e-5)
PAIRS = [("u1", "a"), ("u1", "b"), ("u2", "a"), ("u3", "c")]
ELEMENTS = [["a", "b"], ["a"], ["c", "a"]]
DOCUMENTS = [("u1", ("a", "b", "c")), ("u2", ("a", "b")), ("u3", ("b", "c", "a"))]


def read_twice(released, label):
    """What a user does with a release: write it and use it again (count it)."""
    _ = released | f"{label}/Write" >> beam.Map(lambda x: x)
    _ = released | f"{label}/UseAgain" >> beam.combiners.Count.Globally()


def mechanism(name):
    params = {"max_items_per_user": 2}
    if name == "sips":
        params["rounds"] = 3
    return mechanisms.mechanism_from_name(name, **params)


CASES = [(name, unit, removal)
         for name in sorted(mechanisms.MECHANISMS)
         for unit in ("user_id", "element")
         for removal in (("side_input", "join") if name == "sips" else (None,))]


@pytest.mark.parametrize("name,unit,removal", CASES)
def test_every_selection_checkpoints_its_draws(name, unit, removal):
    m = mechanism(name)
    if removal is not None:
        m = mechanisms.SIPS(max_items_per_user=2, rounds=3, removal=removal)
    p = beam.Pipeline()
    data = p | beam.Create(PAIRS if unit == "user_id" else ELEMENTS)
    budget = Budget(1.0, 1e-5) if name == "truncated-geometric" else BUDGET
    select = SelectItems(m, budget, privacy_unit=unit, non_private_stats=True)
    released = data | "Select" >> select
    read_twice(released, "Released")
    for stage, pcoll in select.non_private_released_by_stage.items():
        read_twice(pcoll, stage)
    assert random_fanouts(p) == []


@pytest.mark.parametrize("kwargs", [
    {}, {"level1": "policy-gaussian"}, {"non_private_stats": True}, {"pruning": "single"},
    {"privacy_unit": "element"}, {"privacy_unit": "element", "level1": "policy-gaussian"},
    {"privacy_unit": "element", "non_private_stats": True},
    # max_items_per_user="auto": the size histogram's choice routes level 1 and sets σ_k.
    {"max_items_per_user": "auto", "non_private_stats": True},
    {"max_items_per_user": "auto", "level1": "policy-gaussian"},
    {"max_items_per_user": "auto", "privacy_unit": "element", "level1": "policy-gaussian"},
    {"max_items_per_user": "auto", "privacy_unit": "element"}])
def test_ngram_extraction_checkpoints_its_draws(kwargs):
    p = beam.Pipeline()
    element = kwargs.get("privacy_unit") == "element"
    docs = p | beam.Create([list(d[1]) for d in DOCUMENTS] if element else DOCUMENTS)
    extract = ExtractNgrams(3, BUDGET, **{"max_items_per_user": 2, **kwargs})
    read_twice(docs | "Extract" >> extract, "Released")
    for k, level in enumerate(extract.released_per_level):
        read_twice(level, f"Level{k}")
    read_twice(extract.level_stats, "Stats")
    if extract.non_private_level_stats is not None:
        read_twice(extract.non_private_level_stats, "RawStats")
    if extract.chosen_max_items_per_user is not None:
        read_twice(extract.chosen_max_items_per_user, "Chosen")
    assert random_fanouts(p) == []


@pytest.mark.parametrize("variant", ["dpsu-all", "dpsu-even", "dpsu-single"])
def test_ngram_baselines_checkpoint_their_draws(variant):
    p = beam.Pipeline()
    docs = p | beam.Create(DOCUMENTS)
    released = docs | NgramsByDPSU(variant, 2, BUDGET, max_items_per_user=2,
                                   n=2 if variant == "dpsu-single" else None)
    read_twice(released, "Released")
    assert random_fanouts(p) == []


@pytest.mark.parametrize("unit,counts_max_items", [
    ("user_id", 2), ("element", 2), ("user_id", "auto"), ("element", "auto")])
def test_selection_then_counts_checkpoint_their_draws(unit, counts_max_items):
    # The jobs' shape: one release written and counted, the counts read twice
    # (and with "auto", the counts' chosen Δ0 too).
    p = beam.Pipeline()
    data = p | beam.Create(PAIRS if unit == "user_id" else ELEMENTS)
    parts = beam_dpsu.split_selection_and_counts(Budget(1.0, 1e-5), 0.25)
    released = data | "Select" >> SelectItems(mechanisms.WeightedGaussian(2), parts.selection,
                                              privacy_unit=unit)
    _ = released | "Write" >> beam.Map(lambda x: x)
    counter = CountReleased(released, parts.counts, max_items_per_user=counts_max_items,
                            privacy_unit=unit)
    counts = data | "Count" >> counter
    read_twice(counts, "Counts")
    if counts_max_items == "auto":
        read_twice(counter.chosen_max_items_per_user, "Chosen")
    assert random_fanouts(p) == []


def test_public_release_steps_checkpoint_their_draws():
    p = beam.Pipeline()
    histogram = p | beam.Create([("a", 3.0), ("b", 1.0)])
    calibration = mechanisms.WeightedGaussian(2).calibrate(BUDGET)
    read_twice(histogram | "Noisy" >> NoisyThreshold(calibration), "Noisy")
    keep = mechanisms.TruncatedGeometric(2).calibrate(Budget(1.0, 1e-5))
    assert isinstance(keep, KeepProbabilityCalibration)
    read_twice(histogram | "Keep" >> KeepWithProbability(keep), "Keep")
    assert random_fanouts(p) == []


# --- the jobs' own pipelines -------------------------------------------------------

def job_pipeline(module, argv):
    job = module.prepare(argv)
    p = beam.Pipeline()
    if module.__name__.endswith("vocabulary"):
        module.build_pipeline(p, job.args, job.mechanism, job.budget)
    else:
        module.build_pipeline(p, job.args, job.transform)
    return p


@pytest.mark.parametrize("argv", [
    ["--mechanism", "weighted-gaussian", "--user-field", "user", "--with-counts"],
    ["--mechanism", "sips", "--user-field", "user", "--with-counts", "--non-private-stats"],
    ["--mechanism", "gw", "--user-field", "@row"],
    ["--mechanism", "policy-gaussian", "--user-field", "@row", "--with-counts"],
    ["--mechanism", "sips", "--user-field", "user", "--with-counts", "--non-private-stats",
     "--max-items-per-user", "auto", "--counts-max-items-per-user", "5"],
    ["--mechanism", "weighted-gaussian", "--user-field", "user", "--with-counts",
     "--max-items-per-user", "auto"],
    ["--mechanism", "weighted-gaussian", "--user-field", "@row", "--with-counts",
     "--counts-max-items-per-user", "auto"],
])
def test_vocabulary_job_checkpoints_its_draws(tmp_path, argv):
    from pipelines import vocabulary
    bound = [] if "--max-items-per-user" in argv else ["--max-items-per-user", "5"]
    p = job_pipeline(vocabulary, [
        "--input", "examples/imdb_2k.csv.gz", "--text-field", "review",
        "--rho", "0.1", "--delta", "1e-5", *bound,
        "--output", str(tmp_path / "out"), *argv])
    assert random_fanouts(p) == []


@pytest.mark.parametrize("argv", [
    ["--input", "examples/msnbc_1k.seq", "--non-private-stats"],
    ["--input", "examples/msnbc_1k.seq", "--method", "dpsu-even"],
    ["--input", "examples/imdb_2k.csv.gz", "--user-field", "user", "--text-field", "review",
     "--with-counts"],
    ["--input", "examples/msnbc_1k.seq", "--with-counts", "--counts-max-items-per-user", "auto"],
])
def test_ngrams_job_checkpoints_its_draws(tmp_path, argv):
    from pipelines import ngrams
    p = job_pipeline(ngrams, [*argv, "--max-n", "3", "--max-items-per-user", "5",
                              "--rho", "1", "--delta", "1e-6", "--output", str(tmp_path / "out")])
    assert random_fanouts(p) == []


# --- the checker has teeth ---------------------------------------------------------

@draws_randomness
def _noisy(x):
    return x


def test_a_random_step_read_twice_is_found_and_a_reshuffle_clears_it():
    p = beam.Pipeline()
    drawn = p | beam.Create([1, 2]) | "Draw" >> beam.Map(_noisy) | "After" >> beam.Map(str)
    _ = drawn | "A" >> beam.Map(len)
    _ = p | "Other" >> beam.Create([0]) | "B" >> beam.Map(
        lambda _, side: side, beam.pvalue.AsList(drawn))  # a side input is a read too
    (finding,) = random_fanouts(p)
    assert finding.startswith("After (random from Draw) is read by 2 steps") and "B" in finding

    p = beam.Pipeline()
    drawn = (p | beam.Create([1, 2]) | "Draw" >> beam.Map(_noisy)
             | "Checkpoint" >> beam.Reshuffle() | "After" >> beam.Map(str))
    _ = drawn | "A" >> beam.Map(len)
    _ = drawn | "B" >> beam.Map(len)
    assert random_fanouts(p) == []


def test_the_library_before_its_checkpoints_would_fail(monkeypatch):
    # Today's pipelines without their Reshuffles: the checker finds the SIPS
    # round's release read by the output and by the next round's removal.
    monkeypatch.setattr(beam, "Reshuffle", lambda *a, **k: beam.Map(lambda x: x))
    p = beam.Pipeline()
    data = p | beam.Create(PAIRS)
    read_twice(data | SelectItems(mechanisms.SIPS(2, rounds=2), BUDGET), "Released")
    findings = random_fanouts(p)
    assert any("Round0" in f and "RemoveReleased" in f for f in findings), findings


def test_every_dofn_that_draws_is_marked():
    # A DoFn of the library that holds a generator, samples or reads OS
    # randomness must carry the marker, or the graph test would not see it.
    drawing = re.compile(r"\brng\b|_rng\b|random_id128|os_random|UserSampler|CandidateSamplers|"
                         r"_sample\b|"
                         r"token_bytes|urandom")
    modules = [m for name, m in vars(beam_dpsu).items() if inspect.ismodule(m)]
    unmarked = []
    for module in modules:
        for name, cls in vars(module).items():
            if (inspect.isclass(cls) and issubclass(cls, beam.DoFn)
                    and cls.__module__ == module.__name__
                    and drawing.search(inspect.getsource(cls))
                    and not getattr(cls, "DRAWS_RANDOMNESS", False)):
                unmarked.append(f"{module.__name__}.{name}")
    assert unmarked == []
    assert randomness.step_draws_randomness(beam.Map(_noisy))
    assert not randomness.step_draws_randomness(beam.Map(str))
