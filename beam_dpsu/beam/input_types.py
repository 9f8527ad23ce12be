"""The element types the public transforms take, as Beam type hints.

Beam checks them when the pipeline is built, so a ``PCollection[int]`` fed to
``SelectItems`` fails there, naming the transform. ``RECORDS``: pairs, records, element
containers, Rows and dicts; ``KEYED``: ``(key, value)`` pairs; ``RELEASED``: released
items or ``(item, count)``; ``DOCUMENT_ELEMENT``: ``ExtractNgrams``'s input.
``ReadsContainers`` reads a NamedTuple or ``Tokens`` as the container it is.
"""

from __future__ import annotations

import abc
import collections.abc
import typing

import apache_beam as beam
import numpy as np
from apache_beam.typehints import Any, Dict, FrozenSet, List, Set, Tuple, Union, typehints
from apache_beam.typehints.decorators import TypeCheckError

__all__ = ["RECORDS", "KEYED", "RELEASED", "DOCUMENT_ELEMENT", "ReadsContainers"]

RECORDS = Union[Tuple[Any, ...], List[Any], Set[Any], FrozenSet[Any], Dict[Any, Any],
                np.ndarray, beam.Row]
KEYED = Tuple[Any, Any]
RELEASED = Union[str, bytes, Tuple[Any, ...]]


class _DocumentLike(abc.ABC):  # noqa: B024  (a registry of classes, not an interface)
    """The plain classes (by ``issubclass``) an input element may be of, registered below."""


for _cls in (collections.abc.Sequence, collections.abc.Mapping, collections.abc.Set, np.ndarray):
    _DocumentLike.register(_cls)

# Any of ExtractNgrams' input forms; each element's form is checked when it is read
# (beam_dpsu.core.documents). (typing's Union and Any: this module's own are Beam's.)
DOCUMENT_ELEMENT = typing.Union[typing.Iterable[typing.Any], typing.Mapping[typing.Any, typing.Any],
                                beam.Row, _DocumentLike]

# Plain container classes and the Beam hints their subclasses are read as.
_CONTAINERS = ((tuple, Tuple[Any, ...]), (list, List[Any]), (set, Set[Any]),
               (frozenset, FrozenSet[Any]), (dict, Dict[Any, Any]))


def _as_container(element_type):
    """``element_type`` with each subclass of a container class read as that container."""
    if isinstance(element_type, typehints.UnionConstraint):
        return Union[tuple(_as_container(t) for t in element_type.union_types)]
    if isinstance(element_type, type):
        for base, hint in _CONTAINERS:
            if element_type is not base and issubclass(element_type, base):
                return hint
    return element_type


class ReadsContainers:
    """A PTransform mixin: input hints checked with container subclasses as their container."""

    def type_check_inputs(self, pvalueish):
        element_type = getattr(pvalueish, "element_type", None)
        hints = self.get_type_hints().input_types
        if (not isinstance(pvalueish, beam.pvalue.PCollection) or element_type is None
                or not hints or len(hints[0]) != 1):
            super().type_check_inputs(pvalueish)
            return
        hint = hints[0][0]
        if not typehints.is_consistent_with(_as_container(element_type), hint):
            raise TypeCheckError(
                f"Input type hint violation at {self.label}: expected {hint}, "
                f"got {element_type}")
