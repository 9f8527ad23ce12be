"""Small input files the tests write for the jobs."""

import csv


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
