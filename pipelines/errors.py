"""The jobs' errors: a bad parameter or input is one ``error: …`` line naming the flag.

* :class:`UsageError`: a bad command-line parameter, or a job that cannot
  start as asked; raised by the jobs themselves.
* Library parameter errors (``beam_dpsu.core.checks.ParameterError``) carry
  the parameter's name apart from the problem; :func:`flag_errors` prints
  them as ``f"{flag} {problem}"`` through one mapping, :data:`FLAG_OF`, so
  an error says ``--max-items-per-user``, never ``max_items_per_user``. No
  message is reworded.
* Where a job's message names several parameters (``give it --epsilon and
  --delta``) the job raises a :class:`FlagMessage`, whose ``{param}``
  placeholders become the flags that set those parameters.
* :func:`error_message`: the one line of an expected failure, also when Beam
  wraps it (``[while running 'Step']``, a portable runner's RuntimeError).

Only the released set leaves (docs/privacy.md, invariants): messages name
files, line numbers, fields, parameters and released counts, never a user id
or a record's text.
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


# The library's parameter names and the flags that set them, in one place.
FLAG_OF = {
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
    """A job's own message about parameters, each written ``{param}`` (e.g. ``"give it
    {epsilon} and {delta}"``): every placeholder becomes the flag that sets the
    parameter, from :data:`FLAG_OF` or, inside :func:`flag_errors`, its overrides."""

    def __init__(self, template: str):
        super().__init__(template.format_map(FLAG_OF))
        self.template = template

    def naming(self, flag_of: dict) -> str:
        return self.template.format_map(flag_of)


@contextlib.contextmanager
def flag_errors(**flag_of):
    """A library ``ParameterError`` raised inside becomes a :class:`UsageError` that names
    the parameter by its flag: ``f"{flag} {problem}"``. ``flag_of`` overrides
    :data:`FLAG_OF` for this block (e.g. ``max_items_per_user="--counts-max-items-per-user"``);
    a :class:`FlagMessage` is worded with the same flags."""
    flags = {**FLAG_OF, **flag_of}
    try:
        yield
    except FlagMessage as exc:
        raise UsageError(exc.naming(flags)) from None
    except ParameterError as exc:
        if exc.param not in flags or not getattr(exc, "leads_with_param", True):
            raise  # a message that does not start with the parameter is shown whole
        raise UsageError(f"{flags[exc.param]} {exc.problem}") from None


CLEAN_ERRORS = (UsageError, InputFormatError, InvalidRecordError, NonGlobalWindowError)
_WRAPPED = re.compile(r"\b(InputFormatError|InvalidRecordError|NonGlobalWindowError|UsageError)"
                      r": (.+)")
_STEP = re.compile(r"\s*\[while running '[^']*'\]")


# A full disk (or quota) while a job writes: an expected failure, not a bug.
NO_SPACE_ERRNOS = (errno.ENOSPC, errno.EDQUOT)
_ERRNO = re.compile(r"\[Errno (\d+)\]")
_STEP_NAME = re.compile(r"\[while running '([^']*)'\]")


def _no_space_message(exc: BaseException) -> str | None:
    """The line for a full disk anywhere in ``exc``'s chain (Beam raises a RuntimeError
    whose text holds ``OSError: [Errno 28] …``, from the original), else None. It names
    the step, never the file's path (a staging file's)."""
    code, seen = None, set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen and code is None:
        seen.add(id(current))
        if isinstance(current, OSError) and current.errno in NO_SPACE_ERRNOS:
            code = current.errno
        else:
            match = _ERRNO.search(str(current))
            if match and int(match.group(1)) in NO_SPACE_ERRNOS:
                code = int(match.group(1))
        current = current.__cause__ or current.__context__
    if code is None:
        return None
    step = _STEP_NAME.search(str(exc))
    where = f" in step {step.group(1)!r}" if step else ""
    return (f"{os.strerror(code)} (errno {code}){where}: nothing of this run was put in "
            "place at the output; free some space and run again")


def _prism_start_message(exc: BaseException) -> str | None:
    """The line for a Prism runner that could not start (its binary neither found nor
    downloaded: an offline machine, a wrong ``--prism_location``), else None. Raised
    while the runner starts, before any data is read."""
    frames = traceback.extract_tb(exc.__traceback__)
    if not any(os.path.basename(frame.filename) == "prism_runner.py" for frame in frames):
        return None
    reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return (f"the Prism runner could not start ({reason[:300]}); give --prism_location a "
            "Prism binary, or choose another runner, e.g. --runner FnApiRunner "
            "(docs/how-to/runners.md)")


def error_message(exc: BaseException) -> str | None:
    """The one-line message of an expected failure, or None for a bug.

    Beam re-raises a DoFn's exception with ``[while running 'Step']``
    appended (dropped here); portable runners wrap it in a RuntimeError whose
    text holds the original ``InputFormatError: …`` line (found here). A full
    disk and a Prism runner that cannot start are expected too.
    """
    no_space = _no_space_message(exc)
    if no_space is not None:
        return no_space
    prism = _prism_start_message(exc)
    if prism is not None:
        return prism
    if isinstance(exc, CLEAN_ERRORS):
        text = str(exc)
    else:
        match = _WRAPPED.search(str(exc))
        if not match:
            return parquet_read_error(exc)
        text = match.group(2)
    return _STEP.sub("", text.strip().splitlines()[0] if text.strip() else text).strip()
