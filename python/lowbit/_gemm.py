"""GEMM procedures on arrays: ``lowbit gemm`` (gemm::run, lowbit/procedure.hpp)."""
from __future__ import annotations

from typing import Any, Optional

import numpy as np

from . import _lowbit
from ._arrays import source, wrap_codes
from ._dtypes import UINT_OF_BYTES
from ._formats import format_name


def _f32_bits(value: Any, argument: str) -> int:
    """The f32 bit pattern of a value that is an f32 value exactly (the command line takes f32 bits)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.floating, np.integer)):
        raise TypeError(f"{argument}: expected a number, not {type(value).__name__}")
    f = np.float32(value)
    if not np.isnan(f) and float(f) != float(value):
        raise ValueError(f"{argument}: {value!r} is not an f32 value (pass np.float32({value!r}) to round it)")
    return int(f.view(np.uint32))


def _matrix(x: Any, argument: str, fmt: Any) -> tuple[np.ndarray, str, tuple]:
    name = None if fmt is None else format_name(fmt, f"{argument}_format")
    flat, name, shape = source(x, argument, name)
    if len(shape) != 2:
        raise ValueError(f"{argument}: shape {shape} is not a matrix")
    return flat, name, shape


def gemm(a: Any, b: Any, *, model: str, a_format: Any = None, b_format: Any = None, c: Any = None,
         alpha: float = 1.0, beta: Optional[float] = None, scale_a: float = 1.0, scale_b: float = 1.0,
         scale_c: float = 1.0, scale_d: float = 1.0, a_scales: Any = None, b_scales: Any = None,
         scale_format: Any = None, scale_block: int = 0, out_format: Any = None) -> np.ndarray:
    """D = alpha * scale_a * scale_b * (A B) + beta * C under a GEMM procedure, as ``lowbit gemm --model
    MODEL`` computes it (the same bits).

    `a` (m x k) and `b` (k x n) are code matrices in their formats' dtypes (float8_e4m3fn, bfloat16, float32,
    ...), or unsigned integer codes with `a_format` / `b_format`.  `model` is any procedure of
    ``lowbit.models()``; a procedure refuses an operand format it does not take (ValueError naming the
    operand).  `c` (m x n) is read as its f32 values; `beta` defaults to 1 with C (it accumulates) and 0
    without.  The block-scaled procedures take `a_scales` and `b_scales` (codes of `scale_format`, by default
    the dtype's or the procedure's own; `scale_block` K elements per scale).  alpha, beta and the scales are
    f32 values.  Returns D as float32 (float16 for an f16-accumulator model), or with `out_format` D cast
    into that format (rne, satfinite of fp32(d * scale_d), cuBLASLt's quantized output).

    Example:
        >>> import lowbit, numpy as np
        >>> a = lowbit.convert(np.array([[1.0, 2.0**-6, 2.0**-6]], np.float32), "e4m3")
        >>> b = lowbit.convert(np.array([[448.0], [1.0], [1.0]], np.float32), "e4m3")
        >>> lowbit.gemm(a, b, model="exact").tolist(), lowbit.gemm(a, b, model="hopper-fp8").tolist()
        ([[448.03125]], [[448.0]])
    """
    if not isinstance(model, str):
        raise TypeError(f"model: expected a string, not {type(model).__name__}")
    fa, na, (m, k) = _matrix(a, "a", a_format)
    fb, nb, (k2, n) = _matrix(b, "b", b_format)
    if k2 != k:
        raise ValueError(f"b: shape ({k2}, {n}) does not follow a's ({m}, {k}): b needs {k} rows")
    fc = nc = None
    if c is not None:
        fc, nc, shape_c = _matrix(c, "c", None)
        if shape_c != (m, n):
            raise ValueError(f"c: shape {shape_c} is not D's ({m}, {n})")
    sa = sb = None
    sf = None if scale_format is None else format_name(scale_format, "scale_format")
    if (a_scales is None) != (b_scales is None):
        raise ValueError(f"{'b_scales' if b_scales is None else 'a_scales'}: both scales or neither")
    if a_scales is not None:
        sa, fsa, _ = source(a_scales, "a_scales", sf)
        sb, fsb, _ = source(b_scales, "b_scales", sf)
        if fsa != fsb:
            raise ValueError(f"b_scales: holds {fsb} scales, a_scales {fsa}")
        sf = fsa
    if isinstance(scale_block, bool) or not isinstance(scale_block, (int, np.integer)) or scale_block < 0:
        raise ValueError(f"scale_block: {scale_block!r} is not a non-negative integer")
    out = None if out_format is None else format_name(out_format, "out_format")
    d, d_format, q, q_format = _lowbit.gemm(
        model, fa, na, m, k, fb, nb, n, fc, nc, sa, sb, sf, int(scale_block), _f32_bits(alpha, "alpha"),
        None if beta is None else _f32_bits(beta, "beta"), _f32_bits(scale_a, "scale_a"), _f32_bits(scale_b, "scale_b"),
        _f32_bits(scale_c, "scale_c"), _f32_bits(scale_d, "scale_d"), out)
    if q is not None:
        width = _lowbit.format_info(q_format)["storage_bytes"]
        return wrap_codes(q.astype(UINT_OF_BYTES[width]), q_format, (m, n))
    width = _lowbit.format_info(d_format)["storage_bytes"]
    return wrap_codes(d.astype(UINT_OF_BYTES[width]), d_format, (m, n))
