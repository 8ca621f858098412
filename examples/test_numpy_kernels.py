"""Gate two numpy-written kernels with lowbit.testing: an NVFP4 quantizer and an FP8 GEMM.

Copy this file next to your kernels and replace the numpy bodies with calls into them.  Run it with

    pytest -q examples/test_numpy_kernels.py

Each suite is one pytest test (lowbit.testing.gate_tests).  LOWBIT_EXAMPLE_BUG=1 plants a bug in the
quantizer (elements clamped at 4 instead of e2m1's largest value, 6), and the NVFP4 test fails naming the
elements.

The quantizer follows Transformer Engine's two-level NVFP4 1x16 recipe as docs/semantics.md section 4 spells
it: S_enc = 448 * 6 / amax (f32), block scale = e4m3(block_amax * (S_enc * fp32(1/6))), element =
e2m1(x * 1 / (scale * S_dec)), the tensor scale stored as S_dec = 1 / S_enc.  The GEMM is the `exact`
model: every product and C summed exactly, rounded once to f32 to nearest even.
"""
import os
from fractions import Fraction

import ml_dtypes
import numpy as np

import lowbit.testing

F32_MAX = np.float32(np.finfo(np.float32).max)
BUG = os.environ.get("LOWBIT_EXAMPLE_BUG") == "1"


class NumpyNvfp4:
    name = "numpy nvfp4"

    def quantize(self, x, recipe):
        standard = {"block_size": "16", "element": "e2m1", "quantization_format": "nvfp4", "variant": "standard",
                    "zero_scale": "kernel"}
        if recipe != standard or not np.isfinite(x).all():
            return None  # declined: reported as skipped with the recipe
        rows, cols = x.shape
        amax = np.float32(np.abs(x).max()) if x.size else np.float32(0)
        with np.errstate(divide="ignore", over="ignore"):
            s_enc = np.minimum(np.float32(448 * 6) / amax, F32_MAX) if amax != 0 else np.float32(1)
        if s_enc == 0:
            s_enc = np.float32(1)
        s_dec = np.float32(1) / s_enc
        enc_sixth = s_enc * np.float32(1 / 6)
        blocks = -(-cols // 16)
        padded = np.zeros((rows, blocks * 16), np.float32)
        padded[:, :cols] = x
        block_amax = np.abs(padded).reshape(rows, blocks, 16).max(axis=2)
        block_dec = np.minimum(block_amax * enc_sixth, F32_MAX)
        scales = np.minimum(block_dec, np.float32(448)).astype(ml_dtypes.float8_e4m3fn)  # rne, satfinite
        with np.errstate(divide="ignore"):
            mult = np.minimum(np.float32(1) / (scales.astype(np.float32) * s_dec), F32_MAX)
        with np.errstate(over="ignore"):
            y = padded * np.repeat(mult, 16, axis=1)
        limit = np.float32(4 if BUG else 6)  # the planted bug: 4 is not e2m1's largest value
        codes = np.clip(y, -limit, limit).astype(ml_dtypes.float4_e2m1fn)[:, :cols]
        return {"codes": codes, "scales": scales, "tensor_scale": np.array([s_dec], np.float32)}


def exact_to_f32(q: Fraction, negative_zero: bool) -> np.float32:
    """The f32 nearest to the exact value q, ties to even (float(q) is the nearest f64; its f32 rounding may
    be off by one ulp after the double rounding, so the nearest of three neighbours is taken)."""
    if q == 0:
        return np.float32(-0.0 if negative_zero else 0.0)
    c = np.float32(float(q))
    best = None
    for v in (np.nextafter(c, np.float32(-np.inf)), c, np.nextafter(c, np.float32(np.inf))):
        d = abs(Fraction(float(v)) - q)
        if best is None or d < best[0] or (d == best[0] and int(v.view(np.uint32)) % 2 == 0):
            best = (d, v)
    return best[1]


class NumpyFp8Gemm:
    name = "numpy fp8 gemm"

    def gemm(self, a, b, recipe, c=None):
        if recipe.get("model") != "exact" or a.dtype.itemsize != 1 or b.dtype.itemsize != 1 or c is None:
            return None  # FP8 operands with C only
        a32, b32, c32 = a.astype(np.float32), b.astype(np.float32), np.asarray(c, np.float32)
        if not (np.isfinite(a32).all() and np.isfinite(b32).all() and np.isfinite(c32).all()):
            return None
        m, k = a32.shape
        n = b32.shape[1]
        d = np.empty((m, n), np.float32)
        for i in range(m):
            for j in range(n):
                terms = [Fraction(float(a32[i, t])) * Fraction(float(b32[t, j])) for t in range(k)]
                total = sum(terms, Fraction(float(c32[i, j])))
                all_negative_zero = bool(np.signbit(c32[i, j])) and all(
                    np.signbit(a32[i, t]) != np.signbit(b32[t, j]) for t in range(k))
                d[i, j] = exact_to_f32(total, all_negative_zero)
        return d


test_nvfp4 = lowbit.testing.gate_tests(NumpyNvfp4(), ["scheme-nvfp4"], require=["scheme-nvfp4"], max_report=3)
test_fp8_gemm = lowbit.testing.gate_tests(NumpyFp8Gemm(), ["gemm-exact"], require=["gemm-exact"], max_report=3)
