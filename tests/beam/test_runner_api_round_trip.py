"""Every public transform survives Beam's runner-API round trip, and releases the same.

``TestPipeline.run(test_runner_api=True)`` translates the pipeline to its
runner-API proto and rebuilds a Python pipeline from it before running it, as
every TestPipeline of the suite does (plain pipelines and the jobs skip it on the
FnApiRunner; Dataflow and the portable runners do it). Here one pipeline holding every
public transform (each mechanism at a fixed Δ0, SIPS with ``auto``, the counts,
DPNE and the n-gram baselines), seeded, run once rebuilt from its proto (the round
trip made explicitly, with the calls Pipeline.run makes, so that it cannot be skipped) and once
as built, must give the same outputs.
"""

import os
import pickle

import apache_beam as beam
import pytest
from tests.support.runner import TestPipeline

from beam_dpsu import (MECHANISMS, Budget, BoundContributions, CountReleased, ExtractNgrams,
                       SelectItems, mechanism_from_name)
from beam_dpsu.ngram_baselines import BASELINES, NgramsByDPSU

pytestmark = pytest.mark.pipeline

SEED = 11
PAIRS = ([(f"u{u}", "common") for u in range(60)]
         + [(f"u{u}", f"w{u % 4}") for u in range(60)]
         + [(f"u{u}", f"rare{u}") for u in range(60)])
DOCUMENTS = [(f"u{u}", ["the", "cat", "sat", f"w{u % 3}"]) for u in range(60)]
BUDGET = Budget(20.0, 1e-5)  # (ε, δ): every mechanism takes one (truncated geometric only it)


class _WriteList(beam.DoFn):
    def __init__(self, path):
        self._path = path

    def process(self, elements):
        with open(self._path, "wb") as f:
            pickle.dump(sorted(map(repr, elements)), f)


def _run(folder, round_trip: bool) -> dict:
    p = TestPipeline()
    pairs = p | "Pairs" >> beam.Create(PAIRS)
    documents = p | "Documents" >> beam.Create(DOCUMENTS)
    outputs = {name: pairs | f"Select {name}" >> SelectItems(
                   mechanism_from_name(name, max_items_per_user=3), BUDGET, seed=SEED)
               for name in sorted(MECHANISMS)}
    outputs["sips auto"] = pairs | "Select sips auto" >> SelectItems(
        mechanism_from_name("sips", max_items_per_user="auto"), BUDGET, seed=SEED)
    outputs["counts"] = pairs | "Counts" >> CountReleased(
        outputs["weighted-gaussian"], BUDGET, max_items_per_user=3, seed=SEED)
    outputs["bounded"] = pairs | "Bound" >> BoundContributions(2, seed=SEED)
    outputs["dpne"] = documents | "DPNE" >> ExtractNgrams(3, BUDGET, max_items_per_user=4,
                                                          seed=SEED)
    for variant in BASELINES:
        outputs[variant] = documents | f"Baseline {variant}" >> NgramsByDPSU(
            variant, 3, BUDGET, max_items_per_user=4, n=2 if variant == "dpsu-single" else None,
            seed=SEED)
    paths = {}
    for name, pcoll in outputs.items():
        paths[name] = os.path.join(folder, f"{len(paths)}.pickle")
        _ = (pcoll | f"ToList {name}" >> beam.combiners.ToList()
             | f"Keep {name}" >> beam.ParDo(_WriteList(paths[name])))
    if round_trip:
        # What run(test_runner_api=True) does, done here so that it cannot be skipped: the
        # pipeline that runs is the one rebuilt from the proto.
        p = beam.Pipeline.from_runner_api(p.to_runner_api(use_fake_coders=True), p.runner,
                                          p.options)
    p.run(test_runner_api=False).wait_until_finish()
    out = {}
    for name, path in paths.items():
        with open(path, "rb") as f:
            out[name] = pickle.load(f)
    return out


@pytest.mark.filterwarnings("ignore:.*seed")
def test_every_public_transform_releases_the_same_after_the_runner_api_round_trip(tmp_path):
    for folder in ("rebuilt", "direct"):
        os.makedirs(tmp_path / folder)
    rebuilt = _run(str(tmp_path / "rebuilt"), round_trip=True)
    direct = _run(str(tmp_path / "direct"), round_trip=False)
    assert rebuilt == direct
    # Each output holds something: a large budget releases the common items.
    assert all(direct.values()), [name for name, out in direct.items() if not out]
    assert "'common'" in direct["weighted-gaussian"]
