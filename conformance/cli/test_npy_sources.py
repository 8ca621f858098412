""".npy inputs as people save them: float64 (numpy's default) rounded once, ml_dtypes arrays ('<V1', '<f1',
'<V2') read as the codes of the format an option names, and integer code arrays refused when no format is
named (io.hpp NpyRead, library quantized.hpp read_source_npy).

The expected bits come from numpy's own casts (astype(np.float32) / astype(np.float16) round a float64 once,
as IEEE 754 and x86 do), from ml_dtypes' decodings of its own types, or are worked by hand in the comments.
"""
import json
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

ml_dtypes = pytest.importorskip("ml_dtypes", reason="ml_dtypes is not installed (pip install -r requirements.txt)")

LOWBIT = os.environ.get("LOWBIT", "lowbit")
GOLDEN = Path(__file__).resolve().parents[2] / "vectors" / "golden"


def run(*args):
    p = subprocess.run([LOWBIT, *map(str, args)], capture_output=True, check=False)
    return p.returncode, p.stdout.decode(), p.stderr.decode()


def ok(*args):
    rc, out, err = run(*args)
    assert rc == 0, err
    return out, err


def fails(args, *names):
    rc, out, err = run(*args)
    assert rc == 2, f"expected exit 2, got {rc}: {err}"
    for n in names:
        assert n in err, f"{n!r} not named in: {err}"
    return err


def descr_of(path):
    """The dtype as the file's header spells it (numpy cannot load every ml_dtypes file back: '<f1')."""
    head = Path(path).read_bytes()[:128].decode("latin-1")
    return head.split("'descr': '")[1].split("'")[0]


def quantized(d):
    return {f: (Path(d) / f).read_bytes() for f in ("codes.npy", "scales.npy")}


def source(rows=4, cols=64, seed=7):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((rows, cols)) * np.exp(rng.uniform(-6, 6, (rows, 1)))


def test_float64_is_rounded_once_into_f32_as_numpy_does(tmp_path):
    x = source()
    # Specials: a NaN with a payload (kept in its top bits, quieted), overflow to Inf, an f64 subnormal that
    # rounds to +0, and a value just above an f32 midpoint.
    x[0, :4] = [np.frombuffer(np.uint64(0x7FF0_0000_0000_1234).tobytes(), np.float64)[0], 1e300, -np.inf, 5e-324]
    x[1, 0] = 1.0 + 2.0**-24 + 2.0**-60
    np.save(tmp_path / "d.npy", x)
    with np.errstate(over="ignore", invalid="ignore"):
        f = x.astype(np.float32)
    np.save(tmp_path / "f.npy", f)
    _, err = ok("quantize", "--scheme", "mx", "--in", tmp_path / "d.npy", "--out", tmp_path / "qd")
    ok("quantize", "--scheme", "mx", "--in", tmp_path / "f.npy", "--out", tmp_path / "qf")
    assert quantized(tmp_path / "qd") == quantized(tmp_path / "qf")
    inexact = int(np.sum((f.astype(np.float64) != x) & ~np.isnan(x)))
    assert f"{inexact} of the {x.size} float64 elements" in err and "into f32" in err


def test_float64_into_bf16_is_one_rounding_not_two(tmp_path):
    # bf16 has 7 fraction bits: near 1 its neighbours are 1.0625 (0x3f88) and 1.0703125 (0x3f89), their
    # midpoint 1.06640625.  v lies 2^-40 above that midpoint, so its one rounding is 0x3f89; through f32 it
    # first lands on the midpoint (2^-40 is below f32's half ulp) and then ties to even: 0x3f88 (what
    # ml_dtypes' astype(bfloat16) gives from a float64).  With 256 in the block, MX's e8m0 scale is
    # 2^(8 - 8) = 1, and e4m3's neighbours of these values are 1.0 (0x38) and 1.125 (0x39) with midpoint
    # 1.0625: 1.0703125 rounds up to 0x39, 1.0625 ties to even, 0x38.  256 is 0x78.
    v = 1.0625 + 2.0**-8 + 2.0**-40
    x = np.zeros((1, 32))
    x[0, 0], x[0, 1] = 256.0, v
    np.save(tmp_path / "d.npy", x)
    _, err = ok("quantize", "--scheme", "mx", "--element", "e4m3", "--in-format", "bf16", "--in", tmp_path / "d.npy",
                "--out", tmp_path / "q1")
    assert "1 of the 32 float64 elements" in err and "into bf16" in err
    codes = np.load(tmp_path / "q1" / "codes.npy")
    assert codes[0, 0] == 0x78 and codes[0, 1] == 0x39 and not codes[0, 2:].any()
    assert np.load(tmp_path / "q1" / "scales.npy").tolist() == [[0x7F]]
    twice = x.astype(ml_dtypes.bfloat16)
    assert twice.view(np.uint16)[0, 1] == 0x3F88  # the double rounding, as the comment says
    np.save(tmp_path / "b.npy", twice)
    ok("quantize", "--scheme", "mx", "--element", "e4m3", "--in-format", "bf16", "--in", tmp_path / "b.npy",
       "--out", tmp_path / "q2")
    assert np.load(tmp_path / "q2" / "codes.npy")[0, 1] == 0x38


def test_float64_into_f16_equals_numpy_astype_float16(tmp_path):
    x = source(seed=3) * 1e-3
    np.save(tmp_path / "d.npy", x)
    np.save(tmp_path / "h.npy", x.astype(np.float16))  # numpy's double -> half is one rounding
    ok("quantize", "--scheme", "nvfp4", "--in-format", "f16", "--in", tmp_path / "d.npy", "--out", tmp_path / "qd")
    ok("quantize", "--scheme", "nvfp4", "--in", tmp_path / "h.npy", "--out", tmp_path / "qh")
    assert quantized(tmp_path / "qd") == quantized(tmp_path / "qh")


@pytest.mark.parametrize("dtype,fmt,descr", [
    ("bfloat16", "bf16", ("<V2", "|V2")),
    ("float8_e4m3fn", "e4m3", ("<V1", "|V1")),
    ("float8_e5m2", "e5m2", ("<f1",)),
    ("float4_e2m1fn", "e2m1", ("<V1", "|V1")),
    ("float6_e3m2fn", "e3m2", ("<V1", "|V1")),
])
def test_ml_dtypes_arrays_read_as_the_named_format(tmp_path, dtype, fmt, descr):
    t = getattr(ml_dtypes, dtype)
    with np.errstate(over="ignore", invalid="ignore"):
        a = source().astype(np.float32).astype(t)  # saturated or not: whatever codes ml_dtypes made
    np.save(tmp_path / "m.npy", a)
    assert descr_of(tmp_path / "m.npy") in descr
    np.save(tmp_path / "f.npy", a.astype(np.float32))  # ml_dtypes decodes its codes exactly
    ok("quantize", "--scheme", "mx", "--in-format", fmt, "--in", tmp_path / "m.npy", "--out", tmp_path / "qm")
    ok("quantize", "--scheme", "mx", "--in", tmp_path / "f.npy", "--out", tmp_path / "qf")
    assert quantized(tmp_path / "qm") == quantized(tmp_path / "qf")
    # The same codes as unsigned integers of the format's width, with the format named.
    width = np.uint16 if fmt == "bf16" else np.uint8
    np.save(tmp_path / "u.npy", a.view(width))
    ok("quantize", "--scheme", "mx", "--in-format", fmt, "--in", tmp_path / "u.npy", "--out", tmp_path / "qu")
    assert quantized(tmp_path / "qu") == quantized(tmp_path / "qf")


def _refusal_files(d):
    np.save(d / "v1.npy", np.zeros((2, 32), ml_dtypes.float8_e4m3fn))
    np.save(d / "v2.npy", np.zeros((2, 32), ml_dtypes.bfloat16))
    np.save(d / "u1.npy", np.zeros((2, 32), np.uint8))
    nib = np.zeros((2, 32), np.uint8)
    nib[0, 1] = 0x10  # not a 4-bit code
    np.save(d / "nib.npy", nib)
    np.save(d / "d.npy", np.ones((2, 32)))
    np.save(d / "b.npy", np.zeros((2, 32), np.bool_))
    np.save(d / "f.npy", np.ones((2, 32), np.float32))


@pytest.mark.parametrize("name,extra,culprits", [
    ("v1.npy", [], ["--in-format", "v1.npy", "descr", "'<V1'", "e4m3"]),
    ("v2.npy", [], ["--in-format", "v2.npy", "'<V2'", "bf16"]),
    ("u1.npy", [], ["--in-format", "u1.npy", "'|u1'", "does not name"]),
    ("v2.npy", ["--in-format", "e4m3"], ["--in-format", "'<V2'", "2-byte", "e4m3"]),
    ("v1.npy", ["--in-format", "f32"], ["--in-format", "'<V1'", "1-byte", "f32"]),
    ("nib.npy", ["--in-format", "e2m1"], ["--in-format", "nib.npy", "element 1", "0x10", "e2m1"]),
    ("d.npy", ["--in-format", "e4m3"], ["--in-format", "'<f8'", "f32, bf16 or f16"]),
    ("d.npy", ["--in-format", "f64"], ["--in-format", "f64", "wider than f32"]),
    ("d.npy", ["--in-format", "e9m9"], ["--in-format", "e9m9"]),
    ("b.npy", ["--in-format", "e4m3"], ["--in-format", "'|b1'"]),
    ("f.npy", ["--in-format", "bf16"], ["--in-format", "'<f4'", "float32"]),
])
def test_sources_without_their_format_are_refused_writing_nothing(tmp_path, name, extra, culprits):
    _refusal_files(tmp_path)
    before = sorted(os.listdir(tmp_path))
    fails(["quantize", "--scheme", "mx", *extra, "--in", tmp_path / name, "--out", tmp_path / "q"], *culprits)
    assert sorted(os.listdir(tmp_path)) == before


def test_npy_readers_elsewhere_refuse_ml_dtypes_arrays_saying_why(tmp_path):
    # dequantize reads lowbit's own files; an ml_dtypes array there is refused with the reason.
    np.save(tmp_path / "x.npy", source(2, 32).astype(np.float32))
    ok("quantize", "--scheme", "mx", "--in", tmp_path / "x.npy", "--out", tmp_path / "q")
    np.save(tmp_path / "q" / "codes.npy", np.load(tmp_path / "q" / "codes.npy").view(ml_dtypes.float8_e4m3fn))
    err = fails(["dequantize", "--in", tmp_path / "q", "--out", tmp_path / "y.npy"], "codes.npy", "'<V1'", "ml_dtypes")
    assert not (tmp_path / "y.npy").exists(), err


# ---- gemm operands ------------------------------------------------------------------------------------

def gemm_files(d, a, b, *options):
    np.save(d / "a.npy", a)
    np.save(d / "b.npy", b)
    return ["gemm", "--model", "hopper-fp8", "--a", d / "a.npy", "--b", d / "b.npy", *options, "--out", d / "d.npy"]


def test_gemm_takes_ml_dtypes_operands_with_their_format_named(tmp_path):
    rng = np.random.default_rng(5)
    a = (rng.standard_normal((4, 32)) * 8).astype(np.float32).astype(ml_dtypes.float8_e4m3fn)
    b = (rng.standard_normal((32, 3)) * 8).astype(np.float32).astype(ml_dtypes.float8_e5m2)
    ok(*gemm_files(tmp_path, a, b, "--a-format", "e4m3", "--b-format", "e5m2"))
    d_ml = np.load(tmp_path / "d.npy")
    ok(*gemm_files(tmp_path, a.view(np.uint8), b.view(np.uint8), "--a-format", "e4m3", "--b-format", "e5m2"))
    assert np.load(tmp_path / "d.npy").tobytes() == d_ml.tobytes() and np.abs(d_ml).max() > 0


@pytest.mark.parametrize("a,b,options,culprits", [
    (np.zeros((2, 2), np.uint8), np.zeros((2, 2), np.uint8), ["--b-format", "e4m3"], ["--a-format", "'|u1'", "name it"]),
    (np.zeros((2, 2), np.uint8), np.zeros((2, 2), ml_dtypes.float8_e4m3fn), ["--a-format", "e4m3"],
     ["--b-format", "'<V1'"]),
    (np.zeros((2, 2), ml_dtypes.bfloat16), np.zeros((2, 2), np.uint8), ["--a-format", "e4m3", "--b-format", "e4m3"],
     ["--a-format", "'<V2'", "2-byte", "e4m3"]),
])
def test_gemm_refuses_codes_without_their_format(tmp_path, a, b, options, culprits):
    fails(gemm_files(tmp_path, a, b, *options), *culprits)
    assert not (tmp_path / "d.npy").exists()


# ---- vectors check: a kernel's results saved from ml_dtypes arrays ---------------------------------

def test_check_reads_results_saved_as_ml_dtypes_arrays(tmp_path):
    results = tmp_path / "r"
    shutil.copytree(GOLDEN / "scheme-mx", results)
    manifest = json.loads((GOLDEN / "scheme-mx" / "manifest.json").read_text())
    types = {"e4m3": ml_dtypes.float8_e4m3fn, "e5m2": ml_dtypes.float8_e5m2, "e8m0": ml_dtypes.float8_e8m0fnu,
             "e2m1": ml_dtypes.float4_e2m1fn, "e2m3": ml_dtypes.float6_e2m3fn, "e3m2": ml_dtypes.float6_e3m2fn}
    converted = 0
    for f in manifest["files"]:
        if f["role"] == "expected" and f.get("format") in types:
            p = results / f["path"]
            a = np.load(p)
            if a.dtype == np.uint8:
                np.save(p, a.view(types[f["format"]]))
                converted += 1
    assert converted > 10
    rc, out, err = run("check", "--vectors", GOLDEN / "scheme-mx", "--results", results)
    assert rc == 0, out + err
    # One code changed in an ml_dtypes file is a mismatch named as any other.
    p = results / "case-000" / "codes.npy"
    assert descr_of(p) in ("<V1", "|V1", "<f1")
    u = np.load(GOLDEN / "scheme-mx" / "case-000" / "codes.npy")
    u[0, 5] ^= 1
    np.save(p, u.view(types[manifest["files"][0]["format"]]))
    rc, out, _ = run("check", "--vectors", GOLDEN / "scheme-mx", "--results", results)
    assert rc == 1 and "codes.npy[0, 5]" in out
