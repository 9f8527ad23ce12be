"""Parameters chosen when the pipeline runs: one value per candidate, and the index (a side
input). Why: docs/explanation/transforms.md#candidate-parameters-in-beam.
"""

from __future__ import annotations

from typing import Callable

import apache_beam as beam

__all__ = ["Chosen", "per_candidate"]


def per_candidate(values) -> tuple:
    """A DoFn's per-candidate values: a tuple as it is, one plain value as a 1-tuple."""
    return values if isinstance(values, tuple) else (values,)


class Chosen:
    """One parameter's value per candidate, and the chosen candidate's index.

    Args:
      values: the candidates' values, in the order of the candidates.
      index: a singleton PCollection of the chosen index in ``values``; None with one value.
    """

    def __init__(self, values, index: beam.pvalue.PCollection | None = None):
        self.values = tuple(values)
        if not self.values:
            raise ValueError("a chosen parameter needs at least one candidate value")
        if index is None and len(self.values) > 1:
            raise ValueError("several candidate values need the chosen index")
        self.index = index

    @classmethod
    def of(cls, value) -> "Chosen":
        """``value`` itself if it is a ``Chosen``, else one fixed value."""
        return value if isinstance(value, Chosen) else cls((value,))

    @property
    def first(self):
        """The first candidate's value (for what every candidate shares)."""
        return self.values[0]

    def map(self, function: Callable) -> "Chosen":
        """Each candidate's ``function(value)``, chosen by the same index."""
        return Chosen([function(value) for value in self.values], self.index)

    def side_inputs(self) -> dict:
        """The keyword side input ``chosen`` (the index); none for a fixed value."""
        args = self.side_input_args()
        return {"chosen": args[0]} if args else {}

    def side_input_args(self) -> list:
        """The index as a positional side input; none for a fixed value."""
        return [] if self.index is None else [beam.pvalue.AsSingleton(self.index)]
