"""The jobs of beam_dpsu: vocabulary, ngrams, evaluate, benchmark (see docs/jobs.md).

Importing this package installs the handler for an interrupt while a job imports
Beam and a logging filter for Beam's noise, before Beam loads (in the worker
processes too). Details: docs/explanation/jobs.md#progress-lines
"""

# First, before any other import: the handler for an interrupt while the job starts.
from pipelines.interrupts import quiet_start

quiet_start()

import errno  # noqa: E402
import logging  # noqa: E402


class _BeamNoiseFilter(logging.Filter):
    """Drops Beam's start-up lines and its ERROR logs of errors the job reports itself."""

    _MESSAGES = ("apitools not found", "Discarding unparseable args",
                 "No semi_persistent_directory found", "Logging handler created")
    _CLEAN_ERRORS = ("InputFormatError", "InvalidRecordError", "NonGlobalWindowError",
                     "UsageError", "ReadParquetRowGroups/",  # io.parquet.PARQUET_READ_STEP
                     # a full disk (errors.NO_SPACE_ERRNOS)
                     f"[Errno {errno.ENOSPC}]", f"[Errno {errno.EDQUOT}]")

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001 - a malformed record is not ours to judge
            message = str(record.msg)
        if any(m in message for m in self._MESSAGES):
            return False
        if record.levelno >= logging.ERROR and record.name.startswith("apache_beam"):
            exc = record.exc_info[1] if record.exc_info else None
            text = f"{type(exc).__name__ if exc else ''} {message}"
            if isinstance(record.msg, BaseException):
                text += f" {type(record.msg).__name__}"
            return not any(name in text for name in self._CLEAN_ERRORS)
        return True


BEAM_NOISE_FILTER = _BeamNoiseFilter()
_NOISY_LOGGERS = ("", "apache_beam.options.pipeline_options", "apache_beam.runners.common",
                  "apache_beam.runners.worker.sdk_worker",
                  "apache_beam.runners.worker.bundle_processor",
                  # relays the log lines of the DirectRunner's worker processes
                  "apache_beam.runners.portability.local_job_service")


def quiet_beam() -> None:
    """Installs the noise filter on Beam's noisy loggers and the root's handlers (a
    logger's filters see only its own records); idempotent."""
    for filterer in [*map(logging.getLogger, _NOISY_LOGGERS), *logging.getLogger().handlers]:
        filterer.addFilter(BEAM_NOISE_FILTER)  # added once only (logging checks)


quiet_beam()
