"""A random draw is seen once (docs/privacy.md, invariant 11): a collection carrying one
is checkpointed (``beam.Reshuffle``) before two steps read it; ``random_fanouts`` lists
the unchecked fan-outs of the steps marked ``draws_randomness``.

Why: docs/explanation/transforms.md#randomness-drawn-once.
"""

from __future__ import annotations

import functools
from collections import defaultdict

import apache_beam as beam
from apache_beam.pipeline import PipelineVisitor
from apache_beam.transforms.util import Reshuffle

__all__ = ["draws_randomness", "step_draws_randomness", "random_fanouts"]


def draws_randomness(obj):
    """Marks a DoFn class or a function as one that draws randomness (returns it)."""
    obj.DRAWS_RANDOMNESS = True
    return obj


def step_draws_randomness(transform) -> bool:
    """Whether a leaf transform runs a DoFn or a function marked ``DRAWS_RANDOMNESS``."""
    fn = getattr(transform, "fn", None)
    if getattr(fn, "DRAWS_RANDOMNESS", False):
        return True
    # beam.FlatMap wraps its function in a DoFn; beam.Map first wraps it in a
    # closure (the tests check that a marked Map is found).
    inner = getattr(fn, "_fn", None)
    closure = getattr(inner, "__closure__", None) or ()
    for candidate in [inner] + [cell.cell_contents for cell in closure]:
        while isinstance(candidate, functools.partial):
            candidate = candidate.func
        if getattr(candidate, "DRAWS_RANDOMNESS", False) is True:
            return True
    return False


class _GraphVisitor(PipelineVisitor):
    """Collects the steps in application order: leaves, and each Reshuffle as one step."""

    def __init__(self):
        self.steps = []
        self._inside_reshuffle = 0

    def enter_composite_transform(self, applied):
        if isinstance(applied.transform, Reshuffle):
            if not self._inside_reshuffle:
                self.steps.append(applied)
            self._inside_reshuffle += 1

    def leave_composite_transform(self, applied):
        if isinstance(applied.transform, Reshuffle):
            self._inside_reshuffle -= 1

    def visit_transform(self, applied):
        if not self._inside_reshuffle:
            self.steps.append(applied)


def random_fanouts(pipeline: beam.Pipeline) -> list[str]:
    """The fan-outs of random draws not checkpointed by a ``Reshuffle``, one line each.

    A collection is random when a step that draws made it, or when any input (main or
    side) of that step is random; a Reshuffle's output is not.
    """
    visitor = _GraphVisitor()
    pipeline.visit(visitor)
    draws_behind: dict = {}  # random PCollection → labels of the draws it carries
    consumers: dict = {}
    producers: dict = {}
    for applied in visitor.steps:
        inputs = ([pc for pc in applied.inputs if isinstance(pc, beam.pvalue.PCollection)]
                  + [s.pvalue for s in applied.side_inputs])
        for pc in set(inputs):
            consumers.setdefault(pc, []).append(applied.full_label)
        if isinstance(applied.transform, Reshuffle):
            continue  # its output is materialised: every reader sees one draw
        draws = set().union(*(draws_behind.get(pc, set()) for pc in inputs))
        if step_draws_randomness(applied.transform):
            draws.add(applied.full_label)
        if draws:
            for pc in applied.outputs.values():
                draws_behind[pc] = draws
                producers[pc] = applied.full_label
    # Findings by producer: the outputs of one step are one draw, however many.
    readers_of: dict = defaultdict(set)
    draws_of: dict = defaultdict(set)
    for pc, producer in producers.items():
        readers_of[producer].update(consumers.get(pc, []))
        draws_of[producer].update(draws_behind[pc])
    return sorted(f"{producer} (random from {', '.join(sorted(draws_of[producer]))}) is read "
                  f"by {len(readers)} steps without a Reshuffle: {', '.join(sorted(readers))}"
                  for producer, readers in readers_of.items() if len(readers) >= 2)
