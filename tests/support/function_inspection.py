"""A memo of Beam's inspection of Python functions for the test suite (speed only).

Beam inspects the functions of a pipeline many times while it builds,
translates and runs it:

* ``get_signature`` (``inspect.signature``) of a DoFn's ``process``, of every
  function given to ``Map``/``FlatMap``/``Filter`` and of its type hints, in
  ``ParDo.__init__``, in the runner-API translation and again in every bundle
  processor: about 700,000 times in the suite, a tenth of its pipeline CPU;
* ``_get_function_body_without_inners`` (``inspect.getsourcelines``, which
  tokenizes the function's source) in every ``ParDo.__init__``, to warn of a
  ``process`` that both yields and returns.

Both answers are functions of the function alone. The signature of a plain
function is read from its code, defaults, annotations and ``__wrapped__``,
which nothing in a pipeline changes once the function exists; a bound
method's is its function's without the first parameter, whatever it is bound
to. So the memo keeps a plain function's signature (and a bound method's, by
its function) for as long as the function lives (weakly keyed), and computes
everything else (classes, partials, callable objects, builtins) as Beam does.
The source body is kept per code object and file (code objects compare by
their content and first line, not their file). Errors are never kept.
``BEAM_DPSU_TESTS_NO_INSPECTION_MEMO=1`` turns the memo off;
tests/project/test_suite_speedups.py checks it against Beam's own answers.
"""

import os
import types
import weakref

from apache_beam.transforms import core, ptransform, util
from apache_beam.typehints import decorators

__all__ = ["install"]

# Every module that calls ``get_signature`` by the name it imported.
SIGNATURE_READERS = (decorators, core, ptransform, util)


def install() -> bool:
    """Replaces Beam's ``get_signature`` and ``_get_function_body_without_inners`` by
    their memoised twins; False if switched off."""
    if os.environ.get("BEAM_DPSU_TESTS_NO_INSPECTION_MEMO") == "1":
        return False
    original_signature = getattr(decorators.get_signature, "__wrapped__",
                                 decorators.get_signature)
    original_body = getattr(core._get_function_body_without_inners, "__wrapped__",
                            core._get_function_body_without_inners)
    plain: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # function → signature
    bound: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # method's function → its
    bodies: dict = {}  # (code object, file) → source body

    def get_signature(func):
        kind = type(func)
        if kind is types.FunctionType:
            kept, key = plain, func
        elif kind is types.MethodType and type(func.__func__) is types.FunctionType:
            kept, key = bound, func.__func__
        else:
            return original_signature(func)
        signature = kept.get(key)
        if signature is None:
            signature = kept[key] = original_signature(func)
        return signature

    def get_function_body_without_inners(func):
        code = getattr(getattr(func, "__func__", func), "__code__", None)
        if type(code) is not types.CodeType:
            return original_body(func)
        key = (code, code.co_filename)  # code objects compare without their file
        body = bodies.get(key)
        if body is None:
            body = bodies[key] = original_body(func)
        return body

    get_signature.__wrapped__ = original_signature  # type: ignore[attr-defined]
    get_function_body_without_inners.__wrapped__ = original_body  # type: ignore[attr-defined]
    for module in SIGNATURE_READERS:
        module.get_signature = get_signature  # type: ignore[attr-defined]
    core._get_function_body_without_inners = get_function_body_without_inners
    return True
