"""Helpers shared by the test files: paths, readers of a job's output folder,
Hypothesis example counts, data sets and statistics used in several files.

Test files import from here, never from one another (tests/project/test_tests_layout.py)."""
