"""Where things are: the repository root, which the tests read files from."""

import os

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
"""The repository root (the folder holding README.md, beam_dpsu/ and tests/)."""
