"""Small input files the tests write for the jobs."""


def write_lines(path, lines, encoding: str = "utf-8") -> str:
    """Writes ``lines`` to ``path`` (a ``pathlib.Path``), each ended by a newline, and
    returns the path as str (what a job's ``--input`` takes)."""
    path.write_text("".join(f"{line}\n" for line in lines), encoding=encoding)
    return str(path)
