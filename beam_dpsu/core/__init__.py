"""The pure core of beam_dpsu: budgets, calibration, thresholds, policies and the
rest of the mathematics, in plain Python and numpy. Nothing here imports Apache
Beam (tests/core/test_layers.py checks it)."""
