"""Composing a release with a later aggregation: ``KeepReleased(released, key=fn)``.

A later DP aggregation bounds and noises the kept records itself (e.g. PipelineDP
with the released set as public partitions). The keys, and the line between the
two methods: docs/explanation/transforms.md#keepreleased.
"""

from __future__ import annotations

from typing import Any, Callable

import apache_beam as beam
import numpy as np

from beam_dpsu.core import checks
from beam_dpsu.core.checks import ParameterError, a_type
from beam_dpsu.core.documents import encodes_as_utf8
from beam_dpsu.core.user_records import InvalidRecordError, plain_str_or_bytes
from beam_dpsu.beam.windowing import require_global_window

__all__ = ["KeepReleased", "METHODS"]

METHODS = ("side_input", "join")
_KEY_TYPES = "a str, bytes, int (not a bool) or tuple of these"


class _NotAKey(Exception):
    """What ``_plain`` found instead of a key: the type to name (never the value)."""


def _plain(value: Any) -> Any:
    """``value`` as the plain str, bytes, int or tuple of these it equals; else ``_NotAKey``."""
    kind = type(value)
    if kind is str:
        if value.isascii() or encodes_as_utf8(value):
            return value
        raise _NotAKey("a str that is not UTF-8 (a lone surrogate)")
    if kind is bytes or kind is int:
        return value
    if isinstance(value, (bool, np.bool_)):
        raise _NotAKey("a bool")
    if isinstance(value, (str, bytes)):
        return _plain(plain_str_or_bytes(value))  # what it holds, as bounding keys items
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, tuple):
        try:
            return tuple(_plain(part) for part in value)
        except _NotAKey as inner:
            raise _NotAKey("a tuple holding " + str(inner).removeprefix("a tuple holding ")) \
                from None
    raise _NotAKey(a_type(value))


def _item_key(value: Any, what: str) -> Any:
    """``value`` as the key both methods compare; InvalidRecordError naming its type if none."""
    try:
        return _plain(value)
    except _NotAKey as found:
        raise InvalidRecordError(f"KeepReleased: {what} must be {_KEY_TYPES}, got {found}") \
            from None


def _released_as_key(item: Any) -> tuple:
    """A released item as the join's (key, marker) element."""
    return _item_key(item, "a released item"), None


def _keyed_record(record: Any, key: Callable[[Any], Any]) -> tuple:
    """record → (its key, the record), the join's records side."""
    return _item_key(key(record), "key(record)"), record


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
            self._released = frozenset(_item_key(item, "a released item") for item in released)
        if _item_key(self._key(record), "key(record)") in self._released:
            yield record


def _kept_by_join(joined):
    _, groups = joined
    if any(True for _ in groups["released"]):
        yield from groups["records"]


class KeepReleased(beam.PTransform):
    """Keeps the records whose key is a released item; drops every other record.

    A record passes, once, exactly when ``key(record)`` equals an item of ``released``:
    that depends on the released set and the records alone, so it costs no budget.
    A later DP aggregation must key users as the selection did
    (``beam_dpsu.canonical_user_id``; example: docs/how-to/compose.md).

    Args:
      released: the ``PCollection`` of released items (``SelectItems``' or
        ``ExtractNgrams``' output) in the records' pipeline.
      key: record → its item (default: the record itself): a str, bytes, int or tuple of these.
      method: ``"side_input"`` (default; the set in every worker's memory) or ``"join"``
        (a ``CoGroupByKey``); same output.

    Returns:
      The ``PCollection`` of the kept records, unchanged.

    Raises:
      ParameterError: ``released`` is not a PCollection (a TypeError too), is
        from another pipeline, or ``method`` is unknown.
      NonGlobalWindowError: either input windowed or unbounded, when built.
      InvalidRecordError: when it runs, a key or released item of another type or a
        str that is not UTF-8 (named by type, never value).
    """

    def __init__(self, released, *, key: Callable[[Any], Any] | None = None,
                 method: str = "side_input", label: str | None = None):
        super().__init__(label)
        checks.instance("released", released, beam.pvalue.PCollection,
                        "the PCollection of released items")
        if key is not None and not callable(key):
            raise checks.ParameterTypeError(
                "key", f"must be a function record -> item, got {a_type(key)}")
        self._released = released
        self._key = (lambda record: record) if key is None else key
        self._method = checks.one_name_of("method", method, METHODS, "'side_input' or 'join'")

    def expand(self, records):
        if self._released.pipeline is not records.pipeline:
            raise ParameterError.worded(
                "released", "KeepReleased: released is a PCollection of another pipeline than "
                            "its records: release and filter in one pipeline")
        require_global_window(records, "KeepReleased (its records)")
        require_global_window(self._released, "KeepReleased (its released items)")
        element_type = records.element_type  # the kept records are records: the input's type
        if self._method == "side_input":
            return records | "KeepBySideInput" >> beam.ParDo(
                _KeepBySideInputFn(self._key), beam.pvalue.AsIter(self._released)
            ).with_output_types(element_type)
        return ({"records": records | "KeyRecords" >> beam.Map(_keyed_record, self._key),
                 "released": self._released | "ReleasedAsKeys" >> beam.Map(_released_as_key)}
                | "JoinOnKey" >> beam.CoGroupByKey()
                | "KeepJoined" >> beam.FlatMap(_kept_by_join).with_output_types(element_type))
