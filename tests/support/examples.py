"""The example data sets in examples/, and smaller slices of them."""

import gzip
import os

from tests.support.paths import ROOT

IMDB_2K = os.path.join(ROOT, "examples", "imdb_2k.csv.gz")
"""2,000 reviews (columns user, review), one reviewer each, one row per line."""


def imdb_slice(path, rows: int) -> str:
    """The header and first ``rows`` reviews of examples/imdb_2k.csv.gz, as a .csv.gz at
    ``path``: the same kind of input at a fraction of the reading time."""
    with gzip.open(IMDB_2K, "rt", encoding="utf-8") as f:
        lines = f.read().split("\n")[:rows + 1]
    with gzip.open(path, "wt", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    return str(path)
