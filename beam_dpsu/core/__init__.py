"""The pure core of beam_dpsu: budgets, calibration, thresholds, policies and the
rest of the mathematics, in plain Python and numpy. Nothing here imports Apache
Beam (tests/core/test_layers.py checks it).

Nor does any module here import scipy when it is imported: each function that
computes with it imports the part it needs (``from scipy import special``), since
scipy's modules cost ~0.3-0.5 CPU-s each on every start that never computes with
them (a job's ``--help``, each worker process of a multi-process run);
tests/core/test_layers.py checks this too."""
