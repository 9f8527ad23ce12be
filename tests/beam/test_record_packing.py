"""``PackRecordsFn``: users' records packed into blocks, for SIPS's rounds and for the
records that wait for the choice of Δ0 (the packing itself is tested with the rounds
and the choice, in test_packed_sips_rounds.py and test_auto_beam.py)."""

import pytest

from beam_dpsu.beam import bounding
from beam_dpsu.beam.record_packing import PackRecordsFn
from beam_dpsu.beam.windowing import in_global_window
from beam_dpsu.core import record_blocks
from beam_dpsu.core.tokenizer import tokenize


def test_a_tokens_element_is_checked_once_and_every_block_is_stamped_alike(monkeypatch):
    # SIPS's packing checks a Tokens element's items for plain str once (in
    # element_distinct_items, not again before packing), and sends every block, full
    # or last, stamped alike: the timestamp of the element that filled a block would
    # tell when that user came.
    checked = []
    check = bounding._plain_tokens
    monkeypatch.setattr(bounding, "_plain_tokens",
                        lambda distinct: checked.append(1) or check(distinct))
    monkeypatch.setattr(record_blocks, "IDS_PER_BLOCK", 3)
    records = [tokenize("a b c"), tokenize("d e"), tokenize("f")]
    for fn in (PackRecordsFn(True), PackRecordsFn(True, key_seed=3),
               PackRecordsFn(True, edges=(1, 2, 5))):
        checked.clear()
        fn.start_bundle()
        sent = [out for record in records for out in fn.process(record) or ()]
        sent += list(fn.finish_bundle() or ())
        assert len(checked) == len(records)
        assert len(sent) == 2  # one block full after the first user, one at the end
        reference = in_global_window(None)
        assert all((out.timestamp, out.windows) == (reference.timestamp, reference.windows)
                   for out in sent)


def test_keyed_blocks_hold_no_occurrences():
    with pytest.raises(ValueError, match="no occurrences"):
        PackRecordsFn(True, occurrences=True, key_seed=3)
