"""Assertions for tests of kernels against lowbit: bits, not tolerances.

``assert_bitexact`` compares codes and reports the first mismatches as ``lowbit check`` does: the element's
index, its input (when given), and the expected and actual codes with their exact values.
"""
from __future__ import annotations

from typing import Any, Optional

import numpy as np

from . import _lowbit
from ._arrays import source
from ._formats import format_name


def _code_and_value(fmt: str, code: int) -> str:
    """"0x7e (448)": a code and its exact value as ``lowbit check`` prints them (lowbit/text.hpp)."""
    return _lowbit.code_and_value(fmt, code)


def assert_bitexact(actual: Any, expected: Any, *, fmt: Any = None, inputs: Any = None, max_report: int = 10) -> None:
    """Assert that two arrays hold the same codes, element for element (NaN codes included).

    `actual` and `expected` are arrays of codes in a format's dtype (float8_e4m3fn, bfloat16, float32, ...),
    lowbit.Codes, or unsigned integers with `fmt`.  `inputs` (optional, shaped as they are) are shown beside
    each mismatch.  On a difference, the AssertionError lists the first `max_report` mismatches as
    ``lowbit check`` does (index, input, expected and actual code with its exact value).  Comparing nothing
    (two empty arrays) fails too: a test that compared no element has shown nothing.

    Example:
        >>> import lowbit, numpy as np
        >>> x = np.array([0.3, 480.0], np.float32)
        >>> lowbit.testing.assert_bitexact(lowbit.convert(x, "e4m3", profile="cuda"),
        ...                                lowbit.convert(x, "e4m3", overflow="satfinite"))
    """
    name = None if fmt is None else format_name(fmt, "fmt")
    a, fa, shape_a = source(actual, "actual", name)
    e, fe, shape_e = source(expected, "expected", name)
    if fa != fe:
        raise AssertionError(f"actual holds {fa} codes, expected {fe} codes")
    if shape_a != shape_e:
        raise AssertionError(f"actual has shape {shape_a}, expected {shape_e}")
    if a.size == 0:
        raise AssertionError("nothing was compared: the arrays are empty")
    x = None
    if inputs is not None:
        x, fx, shape_x = source(inputs, "inputs")
        if shape_x != shape_e:
            raise ValueError(f"inputs: shape {shape_x} is not the arrays' shape {shape_e}")
    bad = np.flatnonzero(a != e)
    if bad.size == 0:
        return
    lines = [f"{bad.size} of {a.size} elements differ ({fe}); the first {min(bad.size, max_report)}:"]
    for i in bad[:max_report]:
        index = np.unravel_index(int(i), shape_e) if shape_e else ()
        text = f"  [{', '.join(str(int(k)) for k in index)}]:"
        if x is not None:
            text += f" input {_code_and_value(fx, int(x[i]))}"
        text += f" expected {_code_and_value(fe, int(e[i]))}, actual {_code_and_value(fe, int(a[i]))}"
        lines.append(text)
    raise AssertionError("\n".join(lines))
