"""Element conversion and decoding of whole arrays, through the library's batch path (lowbit/batch.hpp)."""
from __future__ import annotations

import enum
from typing import Any, NamedTuple, Optional

import numpy as np

from . import _lowbit
from ._arrays import Codes, source, wrap_codes
from ._dtypes import UINT_OF_BYTES
from ._formats import format_name


class Flag(enum.IntFlag):
    """IEEE status flags as ``convert(..., with_flags=True)`` reports them per element (TestFloat's mask)."""

    INEXACT = 1
    UNDERFLOW = 2
    OVERFLOW = 4
    INVALID = 16


class Converted(NamedTuple):
    """``convert(..., with_flags=True)``: the codes, the flags (uint8, a mask of Flag) and the ternary value
    (int8: the sign of rounded - exact, 0 when exact or NaN) of each element."""

    codes: np.ndarray
    flags: np.ndarray
    ternary: np.ndarray


def _option(value: Any, argument: str) -> Optional[str]:
    if value is None or isinstance(value, str):
        return value
    raise TypeError(f"{argument}: expected a string or None, not {type(value).__name__}")


def _threads(threads: Any) -> Optional[int]:
    if threads is None:
        return None
    if isinstance(threads, bool) or not isinstance(threads, (int, np.integer)) or threads < 1:
        raise ValueError(f"threads: {threads!r} is not a positive integer")
    return int(threads)


def random_bits_array(random_bits: Any, shape: tuple, sr_bits: int) -> np.ndarray:
    """One random value R < 2^sr_bits per element of an array of `shape`, as contiguous 1-D uint32."""
    r = np.asarray(random_bits)
    if r.dtype.kind not in "ui":
        raise TypeError(f"random_bits: dtype {r.dtype} is not an integer dtype")
    if r.shape != tuple(shape):
        raise ValueError(f"random_bits: shape {r.shape} is not the input's shape {tuple(shape)}")
    flat = r.reshape(-1)
    if flat.size:
        limit = 1 << sr_bits
        bad = np.flatnonzero((flat < 0) | (flat >= limit))
        if bad.size:
            index = np.unravel_index(int(bad[0]), shape) if shape else ()
            raise ValueError(f"random_bits[{', '.join(str(int(i)) for i in index)}]: {int(flat[bad[0]])} is not below "
                             f"2^{sr_bits}")
    return np.ascontiguousarray(flat, dtype=np.uint32)


def convert(x: Any, to: Any, *, profile: Optional[str] = None, rounding: Optional[str] = None,
            overflow: Optional[str] = None, subnormals: Optional[str] = None, tininess: Optional[str] = None,
            random_bits: Any = None, sr_bits: Optional[int] = None, with_flags: bool = False,
            threads: Optional[int] = None):
    """Convert every element of `x` into the format `to`, as ``lowbit convert --to TO`` does.

    `x` is any numpy array (float64, float32, float16, an ml_dtypes float type, or lowbit.Codes), in any
    layout, or any object with ``__dlpack__`` (PyTorch, JAX, CuPy): host memory is read without a copy, a
    tensor on another device is copied to the host.  Its dtype says its format.

    The policy options are the command line's: `profile` (ocp, cuda, ml_dtypes, llvm, te, torchao,
    microxcaling, p3109) supplies the defaults and the quirks of one implementation; `rounding` (rne, rna,
    rtz, rup, rdn, rto, sr-a, sr-b, sr-c), `overflow` (satfinite, satpropagate, nosat), `subnormals` (keep,
    ftz, daz, ftz-daz) and `tininess` (after, before) override them.  The stochastic roundings need
    `sr_bits` = N and `random_bits`, one integer R < 2^N per element, shaped as `x`.

    Returns the codes in the numpy or ml_dtypes dtype of the same format where there is one (e4m3 as
    float8_e4m3fn, e2m1 as float4_e2m1fn, bf16 as bfloat16, ...), else as lowbit.Codes (unsigned integers
    with ``.format``).  With `with_flags`, a Converted (codes, flags, ternary).  The work runs without the
    interpreter lock; `threads` threads share it (default: every core from 2^22 elements on, else one).

    Example:
        >>> import lowbit, numpy as np
        >>> x = np.array([448, 464, 465, -np.inf, 0.3], dtype=np.float32)
        >>> lowbit.convert(x, "e4m3").view(np.uint8)
        array([126, 126, 127, 255,  42], dtype=uint8)
        >>> lowbit.convert(x, "e4m3", profile="cuda").view(np.uint8)
        array([126, 126, 126, 254,  42], dtype=uint8)
    """
    if not isinstance(with_flags, bool):
        raise TypeError(f"with_flags: expected True or False, not {with_flags!r}")
    if sr_bits is not None and (isinstance(sr_bits, bool) or not isinstance(sr_bits, (int, np.integer))):
        raise TypeError(f"sr_bits: expected an integer, not {type(sr_bits).__name__}")
    target = format_name(to, "to")
    policy = _lowbit.resolve(target, _option(profile, "profile"), _option(rounding, "rounding"),
                             _option(overflow, "overflow"), _option(subnormals, "subnormals"),
                             _option(tininess, "tininess"), None if sr_bits is None else int(sr_bits))
    nthreads = _threads(threads)
    flat, fmt, shape = source(x, "x")
    rbits = None
    if policy.stochastic:
        if random_bits is None:
            raise ValueError(f"random_bits: rounding {policy.rounding} needs one random value per element")
        rbits = random_bits_array(random_bits, shape, policy.sr_bits)
    elif random_bits is not None:
        raise ValueError(f"random_bits: rounding {policy.rounding} is not stochastic (sr-a, sr-b, sr-c take random bits)")
    out = np.empty(flat.size, dtype=UINT_OF_BYTES[policy.code_bytes])
    flags = np.empty(flat.size, dtype=np.uint8) if with_flags else None
    ternary = np.empty(flat.size, dtype=np.int8) if with_flags else None
    bad = _lowbit.convert_into(flat, fmt, policy, out, flags, ternary, rbits, nthreads)
    if bad >= 0:
        index = np.unravel_index(bad, shape) if shape else ()
        value = _lowbit.code_text(fmt, int(flat[bad]))
        raise ValueError(f"x[{', '.join(str(int(i)) for i in index)}]: profile {policy.profile} has no defined result "
                         f"for {value} into {policy.target}")
    codes = wrap_codes(out, policy.target, shape)
    if with_flags:
        return Converted(codes, flags.reshape(shape), ternary.reshape(shape))
    return codes


def decode(codes: Any, fmt: Any = None, *, threads: Optional[int] = None) -> np.ndarray:
    """The exact value of each code as float64 (every value of every built-in format is one).

    The format comes from the codes' dtype (ml_dtypes, numpy) or lowbit.Codes; plain unsigned integers need
    `fmt`.  NaN codes give NaN, with their sign.

    Example:
        >>> import lowbit, numpy as np
        >>> lowbit.decode(np.array([0x7e, 0x01, 0xff, 0x80], np.uint8), "e4m3").tolist()
        [448.0, 0.001953125, nan, -0.0]
    """
    name = None if fmt is None else format_name(fmt, "fmt")
    flat, name, shape = source(codes, "codes", name)
    out = np.empty(flat.size, dtype=np.float64)
    _lowbit.decode_into(flat, name, out, _threads(threads))
    return out.reshape(shape)


def codes(array: Any, fmt: Any) -> np.ndarray:
    """Unsigned-integer codes of `fmt`, checked, in the dtype of the same format (or as lowbit.Codes).

    Example:
        >>> import lowbit, numpy as np
        >>> lowbit.codes(np.array([0x7, 0xf], np.uint8), "e2m1").dtype
        dtype(float4_e2m1fn)
    """
    name = format_name(fmt, "fmt")
    a = np.asarray(array)
    if a.dtype.kind != "u":
        raise TypeError(f"array: dtype {a.dtype} is not an unsigned integer dtype")
    flat, name, shape = source(a, "array", name)
    return wrap_codes(flat.copy(), name, shape)
