"""On-demand shapes and layouts of the GEMM and scheme suites (issue 20; vectors/SPEC.md "On-demand shapes").

An `nt` suite holds the very draws of the `nn` suite at the same shape, stored transposed; the expected D of
the f32-sequential order is recomputed here with numpy's float32 arithmetic (one rounding per multiply and
per add, in K order, from C), independently of lowbit; the planted plugin passes an `nt` suite through the
gate and fails it when it ignores the layout; every bad `--shape` / `--layout` is exit 2 naming the option,
with no folder written.
"""
import json
import os
import subprocess

import numpy as np
import pytest

LOWBIT = os.environ.get("LOWBIT", "lowbit")
PLANTED = os.environ.get("LOWBIT_PLANTED_PLUGIN")


def run(*args, env=None):
    p = subprocess.run([LOWBIT, *map(str, args)], capture_output=True, text=True, check=False,
                       env=None if env is None else {**os.environ, **env})
    return p.returncode, p.stdout, p.stderr


def generate(out, suite, *options):
    rc, stdout, err = run("vectors", "generate", "--suite", suite, "--out", out, *options)
    assert rc == 0, stdout + err
    return json.loads((out / "manifest.json").read_text())


def as_f32(array, fmt):
    """A suite's operand as float32 values: bf16 codes are the top half of an f32, f16 widens exactly."""
    if fmt == "bf16":
        return (array.astype(np.uint32) << 16).view(np.float32)
    return array.astype(np.float32)


def test_nt_tn_tt_store_the_nn_draws_transposed(tmp_path):
    shapes = "3x5x7,4x2x9"
    base = generate(tmp_path / "nn", "gemm-f32-sequential", "--shape", shapes)
    assert base["shapes"] == ["3x5x7", "4x2x9"] and base["layout"] == "nn"
    for layout in ["nt", "tn", "tt"]:
        m = generate(tmp_path / layout, "gemm-f32-sequential", "--shape", shapes, "--layout", layout)
        assert m["layout"] == layout
        assert len(m["cases"]) == len(base["cases"]) == 3 * 2  # (bf16, bf16), (f16, f16), (f32, f32) x 2 shapes
        for case, ref in zip(m["cases"], base["cases"]):
            assert case["layout"] == layout and case["recipe"]["layout"] == layout
            d = f"case-{case['index']:03d}"
            a, b = np.load(tmp_path / layout / d / "a.npy"), np.load(tmp_path / layout / d / "b.npy")
            a0, b0 = np.load(tmp_path / "nn" / d / "a.npy"), np.load(tmp_path / "nn" / d / "b.npy")
            assert a0.shape == (case["m"], case["k"]) and b0.shape == (case["k"], case["n"])
            assert np.array_equal(a, a0.T if layout[0] == "t" else a0)
            assert np.array_equal(b, b0.T if layout[1] == "t" else b0)
            for same in ["c.npy", "d.npy"]:
                assert (tmp_path / layout / d / same).read_bytes() == (tmp_path / "nn" / d / same).read_bytes()


def test_f32_sequential_nt_d_equals_numpy_float32_in_k_order(tmp_path):
    m = generate(tmp_path / "s", "gemm-f32-sequential", "--shape", "5x7x33,1x3x130", "--layout", "nt")
    for case in m["cases"]:
        d = tmp_path / "s" / f"case-{case['index']:03d}"
        r = case["recipe"]
        a = as_f32(np.load(d / "a.npy"), r["a_format"])        # [M, K]: nt stores A row-major
        bt = as_f32(np.load(d / "b.npy"), r["b_format"])       # [N, K]: B transposed
        acc = np.load(d / "c.npy").astype(np.float32)
        with np.errstate(all="ignore"):
            for p in range(case["k"]):
                acc = (acc + np.outer(a[:, p], bt[:, p]).astype(np.float32)).astype(np.float32)
        assert np.array_equal(np.load(d / "d.npy").view(np.uint32), acc.view(np.uint32)), case["name"]


def test_same_request_gives_the_same_bytes(tmp_path):
    for n in ["x", "y"]:
        generate(tmp_path / n, "gemm-blackwell-mxf4nvf4", "--shape", "3x129x64", "--layout", "nt")
    assert (tmp_path / "x/manifest.json").read_bytes() == (tmp_path / "y/manifest.json").read_bytes()


def test_block_scales_follow_their_operand_storage(tmp_path):
    nn = generate(tmp_path / "nn", "gemm-hopper-fp8-blockscaled", "--shape", "3x130x300")
    generate(tmp_path / "nt", "gemm-hopper-fp8-blockscaled", "--shape", "3x130x300", "--layout", "nt")
    # DeepGEMM's layout: A per 1x128 ([M, ceil(K/128)] = [3, 3]), B per 128x128 ([3, ceil(130/128)] = [3, 2]).
    a0, b0 = np.load(tmp_path / "nn/case-000/a_scales.npy"), np.load(tmp_path / "nn/case-000/b_scales.npy")
    assert a0.shape == (3, 3) and b0.shape == (3, 2) and nn["cases"][0]["recipe"]["b_scale_block"] == "128x128"
    assert np.array_equal(np.load(tmp_path / "nt/case-000/a_scales.npy"), a0)
    assert np.array_equal(np.load(tmp_path / "nt/case-000/b_scales.npy"), b0.T)


def test_default_shapes(tmp_path):
    g = generate(tmp_path / "g", "gemm-hopper-fp8", "--shape", "--layout", "nt")
    want = [f"{m}x{n}x{k}" for m in (64, 129, 256) for n in (64, 129, 256) for k in (128, 4112)]
    assert g["shapes"] == want and len(g["cases"]) == 2 * len(want)  # (e4m3, e4m3), (e5m2, e4m3)
    assert np.load(tmp_path / "g/case-001/b.npy").shape == (64, 4112)  # 64x64x4112, B as [N, K]
    s = generate(tmp_path / "s", "scheme-tensor", "--shape")
    assert s["shapes"] == ["128x128", "257x4096"]
    assert [c["shape"] for c in s["cases"]] == [[128, 128], [257, 4096]] * 3  # e4m3, e5m2, e4m3-pow2


def test_scheme_shapes_per_recipe(tmp_path):
    m = generate(tmp_path / "s", "scheme-nvfp4", "--shape", "3x40,17x16")
    names = [c["name"] for c in m["cases"]]
    # Every recipe at every shape, except the Hadamard transform's, whose columns must be a multiple of 16.
    assert names == [f"{r}/random-{s}" for r in ["standard", "fast-math", "4over6", "4over6-mse", "torchao", "zero-scale-reference"]
                     for s in ["3x40", "17x16"]] + ["hadamard/random-17x16", "sr-a-8/random-3x40", "sr-a-8/random-17x16"]
    x = np.load(tmp_path / "s/case-000/x.npy")
    assert x.dtype == np.float32 and x.shape == (3, 40)
    assert np.load(tmp_path / "s/case-000/scales.npy").shape == (3, 3)  # ceil(40 / 16) blocks per row


@pytest.mark.skipif(not PLANTED, reason="LOWBIT_PLANTED_PLUGIN not set (the plugin is built with the tests)")
def test_gate_runs_an_nt_suite_through_the_plugin():
    args = ["gate", "--plugin", PLANTED, "--suite", "gemm-f32-sequential", "--shape", "6x6x6,3x5x33"]
    rc, out, err = run(*args, "--layout", "nt")
    assert rc == 0, out + err
    assert "gemm-f32-sequential: " in out and ", 0 mismatching, 0 skipped, 0 in error  ok" in out
    # The same plugin reading every suite as nn: B [N, K] read as [K, N] gives other sums (square shape) or
    # an error (the shapes disagree); the gate names D's elements.
    rc, out, err = run(*args, "--layout", "nt", env={"LOWBIT_PLANTED_IGNORE_LAYOUT": "1"})
    assert rc == 1, out + err
    assert "random-6x6x6 case-000/d.npy[0, 0]: expected 0x" in out
    # A plugin failure is an error of that case, not a mismatch (the gate's report lists errors apart).
    assert "case-001 random-3x5x33: the plugin's gemm failed" in out
    # The committed suite (no --shape) is unchanged: nn, and passes with or without the variable.
    assert run("gate", "--plugin", PLANTED, "--suite", "gemm-f32-sequential",
               env={"LOWBIT_PLANTED_IGNORE_LAYOUT": "1"})[0] == 0


BAD = [
    (["--suite", "gemm-exact", "--shape", "3x5"], "--shape: '3x5' is not MxNxK"),
    (["--suite", "gemm-exact", "--shape", "3x5x7x1"], "--shape: '3x5x7x1' is not MxNxK"),
    (["--suite", "gemm-exact", "--shape", "0x5x7"], "--shape: '0x5x7': a dimension is 0"),
    (["--suite", "gemm-exact", "--shape", "3x-5x7"], "--shape: '3x-5x7': '-5' is not a decimal integer"),
    (["--suite", "gemm-exact", "--shape", "3x5x 7"], "--shape: '3x5x 7': ' 7' is not a decimal integer"),
    (["--suite", "gemm-exact", "--shape", "03x5x7"], "--shape: '03x5x7': '03' has a leading zero"),
    (["--suite", "gemm-exact", "--shape", "3xx7"], "--shape: '3xx7': a dimension is empty"),
    (["--suite", "gemm-exact", "--shape", "3x5x7,"], "--shape: an empty shape in '3x5x7,'"),
    (["--suite", "gemm-exact", "--shape", "3x5x7,3x5x7"], "--shape: '3x5x7' is given twice"),
    (["--suite", "gemm-exact", "--shape", "99999999999999999999999x1x1"], "a dimension over 1048576"),
    (["--suite", "gemm-exact", "--shape", "1048576x1048576x1"], "C and D would have 1099511627776 elements, over 16777216"),
    (["--suite", "gemm-exact", "--shape", "1x4097x4096"], "B would have 16781312 elements"),
    (["--suite", "gemm-exact", "--shape", ",".join(f"1x1x{k}" for k in range(1, 66))], "more than 64 shapes"),
    (["--suite", "scheme-mx", "--shape", "3x4x5"], "--shape: '3x4x5' is not RxC"),
    (["--suite", "scheme-mx", "--shape", "4097x4097"], "the tensor would have 16785409 elements"),
    (["--suite", "scheme-mx", "--shape", "3x4", "--layout", "nt"], "--layout: 'scheme-mx' is a scheme suite"),
    (["--suite", "convert-ocp", "--shape", "3x4"], "--shape: 'convert-ocp' is a conversion suite"),
    (["--suite", "gemm-exact", "--layout", "nt"], "--layout: applies only to requested shapes"),
    (["--suite", "gemm-exact", "--shape", "2x2x2", "--layout", "nx"], "--layout: 'nx' is not one of nn, nt, tn, tt"),
    (["--suite", "gemm-exact", "--shape", "2x2x2", "--layout", "ntn"], "--layout: 'ntn' is not one of"),
    (["--suite", "gemm-exact", "--shape", "2x2x2", "--layout", ""], "--layout: '' is not one of"),
]


@pytest.mark.parametrize("args,message", BAD, ids=[" ".join(a[1:]) for a, _ in BAD])
def test_bad_shape_or_layout_is_exit_2_naming_the_option(tmp_path, args, message):
    rc, out, err = run("vectors", "generate", *args, "--out", tmp_path / "x")
    assert rc == 2 and message in err, out + err
    assert not (tmp_path / "x").exists() and list(tmp_path.iterdir()) == []
    if PLANTED:
        rc, out, err = run("gate", "--plugin", PLANTED, *args)
        assert rc == 2 and message in err, out + err
        assert "plugin:" not in out  # refused before the plugin is loaded


@pytest.mark.skipif(not PLANTED, reason="LOWBIT_PLANTED_PLUGIN not set")
def test_gate_shape_without_suite_is_exit_2():
    rc, out, err = run("gate", "--plugin", PLANTED, "--shape", "2x2x2")
    assert rc == 2 and "--shape: needs --suite" in err
