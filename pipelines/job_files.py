"""Files a job writes and reads beside its release: the JSON report, scratch folders."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
import uuid

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems

from beam_dpsu.core.report import to_json

__all__ = ["WriteJson", "read_json", "scratch_folder"]


def _write_file(text: str, path: str) -> str:
    """Writes ``text`` to a temporary name beside ``path``, then renames it: a failed
    write never leaves a partial file under the final name."""
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

    Written as one file (no temporary folder; a temporary name renamed), as
    strict JSON with keys in insertion order, so the same report is the same bytes.
    """

    def __init__(self, path: str):
        super().__init__()
        self._path = path

    def expand(self, reports):
        path = self._path
        return (reports
                | "ToJson" >> beam.Map(to_json)
                | "WriteFile" >> beam.Map(
                    lambda text: _write_file(text + "\n", path)).with_output_types(str))


@contextlib.contextmanager
def scratch_folder(folder: str | None, prefix: str):
    """``folder`` (created if needed, and kept), or a temporary folder removed at the end."""
    if folder:
        os.makedirs(folder, exist_ok=True)
        yield folder
        return
    temporary = tempfile.mkdtemp(prefix=prefix)
    try:
        yield temporary
    finally:
        shutil.rmtree(temporary, ignore_errors=True)


def read_json(path: str) -> dict:
    """A JSON file written by the run (local or remote), for the closing summary."""
    with FileSystems.open(path) as f:
        return json.loads(f.read().decode("utf-8"))

