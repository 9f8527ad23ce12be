"""Users' records packed into blocks (``beam_dpsu.core.user_blocks.record_blocks``), in Beam.

Two steps pack users: ``max_items_per_user="auto"``, whose records wait packed
until Δ0 is chosen (``beam_dpsu.beam.max_items_routing``), and SIPS, whose rounds
carry their users packed (``beam_dpsu.beam.sips``). Both use ``PackRecordsFn``.
"""

from __future__ import annotations

import apache_beam as beam
import numpy as np

from beam_dpsu.core.user_blocks import record_blocks
from beam_dpsu.core.tokenizer import Tokens
from beam_dpsu.beam.bounding import distinct_element_id, element_items, plain_str_items
from beam_dpsu.beam.output_types import opaque_output
from beam_dpsu.beam.windowing import in_global_window

__all__ = ["PackRecordsFn"]


@opaque_output
class PackRecordsFn(beam.DoFn):
    """User records → blocks of their checked items, a run of users each.

    Each record is one user's: with ``elements`` an element of
    ``privacy_unit="element"`` input, checked here (the rule of
    ``element_item_counts``: a bad element raises naming the problem, never a
    value), else a merged (user_id, {item: occurrences}) record. A user is
    added whole, then the block ends if it is full. Not
    ``beam.BatchElements``, which logs how many elements it batched (the
    number of users; docs/privacy.md, invariant 6). Every block goes out in
    the global window, stamped with its end (``in_global_window``), whether a
    full block is sent from ``process`` or the last from ``finish_bundle``.

    Args:
      elements: the records are elements of ``privacy_unit="element"`` input.
      occurrences: keep each item's occurrences (for a mechanism that reads them).
      edges: the size bins' edges: each block goes out as (users per size bin,
        block) (``RecordBlockBuilder.build``), for the choice of Δ0; None: the
        block alone.
      key_seed: a seeded run's seed: each user is keyed in its block by its id
        (a record's user id, or an element's seeded ``distinct_element_id``);
        None (unseeded): no keys, and an element draws no id.
    """

    def __init__(self, elements: bool, occurrences: bool = False, edges=None,
                 key_seed: int | None = None):
        if occurrences and key_seed is not None:
            raise ValueError("keyed blocks hold distinct items (SIPS): no occurrences")
        self._elements = elements
        self._occurrences = occurrences
        self._edges = None if edges is None else np.asarray(edges, dtype=np.int64)
        self._key_seed = key_seed
        self._builder: record_blocks.RecordBlockBuilder | None = None

    def _new_builder(self) -> record_blocks.RecordBlockBuilder:
        return record_blocks.RecordBlockBuilder(self._occurrences,
                                                keyed=self._key_seed is not None)

    def start_bundle(self):
        self._builder = self._new_builder()

    def process(self, record):
        if self._elements:
            items = element_items(record, self._occurrences)
            # a Tokens list's set has passed the plain-str check already
            plain = (type(record) is Tokens and type(items) is set) or plain_str_items(items)
            key = (None if self._key_seed is None
                   else distinct_element_id(items, self._key_seed))
        else:
            key, items = record
            plain = plain_str_items(items)
        self._builder.add(items, plain, key)
        if self._builder.full:
            yield self._flush()

    def finish_bundle(self):
        if self._builder.users:
            yield self._flush()

    def _flush(self):
        builder, self._builder = self._builder, self._new_builder()
        assert builder is not None, "start_bundle made one"
        return in_global_window(builder.packed() if self._edges is None
                                else builder.build(self._edges))
