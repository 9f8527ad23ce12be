"""Findings of a new-user trial, through the public API (``import beam_dpsu``).

Each test states the expected behaviour and is marked ``xfail(strict=True)``
while the defect is there: the fix must remove the marker.
"""

import os
import re

import apache_beam as beam
import pytest
from tests.support.runner import TestPipeline

import beam_dpsu

pytestmark = pytest.mark.pipeline

# An item no step label or message template contains, so that an error echoing
# it is caught (the trial used "cat", which words such as "indicate" contain).
ITEM = "okapi"


def _run_mixed_types(tmp_path):
    """50 users hold the str item, 50 others the bytes item with the same text; seeded,
    with a budget large enough that both clear the threshold if they are two items."""
    records = ([(f"s{i}", ITEM) for i in range(50)]
               + [(f"b{i}", ITEM.encode()) for i in range(50)])
    prefix = str(tmp_path / "items")
    with TestPipeline() as p:
        released = (p | beam.Create(records)
                    | beam_dpsu.SelectItems(beam_dpsu.WeightedGaussian(max_items_per_user=1),
                                            beam_dpsu.Budget(10, 1e-5), seed=1))
        _ = released | beam_dpsu.WriteReleased(prefix)
    return prefix


def test_mixed_str_and_bytes_items_are_refused(tmp_path):
    # Today: both are released, the items file holds the line twice and
    # read_released gives [ITEM, ITEM]. Expected: the mixed input is refused.
    with pytest.raises((beam_dpsu.InvalidRecordError, ValueError)) as info:
        _run_mixed_types(tmp_path)
    message = str(info.value).split("[while running")[0]
    assert re.search(r"\bstr\b", message) and re.search(r"\bbytes\b", message), message
    assert ITEM not in message  # names the problem, never the item
    assert not any(name.startswith("items") for name in os.listdir(tmp_path))


def test_dp_equivalents_state_the_requested_epsilon_exactly():
    # Once 1.0000000000002285 at δ = 1e-5 for an (ε = 1, δ = 1e-5) budget; the
    # job copies this report into report.json (and the trial saw 1.0000000000000149).
    select = beam_dpsu.SelectItems(beam_dpsu.WeightedGaussian(max_items_per_user=5),
                                   beam_dpsu.Budget(1, 1e-5))
    at_requested = [e for e in select.report["dp_equivalents"] if e["delta"] == 1e-5]
    assert at_requested and at_requested[0]["epsilon"] == 1.0, select.report["dp_equivalents"]


def test_dp_equivalents_of_ngrams_state_the_requested_epsilon_exactly():
    extract = beam_dpsu.ExtractNgrams(3, beam_dpsu.Budget(1, 1e-5), max_items_per_user=5)
    at_requested = [e for e in extract.report["dp_equivalents"] if e["delta"] == 1e-5]
    assert at_requested and at_requested[0]["epsilon"] == 1.0, extract.report["dp_equivalents"]


def test_the_library_splits_selection_and_counts_as_the_job_does():
    # Once basic by default (the docs' SIPS + CountReleased pipeline released 30 items
    # where the job, splitting tightly, released 40-44).
    from types import SimpleNamespace

    from pipelines.settings import budget_parts_from_args
    total, mechanism = beam_dpsu.Budget(1.0, 1e-5), beam_dpsu.SIPS(max_items_per_user=20)
    args = SimpleNamespace(with_counts=True, counts_share=None, counts_max_items_per_user=None)
    job = budget_parts_from_args(args, total, mechanism, 20)
    library = beam_dpsu.split_selection_and_counts(total, selection_mechanism=mechanism,
                                                   counts_max_items_per_user=20)
    assert library == job and library.scale > 1.0
