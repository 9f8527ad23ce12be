"""Composing a release with a later aggregation: ``KeepReleased(released, key=fn)``.

A released set (``SelectItems``, ``ExtractNgrams``) is public, so restricting
another PCollection's records to it costs no budget: ``records |
KeepReleased(released, key=fn)`` keeps the records whose key is a released
item, and nothing else decides what passes (no counter, log or order that
reads the data). A later DP aggregation over the kept records then bounds and
noises them itself (e.g. PipelineDP with the released set as public
partitions, ``public_partitions_already_filtered=True``).

Where the line between the two methods lies. ``method="side_input"``
(default) broadcasts the released set to every worker, where each DoFn
instance builds one ``frozenset`` the first time it runs and keeps it for
every later bundle (the set is one value: both inputs are in the global
window): no shuffle, one hash lookup per record. Measured in CPython 3.11,
the set costs about 100 bytes per released item of 10 characters (≈ 60 for
the str, ≈ 40 for the table; +1 byte per further character), so 1 million
items take about 100 MB and 10 million about 1 GB of every worker. Use
``method="join"`` (a ``CoGroupByKey`` on the key: the records and the
released items are shuffled once, no per-worker memory bound) when the
released set may exceed about 10 % of a worker's memory, i.e. from a few
million items on common 4–8 GB workers; below that the side input is faster.
SIPS's ``removal`` draws the same line (``beam_dpsu.beam.sips``).
"""

from __future__ import annotations

from typing import Any, Callable

import beam_dpsu.beam  # noqa: F401  (first: it imports Beam quietly)
import apache_beam as beam
import numpy as np

from beam_dpsu.core import checks
from beam_dpsu.core.checks import ParameterError, a_type
from beam_dpsu.core.user_records import InvalidRecordError
from beam_dpsu.beam.windowing import require_global_window

__all__ = ["KeepReleased", "METHODS"]

METHODS = ("side_input", "join")


def _record_itself(record: Any) -> Any:
    return record


def _hashable(value: Any, what: str) -> Any:
    """``value`` if it can be a set member; an error naming its type (never its value)."""
    try:
        hash(value)
    except TypeError:
        raise InvalidRecordError(f"KeepReleased: {what} must be hashable (a str, bytes, int "
                                 f"or tuple of these), got {a_type(value)}") from None
    return value


def _canonical(value: Any) -> Any:
    """``value`` as the plain Python value it equals (numpy.str_ → str, numpy.int64 → int,
    tuples element by element), so that the join's encoded keys match as ``==`` does."""
    if type(value) in (str, bytes, int):
        return value
    if isinstance(value, str):
        return str(value)
    if isinstance(value, bytes):
        return bytes(value)
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, tuple):
        return tuple(_canonical(v) for v in value)
    return value


class _KeepBySideInputFn(beam.DoFn):
    """Records whose key is in the released set, read once per DoFn instance."""

    def __init__(self, key: Callable[[Any], Any]):
        self._key = key
        self._released: frozenset | None = None

    def setup(self):
        self._released = None

    def process(self, record, released):
        if self._released is None:
            # One value in the global window: built once, reused by every later bundle.
            self._released = frozenset(_hashable(item, "a released item") for item in released)
        if _hashable(self._key(record), "key(record)") in self._released:
            yield record


def _kept_by_join(joined):
    _, groups = joined
    if any(True for _ in groups["released"]):
        yield from groups["records"]


class KeepReleased(beam.PTransform):
    """Keeps the records whose key is a released item; drops every other record.

    ``records | KeepReleased(released, key=fn)`` passes a record through, once,
    exactly when ``fn(record)`` equals (``==``) an item of ``released``; which
    records pass depends on the released set and the records alone, so it adds
    no privacy cost of its own. A record whose key several released elements
    equal still passes once; records with equal keys all pass or all drop.

    Args:
      released: the ``PCollection`` of released items (``SelectItems``' or
        ``ExtractNgrams``' output) in the records' pipeline.
      key: record → its item (hashable: str, bytes, int, tuple of these, as
        ``ExtractNgrams``' n-grams are); default: the record is its item.
      method: ``"side_input"`` (default; the set in every worker's memory,
        ~100 bytes per 10-character item) or ``"join"`` (a ``CoGroupByKey``, no
        memory bound): the module docstring says where the line is. Both
        give the same output.

    Returns:
      The ``PCollection`` of the kept records, unchanged.

    Raises:
      ParameterError: ``released`` is not a PCollection (a TypeError too), is
        from another pipeline, or ``method`` is unknown.
      NonGlobalWindowError: either input windowed or unbounded, when built.
      InvalidRecordError: when it runs, a key or released item that is not
        hashable (the message names its type, never its value).

    For example:

    ```python
    released = pairs | SelectItems(WeightedGaussian(100), parts.selection)
    rows = rows | KeepReleased(released, key=lambda row: row["word"])
    ```
    """

    def __init__(self, released, *, key: Callable[[Any], Any] | None = None,
                 method: str = "side_input", label: str | None = None):
        super().__init__(label)
        checks.instance("released", released, beam.pvalue.PCollection,
                        "the PCollection of released items", lambda v: type(v).__name__)
        if key is not None and not callable(key):
            raise checks.ParameterTypeError("key", f"must be a function record -> item, got "
                                                   f"{a_type(key)}")
        self._released = released
        self._key = _record_itself if key is None else key
        self._method = checks.one_of("method", method, METHODS, "'side_input' or 'join'")

    def expand(self, records):
        if self._released.pipeline is not records.pipeline:
            raise ParameterError.worded(
                "released", "KeepReleased: released is a PCollection of another pipeline than "
                            "its records: release and filter in one pipeline")
        require_global_window(records, "KeepReleased (its records)")
        require_global_window(self._released, "KeepReleased (its released items)")
        # The kept records are records: their type stays the input's.
        element_type = records.element_type
        if self._method == "side_input":
            return records | "KeepBySideInput" >> beam.ParDo(
                _KeepBySideInputFn(self._key), beam.pvalue.AsIter(self._released)
            ).with_output_types(element_type)
        key = self._key
        keyed = records | "KeyRecords" >> beam.Map(
            lambda record: (_canonical(_hashable(key(record), "key(record)")), record))
        items = self._released | "ReleasedAsKeys" >> beam.Map(
            lambda item: (_canonical(_hashable(item, "a released item")), None))
        return ({"records": keyed, "released": items}
                | "JoinOnKey" >> beam.CoGroupByKey()
                | "KeepJoined" >> beam.FlatMap(_kept_by_join).with_output_types(element_type))
