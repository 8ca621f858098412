"""lowbit.gemm gives `lowbit gemm`'s bits for every procedure on its golden operand formats (shared random
inputs, JSON in), with C, the epilogue and a quantized output; operands a procedure does not take are
refused naming the operand, as the command line refuses them."""
import json

import numpy as np
import pytest

import lowbit
from conftest import cli

ml_dtypes = pytest.importorskip("ml_dtypes", reason="ml_dtypes is not installed (pip install -r requirements.txt)")

M, N, K = 4, 5, 70


def random_codes(fmt, shape, seed):
    """Finite random values of a format, as its codes (the values of N(0, 1) x 4 converted, satfinite)."""
    x = (np.random.default_rng(seed).standard_normal(shape) * 4).astype(np.float32)
    return lowbit.convert(x, fmt, overflow="satfinite")


def raw(codes):
    a = np.asarray(codes)
    return a.view(f"u{a.dtype.itemsize}")


def hexes(codes, fmt):
    digits = (lowbit.format(fmt).storage_bits + 3) // 4
    return [f"0x{int(v):0{digits}x}" for v in raw(codes).reshape(-1)]


def scale_codes(fmt, shape, seed):
    rng = np.random.default_rng(seed)
    if fmt == "f32":
        return np.exp2(rng.integers(-3, 4, size=shape)).astype(np.float32)
    if fmt == "e8m0":
        return rng.integers(124, 131, size=shape, dtype=np.uint8).view(ml_dtypes.float8_e8m0fnu)
    return lowbit.codes(rng.integers(0x30, 0x48, size=shape, dtype=np.uint8), fmt)  # ue4m3 values 0.5 .. 2


def cases():
    for p in lowbit.models():
        for g in p.golden:
            yield pytest.param(p, g, id=f"{p.name}-{g['a_format']}-{g['b_format']}")


@pytest.mark.parametrize("proc,golden", list(cases()))
def test_gemm_matches_the_command_line(proc, golden):
    fa, fb = golden["a_format"], golden["b_format"]
    a, b = random_codes(fa, (M, K), 1), random_codes(fb, (K, N), 2)
    c = (np.random.default_rng(3).standard_normal((M, N)) * 8).astype(np.float32)
    job = {"m": M, "n": N, "k": K, "a_format": fa, "b_format": fb, "a": hexes(a, fa), "b": hexes(b, fb),
           "c": hexes(c, "f32")}
    kw = {}
    if "scale_format" in golden:
        sf, blk = golden["scale_format"], golden["scale_block"]
        kb = -(-K // blk)
        if proc.scales == "1x128-128x128" or (sf == "f32" and proc.kind == "exact"):
            sa, sb = scale_codes(sf, (M, kb), 4), scale_codes(sf, (kb, -(-N // 128)), 5)
        else:
            sa, sb = scale_codes(sf, (M, kb), 4), scale_codes(sf, (kb, N), 5)
        job |= {"a_scales": hexes(sa, sf), "b_scales": hexes(sb, sf), "scale_format": sf, "scale_block": blk}
        kw = {"a_scales": sa, "b_scales": sb, "scale_format": sf, "scale_block": blk}
    want = json.loads(cli("gemm", "--model", proc.name, "--a", "-", "--out", "-", input=json.dumps(job)).stdout)["d"]
    d = lowbit.gemm(a, b, model=proc.name, c=c, **kw)
    assert d.shape == (M, N)
    assert hexes(d, lowbit.format(d.dtype).name if d.dtype.kind == "f" else d.format) == want


@pytest.mark.parametrize("model", ["exact", "hopper-fp8", "hopper-fp8-promote128"])
def test_epilogue_and_quantized_output_match_the_command_line(model):
    a, b = random_codes("e4m3", (M, K), 6), random_codes("e5m2", (K, N), 7)
    c = (np.random.default_rng(8).standard_normal((M, N))).astype(np.float32)
    job = {"m": M, "n": N, "k": K, "a_format": "e4m3", "b_format": "e5m2", "a": hexes(a, "e4m3"), "b": hexes(b, "e5m2"),
           "c": hexes(c, "f32"), "alpha": "0x3f000000", "beta": "0x40000000", "scale_a": "0x40800000",
           "scale_d": "0x3e000000", "d_format": "e4m3"}
    want = json.loads(cli("gemm", "--model", model, "--a", "-", "--out", "-", input=json.dumps(job)).stdout)["d"]
    d = lowbit.gemm(a, b, model=model, c=c, alpha=0.5, beta=2.0, scale_a=4.0, scale_d=0.125, out_format="e4m3")
    assert d.dtype == ml_dtypes.float8_e4m3fn and hexes(d, "e4m3") == want


def test_refusals_name_the_operand():
    a16 = lowbit.convert(np.ones((2, 32), np.float32), "bf16")
    b8 = lowbit.convert(np.ones((32, 2), np.float32), "e4m3")
    job = {"m": 2, "n": 2, "k": 32, "a_format": "bf16", "b_format": "e4m3", "a": hexes(a16, "bf16"), "b": hexes(b8, "e4m3")}
    run = cli("gemm", "--model", "hopper-fp8", "--a", "-", "--out", "-", input=json.dumps(job), check=False)
    assert run.returncode == 2
    why = run.stderr.decode().strip().split(": ", 2)[2]
    with pytest.raises(ValueError) as e:
        lowbit.gemm(a16, b8, model="hopper-fp8")
    assert str(e.value) == f"a_format: {why}"
    with pytest.raises(ValueError, match=r"^model: 'hopper-fp9' is not a GEMM procedure"):
        lowbit.gemm(b8.T, b8, model="hopper-fp9")
    with pytest.raises(ValueError, match=r"^b: shape \(32, 2\) does not follow a's \(32, 2\): b needs 2 rows"):
        lowbit.gemm(b8, b8, model="exact")
    with pytest.raises(ValueError, match=r"^alpha: 0.1 is not an f32 value"):
        lowbit.gemm(b8.T, b8, model="exact", alpha=0.1)
    with pytest.raises(ValueError, match=r"^a_scales: blackwell-mxf8f6f4 reads block scales of A and B"):
        lowbit.gemm(b8.T, b8, model="blackwell-mxf8f6f4")
    with pytest.raises(ValueError, match=r"^a_scales: f32-sequential takes no block scales"):
        lowbit.gemm(b8.T, b8, model="f32-sequential", a_scales=np.ones((2, 1), np.float32),
                    b_scales=np.ones((1, 2), np.float32))
