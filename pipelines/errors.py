"""The jobs' errors: a bad parameter or input is one ``error: …`` line naming the flag.

Library ``ParameterError``s are named by flag through :data:`FLAG_OF`, never
reworded. Messages never name a user id or a record's text (docs/privacy.md,
invariants). Details: docs/explanation/jobs.md#errors
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import traceback

from beam_dpsu.beam.bounding import InvalidRecordError
from beam_dpsu.beam.windowing import NonGlobalWindowError
from beam_dpsu.core.checks import ParameterError
from pipelines.io.errors import InputFormatError
from pipelines.io.parquet import parquet_read_error

__all__ = ["UsageError", "FlagMessage", "FLAG_OF", "flag_errors", "error_message",
           "CLEAN_ERRORS", "NO_SPACE_ERRNOS"]


class UsageError(ValueError):
    """A bad command-line parameter or a job that cannot start as asked."""


FLAG_OF = {  # the library's parameter names and the flags that set them
    "epsilon": "--epsilon", "delta": "--delta", "rho": "--rho",
    "mechanism": "--mechanism", "max_items_per_user": "--max-items-per-user",
    "rounds": "--rounds", "ratio": "--ratio", "removal": "--sips-removal",
    "alpha": "--alpha", "shards": "--shards", "hot_key_fanout": "--hot-key-fanout",
    "counts_share": "--counts-share", "num_shards": "--num-shards", "seed": "--seed",
    "max_n": "--max-n", "eta": "--eta", "decay": "--noise-decay",
    "noise_schedule": "--noise-decay", "pruning": "--pruning", "level1": "--level1",
    "pre_threshold": "--pre-threshold",
}


class FlagMessage(UsageError):
    """A job's message whose ``{param}`` placeholders become flags (``"give {epsilon}"``),
    from :data:`FLAG_OF` or :func:`flag_errors`'s overrides."""

    def __init__(self, template: str):
        super().__init__(template.format_map(FLAG_OF))
        self.template = template


@contextlib.contextmanager
def flag_errors(**flag_of):
    """A ``ParameterError`` inside becomes a :class:`UsageError` ``f"{flag} {problem}"``.

    ``flag_of`` overrides :data:`FLAG_OF` for this block (e.g.
    ``max_items_per_user="--counts-max-items-per-user"``).
    """
    flags = {**FLAG_OF, **flag_of}
    try:
        yield
    except FlagMessage as exc:
        raise UsageError(exc.template.format_map(flags)) from None
    except ParameterError as exc:
        if exc.param not in flags or not getattr(exc, "leads_with_param", True):
            raise  # a message that does not start with the parameter is shown whole
        raise UsageError(f"{flags[exc.param]} {exc.problem}") from None


CLEAN_ERRORS = (UsageError, InputFormatError, InvalidRecordError, NonGlobalWindowError)
_WRAPPED = re.compile(rf"\b({'|'.join(e.__name__ for e in CLEAN_ERRORS)}): (.+)")
_STEP = re.compile(r"\s*\[while running '([^']*)'\]")
NO_SPACE_ERRNOS = (errno.ENOSPC, errno.EDQUOT)  # a full disk (or quota): expected
_ERRNO = re.compile(r"\[Errno (\d+)\]")


def _no_space_message(exc: BaseException) -> str | None:
    """The line for a full disk anywhere in ``exc``'s chain (never naming a path), else None."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        match = _ERRNO.search(str(current))
        code = (current.errno if isinstance(current, OSError) and current.errno in NO_SPACE_ERRNOS
                else int(match.group(1)) if match else None)
        if code in NO_SPACE_ERRNOS:
            step = _STEP.search(str(exc))
            where = f" in step {step.group(1)!r}" if step else ""
            return (f"{os.strerror(code)} (errno {code}){where}: nothing of this run was put in "
                    "place at the output; free some space and run again")
        current = current.__cause__ or current.__context__
    return None


def _prism_start_message(exc: BaseException) -> str | None:
    """The line for a Prism runner that could not start, else None."""
    frames = traceback.extract_tb(exc.__traceback__)
    if not any(os.path.basename(frame.filename) == "prism_runner.py" for frame in frames):
        return None
    reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return (f"the Prism runner could not start ({reason[:300]}); give --prism_location a "
            "Prism binary, or choose another runner, e.g. --runner FnApiRunner "
            "(docs/how-to/runners.md)")


def error_message(exc: BaseException) -> str | None:
    """The one-line message of an expected failure, or None for a bug.

    Beam's ``[while running 'Step']`` is dropped; a portable runner's
    RuntimeError is searched for the original error's line.
    """
    if (known := _no_space_message(exc) or _prism_start_message(exc)) is not None:
        return known
    if isinstance(exc, CLEAN_ERRORS):
        text = str(exc)
    else:
        match = _WRAPPED.search(str(exc))
        if not match:
            return parquet_read_error(exc)
        text = match.group(2)
    return _STEP.sub("", text.strip().splitlines()[0] if text.strip() else text).strip()
