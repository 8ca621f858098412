"""Which numpy / ml_dtypes dtype holds the codes of which lowbit format, and which DLPack type codes do.

A format has a dtype only where the two are the same format: the same widths, bias and encodings of zero,
infinity and NaN (tests/test_formats.py decodes every code both ways to hold this).  Every other format's
codes are unsigned integers with the format's name attached (lowbit.Codes): MXINT8 (int8) is two's
complement with an implicit scale of 2^-6, not numpy's int8.
"""
from __future__ import annotations

import numpy as np

try:
    import ml_dtypes
except ImportError:  # the package depends on ml_dtypes; without it only numpy's own dtypes are known
    ml_dtypes = None

# lowbit format -> dtype name (numpy's own for f64, f32, f16; ml_dtypes' for the rest).
DTYPE_NAMES = {
    "f64": "float64",
    "f32": "float32",
    "f16": "float16",
    "bf16": "bfloat16",
    "e4m3": "float8_e4m3fn",
    "e5m2": "float8_e5m2",
    "e4m3fnuz": "float8_e4m3fnuz",
    "e5m2fnuz": "float8_e5m2fnuz",
    "e4m3b11fnuz": "float8_e4m3b11fnuz",
    "e4m3ieee": "float8_e4m3",
    "e3m4": "float8_e3m4",
    "e8m0": "float8_e8m0fnu",
    "e2m3": "float6_e2m3fn",
    "e3m2": "float6_e3m2fn",
    "e2m1": "float4_e2m1fn",
}

# DLPack type code and bits -> lowbit format (dlpack.h: kDLFloat 2, kDLBfloat 4, kDLFloat8_e3m4 7 ...
# kDLFloat6_e3m2fn 16, named after the ml_dtypes types).
DLPACK_FORMATS = {
    (2, 16): "f16", (2, 32): "f32", (2, 64): "f64", (4, 16): "bf16",
    (7, 8): "e3m4", (8, 8): "e4m3ieee", (9, 8): "e4m3b11fnuz", (10, 8): "e4m3", (11, 8): "e4m3fnuz",
    (12, 8): "e5m2", (13, 8): "e5m2fnuz", (14, 8): "e8m0", (15, 8): "e2m3", (16, 8): "e3m2",
}


def _dtype(name: str):
    if name in ("float64", "float32", "float16"):
        return np.dtype(name)
    if ml_dtypes is None or not hasattr(ml_dtypes, name):
        return None
    return np.dtype(getattr(ml_dtypes, name))


DTYPE_OF_FORMAT = {f: d for f, n in DTYPE_NAMES.items() if (d := _dtype(n)) is not None}
FORMAT_OF_DTYPE = {d: f for f, d in DTYPE_OF_FORMAT.items()}

UINT_OF_BYTES = {1: np.dtype(np.uint8), 2: np.dtype(np.uint16), 4: np.dtype(np.uint32), 8: np.dtype(np.uint64)}


def dtype_of(fmt: str):
    """The dtype that holds `fmt`'s codes, or None."""
    return DTYPE_OF_FORMAT.get(fmt)


def format_of(dtype) -> str | None:
    """The lowbit format a numpy dtype holds, or None."""
    return FORMAT_OF_DTYPE.get(np.dtype(dtype))
