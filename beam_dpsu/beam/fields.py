"""Schema'd input: the user id and the item(s) read from named fields.

``SelectItems``, ``ExtractNgrams`` and ``CountReleased`` take ``beam.Row``s, NamedTuples
or dicts with ``user_field=…, item_list_field=…``; ``read_fields`` turns each into
the pair, record or document they take. Errors name the field and type, never a value.

Details: docs/explanation/beam-pipeline.md#named-fields.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import apache_beam as beam
import numpy as np
from apache_beam.typehints import typehints
from apache_beam.typehints.row_type import RowTypeConstraint

from beam_dpsu.beam.bounding import InvalidRecordError, canonical_user_id
from beam_dpsu.core import checks
from beam_dpsu.core.checks import ParameterError, a_type

__all__ = ["InputFields", "input_fields", "check_element_type", "read_fields"]

# What the value field holds, by argument: one item, a collection of items,
# an ordered sequence of tokens (ExtractNgrams), or, for CountReleased(...,
# ngrams=True), one n-gram or a collection of n-grams.
_KINDS = {"item_field": "item", "item_list_field": "items", "tokens_field": "tokens"}
_NGRAM_KINDS = {"item": "ngram", "items": "ngrams"}
# Element types that are already the tuple/list form: fields would misread them.
_PLAIN_FORMS = (typehints.TupleConstraint, typehints.TupleSequenceConstraint,
                typehints.ListConstraint, typehints.SetTypeConstraint)
# What an ordered value field must be, for errors.
_ORDERED = {"ngram": "an n-gram (a list or tuple of str)",
            "tokens": "a list or tuple of str tokens (in order)"}
# How many of an element's field names an error lists.
_NAMES_SHOWN = 20


@dataclasses.dataclass(frozen=True)
class InputFields:
    """Which fields of the input elements hold the user id and the item(s).

    Attributes:
      user_field: the user id's field; None with ``privacy_unit="element"``.
      value_field: the field holding the item(s) or tokens.
      value_arg: the argument that named it (e.g. ``"item_list_field"``), for errors.
      kind: ``"item"``, ``"items"``, ``"tokens"``, ``"ngram"`` or ``"ngrams"``.
    """

    user_field: str | None
    value_field: str
    value_arg: str
    kind: str

    def named(self) -> tuple:
        """The (argument, field name) pairs, the user's first (its name may be None)."""
        return ("user_field", self.user_field), (self.value_arg, self.value_field)


def input_fields(privacy_unit: str, user_field: str | None = None, ngrams: bool = False,
                 **value_fields: str | None) -> InputFields | None:
    """Validates a transform's field arguments; None when none is given (tuple input).

    Args:
      privacy_unit: the transform's (already checked) privacy unit.
      user_field: the user id's field; must be None with ``privacy_unit="element"``.
      ngrams: the items are n-grams (``CountReleased(..., ngrams=True)``).
      **value_fields: the transform's value arguments (at most one not None).

    Raises:
      ValueError: a combination that cannot be read unambiguously.
      TypeError: a field name that is not a non-empty str.
    """
    given = {arg: name for arg, name in value_fields.items() if name is not None}
    if len(given) > 1:
        raise ParameterError.worded(
            next(iter(given)), f"give one of {' or '.join(value_fields)}, not "
                               f"{' and '.join(given)}: a field holds either one item per "
                               "element or a list of them")
    if not given:
        if user_field is not None:
            raise ParameterError("user_field", f"needs {' or '.join(value_fields)} too: which "
                                               "field holds the items")
        return None
    (arg, name), = given.items()
    name = checks.field_name(name, arg)
    kind = _KINDS[arg]
    if privacy_unit == "element":
        if user_field is not None:
            raise ParameterError.worded(
                "user_field", "with privacy_unit='element' each element is one person and "
                              "has no user id: drop user_field")
        if kind == "item":
            raise ParameterError.worded(
                arg, "with privacy_unit='element' an element holds all of one "
                     "person's items: give them as a list with item_list_field")
    elif user_field is None:
        raise ParameterError(arg, "needs user_field too: with privacy_unit='user_id' the user "
                                  "id's field must be named (or privacy_unit='element' if each "
                                  "element is all of one person's data)")
    else:
        user_field = checks.field_name(user_field, "user_field")
        if user_field == name:
            raise ParameterError("user_field", f"and {arg} name the same field {name!r}")
    return InputFields(user_field, name, arg, _NGRAM_KINDS[kind] if ngrams else kind)


def _is_named_tuple(element: Any) -> bool:
    return isinstance(element, tuple) and hasattr(element, "_fields")


def _element_kind(element: Any) -> str:
    """The element's type for errors: "a beam.Row", "a dict", "a Review (NamedTuple)"."""
    if isinstance(element, beam.Row):
        return "a beam.Row"
    name = type(element).__name__
    if _is_named_tuple(element):
        # Beam decodes Rows into NamedTuple classes it generates (BeamSchema_<uuid>).
        return "a beam.Row" if name.startswith("BeamSchema_") else f"a {name} (NamedTuple)"
    return a_type(element)


def _names(names: list) -> str:
    shown = ", ".join(repr(n) for n in names[:_NAMES_SHOWN])
    more = len(names) - _NAMES_SHOWN
    return (shown or "none") + (f" and {more} more" if more > 0 else "")


def _check_named(element: Any) -> None:
    """Raises unless ``element`` is a Row, NamedTuple or dict."""
    if isinstance(element, (Mapping, beam.Row)) or _is_named_tuple(element):
        return
    hint = ("; a plain tuple or list is read without fields: drop user_field/item_field/"
            "item_list_field/tokens_field" if isinstance(element, (tuple, list)) else "")
    raise InvalidRecordError("with named fields each element must be a beam.Row, a "
                             f"NamedTuple or a dict, got {a_type(element)}{hint}")


def _read(element: Any, name: str, arg: str) -> Any:
    # A mapping is asked first: a defaultdict or Counter would make up a value
    # for a missing key (an empty user, silently).
    is_mapping = isinstance(element, Mapping)
    if is_mapping and name not in element:
        # Its keys may be data (e.g. {user_id: items}): neither listed nor counted.
        raise InvalidRecordError(f"{_element_kind(element)} has no key {name!r} ({arg})")
    try:
        return element[name] if is_mapping else getattr(element, name)
    except (AttributeError, KeyError):
        # Only a class's field names: a beam.Row built at run time may be keyed by data.
        hint = f"; its fields: {_names(list(element._fields))}" if _is_named_tuple(element) else ""
        raise InvalidRecordError(
            f"{_element_kind(element)} has no field {name!r} ({arg}){hint}") from None


def _user_id(value: Any, element: Any, name: str) -> Any:
    if value is None or (isinstance(value, (str, bytes)) and not value):
        raise InvalidRecordError(f"field {name!r} (user_field) of {_element_kind(element)} "
                                 "is a missing user id (None or empty)")
    try:
        return canonical_user_id(value)
    except InvalidRecordError:
        raise InvalidRecordError(
            f"field {name!r} (user_field) of {_element_kind(element)} must be a str, bytes, "
            f"int or tuple of these, got {a_type(value)}") from None


class _ReadFields:
    """One element → its pair, record or document (or, without a user, its items)."""

    def __init__(self, fields: InputFields) -> None:
        self._fields = fields

    def _bad_value(self, value: Any, element: Any, expected: str,
                   hint: str = "") -> InvalidRecordError:
        f = self._fields
        return InvalidRecordError(f"field {f.value_field!r} ({f.value_arg}) of "
                                  f"{_element_kind(element)} must be {expected}, got "
                                  f"{a_type(value)}{hint}")

    def value(self, element: Any) -> Any:
        f = self._fields
        value = _read(element, f.value_field, f.value_arg)
        if f.kind == "item":
            if not isinstance(value, (str, bytes)):
                raise self._bad_value(value, element, "one item (str or bytes)",
                                      "; a list of items is read with item_list_field")
            return value
        if f.kind in ("ngram", "tokens"):  # ordered: a sequence, not a set
            if isinstance(value, np.ndarray) and value.ndim == 1:
                value = value.tolist()
            if not isinstance(value, (list, tuple)):
                hint = ("; tokenise the text into a list first"
                        if isinstance(value, (str, bytes)) else "")
                raise self._bad_value(value, element, _ORDERED[f.kind], hint)
            return tuple(value) if f.kind == "ngram" else value
        if isinstance(value, (str, bytes, Mapping)):
            # A str would be read as one item (or split into characters): refused.
            hint = ("; tokenise the text into a list first, or read one item per element "
                    "with item_field" if isinstance(value, (str, bytes)) else "")
            raise self._bad_value(value, element, "a list, tuple, set or array of "
                                  + ("n-grams" if f.kind == "ngrams" else "items"), hint)
        if f.kind == "ngrams":
            return [tuple(g) if isinstance(g, (list, np.ndarray)) else g for g in value]
        return value

    def __call__(self, element: Any) -> Any:
        _check_named(element)
        f = self._fields
        value = self.value(element)
        if f.user_field is None:
            # privacy_unit="element": the items alone, a tuple as a list (the element
            # form refuses tuples only because, unnamed, one could be a pair).
            return list(value) if isinstance(value, tuple) else value
        user_id = _user_id(_read(element, f.user_field, "user_field"), element, f.user_field)
        # A tuple of tokens takes check_document's fast path.
        return user_id, tuple(value) if f.kind == "tokens" else value


def check_element_type(fields: InputFields, element_type: Any, transform: str) -> None:
    """Refuses, when the pipeline is built, an input whose type cannot have the fields
    (plain tuples, lists, strings; a schema without a named field)."""
    if isinstance(element_type, _PLAIN_FORMS) or element_type in (tuple, list, str, bytes):
        named = ", ".join(f"{arg}={name!r}" for arg, name in fields.named() if name is not None)
        raise TypeError(
            f"{transform} was given named fields ({named}), but its input's "
            f"elements are {element_type}: fields are read from beam.Row, NamedTuple or dict "
            "elements. Drop the field arguments to take tuples or lists as they are.")
    if isinstance(element_type, RowTypeConstraint):
        kind, names = "beam.Row", [name for name, _ in element_type._fields]
    elif isinstance(element_type, type) and issubclass(element_type, tuple) and hasattr(
            element_type, "_fields"):
        kind, names = f"{element_type.__name__} (NamedTuple)", list(element_type._fields)
    else:
        return  # no schema: each element is checked when it is read
    for arg, name in fields.named():
        if name is not None and name not in names:
            raise InvalidRecordError(f"{transform}: the input's elements ({kind}) have no field "
                                     f"{name!r} ({arg}); their fields: {_names(names)}")


@beam.ptransform_fn
def _fields_to_records(elements, fields: InputFields, transform: str):
    """Schema'd elements → the pairs, records or documents the release transforms take."""
    check_element_type(fields, elements.element_type, transform)
    records = elements | "ReadFields" >> beam.Map(_ReadFields(fields)).with_output_types(Any)
    if fields.kind != "ngrams":
        return records
    # CountReleased counts n-grams from (user_id, n-gram) pairs: one per n-gram.
    return records | "OnePairPerNgram" >> beam.FlatMapTuple(
        lambda user_id, ngrams: [(user_id, gram) for gram in ngrams]).with_output_types(Any)


def read_fields(elements, fields: InputFields | None, transform: str):
    """``elements`` read by ``fields`` (Rows and NamedTuples by attribute, dicts by key; a
    schema checked when built) in the step ``FieldsToRecords``, else as they are."""
    if fields is None:
        return elements
    return elements | "FieldsToRecords" >> _fields_to_records(fields, transform)
