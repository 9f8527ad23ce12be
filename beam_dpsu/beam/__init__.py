"""Beam building blocks of beam_dpsu: they move data (bounding, histograms, the
sequential DoFn, SIPS rounds, Δ0 routing, the release guard, records, output) and
call the pure core for every decision."""
