"""Small input files the tests write for the jobs."""

import csv
import gzip
import random


def write_lines(path, lines, encoding: str = "utf-8") -> str:
    """Writes ``lines`` to ``path`` (a ``pathlib.Path``), each ended by a newline, and
    returns the path as str (what a job's ``--input`` takes)."""
    path.write_text("".join(f"{line}\n" for line in lines), encoding=encoding)
    return str(path)


def write_pairs(path, items_per_user, users: int = 60) -> str:
    """``users`` users each holding every item of ``items_per_user``, written by
    Python's csv.writer (items holding a quote, comma or line break are quoted)."""
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        for u in range(users):
            for item in items_per_user:
                writer.writerow([f"u{u}", item])
    return str(path)


def csv_gzip_corrupted_mid_stream(path):
    """A .csv.gz whose deflate data is damaged mid-stream: it decompresses into garbage
    (which a parser meets first) and fails only at its checksum."""
    rng = random.Random(0)
    words = ["alpha", "beta", "gamma", "delta", "cat", "dog", "mouse", "horse"]
    text = "user,text\n" + "".join(f"u{i},{' '.join(rng.choice(words) for _ in range(8))}\n"
                                   for i in range(30000))
    data = bytearray(gzip.compress(text.encode(), mtime=0))
    middle = len(data) // 2
    data[middle:middle + 16] = bytes(b ^ 0xFF for b in data[middle:middle + 16])
    path.write_bytes(bytes(data))
    return path
