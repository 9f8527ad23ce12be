"""One budget, one release (docs/privacy.md, invariant 9); a seed is announced (invariant 2).

A ``ReleaseTransform`` object (copies and pickles too) is expanded once, else
``AppliedTwiceError``; ``warn_if_seeded`` logs one WARNING per seeded release.

Why and how: docs/explanation/transforms.md#the-release-guard.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import itertools
import logging
import uuid

import apache_beam as beam

from beam_dpsu.core import checks
from beam_dpsu.core.budgets import BudgetAccountant

__all__ = ["AppliedTwiceError", "ReleaseTransform", "seed_announced", "warn_if_seeded"]

LOG = logging.getLogger("beam_dpsu")

# The release transforms being expanded right now, innermost last.
_EXPANDING: contextvars.ContextVar[tuple] = contextvars.ContextVar(
    "beam_dpsu_expanding_releases", default=())
# True while a seeded transform builds its parts (their seed is its seed).
_SEED_ANNOUNCED: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "beam_dpsu_seed_announced", default=False)
_PIPELINE_NUMBERS = itertools.count(1)

# Release token → (full label, pipeline number) of its one application in this
# process. Copies share their original's token (see ``ReleaseTransform.__new__``).
_APPLIED: dict[str, tuple[str, int]] = {}


def _pipeline_number(pipeline) -> int:
    """A number naming ``pipeline`` for this process (``id()`` may be reused once it is gone)."""
    number = getattr(pipeline, "_beam_dpsu_number", None)
    if number is None:
        number = next(_PIPELINE_NUMBERS)
        with contextlib.suppress(AttributeError):  # not a Pipeline (no input pipeline known)
            pipeline._beam_dpsu_number = number
    return number


class AppliedTwiceError(RuntimeError):
    """A release transform object was applied a second time (two releases, one budget)."""


@contextlib.contextmanager
def _one_application(transform, pvalueish):
    """Claims ``transform`` for this application while it expands; frees it on failure."""
    expanding = _EXPANDING.get()
    pipeline = getattr(pvalueish, "pipeline", None)
    current = getattr(pipeline, "_current_transform", None)
    label = current().full_label if current is not None else transform.label
    release = transform._release_token
    if any(t is transform and _APPLIED.get(release, (None,))[0] == label for t in expanding):
        yield  # a subclass's super().expand(): the same node, the same application
        return
    if release in _APPLIED:
        first, number = _APPLIED[release]
        name = type(transform).__name__
        where = "this pipeline" if number == _pipeline_number(pipeline) else "another pipeline"
        raise AppliedTwiceError(
            f"{name} is already applied as {first!r} in {where}: one {name} object is one "
            f"budget, and applying it again (as {label!r}) would make two releases, each "
            f"spending that whole budget. Reuse the output of its one application; for a "
            f"second release build a second {name} with its own budget (split a total with "
            f"a BudgetAccountant and pass accountant= to each).")
    _APPLIED[release] = (label, _pipeline_number(pipeline))
    token = _EXPANDING.set(expanding + (transform,))
    try:
        with seed_announced():
            yield
    except BaseException:
        _APPLIED.pop(release, None)  # nothing was released: the budget is free again
        raise
    finally:
        _EXPANDING.reset(token)


def _expand_once(expand):
    """Wraps ``expand`` to claim the object first (module-level names only: a subclass in
    ``__main__``, pickled by value, still pickles)."""

    @functools.wraps(expand)
    def expand_once(self, pvalueish):
        with _one_application(self, pvalueish):
            return expand(self, pvalueish)

    return expand_once


class ReleaseTransform(beam.PTransform):
    """A PTransform that spends a whole budget: applied twice, it raises ``AppliedTwiceError``."""

    _release_token: str
    seed: int | None  # each release's own (``_spend`` warns when it is set)

    def __new__(cls, *args, **kwargs):
        # Made before ``__init__`` (subclasses need not call anything). Copies and
        # pickles restore their original's ``__dict__``, token included: the same budget.
        instance = super().__new__(cls)
        instance._release_token = uuid.uuid4().hex
        return instance

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "expand" in cls.__dict__:
            cls.expand = _expand_once(cls.__dict__["expand"])

    def _spend(self, accountant, budget, name: str, detail: str | None = None) -> None:
        """Spends ``budget`` from ``accountant`` (if any; raises if it does not fit), then
        logs the seeded WARNING for ``name`` (``self.seed``)."""
        if accountant is not None:
            checks.instance("accountant", accountant, BudgetAccountant, "a BudgetAccountant")
            accountant.spend(budget, what=name if detail is None else f"{name} ({detail})")
        warn_if_seeded(self.seed, name)


@contextlib.contextmanager
def seed_announced():
    """Inside: building blocks stay quiet about their seed (their builder announced it)."""
    token = _SEED_ANNOUNCED.set(True)
    try:
        yield
    finally:
        _SEED_ANNOUNCED.reset(token)


def warn_if_seeded(seed, what: str) -> None:
    """Logs one WARNING that ``what`` is seeded, unless inside ``seed_announced``."""
    if seed is not None and not _SEED_ANNOUNCED.get():
        LOG.warning(f"{what} seeded: for tests only, not private (seed {seed} fixes its noise "
                    "and sampling; never publish what it releases)")
