"""A contract's gelu and silu steps (issue 21, item 1): the reference is the function's correctly rounded f32
value (MPFR, library/src/contract_activation.cpp), and `contract check` compares the stages from the activation
on within the contract's `tolerance_ulp`, naming each element's ulp distance and the worst one.

The expected bits below were computed once, independently of lowbit, with mpmath at 400 bits and rounded to the
nearest f32 (ties to even) by comparing the neighbouring f32 values exactly:
    gelu(erf)  x * erfc(-x / sqrt(2)) / 2
    gelu(tanh) x / 2 * (1 + tanh(sqrt(2 / pi) * (x + 44715 / 10^6 * x^3)))
    silu       x / (1 + exp(-x))
Cross-checks by hand: Phi(1) = 0.8413447460685429 (so gelu_erf(1) = 0x3f57625f = 0.84134474); silu(1) = 1 / (1 +
1/e) = 0.7310585786 (0x3f3b26a8); gelu_erf(-14) = -14 * Phi(-14) = -1.1e-43 is a subnormal (0x8000004e) while the
tanh form's tail falls off faster and underflows to -0; near 0 each function is x/2, so the subnormal 3e-40
halves exactly.
"""
import json
import os
import subprocess

import numpy as np
import pytest

LOWBIT = os.environ.get("LOWBIT", "lowbit")

X = [1.0, -1.0, 0.5, -3.0, 2.5, -10.0, 0.001, -14.0, 3.0e-40]
EXPECTED = {
    "erf": [0x3F57625F, 0xBE227686, 0x3EB103AF, 0xBB84B34C, 0x401F01A7, 0x9AB83C9B, 0x3A032D35, 0x8000004E, 0x1A224],
    "tanh": [0x3F57585C, 0xBE229E91, 0x3EB1016D, 0xBB6E6150, 0x401F08DC, 0x8223E47F, 0x3A032D35, 0x80000000, 0x1A224],
    "silu": [0x3F3B26A8, 0xBE89B2B1, 0x3E9F597F, 0xBE11B139, 0x4013DCD9, 0xB9EE03FD, 0x3A032336, 0xB7434F66, 0x1A224],
}
# NaN, +Inf, -Inf, 0: the GPU's canonical NaN, the limits (+Inf; -0 from below), the same zero.  (A -0 input
# reaches no activation here: the exact GEMM's zero sum is +0.)
SPECIAL_X = [np.nan, np.inf, -np.inf, 0.0]
SPECIAL = [0x7FFFFFFF, 0x7F800000, 0x80000000, 0x00000000]


def run(args):
    p = subprocess.run([LOWBIT, *map(str, args)], capture_output=True, text=True, check=False)
    return p.returncode, p.stdout, p.stderr


def doc(activation, tolerance, cast=None, name=None):
    step = {"step": "silu"} if activation == "silu" else {"step": "gelu", "approximation": activation}
    step["tolerance_ulp"] = tolerance
    epilogue = [step] + ([{"step": "cast", "format": cast}] if cast else [])
    return {"lowbit_contract": 1, "name": name or f"{activation}-{tolerance}", "storage": {"x": "f32", "w": "f32"},
            "passes": {"fprop": {"x": {"quantize": None}, "w": {"quantize": None}, "procedure": "exact",
                                 "epilogue": epilogue}}}


def layer(tmp_path, d, xs):
    """Y = X · Wᵀ with W = [[1]]: the accumulator is X itself, one value per row, then the activation."""
    c = tmp_path / f"{d['name']}.json"
    c.write_text(json.dumps(d))
    np.save(tmp_path / "x.npy", np.array(xs, np.float32).reshape(-1, 1))
    np.save(tmp_path / "w.npy", np.ones((1, 1), np.float32))
    out = tmp_path / f"run-{d['name']}"
    rc, _, err = run(["contract", "run", "--contract", c, "--x", tmp_path / "x.npy", "--w", tmp_path / "w.npy",
                      "--out", out])
    assert rc == 0, err
    return c, out


def bits(path):
    return [int(v) for v in np.load(path).view(np.uint32).ravel()]


@pytest.mark.parametrize("activation", ["erf", "tanh", "silu"])
def test_reference_values(tmp_path, activation):
    _, out = layer(tmp_path, doc(activation, 0), X + SPECIAL_X)
    step = "silu" if activation == "silu" else "gelu"
    assert bits(out / "accumulator.npy")[: len(X)] == [int(v) for v in np.array(X, np.float32).view(np.uint32)]
    assert bits(out / f"epilogue[0].{step}.npy") == EXPECTED[activation] + SPECIAL
    assert bits(out / "output.npy") == EXPECTED[activation] + SPECIAL
    manifest = json.loads((out / "manifest.json").read_text())
    tol = {e["path"]: e.get("tolerance_ulp") for e in manifest["stages"]}
    # The exact stages (the accumulator) are compared bit for bit; from the activation on, within the tolerance.
    assert tol == {"accumulator.npy": None, f"epilogue[0].{step}.npy": 0, "output.npy": 0}


def kernel_output(tmp_path, reference, changes):
    k = tmp_path / "kernel"
    k.mkdir(exist_ok=True)
    a = np.array(reference, np.uint32)
    for i, v in changes.items():
        a[i] = v
    np.save(k / "output.npy", a.view(np.float32).reshape(-1, 1))
    return k


@pytest.mark.parametrize("activation", ["erf", "tanh", "silu"])
def test_one_ulp_passes_at_1_and_fails_at_0(tmp_path, activation):
    ref = EXPECTED[activation]
    # Element 2 one ulp above the reference, element 4 one ulp below (both positive values).
    changes = {2: ref[2] + 1, 4: ref[4] - 1}
    c1, run1 = layer(tmp_path, doc(activation, 1), X)
    k = kernel_output(tmp_path, ref, changes)
    rc, out, err = run(["contract", "check", "--contract", c1, "--inputs", run1, "--results", k])
    assert rc == 0, out + err
    assert "output.npy: 9 elements within tolerance (2 within 1 ulp; worst output[2, 0]:" in out
    assert out.endswith("ok: 9 elements compared, 7 equal and 2 within their stage's tolerance\n")
    c0, run0 = layer(tmp_path, doc(activation, 0), X)
    rc, out, err = run(["contract", "check", "--contract", c0, "--inputs", run0, "--results", k])
    assert rc == 1, out + err
    assert "output.npy: 2 of 9 elements beyond 0 ulp" in out
    assert f"  output[2, 0]: expected {ref[2]:#010x}" in out and ", 1 ulp" in out
    assert "FAILED: first differing stage output.npy" in out


def test_ulp_distance_counts_across_zero_and_names_the_worst(tmp_path):
    # -0 against +0 is no distance; the smallest subnormal against -(smallest subnormal) is 2; a NaN against a
    # number fails whatever the tolerance, and is the worst.
    ref = EXPECTED["erf"]
    c, d = layer(tmp_path, doc("erf", 3), X)
    k = kernel_output(tmp_path, ref, {7: 0x80000000 + 0x4E - 3})  # 3 ulp toward zero from 0x8000004e
    rc, out, _ = run(["contract", "check", "--contract", c, "--inputs", d, "--results", k])
    assert rc == 0 and "worst output[7, 0]: expected 0x8000004e" in out and ", 3 ulp)" in out, out
    k = kernel_output(tmp_path, ref, {7: 0x80000000 + 0x4E - 4})
    rc, out, _ = run(["contract", "check", "--contract", c, "--inputs", d, "--results", k])
    assert rc == 1 and "1 of 9 elements beyond 3 ulp" in out and ", 4 ulp" in out, out
    k = kernel_output(tmp_path, ref, {0: 0x7FC00000})
    rc, out, _ = run(["contract", "check", "--contract", c, "--inputs", d, "--results", k])
    assert rc == 1 and "output[0, 0]: expected 0x3f57625f" in out and "NaN against a number" in out, out


def test_bf16_output_counts_bf16_ulps(tmp_path):
    # A bf16 cast after the activation: the output's tolerance counts bf16 ulps.  gelu_erf(1) = 0x3f57625f rounds
    # to bf16 0x3f57 (the dropped half 0x625f is below 0x8000).
    c, d = layer(tmp_path, doc("erf", 1, cast="bf16"), [1.0])
    assert [int(v) for v in np.load(d / "output.npy").ravel()] == [0x3F57]
    k = tmp_path / "kernel"
    k.mkdir()
    np.save(k / "output.npy", np.array([[0x3F58]], np.uint16))
    rc, out, _ = run(["contract", "check", "--contract", c, "--inputs", d, "--results", k])
    assert rc == 0 and "1 within 1 ulp" in out, out
    np.save(k / "output.npy", np.array([[0x3F59]], np.uint16))
    rc, out, _ = run(["contract", "check", "--contract", c, "--inputs", d, "--results", k])
    assert rc == 1 and "2 ulp" in out, out


@pytest.mark.parametrize("edit,path,words", [
    (lambda d: d["passes"]["fprop"]["epilogue"][0].pop("tolerance_ulp"), "passes.fprop.epilogue[0]", "tolerance_ulp"),
    (lambda d: d["passes"]["fprop"]["epilogue"][0].update(tolerance_ulp=-1), "epilogue[0].tolerance_ulp", "whole number"),
    (lambda d: d["passes"]["fprop"]["epilogue"][0].update(approximation="sigmoid"), "epilogue[0].approximation",
     "erf, tanh"),
    (lambda d: d["passes"]["fprop"]["epilogue"][0].pop("approximation"), "passes.fprop.epilogue[0]", "erf or tanh"),
    (lambda d: d["passes"]["fprop"]["epilogue"].insert(1, {"step": "relu"}), "epilogue[1].step", "only a cast"),
    (lambda d: d["passes"]["fprop"]["epilogue"][1].update(format="e4m3"), "epilogue[1].format", "f32, bf16 or f16"),
])
def test_bad_activation_steps(tmp_path, edit, path, words):
    d = doc("erf", 1, cast="bf16")
    edit(d)
    c = tmp_path / "bad.json"
    c.write_text(json.dumps(d))
    np.save(tmp_path / "x.npy", np.ones((1, 1), np.float32))
    rc, out, err = run(["contract", "run", "--contract", c, "--x", tmp_path / "x.npy", "--w", tmp_path / "x.npy",
                        "--out", tmp_path / "never"])
    assert rc == 2 and path in err and words in err, err
    assert not (tmp_path / "never").exists() and out == ""
