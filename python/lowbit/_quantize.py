"""Scaling schemes: ``lowbit quantize`` on arrays (scale::quantize, lowbit/scale.hpp)."""
from __future__ import annotations

import copy
import math
from typing import Any, Optional

import numpy as np

from . import _lowbit
from ._arrays import source, wrap_codes
from ._convert import random_bits_array
from ._dtypes import UINT_OF_BYTES
from ._formats import format_name

DelayedState = _lowbit.DelayedState


def _matrix_dims(shape: tuple) -> tuple[int, int]:
    """The tensor as rows x cols (``lowbit quantize``'s rule): rank 0 and 1 are one row, higher ranks flatten
    their leading dims into rows."""
    cols = shape[-1] if shape else 1
    return (math.prod(shape) // cols if cols else 0), cols


def _f32_values(x: Any) -> tuple[np.ndarray, tuple]:
    flat, fmt, shape = source(x, "x")
    if fmt == "f32":
        return flat.view(np.float32), shape
    if fmt not in ("bf16", "f16", "f64"):
        raise TypeError(f"x: quantize takes f64, f32, bf16 or f16 values, not {fmt} (convert to f32 first: "
                        f"lowbit.convert(x, 'f32') rounds explicitly)")
    # Exact widening, as `lowbit quantize --in-format bf16|f16` reads its values (a NaN is quieted); a float64
    # array is rounded once into f32 under IEEE 754's default (to nearest even, overflow to Inf, a NaN keeping
    # its sign and top payload bits), as `lowbit quantize --in X.npy` reads one and numpy's astype(float32) does.
    policy = _lowbit.resolve("f32", None, None, None, None, None, None)
    out = np.empty(flat.size, dtype=np.uint32)
    _lowbit.convert_into(flat, fmt, policy, out, None, None, None, None)
    return out.view(np.float32), shape


class Quantized:
    """A quantized tensor: what ``lowbit quantize`` writes, as arrays.

    ``codes``: one element code per input element, shaped as the input, in the element format's dtype
    (float8_e4m3fn, float4_e2m1fn, ...; lowbit.Codes for int8).  ``scales``: the decode scales of the blocks,
    shaped (scale rows, scale columns), in their own dtype (float32, float8_e8m0fnu for MX, float8_e4m3fn for
    NVFP4).  ``tensor_scale``: NVFP4's S_dec (float32) or None.  ``amax``: the tensor's amax as the scheme
    reads it (float32).  ``state``: the delayed scheme's new DelayedState, else None.  ``block``: the block
    shape (rows, cols) behind each scale.  ``columnwise``: with direction="both", the Quantized of the
    transpose (its own scales), else None.  ``packed_scales``: ue8m0-packed words (uint32) or None.
    """

    def __init__(self, q, shape, *, scheme, axis, amax, state, columnwise=None):
        self._q = q
        self.scheme: str = scheme
        self.element: str = q.element
        self.shape: tuple = tuple(shape)
        self.axis: int = axis
        self.block: tuple[int, int] = (q.block_rows, q.block_cols)
        self.scale_format: str = q.scale_format
        codes = q.codes()
        if axis == 0:  # quantized along the columns: codes back in the input's order, as the command line writes
            codes = codes.reshape(q.rows, q.cols).T.reshape(-1)
        self.codes: np.ndarray = wrap_codes(np.ascontiguousarray(codes), q.element, self.shape)
        self.scales: np.ndarray = wrap_codes(q.scale_codes(), q.scale_format, (q.scale_rows, q.scale_cols))
        ts = q.tensor_scale_bits
        self.tensor_scale: Optional[np.float32] = None if ts is None else np.array(ts, np.uint32).view(np.float32)[()]
        packed = q.packed_scales()
        self.packed_scales: Optional[np.ndarray] = packed if packed.size else None
        self.amax: np.float32 = np.float32(amax)
        self.state: Optional[DelayedState] = state
        self.columnwise: Optional[Quantized] = columnwise

    def _along_rows(self, what: str) -> None:
        if self.axis == 0:
            raise ValueError(f"axis: {what} are along the last axis (axis=0 quantized the transpose; as on the "
                             f"command line, quantize x.T instead)")

    def packed(self) -> np.ndarray:
        """The codes as stored packed (``lowbit quantize --pack``): FP4 two per byte (element 0 in the low
        nibble), FP6 four per three bytes; each row padded to whole bytes (uint8, the last dim in bytes).
        Wider elements are stored one per byte (``codes``) and have no packing, as on the command line."""
        self._along_rows("packed rows")
        bits = _lowbit.format_info(self.element)["bits"]
        if bits not in (4, 6):
            raise ValueError(f"packed: packs 4- and 6-bit elements (e2m1, e2m3, e3m2), not {self.element}")
        p = self._q.packed_codes()
        lead = self.shape[:-1] if self.shape else ()
        return p.reshape(lead + (p.size // max(math.prod(lead), 1),))

    def scale_layout(self, layout: str = "row-major") -> np.ndarray:
        """The scales in a storage layout (``--scale-layout``): "row-major" (``scales``) or "cublaslt" (uint8,
        cuBLASLt's 128x4-tiled layout of 8-bit scales of 1-D blocks, zero padding)."""
        if layout == "row-major":
            return self.scales
        if layout != "cublaslt":
            raise ValueError(f"layout: {layout!r} is not one of row-major, cublaslt")
        self._along_rows("cuBLASLt scale rows")
        return self._q.cublaslt_scales()

    def dequantize(self, dtype: Any = np.float64) -> np.ndarray:
        """code * scale (* tensor scale) per element, shaped as the input: exact in float64 (the default), or
        rounded once to float32 as ``lowbit dequantize`` writes it."""
        v = self._q.dequantize()
        if self.axis == 0:
            v = v.reshape(self._q.rows, self._q.cols).T
        v = np.ascontiguousarray(v).reshape(self.shape)
        dt = np.dtype(dtype)
        if dt not in (np.dtype(np.float64), np.dtype(np.float32)):
            raise ValueError(f"dtype: {dt} is not float64 or float32")
        return v.astype(dt)

    def __repr__(self) -> str:
        return (f"Quantized(scheme={self.scheme!r}, element={self.element!r}, shape={self.shape}, block={self.block}, "
                f"scales={self.scales.shape} {self.scale_format})")


def _string(value: Any, argument: str) -> Optional[str]:
    if value is None or isinstance(value, str):
        return value
    raise TypeError(f"{argument}: expected a string or None, not {type(value).__name__}")


def _integer(value: Any, argument: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{argument}: expected an integer, not {type(value).__name__}")
    return int(value)


def quantize(x: Any, scheme: str, *, element: Any = None, block: int = 0, axis: int = -1, direction: str = "row",
             scale_rule: Optional[str] = None, scale_format: Optional[str] = None, nonfinite: Optional[str] = None,
             variant: Optional[str] = None, zero_scale: Optional[str] = None, profile: Optional[str] = None,
             rounding: Optional[str] = None, sr_bits: int = 0, sr_seed: Optional[int] = None, random_bits: Any = None,
             hadamard: bool = False, state: Optional[DelayedState] = None, amax_nan: Optional[str] = None) -> Quantized:
    """Quantize `x` with a scaling scheme, as ``lowbit quantize --scheme SCHEME`` does; the same options with
    the same defaults (``lowbit quantize --help``), keywords for flags.

    `scheme`: tensor, delayed, channel, token, block1x128, block128x128, block, mx, nvfp4, nvfp4-2d,
    nvfp4-1level.  `x`: f32, bf16 or f16 values (numpy, ml_dtypes or DLPack), of any rank (leading dims are
    rows).  `element` (default e4m3; e2m1 for NVFP4), `block` (0: the scheme's), `axis` (-1 or 1: blocks
    along the last axis; 0: along the first, on a matrix), `direction` (row, col: the transpose with its own
    scales, both: row with ``.columnwise``), `scale_rule` (MX: floor, ceil, even, rceil, rne), `scale_format`
    (f32, pow2, ue8m0-packed), `nonfinite` (MX: scale-nan, propagate, amax), `variant` (NVFP4: standard,
    fast-math, 4over6, 4over6-mse), `zero_scale` (kernel, reference), `profile` (element rounding and scheme
    defaults; te: rceil, pow2), `rounding`, `hadamard`, `amax_nan` (ignore, propagate).  A stochastic
    `rounding` needs `sr_bits` and either `sr_seed` (Philox4x32-10, as ``--sr-seed``) or `random_bits` (one
    value per element, shaped as `x`, as ``--sr-bits-file``).  The delayed scheme reads `state` (default: a
    fresh one) and returns the next one in ``.state``; the argument is not changed.  An option left None takes
    the scheme's default; one the scheme does not take is refused (ValueError naming it), as on the command line.

    Example:
        >>> import lowbit, numpy as np
        >>> q = lowbit.quantize(np.array([1, -2, 0.5, 3], np.float32), "mx", element="e2m1", block=4)
        >>> q.codes.view(np.uint8), q.scales.view(np.uint8)
        (array([ 4, 14,  2,  7], dtype=uint8), array([[126]], dtype=uint8))
        >>> q.dequantize().tolist()
        [1.0, -2.0, 0.5, 3.0]
    """
    if not isinstance(scheme, str):
        raise TypeError(f"scheme: expected a string, not {type(scheme).__name__}")
    if not isinstance(hadamard, bool):
        raise TypeError(f"hadamard: expected True or False, not {hadamard!r}")
    element_name = None if element is None else format_name(element, "element")
    sr_bits = _integer(sr_bits, "sr_bits")
    options = _lowbit.scheme_options(scheme, element_name, _integer(block, "block"), _string(scale_rule, "scale_rule"),
                                     _string(scale_format, "scale_format"), _string(nonfinite, "nonfinite"),
                                     _string(variant, "variant"), _string(zero_scale, "zero_scale"),
                                     _string(profile, "profile"), _string(rounding, "rounding"),
                                     _string(amax_nan, "amax_nan"), hadamard, sr_bits)
    values, shape = _f32_values(x)
    rows, cols = _matrix_dims(shape)
    if rows < 1 or cols < 1:
        raise ValueError(f"x: shape {tuple(shape)} has nothing to quantize")
    axis = _integer(axis, "axis")
    if axis not in (-1, 0, 1):
        raise ValueError(f"axis: {axis} is not -1, 0 or 1")
    if axis == 0 and len(shape) > 2:
        raise ValueError(f"axis: 0 takes a matrix; x has shape {tuple(shape)}")
    if direction not in ("row", "col", "both"):
        raise ValueError(f"direction: {direction!r} is not one of row, col, both")
    if state is not None:
        if not isinstance(state, DelayedState):
            raise TypeError(f"state: expected a lowbit.DelayedState, not {type(state).__name__}")
        if options.scheme != "delayed":
            raise ValueError("state: applies to the delayed scheme")

    # Random bits, in the input's element order (the command line's rules for --sr-seed and --sr-bits-file).
    rbits = None
    if options.stochastic:
        if not 1 <= sr_bits <= 32:
            raise ValueError(f"sr_bits: {sr_bits} is outside 1..32 (a stochastic rounding needs it)")
        if (sr_seed is None) == (random_bits is None):
            raise ValueError("sr_seed / random_bits: a stochastic rounding needs exactly one of them")
        if sr_seed is not None:
            seed = _integer(sr_seed, "sr_seed")
            if seed < 0 or seed >= 2**63:
                raise ValueError(f"sr_seed: {seed} is outside 0..2^63-1")
            rbits = _lowbit.philox_bits(seed, rows * cols, sr_bits)
        else:
            rbits = random_bits_array(random_bits, shape, sr_bits)
    elif sr_bits != 0 or sr_seed is not None or random_bits is not None:
        raise ValueError("sr_bits: only with a stochastic rounding (sr-a, sr-b, sr-c)")

    matrix = values.reshape(rows, cols)
    transposed = np.ascontiguousarray(matrix.T) if (axis == 0 or direction != "row") else None
    rbits_t = None
    if rbits is not None and transposed is not None:
        rbits_t = np.ascontiguousarray(rbits.reshape(rows, cols).T).reshape(-1)
    amax = _lowbit.amax(values, options.amax_propagates_nan)
    st = copy.copy(state) if state is not None else None

    def run(m, bits, s):
        return _lowbit.quantize(m, options, bits, s)

    row = None
    if direction in ("row", "both"):
        if axis == 0:
            q, st_next = run(transposed, rbits_t, st)
        else:
            q, st_next = run(np.ascontiguousarray(matrix), rbits, st)
        row = (q, st_next)
        st = st_next if st_next is not None else st
    col = None
    if direction in ("col", "both"):
        # The columnwise copy (TE's backward-pass layout): the transpose with its own scales; with both, the
        # row direction's state is the one that carries on.
        q, st_col = run(transposed, rbits_t, st)
        col = Quantized(q, (cols, rows), scheme=scheme, axis=-1, amax=amax, state=st_col)
    if row is None:
        return col
    q, st_next = row
    return Quantized(q, tuple(shape), scheme=scheme, axis=0 if axis == 0 else -1, amax=amax, state=st_next,
                     columnwise=col)
