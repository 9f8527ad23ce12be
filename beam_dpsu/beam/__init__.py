"""Beam building blocks of beam_dpsu: they move data and call the pure core for every decision."""
