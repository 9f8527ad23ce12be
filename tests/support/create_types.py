"""A faster way to Beam's element type of a ``beam.Create`` for the test suite (speed only).

``Create(values).infer_output_type`` builds a type hint for every value
(``trivial_inference.instance_to_type``: a ``Tuple[str, int]`` object per
pair, each parameter validated) and then the ``Union`` of them all, each
member validated again. Tests create thousands of (user, item) pairs, so that
was about 3 % of the suite's CPU.

* The hint of a tuple or a list whose members are all of simple types (no
  container, ``Row`` or bound method: their hint is their type) is a function
  of those types alone: it is built once per tuple of types (per set of types
  for a list) and shared, as nothing in Beam changes a tuple's or a list's hint
  in place. Every other value gets Beam's own hint.
* ``Union`` flattens its members into a set, so it is given each distinct hint
  once, first occurrences first (the only member it changes in place, the
  first ``Dict`` hint, stays the first). Hints that cannot be hashed are all
  given, as Beam gives them; ``Row`` values take Beam's own path.

``BEAM_DPSU_TESTS_NO_CREATE_TYPES_MEMO=1`` turns this off;
tests/project/test_suite_speedups.py checks it against Beam's own answers.
"""

import os

from apache_beam import pvalue
from apache_beam.transforms import core
from apache_beam.typehints import trivial_inference, typehints

__all__ = ["install"]

# Types whose hint is not the type itself.
NOT_SIMPLE = frozenset(typehints.DISALLOWED_PRIMITIVE_TYPES) | {
    pvalue.Row, trivial_inference.BoundMethod}


def install() -> bool:
    """Replaces ``instance_to_type`` and ``Create.infer_output_type``; False if switched off."""
    if os.environ.get("BEAM_DPSU_TESTS_NO_CREATE_TYPES_MEMO") == "1":
        return False
    original_hint = getattr(trivial_inference.instance_to_type, "__wrapped__",
                            trivial_inference.instance_to_type)
    original_create = getattr(core.Create.infer_output_type, "__wrapped__",
                              core.Create.infer_output_type)
    tuple_hints: dict = {}  # member types → the tuple's hint
    list_hints: dict = {}  # the set of member types → the list's hint

    def instance_to_type(o):
        kind = type(o)
        if kind is tuple:
            member_types = tuple(map(type, o))
            kept = tuple_hints
        elif kind is list and o:
            member_types = frozenset(map(type, o))
            kept = list_hints
        else:
            return original_hint(o)
        hint = kept.get(member_types)
        if hint is None:
            if NOT_SIMPLE.intersection(member_types):
                return original_hint(o)
            hint = kept[member_types] = original_hint(o)
        return hint

    def infer_output_type(self, unused_input_type):
        values = self.values
        if not values or hasattr(values[0], "as_dict"):
            return original_create(self, unused_input_type)
        hints = [trivial_inference.instance_to_type(v) for v in values]
        try:
            hints = list(dict.fromkeys(hints))
        except TypeError:  # a hint that cannot be hashed: Union is given them all
            pass
        return typehints.Union[hints]

    instance_to_type.__wrapped__ = original_hint  # type: ignore[attr-defined]
    infer_output_type.__wrapped__ = original_create  # type: ignore[attr-defined]
    trivial_inference.instance_to_type = instance_to_type
    core.Create.infer_output_type = infer_output_type  # type: ignore[method-assign]
    return True
