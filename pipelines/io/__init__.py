"""Reading user data into (user_id, items) records, (user_id, item) pairs or (user_id,
tokens) documents, for the jobs.

Every file is read whole or the job fails: a truncated or corrupt file is an
error, never a shorter read, and a record that cannot be read fails the pipeline
with an ``InputFormatError`` naming the file, line and field, never quoting the
record; nothing is skipped silently. The formats: docs/jobs.md#input-and-flags;
how, and why: docs/explanation/reading.md.
"""
