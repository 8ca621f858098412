"""`lowbit quantize`, `lowbit dequantize` and `lowbit gemm` (issues 3 and 4, text mode), and differential
tests of the scaling schemes against independent computations:

* MX blocks against gfloat's block quantizer (OCP MX v1.0 floor rule, `gfloat.block`);
* TE per-tensor current scaling and TE's two-level NVFP4, restated here step by step in numpy float32
  arithmetic with ml_dtypes element casts (docs/semantics.md §4), never through lowbit.
"""
import json
import os
import subprocess

import numpy as np
import pytest

LOWBIT = os.environ.get("LOWBIT", "lowbit")


def run(args, stdin=""):
    p = subprocess.run([LOWBIT, *args], input=stdin.encode(), capture_output=True, check=False)
    return p.returncode, p.stdout.decode(), p.stderr.decode()


def quantize(args, values, shape=None):
    bits = np.asarray(values, dtype=np.float32).view(np.uint32).ravel()
    extra = ["--shape", f"{shape[0]},{shape[1]}"] if shape else []
    rc, out, err = run(["quantize", *args, *extra, "--in", "-", "--out", "-"], " ".join(f"0x{b:08x}" for b in bits))
    assert rc == 0, err
    return json.loads(out)


def codes(j, key="codes"):
    return [int(c, 16) for c in j[key]]


def fails(args, stdin, *names):
    rc, out, err = run(args, stdin)
    assert rc == 2, f"expected exit 2, got {rc}: {err}"
    for n in names:
        assert n in err, f"{n!r} not named in: {err}"
    assert out == ""


RNG = np.random.default_rng(12345)


def random_tensor(n):
    # Values over many binades, with zeros, ties at element boundaries and exact powers of two.
    mant = RNG.uniform(1, 2, n)
    exp = RNG.integers(-12, 12, n)
    v = (np.where(RNG.random(n) < 0.5, -1, 1) * mant * np.exp2(exp)).astype(np.float32)
    v[RNG.random(n) < 0.05] = 0
    v[RNG.random(n) < 0.05] = np.float32(1.5) * np.exp2(RNG.integers(-6, 6))
    return v


# ---- MX against gfloat ------------------------------------------------------------------------------
gfloat = pytest.importorskip("gfloat", reason="gfloat is not installed (pip install -r requirements.txt)")
from gfloat import block as gblock  # noqa: E402
from gfloat import formats as gformats  # noqa: E402

MX_FORMATS = {
    "e4m3": gformats.format_info_mxfp8_e4m3,
    "e5m2": gformats.format_info_mxfp8_e5m2,
    "e2m3": gformats.format_info_mxfp6_e2m3,
    "e3m2": gformats.format_info_mxfp6_e3m2,
    "e2m1": gformats.format_info_mxfp4_e2m1,
}


@pytest.mark.parametrize("element", list(MX_FORMATS))
def test_mx_floor_matches_gfloat(element):
    fi = MX_FORMATS[element]
    for trial in range(40):
        v = random_tensor(32)
        if trial % 7 == 0:
            v[:] = 0
        j = quantize(["--scheme", "mx", "--element", element], v)
        scale = gblock.compute_scale_amax(fi.etype.emax, v.astype(np.float64))
        enc = list(gblock.encode_block(fi, scale, v.astype(np.float64) / scale, gfloat.RoundMode.TiesToEven))
        assert codes(j, "scales") == [enc[0]], (element, trial)
        assert codes(j) == enc[1:], (element, trial)


def test_mx_int8_values_match_gfloat():
    fi = gformats.format_info_mxint8
    for trial in range(40):
        v = random_tensor(32)
        j = quantize(["--scheme", "mx", "--element", "int8"], v)
        scale = gblock.compute_scale_amax(fi.etype.emax, v.astype(np.float64))
        enc = list(gblock.encode_block(fi, scale, v.astype(np.float64) / scale, gfloat.RoundMode.TiesToEven))
        want = [gfloat.decode_float(fi.etype, c).fval for c in enc[1:]]
        got = [((c ^ 0x80) - 0x80) / 64 for c in codes(j)]  # two's complement, implicit 2^-6
        assert got == want, trial


# ---- TE per-tensor and NVFP4 against a numpy float32 restatement ------------------------------------
ml_dtypes = pytest.importorskip("ml_dtypes")
f32 = np.float32


def cast_sat(x, dtype, maxv):
    """rne + satfinite for finite values: clip then cast (ml_dtypes casts are rne)."""
    return np.clip(x.astype(np.float32), -maxv, maxv).astype(dtype).view(np.uint8)


def te_scale(amax, fp8_max):
    if np.isinf(amax) or amax == 0 or np.isnan(amax):
        return f32(1)
    s = f32(fp8_max) / f32(amax)
    return f32(np.finfo(np.float32).max) if np.isinf(s) else s


def test_tensor_scheme_matches_te_formula():
    for trial in range(30):
        v = random_tensor(64)
        j = quantize(["--scheme", "tensor"], v)
        s = te_scale(np.max(np.abs(v)), 448)
        want = cast_sat(v * s, ml_dtypes.float8_e4m3fn, 448)
        assert codes(j) == [int(c) for c in want], trial
        assert codes(j, "scales") == [int(np.array([f32(1) / s]).view(np.uint32)[0])]


def nvfp4_reference(v):
    """TE two-level NVFP4 (docs/semantics.md §4 steps 1-7), one row, 1-D blocks of 16."""
    amax = f32(np.max(np.abs(v)))
    with np.errstate(divide="ignore", over="ignore"):
        s_enc = np.fmin(f32(2688) / amax, np.finfo(np.float32).max).astype(np.float32)
    if amax == 0 or s_enc == 0:
        s_enc = f32(1)
    s_dec = f32(1) / s_enc
    scales, elems = [], []
    sixth = f32(1) / f32(6)
    for b in range(0, v.size, 16):
        blk = v[b:b + 16]
        s_dec_b = f32(np.max(np.abs(blk))) * f32(s_enc * sixth)
        sc = cast_sat(np.array([s_dec_b]), ml_dtypes.float8_e4m3fn, 448)[0]
        scf = np.array([sc], dtype=np.uint8).view(ml_dtypes.float8_e4m3fn).astype(np.float32)[0]
        with np.errstate(divide="ignore"):
            s_enc_b = np.fmin(f32(1) / f32(scf * s_dec), np.finfo(np.float32).max).astype(np.float32)
        scales.append(int(sc))
        prod = (blk * s_enc_b).astype(np.float32)
        elems += [int(c) & 0xF for c in cast_sat(prod, ml_dtypes.float4_e2m1fn, 6)]
    return scales, elems, int(np.array([s_dec]).view(np.uint32)[0])


def test_nvfp4_matches_te_steps():
    for trial in range(30):
        v = random_tensor(64)
        if trial % 5 == 0:
            v[16:32] = 0  # a zero block beside non-zero ones
        j = quantize(["--scheme", "nvfp4"], v)
        scales, elems, s_dec = nvfp4_reference(v)
        assert codes(j, "scales") == scales, trial
        assert codes(j) == elems, trial
        assert int(j["tensor_scale"], 16) == s_dec


E2M1 = [0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6]


def nvfp4_4over6_reference(v, mse=False):
    """NVFP4 4over6 (docs/semantics.md §4; TE quantize_4over6_kernel.cuh), one row, 1-D blocks of 16: S_enc from
    1536 = 256 * 6, map-to-6 and map-to-4 (1.5x) block scales, each block keeping the candidate with the
    smaller summed |d| (or d * d), d = e2m1 * scale * amax / 1536 - x; a tie keeps map-to-6."""
    amax = f32(np.max(np.abs(v)))
    with np.errstate(divide="ignore", over="ignore"):
        s_enc = np.fmin(f32(1536) / amax, np.finfo(np.float32).max).astype(np.float32)
    if amax == 0 or s_enc == 0:
        s_enc = f32(1)
    s_dec = f32(1) / s_enc
    scales, elems = [], []
    for b in range(0, v.size, 16):
        blk = v[b:b + 16]
        base = f32(f32(np.max(np.abs(blk))) / f32(6)) * s_enc
        cands = []
        for s_dec_b in (f32(base * f32(1.5)), base):
            sc = cast_sat(np.array([np.fmin(s_dec_b, f32(448))], dtype=np.float32), ml_dtypes.float8_e4m3fn, 448)[0]
            scf = np.array([sc], dtype=np.uint8).view(ml_dtypes.float8_e4m3fn).astype(np.float32)[0]
            with np.errstate(divide="ignore", over="ignore"):
                mult = np.fmin(f32(1) / f32(scf * s_dec), np.finfo(np.float32).max).astype(np.float32)
                cs = [int(c) & 0xF for c in cast_sat((blk * mult).astype(np.float32), ml_dtypes.float4_e2m1fn, 6)]
            err = f32(0)
            for c, x in zip(cs, blk):
                d = f32(f32(f32(f32(E2M1[c]) * scf) * amax) / f32(1536)) - x
                err = f32(err + (d * d if mse else abs(d)))
            cands.append((err, int(sc), cs))
        (e4, s4, c4), (e6, s6, c6) = cands
        scales.append(s4 if e4 < e6 else s6)
        elems += c4 if e4 < e6 else c6
    return scales, elems, int(np.array([s_dec]).view(np.uint32)[0])


@pytest.mark.parametrize("variant,mse", [("4over6", False), ("4over6-mse", True)])
def test_nvfp4_4over6_matches_te_steps(variant, mse):
    for trial in range(30):
        v = random_tensor(64)
        if trial % 5 == 0:
            v[16:32] = 0
        j = quantize(["--scheme", "nvfp4", "--variant", variant], v)
        scales, elems, s_dec = nvfp4_4over6_reference(v, mse)
        assert codes(j, "scales") == scales, trial
        assert codes(j) == elems, trial
        assert int(j["tensor_scale"], 16) == s_dec


def test_nvfp4_4over6_hand_case():
    # Amax 6: S_enc = 256, S_dec = 2^-8; map-to-4 scale 384 (0x7c), multiplier fp32(1 / 1.5): 6 -> 4 (0x6),
    # -4.5 -> -3 (0xd), both exact back (error 0); map-to-6 (0x78) turns -4.5 into -4 (error 0.5).
    v = np.zeros(16, dtype=np.float32)
    v[0], v[1] = 6, -4.5
    j = quantize(["--scheme", "nvfp4", "--variant", "4over6"], v)
    assert codes(j, "scales") == [0x7C]
    assert codes(j) == [0x6, 0xD] + [0] * 14
    assert int(j["tensor_scale"], 16) == 0x3B800000


# ---- the text contract ------------------------------------------------------------------------------
def test_json_fields_and_directions():
    v = np.arange(1, 7, dtype=np.float32)
    j = quantize(["--scheme", "mx", "--block", "2", "--direction", "both"], v, shape=(2, 3))
    assert j["scheme"] == "mx" and j["element"] == "e4m3" and j["shape"] == [2, 3]
    # Rows [1 2 3] [4 5 6] in blocks of 2: two scales per row (a partial last block has its own scale).
    assert len(j["scales"]) == 4 and len(j["codes"]) == 6
    # The transpose [1 4] [2 5] [3 6]: one block of 2 per row.
    assert len(j["col_scales"]) == 3 and len(j["col_codes"]) == 6
    # Codes are printed as convert prints them: two hex digits for e4m3.
    assert all(c.startswith("0x") and len(c) == 4 for c in j["codes"])


def test_dequantize_round_trip_and_exact():
    v = np.array([1, -2, 0.5], dtype=np.float32)
    rc, out, err = run(["quantize", "--scheme", "tensor", "--scale-format", "pow2", "--in", "-", "--out", "-"],
                       " ".join(f"0x{b:08x}" for b in v.view(np.uint32)))
    assert rc == 0, err
    rc, back, err = run(["dequantize", "--in", "-", "--out", "-"], out)
    assert rc == 0, err
    # Power-of-two scales are exactly reversible: 1, -2 and 0.5 come back.
    assert back.split() == ["0x3f800000", "0xc0000000", "0x3f000000"]
    rc, exact, err = run(["dequantize", "--exact"], out)
    assert exact.split() == ["1", "-2", "0.5"]


def test_delayed_state_file(tmp_path):
    state = tmp_path / "state.json"
    v = np.array([1, -2, 0.5], dtype=np.float32)
    bits = " ".join(f"0x{b:08x}" for b in v.view(np.uint32))
    # First step: scale 1 (codes of 1, -2, 0.5); the new scale 448/2 = 224 = 0x43600000 is saved.
    rc, out, err = run(["quantize", "--scheme", "delayed", "--state", str(state), "--in", "-", "--out", "-"], bits)
    assert rc == 0, err
    assert codes(json.loads(out)) == [0x38, 0xC0, 0x30]
    assert json.loads(state.read_text())["scale"] == "0x43600000"
    # Second step reads it: 224, -448, 112 = 0x76, 0xfe, 0x6e.
    rc, out, err = run(["quantize", "--scheme", "delayed", "--state", str(state), "--in", "-", "--out", "-"], bits)
    assert codes(json.loads(out)) == [0x76, 0xFE, 0x6E]


def test_profile_defaults_apply_only_where_the_scheme_takes_them():
    # te gives MX its rceil rule and amax non-finite rule; a per-tensor scheme takes neither and is not refused.
    v = [1.0, -3.0, 0.5, 448.0]
    te, plain = quantize(["--scheme", "tensor", "--profile", "te"], v), quantize(["--scheme", "tensor"], v)
    assert (te["codes"], te["scales"]) == (plain["codes"], plain["scales"])
    assert quantize(["--scheme", "mx", "--block", "4", "--profile", "te"], v) == \
        quantize(["--scheme", "mx", "--block", "4", "--scale-rule", "rceil", "--nonfinite", "amax", "--profile", "te"], v)


def test_stochastic_rounding_is_reproducible():
    v = random_tensor(32)
    a = quantize(["--scheme", "mx", "--rounding", "sr-a", "--sr-bits", "8", "--sr-seed", "7"], v)
    b = quantize(["--scheme", "mx", "--rounding", "sr-a", "--sr-bits", "8", "--sr-seed", "7"], v)
    c = quantize(["--scheme", "mx", "--rounding", "sr-a", "--sr-bits", "8", "--sr-seed", "8"], v)
    assert a == b and a != c


@pytest.mark.parametrize("args,stdin,names", [
    (["quantize", "--scheme", "nope", "--in", "-", "--out", "-"], "0x3f800000", ["--scheme", "nope"]),
    (["quantize", "--scheme", "mx", "--in", "-", "--out", "-"], "0x3f800000 0x3f80000g", ["value 2"]),
    (["quantize", "--scheme", "mx", "--shape", "2,2", "--in", "-", "--out", "-"], "0x3f800000", ["--shape"]),
    (["quantize", "--scheme", "mx", "--element", "bf16", "--in", "-", "--out", "-"], "0x3f800000", ["--element"]),
    (["quantize", "--scheme", "mx", "--rounding", "sr-a", "--sr-bits", "8", "--in", "-", "--out", "-"], "0x3f800000",
     ["--sr-seed"]),
    (["quantize", "--scheme", "nvfp4-1level", "--variant", "4over6", "--in", "-", "--out", "-"], "0x3f800000",
     ["--variant", "4over6"]),
    (["quantize", "--scheme", "nvfp4", "--variant", "4over6", "--rounding", "sr-a", "--sr-bits", "8", "--sr-seed",
      "1", "--in", "-", "--out", "-"], "0x3f800000", ["--rounding", "4over6"]),
    (["quantize", "--scheme", "tensor", "--scale-rule", "rceil", "--in", "-", "--out", "-"], "0x3f800000",
     ["--scale-rule"]),
    # An option the scheme does not take is refused, even at its default value (scale.hpp's scheme rows).
    (["quantize", "--scheme", "tensor", "--block", "4", "--in", "-", "--out", "-"], "0x3f800000",
     ["--block", "tensor"]),
    (["quantize", "--scheme", "tensor", "--nonfinite", "amax", "--in", "-", "--out", "-"], "0x3f800000",
     ["--nonfinite", "tensor"]),
    (["quantize", "--scheme", "delayed", "--variant", "standard", "--in", "-", "--out", "-"], "0x3f800000",
     ["--variant", "delayed"]),
    (["quantize", "--scheme", "mx", "--variant", "torchao", "--nonfinite", "propagate", "--in", "-", "--out", "-"],
     "0x3f800000", ["--nonfinite", "torchao"]),
    (["quantize", "--scheme", "mx", "--variant", "torchao", "--element", "int8", "--in", "-", "--out", "-"],
     "0x3f800000", ["--element", "torchao"]),
    (["quantize", "--scheme", "nvfp4-1level", "--zero-scale", "kernel", "--in", "-", "--out", "-"], "0x3f800000",
     ["--zero-scale", "nvfp4-1level"]),
    (["quantize", "--scheme", "nvfp4", "--block", "32", "--in", "-", "--out", "-"], "0x3f800000",
     ["--block", "16"]),
    (["quantize", "--scheme", "mx", "--direction", "up", "--in", "-", "--out", "-"], "0x3f800000",
     ["--direction", "row, col, both"]),
    (["dequantize"], "{\"scheme\": \"mx\"}", ["element"]),
    (["dequantize"], "not json", ["malformed JSON"]),
])
def test_quantize_errors(args, stdin, names):
    fails(args, stdin, *names)


# ---- gemm -------------------------------------------------------------------------------------------
def gemm(model, obj, *extra):
    rc, out, err = run(["gemm", "--model", model, "--a", "-", "--out", "-", *extra], json.dumps(obj))
    assert rc == 0, err
    return json.loads(out)


# 448 - 448 + 2^-6 (e4m3 0x7e, 0xfe, 0x08 times 1.0 = 0x38): the exact answer 2^-6 = 0x3c800000; the hopper-fp8
# model aligns to 448's exponent with 13 fraction bits and loses 2^-6 entirely (+0); see
# conformance/gemm/test_models.cpp for the derivation.
CANCEL = {"m": 1, "n": 1, "k": 3, "a_format": "e4m3", "b_format": "e4m3",
          "a": ["0x7e", "0xfe", "0x08"], "b": ["0x38", "0x38", "0x38"]}


def test_gemm_models():
    assert gemm("exact", CANCEL) == {"d": ["0x3c800000"]}
    assert gemm("hopper-fp8", CANCEL) == {"d": ["0x00000000"]}
    assert gemm("blackwell-f8f6f4", CANCEL) == {"d": ["0x3c800000"]}
    # C = 1.0 accumulates (beta defaults to 1 with C): exact 1 + 2^-6 = 0x3f820000.
    assert gemm("exact", {**CANCEL, "c": ["0x3f800000"]}) == {"d": ["0x3f820000"]}
    # alpha = 2, beta = 0.5 with C = 1: 2 * 2^-6 + 0.5 = 0.53125 = 1.0625 * 2^-1, fraction 2^-4: 0x3f080000.
    assert gemm("exact", {**CANCEL, "c": ["0x3f800000"], "alpha": "0x40000000", "beta": "0x3f000000"}) == \
        {"d": ["0x3f080000"]}
    assert gemm("exact", CANCEL, "--amax")["amax_d"] == "0x3c800000"


def test_gemm_hopper_fp8_mma_sync(tmp_path):
    # FP8 mma.sync on Hopper: k = 0, 1 (448 - 448) form the first f16 step and k = 2 (2^-9 * 2^-9 = 2^-18,
    # e4m3 0x01) the second, so 2^-18 (0x36800000) survives; with the pair split across the two steps (k = 0
    # and k = 2) the tiny product meets 448 in the first step and truncates away: +0.  hopper-fp8 (one fused
    # sum, F = 13) loses it either way.  conformance/gemm/test_mma_sync_model.cpp derives these.
    first = {"m": 1, "n": 1, "k": 3, "a": ["0x7e", "0xfe", "0x01"], "b": ["0x38", "0x38", "0x01"]}
    split = {"m": 1, "n": 1, "k": 3, "a": ["0x7e", "0x01", "0xfe"], "b": ["0x38", "0x01", "0x38"]}
    assert gemm("hopper-fp8-mma-sync", first) == {"d": ["0x36800000"]}
    assert gemm("hopper-fp8-mma-sync", split) == {"d": ["0x00000000"]}
    assert gemm("hopper-fp8", first) == {"d": ["0x00000000"]}
    # Operands f16 cannot hold are refused, naming the argument, with no output file.
    out = tmp_path / "d.json"
    fails(["gemm", "--model", "hopper-fp8-mma-sync", "--a", "-", "--out", str(out)],
          json.dumps({**first, "b_format": "bf16", "b": ["0x3f80", "0x3f80", "0x3f80"]}), '"b_format"', "bf16")
    assert not out.exists()


def test_gemm_block_scaled_exact_and_model():
    # e2m1 6 * 6 in the first of four 16-groups, ue4m3 scales 448 (0x7e) for A and 1.0 (0x38) for B:
    # 36 * 448 = 16128 = 0x467c0000 under both the exact reference and blackwell-mxf4nvf4.
    a = ["0x7"] + ["0x0"] * 63
    obj = {"m": 1, "n": 1, "k": 64, "a_format": "e2m1", "b_format": "e2m1", "a": a, "b": a,
           "scale_format": "ue4m3", "scale_block": 16,
           "a_scales": ["0x7e", "0x38", "0x38", "0x38"], "b_scales": ["0x38", "0x38", "0x38", "0x38"]}
    assert gemm("exact", obj) == {"d": ["0x467c0000"]}
    assert gemm("blackwell-mxf4nvf4", obj) == {"d": ["0x467c0000"]}


def test_gemm_cublaslt_scales_and_quantized_output():
    # D = scale_d * (alpha * scale_a * scale_b * AB + beta * scale_c * C): AB = 2^-6 (the cancellation case),
    # scale_a = 4, scale_b = 8 (0x41000000), C = 1 with scale_c = 0.25 (0x3e800000): 2^-1 + 0.25 = 0.75.
    obj = {**CANCEL, "c": ["0x3f800000"], "scale_a": "0x40800000", "scale_b": "0x41000000", "scale_c": "0x3e800000"}
    assert gemm("exact", obj) == {"d": ["0x3f400000"]}
    # Quantized to e4m3 with scale_d = 448 (0x43e00000): 0.75 * 448 = 336, midway between 320 (0x7a) and 352
    # (0x7b); rne gives the even code 0x7a.  amax_d is taken before scale_d: 0.75 = 0x3f400000.
    q = gemm("exact", {**obj, "scale_d": "0x43e00000", "d_format": "e4m3"}, "--amax")
    assert q == {"d": ["0x7a"], "amax_d": "0x3f400000"}
    # 1000 * 0.75 = 750 saturates to 448 (0x7e) under the quantized output's satfinite.
    q = gemm("f32-sequential", {**obj, "scale_d": "0x447a0000", "d_format": "e4m3"})
    assert q == {"d": ["0x7e"]}
    fails(["gemm", "--model", "exact", "--a", "-", "--out", "-"], json.dumps({**CANCEL, "scale_d": "0x40000000"}),
          "scale_d")


def test_gemm_list_models():
    rc, out, err = run(["gemm", "--list-models"])
    names = [line.split("\t")[0] for line in out.splitlines()]
    for n in ["exact", "hopper-fp8", "hopper-fp8-mma-sync", "hopper-fp8-promote128", "ada-fp8", "volta-f16",
              "blackwell-mxf4nvf4"]:
        assert n in names


def test_gemm_list_models_json():
    rc, out, err = run(["gemm", "--list-models", "--json"])
    assert rc == 0, err
    rows = json.loads(out)
    rc, out, err = run(["gemm", "--list-models"])
    text = [line.split("\t")[0] for line in out.splitlines()]
    assert [r["name"] for r in rows] == text
    by = {r["name"]: r for r in rows}
    # The instruction's own operands (PTX ISA: wgmma .e4m3/.e5m2), no conversion in front of wgmma.
    assert by["hopper-fp8"]["operands"] == ["e4m3", "e5m2"] and by["hopper-fp8"]["converts_exactly"] is False
    assert by["hopper-fp8"]["model"]["group"] == 32 and by["hopper-fp8"]["model"]["fraction_bits"] == 13
    assert by["hopper-bf16"]["operands"] == ["bf16"] and by["hopper-bf16"]["converts_exactly"] is True
    assert by["hopper-fp8-promote128"]["kind"] == "promoted" and by["hopper-fp8-promote128"]["interval"] == 128
    assert by["blackwell-mxf4nvf4"]["scales"] == "k-blocks"
    fails(["gemm", "--json"], "", "--json")


def test_gemm_refuses_operands_and_scales_the_procedure_does_not_take():
    # hopper-fp8 is wgmma's FP8 instruction: bf16 operands are refused, naming the operand and what it takes.
    bf = {"m": 1, "n": 1, "k": 1, "a_format": "bf16", "b_format": "bf16", "a": ["0x3f80"], "b": ["0x3f80"]}
    fails(["gemm", "--model", "hopper-fp8", "--a", "-", "--out", "-"], json.dumps(bf), '"a_format"', "e4m3, e5m2", "bf16")
    # hopper-bf16 converts narrower formats exactly: e4m3 1.0 * 1.0 = 1.0.
    assert gemm("hopper-bf16", {**CANCEL, "k": 1, "a": ["0x38"], "b": ["0x38"]}) == {"d": ["0x3f800000"]}
    # Block scales for a model that has none are refused, not ignored.
    fails(["gemm", "--model", "hopper-fp8", "--a", "-", "--out", "-"],
          json.dumps({**CANCEL, "a_scales": ["0x7f"], "b_scales": ["0x7f"]}), '"a_scales"', "no block scales")


@pytest.mark.parametrize("obj,names", [
    ({"m": 1, "n": 1, "k": 2, "a": ["0x38"], "b": ["0x38", "0x38"]}, ['"a"', "expected 2"]),
    ({"n": 1, "k": 1, "a": ["0x38"], "b": ["0x38"]}, ['"m"']),
    ({"m": 1, "n": 1, "k": 1, "a": ["0x138"], "b": ["0x38"]}, ['"a"[0]']),
    ({"m": 1, "n": 1, "k": 1, "a_format": "nope", "a": ["0x38"], "b": ["0x38"]}, ['"a_format"']),
])
def test_gemm_errors(obj, names):
    fails(["gemm", "--model", "exact", "--a", "-", "--out", "-"], json.dumps(obj), *names)
    fails(["gemm", "--model", "no-such-model", "--a", "-", "--out", "-"], json.dumps(CANCEL), "no-such-model")


def test_gemm_npy_files(tmp_path):
    a, b, out = tmp_path / "a.npy", tmp_path / "b.npy", tmp_path / "d.npy"
    np.save(a, np.array([[0x7E, 0xFE, 0x08]], dtype=np.uint8))   # e4m3 codes: 448, -448, 2^-6
    np.save(b, np.array([[0x38], [0x38], [0x38]], dtype=np.uint8))  # 1.0
    # Integer codes name their format: without it, exit 2 with the hint.
    fails(["gemm", "--model", "exact", "--a", str(a), "--b", str(b), "--out", str(out)], "", "--a-format", "'|u1'")
    assert not out.exists()
    rc, _, err = run(["gemm", "--model", "exact", "--a", str(a), "--a-format", "e4m3", "--b", str(b), "--b-format",
                      "e4m3", "--out", str(out)])
    assert rc == 0, err
    d = np.load(out)
    assert d.dtype == np.float32 and d.shape == (1, 1) and d.view(np.uint32)[0, 0] == 0x3C800000
    # f32 operands as values: 1.5 * 2 + 2 * 0.25 = 3.5 (0x40600000), exact in every model here.
    np.save(a, np.array([[1.5, 2.0]], dtype=np.float32))
    np.save(b, np.array([[2.0], [0.25]], dtype=np.float32))
    rc, o, err = run(["gemm", "--model", "hopper-tf32", "--a", str(a), "--b", str(b), "--out", "-"])
    assert json.loads(o) == {"d": ["0x40600000"]}
    # Inner dimensions that differ, a missing file: exit 2 naming the culprit, no output file.
    out2 = tmp_path / "e.npy"
    np.save(b, np.array([[2.0], [0.25], [1.0]], dtype=np.float32))
    fails(["gemm", "--model", "exact", "--a", str(a), "--b", str(b), "--out", str(out2)], "", "--b", "1x2")
    fails(["gemm", "--model", "exact", "--a", str(tmp_path / "nope.npy"), "--b", str(b), "--out", str(out2)], "",
          "--a", "nope.npy")
    assert not out2.exists()
