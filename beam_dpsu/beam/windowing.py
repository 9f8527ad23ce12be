"""Bounding is global: every transform that bounds or aggregates users refuses windows.

A windowed input, an unbounded one, or a non-default trigger would bound each
user once per window or pane (docs/privacy.md, invariant 7): all three are
refused when the pipeline is built (docs/explanation/beam-pipeline.md#windows).
"""

from __future__ import annotations

from apache_beam.transforms.trigger import DefaultTrigger
from apache_beam.transforms.window import GlobalWindow, GlobalWindows
from apache_beam.utils.windowed_value import WindowedValue

__all__ = ["NonGlobalWindowError", "require_global_window", "in_global_window"]

_GLOBAL_WINDOW = (GlobalWindow(),)
_END_OF_GLOBAL_WINDOW = GlobalWindow().max_timestamp()


class NonGlobalWindowError(ValueError):
    """A PCollection given to a bounding transform is windowed or unbounded."""


def require_global_window(pcoll, transform: str):
    """Returns ``pcoll`` if it is bounded and in the global window; raises otherwise.

    Args:
      pcoll: the input PCollection of a transform that bounds contributions.
      transform: the transform's name, for the error message.
    """
    windowing = getattr(pcoll, "windowing", None)
    windowfn = getattr(windowing, "windowfn", None)
    if windowfn is not None and not isinstance(windowfn, GlobalWindows):
        raise NonGlobalWindowError(
            f"{transform} needs its input in the global window, but it is windowed by "
            f"{type(windowfn).__name__}: contributions would be bounded per window, so a "
            "user with records in several windows would be counted several times and the "
            "privacy guarantee would not hold. Apply "
            "beam.WindowInto(beam.window.GlobalWindows()) before it, over the whole input "
            "you mean to release from.")
    triggerfn = getattr(windowing, "triggerfn", None)
    if triggerfn is not None and not isinstance(triggerfn, DefaultTrigger):
        raise NonGlobalWindowError(
            f"{transform} needs the global window with its default trigger, but the input has "
            f"the trigger {type(triggerfn).__name__}: each pane would be bounded on its own. "
            "Apply beam.WindowInto(beam.window.GlobalWindows()) (default trigger) before it.")
    if getattr(pcoll, "is_bounded", True) is False:
        raise NonGlobalWindowError(
            f"{transform} needs a bounded (batch) input: an unbounded PCollection has no end "
            "at which each user's contribution can be bounded once. Read a finite snapshot "
            "(e.g. a batch read of the files or table) instead.")
    return pcoll


def in_global_window(value) -> WindowedValue:
    """``value`` in the global window, stamped with its end (as a ``GroupByKey``'s output).

    For DoFns that batch: how outputs fell into batches leaves no trace in their
    metadata. Only for transforms that refuse every other window.
    """
    return WindowedValue(value, _END_OF_GLOBAL_WINDOW, _GLOBAL_WINDOW)
