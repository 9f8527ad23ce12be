"""Readers of what a job (``python -m pipelines.vocabulary`` / ``pipelines.ngrams``)
wrote in its output folder: shard files, report.json, every file's bytes."""

import glob
import json
import os


def shard_lines(out_dir, pattern: str) -> list[str]:
    """Every line of the files matching ``pattern`` (e.g. ``"items-*.txt"``), the
    files in name order, each line without its newline; blank lines kept."""
    lines = []
    for path in sorted(glob.glob(os.path.join(out_dir, pattern))):
        with open(path, encoding="utf-8") as f:
            lines += [line.rstrip("\n") for line in f]
    return lines


def read_report(out_dir) -> dict:
    """The job's report.json."""
    with open(os.path.join(out_dir, "report.json"), encoding="utf-8") as f:
        return json.load(f)


def released_items_and_report(out_dir) -> tuple[list[str], dict]:
    """The vocabulary job's released items (its items-*.txt lines, blank lines
    left out) and its report."""
    items = [line for line in shard_lines(out_dir, "items-*.txt") if line.strip()]
    return items, read_report(out_dir)


def output_bytes(out_dir) -> dict:
    """Every file the job wrote, name → bytes."""
    files = {}
    for path in sorted(glob.glob(os.path.join(out_dir, "*"))):
        with open(path, "rb") as f:
            files[os.path.basename(path)] = f.read()
    return files
