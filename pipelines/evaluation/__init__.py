"""Evaluation and benchmark jobs, for measuring the library rather than releasing data
(every figure they print is a raw statistic of the data, not private):

* ``python -m pipelines.evaluation.evaluate``: items released per mechanism and
  budget, each trial from one cached read of the input;
* ``python -m pipelines.evaluation.benchmark``: how fast a job runs against reading
  its input (wall time, pairs/s, peak memory);
* ``python -m pipelines.evaluation.peers``: PipelineDP's partition selection next
  to beam_dpsu on the same data and budget;
* ``python -m pipelines.evaluation.max_items``: Δ0 chosen privately against the
  best fixed Δ0 of a grid.
"""
