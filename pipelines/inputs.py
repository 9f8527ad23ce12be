"""The names ``pipelines/cli.py`` still imports from here, until it imports them from
``pipelines.io`` (the input package); nothing else imports this module, and it goes then."""

from pipelines.io.checks import check_input_exists, inspect_input
from pipelines.io.errors import InputFormatError
from pipelines.io.formats import FORMAT_HELP, ROW_AS_USER, infer_format
from pipelines.io.parquet import ParquetFields, inspect_parquet, parquet_read_error

__all__ = ["FORMAT_HELP", "ROW_AS_USER", "InputFormatError", "ParquetFields",
           "check_input_exists", "infer_format", "inspect_input", "inspect_parquet",
           "parquet_read_error"]
