"""Reading user data into (user_id, items) records, (user_id, item) pairs or (user_id,
tokens) documents, for the jobs.

A row or document of text formats is read as one per-user record (its
tokens), the compact form ``SelectItems`` takes (``ReadUserItems``), and
never exploded into one element per token; ``ReadPairs`` does that, for
consumers that need pairs.

Formats (``--format``; inferred from the file names when not given, see
:func:`pipelines.io.formats.infer_format`):

* ``pairs``: CSV records ``user,item``, read with the csv module's default
  dialect (a quoted field may hold commas, ``""`` quotes and line breaks, as
  ``csv.writer`` writes them); the item is used exactly as written (no
  tokenising, no whitespace stripped). Every record has two non-empty
  fields; a blank line and a first line of column names (``user,item``) are
  refused, unless ``--skip-header-lines`` skips the header. Never inferred: a
  ``.csv`` file is read as ``csv``.
* ``csv``: a CSV file with a header row; ``--user-field`` names the user id
  column (or is ``@row``: each row is one user) and ``--text-field`` the text
  column, which is tokenised. A row with fewer or more fields than the header
  is refused; blank lines between records are skipped (as
  ``csv.DictReader`` does: a blank line is no record).
* ``jsonl``: one JSON object per line, with the same two fields; a blank line
  is refused, and so is a string read that holds a lone surrogate escape
  (``"\\udc80"``: JSON allows it, no UTF-8 spells it).
* In both (and in Parquet) a field read that the header or object names
  twice is refused, never one of the two taken.
* ``text``: one user per line, the whole line is their text; the user id is
  ``<file>:<line number>``. A first line that is a CSV header (``user,text``)
  is refused, unless ``--skip-header-lines`` skips it.
* ``msnbc`` (n-grams only): the UCI MSNBC sequence file, zipped or not.
* ``parquet``: Parquet files, read with Beam's Parquet source, only the
  columns needed: ``--user-field`` (a string, integer or binary column, or
  ``@row``) and either ``--text-field`` (a string column, tokenised) or
  ``--items-field`` (a list of strings: items already tokenised, used as
  is). Every file's footer is checked before a pipeline is built (see
  :func:`pipelines.io.parquet.inspect_parquet`). A binary user id must be
  UTF-8 (it is read as its text).
* In every format (pairs, csv, jsonl, parquet) a user id read from a field
  is its text (an integer's decimal text) with surrounding whitespace
  stripped (``str.strip``); one that is empty or only whitespace is refused.

Files are matched with Beam's filesystems (local, gs://, …) and decompressed
by extension (.gz, .bz2, .zst/.zstd, .deflate, .xz/.lzma) with Python's
decompressors, to the end-of-stream marker of the last member: a truncated or
corrupt file is an error, never a shorter read (Beam's own reader stops
silently where a cut file ends). Each file is parsed whole by one worker,
which keeps true line numbers for error messages (every line is decoded on
its own) and lets CSV fields span lines, up to ``FIELD_SIZE_LIMIT``
characters; a quote never closed is an error naming the line it opens on.

A record that cannot be read fails the pipeline with an ``InputFormatError``
naming the file, the line (and record) number and the field, and saying what
is wrong; it never quotes the record, a user id or text (runner logs keep
error messages). Nothing is skipped silently: what is skipped is said above
(header lines asked for, CSV blank lines, the MSNBC header). A compressed
file is read to its end when a parser fails on it, so that a corrupt file is
reported as corrupt (deflate's damage shows only at its checksum). Text
holding a NUL character is refused in every format: a NUL byte in a line, a
``\\u0000`` escape in JSON, a NUL in a Parquet string column, list of items or
binary user id (read as text).
:func:`pipelines.io.checks.inspect_input` parses the first records of each
file on the launching machine, before a pipeline is built, so that most
mistakes (a wrong ``--format`` among them: each parser checks its format's
shape and hints at the right one) fail at once.

Modules, one concern each:

* ``errors``: ``InputFormatError``;
* ``formats``: the format names, what each reads, the format file names imply, and
  ``READING_RULES_VERSION`` (changed with any rule above for how ids, items and texts
  are read);
* ``decompression``: ``open_input``, a file's bytes read whole or not at all;
* ``lines``: a byte stream's UTF-8 lines, each with its true number;
* ``parsers``: one parser per text format, (path, stream) → records;
* ``checks``: what is checked on the launching machine before a pipeline is built;
* ``parquet``: Parquet columns, footer checks and ``ReadParquetRecords``;
* ``read``: the Beam transforms the jobs read with (``ReadUserItems``,
  ``ReadPairs``, ``ReadDocuments``, ``ReadUserTexts``).
"""
