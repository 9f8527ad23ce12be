"""Evaluation and benchmark jobs, for measuring the library rather than releasing data
(every figure they print is a raw statistic of the data, not private): ``evaluate``
(items released per mechanism and budget), ``benchmark`` (speed against reading the
input), ``peers`` (PipelineDP next to beam_dpsu), ``max_items`` (Δ0 auto against a grid).
"""
