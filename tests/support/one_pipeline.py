"""Several cases in one TestPipeline, each case's output read back by its own test.

Every TestPipeline run costs about a second of graph building and runner start
on the DirectRunner; a parametrized test that runs one small pipeline per case
pays it per case. ``run_cases`` builds every case on its own branch of one
pipeline and returns each branch's elements, so a module-scoped fixture can run
the pipeline once and the parametrized test (one id per case, as before) asserts
on its own case's output::

    @pytest.fixture(scope="module")
    def released(tmp_path_factory):
        return run_cases(tmp_path_factory.mktemp("cases"), lambda p: {
            name: p | f"Create {name}" >> ... for name in NAMES})

    @pytest.mark.parametrize("name", NAMES)
    def test_something(released, name):
        assert ...released[name]...
"""

from __future__ import annotations

import os
import pickle
from typing import Callable

import apache_beam as beam
from tests.support.runner import TestPipeline


class _WriteList(beam.DoFn):
    """Pickles the one list it gets into ``path`` (ToList gives exactly one)."""

    def __init__(self, path: str):
        self._path = path

    def process(self, elements):
        with open(self._path, "wb") as f:
            pickle.dump(list(elements), f)


Outputs = dict  # {name: PCollection, or {part: PCollection}}


def run_cases(folder, build: Callable[[beam.Pipeline], Outputs]) -> dict:
    """Runs ``build(pipeline)`` (every case on its own branch of one TestPipeline; it may
    share inputs between cases) and returns {name: the list of that case's elements (in
    the runner's order)}; a case given as {part: PCollection} gets {part: list}.

    Labels must be unique across cases (e.g. end them with the case's name).
    """
    keys: list = []
    path = os.path.join(str(folder), "cases.pickle")
    with TestPipeline() as p:
        tagged = []
        for name, built in build(p).items():
            parts = built if isinstance(built, dict) else {None: built}
            for part, pcoll in parts.items():
                label = name if part is None else f"{name} {part}"
                index = len(keys)
                keys.append((name, part))
                tagged.append(pcoll | f"Tag {label}" >> beam.Map(
                    lambda element, i=index: (i, element)))
        # One list for every case: each case's elements tagged with its index (one Map a
        # case, then one Flatten, ToList and write, instead of a ToList and a write each).
        if tagged:
            _ = (tagged | "Cases" >> beam.Flatten() | "ToList" >> beam.combiners.ToList()
                 | "Keep" >> beam.ParDo(_WriteList(path)))
    by_case: dict = {i: [] for i in range(len(keys))}
    if tagged:
        with open(path, "rb") as f:
            for i, element in pickle.load(f):
                by_case[i].append(element)
    out: dict = {}
    for i, (name, part) in enumerate(keys):
        if part is None:
            out[name] = by_case[i]
        else:
            out.setdefault(name, {})[part] = by_case[i]
    return out
