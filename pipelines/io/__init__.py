"""Reading user data into (user_id, items) records, (user_id, item) pairs or (user_id,
tokens) documents, for the jobs.

A row or document of text formats is read as one per-user record (its
tokens), the compact form ``SelectItems`` takes (``ReadUserItems``), and
never exploded into one element per token; ``ReadPairs`` does that, for
consumers that need pairs. The formats (``--format``: pairs, csv, jsonl, text,
msnbc, parquet; inferred from the file names when not given, see
:func:`pipelines.io.formats.infer_format`), and exactly what each reads and
refuses: docs/jobs.md#input-and-flags.

Every file is read whole or the job fails: files are matched with Beam's
filesystems (local, gs://, …) and decompressed by extension with Python's
decompressors, to the end-of-stream marker of the last member (a truncated or
corrupt file is an error, never a shorter read); each file is parsed whole by
one worker, which keeps true line numbers and lets CSV fields span lines. A
record that cannot be read fails the pipeline with an ``InputFormatError``
naming the file, line and field, never quoting the record, a user id or text;
nothing is skipped silently. :func:`pipelines.io.checks.inspect_input` parses
the first records of each file before a pipeline is built, so that most
mistakes (a wrong ``--format`` among them) fail at once.

Modules, one concern each: ``errors`` (``InputFormatError``), ``formats`` (the
format names, what each reads, what file names imply, ``READING_RULES_VERSION``), ``decompression``
(``open_input``: a file's bytes read whole or not at all), ``lines`` (a byte
stream's UTF-8 lines with their true numbers), ``parsers`` (one per text
format), ``checks`` (on the launching machine, before a pipeline is built),
``parquet`` (columns, footer checks, ``ReadParquetRecords``) and ``read`` (the
jobs' Beam transforms: ``ReadUserItems``, ``ReadPairs``, ``ReadDocuments``,
``ReadUserTexts``).
"""
