"""The ``Any`` output type internal DoFns declare, so Beam need not infer it at every build.

The same types and coders, without reading their bytecode (tests/beam/test_output_types.py)."""

from __future__ import annotations

import apache_beam as beam

__all__ = ["opaque_output"]

opaque_output = beam.typehints.with_output_types(beam.typehints.Any)
