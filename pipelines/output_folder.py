"""The output folder: one folder, one release, appearing complete or not at all.

The run writes into a hidden, locked sibling renamed into place once everything
is written, removed if the run fails. Details: docs/explanation/jobs.md#the-output-folder
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import re
import shutil
import uuid
from typing import Callable, Sequence

from apache_beam.io.filesystems import FileSystems

from pipelines.errors import UsageError
from pipelines.interrupts import INTERRUPTS

__all__ = ["prepare_output", "written_whole", "run_with_output", "staging_of", "STAGING"]

STAGING = ".beam_dpsu-staging-"
# A staging folder being created (locked, then renamed), and an old folder moved aside.
_STARTING = ".beam_dpsu-starting-"
_OLD = ".beam_dpsu-old-"

_LOG = logging.getLogger("pipelines")

# A writer's temporary file left by a worker that died before its rename (its bundle
# was retried and wrote the file again): not part of the release.
_LEFTOVER_TEMPORARY = re.compile(r"\.tmp-[0-9a-f]{32}")


def _is_local(path: str) -> bool:
    return "://" not in path


def _sibling(folder: str, kind: str = STAGING) -> str:
    """A hidden, unique name beside ``folder`` (absolute, or a URL): ``PARENT/.NAME<kind><hex>``."""
    parent, _, name = folder.rstrip("/").rpartition("/")
    return f"{parent}/.{name}{kind}{uuid.uuid4().hex[:12]}"


def _locked(path: str) -> int | None:
    """A descriptor of folder ``path`` holding an exclusive ``flock``, or None."""
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


def _clear_left_siblings(path: str) -> None:
    """Removes the staging siblings of ``path`` no live run holds; names the others."""
    parent, name = os.path.split(path)
    pattern = re.compile(rf"\.{re.escape(name)}({re.escape(STAGING)}|{re.escape(_OLD)})"
                         r"[0-9a-f]{12}")
    try:
        siblings = sorted(n for n in os.listdir(parent) if pattern.fullmatch(n))
    except OSError:
        return  # no parent yet (or unreadable): nothing to find
    for sibling in siblings:
        where = os.path.join(parent, sibling)
        if pattern.fullmatch(sibling).group(1) == _OLD:  # type: ignore[union-attr]
            _LOG.warning(f"warning: {where} holds a folder moved aside by an earlier run "
                         "killed while it put its output in place; check it and remove it")
            continue
        try:
            fd = _locked(where)
        except OSError:
            continue  # gone meanwhile, or not a folder
        if fd is None:
            _LOG.warning(f"warning: {where} is a staging folder that another run into the "
                         "same --output may be writing (locked, or locks unsupported); "
                         "left as it is")
            continue
        try:
            shutil.rmtree(where)
            _LOG.warning(f"warning: removed {where}, a staging folder left by an earlier run "
                         "that did not finish (killed?)")
        except OSError as exc:
            _LOG.warning(f"warning: {where} is a staging folder left by an earlier run that "
                         f"did not finish; it cannot be removed ({exc.strerror or exc}): remove it")
        finally:
            os.close(fd)


def _refuse_used(folder: str) -> None:
    raise UsageError(f"--output {folder} already holds files (an earlier release?); give "
                     "--overwrite to replace the whole folder, or choose a new or empty one")


def _swap_folders(a: str, b: str) -> bool:
    """Exchanges two folders' names in one step (``renameat2``); False where it cannot."""
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd, rename_exchange = -100, 2
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p,
                          ctypes.c_uint]
    return renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0


class _LocalOutput:
    """A local output folder written whole or not at all, through ``staging``."""

    def __init__(self, folder: str, overwrite: bool = False, inputs: Sequence[str] = ()):
        self.folder, self.overwrite = folder, overwrite
        self._path = os.path.realpath(folder)  # a symlinked folder: replaced where it is
        if os.path.exists(self._path) and not os.path.isdir(self._path):
            raise UsageError(f"cannot write output {folder!r}: it is a file, not a folder")
        if os.path.isdir(self._path):
            if os.listdir(self._path) and not overwrite:
                _refuse_used(folder)
            self._check_replaceable(inputs)
        parent = os.path.dirname(self._path)
        self._created = _missing_ancestor(parent)  # removed again if the run fails
        _clear_left_siblings(self._path)
        self.staging = _sibling(self._path)
        self._lock: int | None = None  # held while the run lives
        starting = _sibling(self._path, _STARTING)
        try:
            os.makedirs(parent, exist_ok=True)
            os.mkdir(starting)
            self._lock = _locked(starting)
            os.rename(starting, self.staging)
        except OSError as exc:
            self._unlock()
            with contextlib.suppress(OSError):
                os.rmdir(starting)
            blocker = os.path.dirname(self._created) if self._created else parent
            reason = (f"{blocker} is a file" if not os.path.isdir(blocker)
                      else exc.strerror or type(exc).__name__)
            self._remove_created()
            raise UsageError(f"cannot write output folder {folder!r}: {reason}") from None

    def _check_replaceable(self, inputs: Sequence[str]) -> None:
        inside = self._path.rstrip(os.sep) + os.sep
        if (os.getcwd() + os.sep).startswith(inside):
            raise UsageError(f"--output {self.folder} holds the working folder, which the "
                             "job would replace; choose another --output")
        for f in inputs:
            if f and _is_local(f) and os.path.realpath(f).startswith(inside):
                raise UsageError(f"--output {self.folder} holds the input {f}; --overwrite "
                                 "would remove it: choose another --output")

    def _unlock(self) -> None:
        if self._lock is not None:
            os.close(self._lock)
            self._lock = None

    def commit(self) -> None:
        try:
            for name in os.listdir(self.staging):
                if _LEFTOVER_TEMPORARY.search(name):
                    os.remove(os.path.join(self.staging, name))
            self._put_in_place()
        finally:
            self._unlock()

    def _put_in_place(self) -> None:
        try:
            if not (os.path.isdir(self._path) and os.listdir(self._path)):
                os.replace(self.staging, self._path)  # onto a missing or empty folder
            elif not self.overwrite:  # filled by someone else while the job ran
                _refuse_used(self.folder)
            elif _swap_folders(self.staging, self._path):
                shutil.rmtree(self.staging, ignore_errors=True)  # now the old folder
            else:
                old = _sibling(self._path, _OLD)
                os.rename(self._path, old)
                try:
                    os.rename(self.staging, self._path)
                except OSError:
                    os.rename(old, self._path)  # the old folder back, whole
                    raise
                shutil.rmtree(old, ignore_errors=True)
        except OSError as exc:
            raise UsageError(f"cannot put output folder {self.folder!r} in place: "
                             f"{exc.strerror or exc}") from None

    def discard(self) -> None:
        shutil.rmtree(self.staging, ignore_errors=True)
        self._unlock()
        self._remove_created()

    def _remove_created(self) -> None:
        """Removes the parent folders this run created, while they are empty."""
        if not self._created:
            return
        path = os.path.dirname(self._path)
        while True:
            try:
                os.rmdir(path)
            except OSError:
                return
            if path == self._created:
                return
            path = os.path.dirname(path)


class _RemoteOutput:
    """A remote output (gs://, …) through Beam's FileSystems, file by file: NOT atomic."""

    def __init__(self, folder: str, overwrite: bool = False, inputs: Sequence[str] = ()):
        self.folder, self.overwrite = folder.rstrip("/"), overwrite
        try:
            FileSystems.get_filesystem(folder)
        except ValueError as exc:
            raise UsageError(f"cannot write output {folder!r}: {exc}") from None
        if self._files(self.folder) and not overwrite:
            _refuse_used(folder)
        if inside := [f for f in inputs if f and f.startswith(self.folder + "/")]:
            raise UsageError(f"--output {folder} holds the input {inside[0]}; choose another "
                             "--output")
        self.staging = _sibling(self.folder)

    @staticmethod
    def _files(prefix: str) -> list[str]:
        """Every file under ``prefix``."""
        try:
            return [m.path for m in FileSystems.match([prefix + "/**"])[0].metadata_list]
        except Exception as exc:  # noqa: BLE001 - BeamIOError wraps the store's own error
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise UsageError(f"cannot list output {prefix!r}: {first}") from None

    def commit(self) -> None:
        if old := self._files(self.folder):
            if not self.overwrite:
                _refuse_used(self.folder)
            FileSystems.delete(old)
        new = self._files(self.staging)
        if leftovers := [p for p in new if _LEFTOVER_TEMPORARY.search(p[len(self.staging):])]:
            FileSystems.delete(leftovers)
            new = [p for p in new if p not in leftovers]
        FileSystems.rename(new, [self.folder + p[len(self.staging):] for p in new])
        self.discard()

    def discard(self) -> None:
        with contextlib.suppress(Exception):  # best effort, after a failure already reported
            if left := self._files(self.staging):
                FileSystems.delete(left)
            if FileSystems.exists(self.staging):
                FileSystems.delete([self.staging])


def prepare_output(folder: str, overwrite: bool = False, inputs: Sequence[str] = ()):
    """The output folder, checked before any pipeline runs.

    The run writes into its ``staging``; :meth:`commit` puts it in place,
    :meth:`discard` removes it after a failure.

    Args:
      folder: the ``--output`` folder.
      overwrite: whether a folder that holds files may be replaced.
      inputs: the input files, which the folder must not hold.

    Raises:
      UsageError: an empty or blank ``folder``, the root folder, a folder that holds files
        (without ``overwrite``), a file, an unwritable place; with ``overwrite``, one
        holding an input or the working folder.
    """
    if not folder.strip():
        raise UsageError(f"--output is empty ({folder!r}): give the folder to write into")
    path = folder.split("://", 1)[1] if not _is_local(folder) else os.path.realpath(folder)
    if not path.strip("/").strip():
        raise UsageError(f"--output {folder} is the root folder, which the job would fill; "
                         "give a folder of its own")
    if _is_local(folder):
        return _LocalOutput(folder, overwrite, inputs)
    return _RemoteOutput(folder, overwrite, inputs)


def _missing_ancestor(path: str) -> str | None:
    """The topmost folder of ``path`` (itself included) that does not exist yet."""
    missing = None
    while path and not os.path.exists(path):  # an absolute path: "/" exists
        missing, path = path, os.path.dirname(path)
    return missing


@contextlib.contextmanager
def written_whole(folder: str | None, overwrite: bool = False, inputs: Sequence[str] = ()):
    """Yields where to write ``folder`` (None: nothing); puts it in place when the block
    ends, removes it if the block raises."""
    if folder is None:
        yield None
        return
    output = None
    try:
        with INTERRUPTS.held():  # an interrupt waits until the sibling exists
            output = prepare_output(folder, overwrite, inputs)
        yield output.staging
        if INTERRUPTS.signal is not None:
            raise KeyboardInterrupt  # one came and was swallowed on the way here
        with INTERRUPTS.held(then_raise=False):  # once started, too late to stop
            output.commit()
            INTERRUPTS.released_to = folder
    except BaseException:
        if output is not None:
            with INTERRUPTS.held(then_raise=False):
                output.discard()
        raise


def run_with_output(job, run: Callable[..., str]) -> str:
    """``run(job)`` with ``job.staging`` where to write ``job.output`` (:func:`written_whole`)."""
    with written_whole(getattr(job, "output", None), getattr(job, "overwrite", False),
                       getattr(job, "inputs", ())) as staging:
        job.staging = staging
        return run(job)


def staging_of(job) -> str:
    """Where the job writes: its staging folder (:func:`run_with_output`), else ``job.output``."""
    staging = getattr(job, "staging", None)
    return (job.output if staging is None else staging).rstrip("/")
