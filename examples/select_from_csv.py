"""File in, file out with the library: the words of a CSV file's text column, and their counts.

    pip install -e .
    python examples/select_from_csv.py --input examples/imdb_2k.csv.gz \\
        --user-field user --text-field review --epsilon 1 --delta 1e-5 --output /tmp/words

Reads the CSV with Beam's own I/O (``ReadFromText``: one row per line, the
header skipped, ``.gz`` decompressed by its suffix; for rows with quoted line
breaks read the file with the jobs' reader, or Beam's ``ReadFromCsv``), one
record per row: (user, the row's tokens by ``beam_dpsu.tokenize``). One
(ε, δ) total pays for the release and the counts, split as the vocabulary
job splits it with ``--with-counts``: ``split_selection_and_counts`` given the
selection's mechanism and the counts' Δ0 spends the slack between the sum
and the two as run (tight composition, ``docs/privacy.md``), so each part
gets more than its share of a plain sum. Then SIPS releases the words
(``SelectItems``) and ``CountReleased`` counts the users holding each.

Writes ``OUT/items-00000-of-00001.txt`` (the released words, sorted:
``WriteReleased``) and ``OUT/counts-00000-of-00001.tsv`` (``word<TAB>noisy
count``, in the words' order: ``WriteReleasedCounts``), and prints one line:
the number of released words and the budget of each part.
"""

from __future__ import annotations

import argparse
import csv
import os
import sys

import apache_beam as beam
import beam_dpsu
from apache_beam.io.filesystems import FileSystems

MAX_ITEMS_PER_USER = 20  # Δ0 of the selection and of the counts


def header_of(path: str) -> list[str]:
    """The CSV header's field names (FileSystems decompresses by the file's suffix)."""
    with FileSystems.open(path) as f:
        first = f.readline().decode("utf-8-sig")
    return next(csv.reader([first]))


def parse_row(line: str, user: int, text: int):
    """(user, tokens) of one CSV line; ``user`` and ``text`` are column positions."""
    row = next(csv.reader([line]))
    return row[user], beam_dpsu.tokenize(row[text])


def run(input_path: str, user_field: str, text_field: str, total: beam_dpsu.Budget,
        output: str, argv=None) -> str:
    """Runs the pipeline; returns the summary line."""
    header = header_of(input_path)
    for field in (user_field, text_field):
        if field not in header:
            raise SystemExit(f"error: {input_path}: the header has no field {field!r} "
                             f"(it has {', '.join(header)})")
    user, text = header.index(user_field), header.index(text_field)
    sips = beam_dpsu.SIPS(max_items_per_user=MAX_ITEMS_PER_USER)
    parts = beam_dpsu.split_selection_and_counts(
        total, selection_mechanism=sips, counts_max_items_per_user=MAX_ITEMS_PER_USER)
    select = beam_dpsu.SelectItems(sips, parts.selection)
    os.makedirs(output, exist_ok=True)
    with beam.Pipeline(argv=argv) as p:
        records = (p
                   | "ReadCsv" >> beam.io.ReadFromText(input_path, skip_header_lines=1)
                   | "ParseRows" >> beam.Map(parse_row, user, text))
        released = records | "SelectWords" >> select
        _ = released | "WriteWords" >> beam_dpsu.WriteReleased(f"{output}/items")
        counts = records | "CountWords" >> beam_dpsu.CountReleased(
            released, parts.counts, max_items_per_user=MAX_ITEMS_PER_USER)
        _ = counts | "WriteCounts" >> beam_dpsu.WriteReleasedCounts(f"{output}/counts")
    released_words = beam_dpsu.read_released(f"{output}/items-*.txt")
    return (f"released {len(released_words):,} words with SIPS under (ε = {total.epsilon:g}, "
            f"δ = {total.delta:g})-DP: the selection "
            f"{parts.selection.epsilon:.3f} and the counts {parts.counts.epsilon:.3f} of ε "
            f"(tight split, scale {parts.scale:.3f}); wrote {output}/items-00000-of-00001.txt "
            f"and {output}/counts-00000-of-00001.tsv")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--input", required=True)
    parser.add_argument("--user-field", default="user")
    parser.add_argument("--text-field", default="review")
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--delta", type=float, default=1e-5)
    parser.add_argument("--output", required=True)
    args, beam_args = parser.parse_known_args(argv)
    print(run(args.input, args.user_field, args.text_field,
              beam_dpsu.Budget(args.epsilon, args.delta), args.output, beam_args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
