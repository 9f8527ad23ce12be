"""The output type the internal DoFns declare to Beam, so it need not infer it.

When a step declares no output type, Beam infers one as it builds the pipeline,
by interpreting the bytecode of the DoFn's ``process`` and of what it calls
(``apache_beam.typehints.trivial_inference``), every time a pipeline is built:
a cost for every step, and a visible share of the test suite's time. For
the DoFns that emit packed blocks, shard dicts or records, what it infers is
``Any`` whatever the input; ``opaque_output`` declares exactly that, so the
build skips the inference and each output PCollection gets the type, and so
the coder, it got before (tests/beam/test_output_types.py checks both).
"""

from __future__ import annotations

import apache_beam as beam

__all__ = ["opaque_output"]

# A class decorator: the DoFn's outputs are declared ``Any``.
opaque_output = beam.typehints.with_output_types(beam.typehints.Any)
