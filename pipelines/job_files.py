"""Files a job writes and reads beside its release: the JSON report, scratch folders."""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import uuid

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems

from beam_dpsu.core.report import to_json
from pipelines.errors import UsageError

__all__ = ["WriteJson", "read_json", "scratch_folder", "check_scratch_folder"]


def _write_file(text: str, path: str) -> str:
    """Writes ``text`` to ``path`` through a temporary name: never a partial file there."""
    temporary = f"{path}.tmp-{uuid.uuid4().hex}"
    handle = FileSystems.create(temporary)
    try:
        handle.write(text.encode("utf-8"))
    finally:
        handle.close()
    FileSystems.rename([temporary], [path])
    return path


class WriteJson(beam.PTransform):
    """Writes the one dict of a PCollection as a JSON file at ``path``.

    Strict JSON with keys in insertion order: the same report is the same bytes.
    """

    def __init__(self, path: str):
        super().__init__()
        self._path = path

    def expand(self, reports):
        path = self._path
        return (reports | "ToJson" >> beam.Map(to_json)
                | "WriteFile" >> beam.Map(
                    lambda text: _write_file(text + "\n", path)).with_output_types(str))


def check_scratch_folder(folder: str, flag: str) -> None:
    """A flag's scratch folder is a local folder, or one that can be created (it is, here).

    Args:
      folder: the flag's value.
      flag: the flag, e.g. ``"--workdir"``, for the message.

    Raises:
      UsageError: naming ``flag`` and the problem.
    """
    if "://" in folder:
        raise UsageError(f"{flag} must be a local folder, got {folder!r}")
    if os.path.exists(folder) and not os.path.isdir(folder):
        raise UsageError(f"{flag} {folder} is a file, not a folder")
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"{flag} {folder} cannot be created: {exc.strerror or exc}") from None
    if not os.access(folder, os.W_OK | os.X_OK):
        raise UsageError(f"{flag} {folder} is not writable")


def scratch_folder(folder: str | None, prefix: str) -> contextlib.AbstractContextManager[str]:
    """``folder`` (created if needed, and kept), or a temporary folder removed at the end."""
    if folder:
        os.makedirs(folder, exist_ok=True)
        return contextlib.nullcontext(folder)
    return tempfile.TemporaryDirectory(prefix=prefix, ignore_cleanup_errors=True)


def read_json(path: str) -> dict:
    """A JSON file written by the run (local or remote), for the closing summary."""
    with FileSystems.open(path) as f:
        return json.loads(f.read().decode("utf-8"))

