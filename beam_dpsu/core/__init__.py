"""The pure core of beam_dpsu: budgets, calibration, thresholds, policies and the rest of
the mathematics, in plain Python and numpy, importing neither Apache Beam nor scipy
(tests/core/test_layers.py checks both): each function that computes with scipy imports
it (``from scipy import special``), since scipy's modules cost ~0.3-0.5 CPU-s each on
every start that never uses them (a job's ``--help``, each worker of a multi-process run)."""
