"""Differential test: `lowbit convert --profile ml_dtypes` and the Python package's
`lowbit.convert(..., profile="ml_dtypes")` against ml_dtypes (numpy `astype`): one test, two subjects.

Every bf16 and f16 code and 10^6 seeded-random f32 bit patterns (plus every class's boundary patterns)
go into every ml_dtypes format; the codes must agree bit for bit, NaN codes included.  Expected codes
come from ml_dtypes itself (`x.astype(ml_dtypes.X).view(np.uint8)`), never from lowbit.

The profile reproduces three rules found by this comparison (reference/src/profile.cpp):
  * NaN into an IEEE-style target (float8_e5m2, float8_e4m3, float8_e3m4, bfloat16): the quiet NaN of the
    input's sign, payload dropped (f32 0x7fbd937d -> e5m2 0x7e, bf16 0x7fc0).
  * float16 from f32 is numpy's own cast: the top ten payload bits without the quiet bit, an empty payload
    becoming 1 (0x7f8cfc76 -> 0x7c67, 0x7f800001 -> 0x7c01); from bf16 it goes through ml_dtypes (0x7e00);
    f16 -> f16 and bf16 -> bf16 are copies (0x7c01 stays 0x7c01).
  * float8_e8m0fnu from inputs strictly between 2^-127 and 2^-126 (f32 subnormals 0x00400001..0x007fffff,
    bf16 0x0041..0x007f): 0x01 (2^-126), a round up, where nearest rounding would give 0x00 below
    1.5 * 2^-127.
"""
import os
import subprocess
import warnings

import numpy as np
import pytest

ml_dtypes = pytest.importorskip("ml_dtypes", reason="ml_dtypes is not installed (pip install -r requirements.txt)")

LOWBIT = os.environ.get("LOWBIT", "lowbit")


def _module():
    """The Python package, or None.  Where the build installed it (-DLOWBIT_PYTHON=ON: ctest runs this file in
    the package's virtual environment with LOWBIT_REQUIRE_MODULE=1) its absence is a failure, not a skip."""
    try:
        import lowbit
    except ImportError:
        if os.environ.get("LOWBIT_REQUIRE_MODULE") == "1":
            raise
        return None
    return lowbit


@pytest.fixture(params=["cli", "module"], scope="module")
def subject(request):
    """How lowbit is asked: the command line (`lowbit convert --raw`) or the Python module."""
    if request.param == "module" and _module() is None:
        pytest.skip("the lowbit Python package is not installed (configure with -DLOWBIT_PYTHON=ON, or pip install .)")
    return request.param

# ml_dtypes type name -> lowbit format name.
TARGETS = {
    "float8_e4m3fn": "e4m3",
    "float8_e5m2": "e5m2",
    "float8_e4m3fnuz": "e4m3fnuz",
    "float8_e5m2fnuz": "e5m2fnuz",
    "float8_e4m3b11fnuz": "e4m3b11fnuz",
    "float8_e4m3": "e4m3ieee",
    "float8_e3m4": "e3m4",
    "float6_e2m3fn": "e2m3",
    "float6_e3m2fn": "e3m2",
    "float4_e2m1fn": "e2m1",
    "float8_e8m0fnu": "e8m0",
    "bfloat16": "bf16",
    "float16": "f16",
}
IEEE_NAN_TARGETS = {"float8_e5m2", "float8_e4m3", "float8_e3m4", "bfloat16", "float16"}


def dtype(name):
    return np.dtype(np.float16) if name == "float16" else np.dtype(getattr(ml_dtypes, name))


def f32_inputs():
    rng = np.random.default_rng(20240601)
    random = rng.integers(0, 2**32, size=1_000_000, dtype=np.uint64).astype(np.uint32)
    # Every class at its edges: zeros, smallest/largest subnormals, normals, Inf, NaN of each kind.
    edges = []
    for sign in (0, 0x80000000):
        for mag in (0, 1, 2, 0x3FFFFF, 0x400000, 0x400001, 0x5FFFFF, 0x600000, 0x7FFFFF, 0x800000, 0x800001,
                    0x3F800000, 0x3F400000, 0x7F000000, 0x7F000001, 0x7F7FFFFF, 0x7F800000, 0x7F800001,
                    0x7FA00000, 0x7FBFFFFF, 0x7FC00000, 0x7FC00001, 0x7FFFFFFF):
            edges.append(sign | mag)
    # Every f32 whose top 16 bits are any value and low bits are a tie / just off a tie for 8-bit targets.
    hi = np.arange(65536, dtype=np.uint32) << 16
    ties = np.concatenate([hi, hi | 0x8000, hi | 0x7FFF, hi | 0x8001, hi | 0x00080000, hi | 0x0007FFFF])
    return np.concatenate([np.array(edges, dtype=np.uint32), ties, random])


SOURCES = {
    "f16": (np.arange(65536, dtype=np.uint16), np.float16),
    "bf16": (np.arange(65536, dtype=np.uint16), "bfloat16"),
    "f32": (None, np.float32),
}


def source(name):
    bits, t = SOURCES[name]
    if bits is None:
        bits = f32_inputs()
    values = bits.view(np.float16 if t is np.float16 else (ml_dtypes.bfloat16 if t == "bfloat16" else np.float32))
    return bits, values


_cache = {}


def cached_source(name):
    if name not in _cache:
        _cache[name] = source(name)
    return _cache[name]


def lowbit_codes(subject, src, target, bits, values):
    out_dtype = np.uint16 if dtype_width(target) == 2 else np.uint8
    if subject == "module":
        codes = np.asarray(_module().convert(values, TARGETS[target], profile="ml_dtypes")).view(out_dtype)
        assert codes.size == bits.size, "one code per input"
        return codes
    run = subprocess.run(
        [LOWBIT, "convert", "--raw", "--profile", "ml_dtypes", "--from", src, "--to", TARGETS[target]],
        input=bits.tobytes(), capture_output=True, check=False)
    assert run.returncode == 0, run.stderr.decode()
    codes = np.frombuffer(run.stdout, dtype=out_dtype)
    assert codes.size == bits.size, "one code per input"
    return codes


def dtype_width(target):
    return dtype(target).itemsize


def peer_codes(target, values):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = values.astype(dtype(target))
    return ref.view(np.uint16 if ref.dtype.itemsize == 2 else np.uint8)


def e8m0_subnormal_quirk(src, bits):
    """Inputs of the known e8m0 disagreement: subnormal inputs in (2^-127, 1.5 * 2^-127)."""
    if src == "f32":
        return (bits > 0x400000) & (bits < 0x600000)
    if src == "bf16":
        return (bits > 0x40) & (bits < 0x60)
    return np.zeros(bits.shape, dtype=bool)


def mismatch_report(src, target, bits, ref, got, mask):
    idx = np.nonzero(mask & (ref != got))[0]
    lines = [f"{idx.size} mismatches {src} -> {target} (input bits, ml_dtypes, lowbit):"]
    for i in idx[:10]:
        lines.append(f"  {int(bits[i]):#x} {int(ref[i]):#x} {int(got[i]):#x}")
    return "\n".join(lines), idx.size


def compare(subject, src, target, select):
    bits, values = cached_source(src)
    ref = peer_codes(target, values)
    got = lowbit_codes(subject, src, target, bits, values)
    mask = select(bits, values)
    assert mask.any(), "the selection must not be empty"
    text, n = mismatch_report(src, target, bits, ref, got, mask)
    assert n == 0, text


def is_nan(values):
    return np.isnan(values.astype(np.float32))


@pytest.mark.parametrize("target", list(TARGETS))
@pytest.mark.parametrize("src", list(SOURCES))
def test_non_nan_inputs(subject, src, target):
    def select(bits, values):
        keep = ~is_nan(values)
        return keep
    compare(subject, src, target, select)


def nan_cases():
    for src in SOURCES:
        for target in TARGETS:
            yield pytest.param(src, target)


@pytest.mark.parametrize("src,target", list(nan_cases()))
def test_nan_inputs(subject, src, target):
    compare(subject, src, target, lambda bits, values: is_nan(values))


@pytest.mark.parametrize("src", ["f32", "bf16"])
def test_e8m0_subnormal_inputs(subject, src):
    compare(subject, src, "float8_e8m0fnu", lambda bits, values: e8m0_subnormal_quirk(src, bits))


def test_peer_facts():
    """docs/semantics.md §3's ml_dtypes table, read from ml_dtypes itself (guards the comparison above)."""
    x = np.array([1.5, 3, 6, 0.75, -1, 0, 1e-40, 3e38], dtype=np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        e8 = x.astype(ml_dtypes.float8_e8m0fnu).view(np.uint8)
    assert [int(c) for c in e8] == [0x80, 0x81, 0x82, 0x7F, 0xFF, 0xFF, 0x00, 0xFF]
    nan = np.array([np.nan, -np.nan], dtype=np.float32)
    assert [int(c) for c in nan.astype(ml_dtypes.float4_e2m1fn).view(np.uint8)] == [0x8, 0x0]


# ---- 8- and fewer-bit sources (peerlib's harness) ---------------------------------------------------------
import peerlib  # noqa: E402

NARROW = [n for n in TARGETS.values() if peerlib.width(n) == 1]


def narrow_pairs():
    for src in NARROW:
        for dst in TARGETS.values():
            # ml_dtypes has no cast between float8_e8m0fnu and the other narrow types (numpy refuses it).
            if (src == "e8m0") != (dst == "e8m0") and peerlib.width(dst) == 1:
                continue
            yield src, dst


@pytest.mark.parametrize("src,dst", list(narrow_pairs()))
def test_narrow_sources(src, dst):
    """Every code of every 8-, 6- and 4-bit ml_dtypes type into every ml_dtypes type, NaN codes included."""
    inputs = peerlib.every_code(src)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = inputs.view(peerlib.numpy_dtype(src)).astype(peerlib.numpy_dtype(dst)).view(peerlib.code_dtype(dst))
    peerlib.assert_same(peerlib.compare("ml_dtypes astype vs --profile ml_dtypes", src, dst, "ml_dtypes", inputs,
                                        ref, "ml_dtypes"))


def test_no_cast_between_e8m0_and_fp8():
    """The pairs test_narrow_sources leaves out: numpy refuses them, so there is nothing to compare."""
    x = np.zeros(2, dtype=ml_dtypes.float8_e4m3fn)
    with pytest.raises(TypeError):
        x.astype(ml_dtypes.float8_e8m0fnu)
