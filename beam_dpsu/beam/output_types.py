"""The output type the internal DoFns declare to Beam, so it need not infer it.

Beam infers an undeclared output type from the DoFn's bytecode every time a
pipeline is built; for the DoFns that emit blocks, shard dicts or records it
infers ``Any``. ``opaque_output`` declares exactly that: the same types and
coders, without the cost (tests/beam/test_output_types.py checks both).
"""

from __future__ import annotations

import apache_beam as beam

__all__ = ["opaque_output"]

# A class decorator: the DoFn's outputs are declared ``Any``.
opaque_output = beam.typehints.with_output_types(beam.typehints.Any)
