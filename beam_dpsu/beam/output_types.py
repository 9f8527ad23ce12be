"""The output type the internal DoFns declare to Beam, so it need not infer it.

Beam would infer ``Any`` from their bytecode at every build; ``opaque_output`` declares
it: the same types and coders, without the cost (tests/beam/test_output_types.py).
"""

from __future__ import annotations

import apache_beam as beam

__all__ = ["opaque_output"]

opaque_output = beam.typehints.with_output_types(beam.typehints.Any)
