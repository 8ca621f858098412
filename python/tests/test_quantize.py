"""lowbit.quantize gives `lowbit quantize`'s bits on shared inputs: codes, scales, tensor scale, packed scales,
block shape and delayed state for every scheme and option (text mode), the packed codes and cuBLASLt scale
layout of file mode, and `lowbit dequantize`'s values."""
import json

import numpy as np
import pytest

import lowbit
from conftest import cli

ml_dtypes = pytest.importorskip("ml_dtypes", reason="ml_dtypes is not installed (pip install -r requirements.txt)")


def tensor(rows=32, cols=64, seed=1, specials=False):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((rows, cols)) * np.exp(rng.uniform(-4, 4, (rows, 1)))).astype(np.float32)
    x[3, 5] = 700.0
    if specials:
        x[1, 2], x[4, 40], x[7, 0] = np.nan, np.inf, -np.inf
    return x


def hexes(values, bits=32):
    return np.array([int(v, 16) for v in values], dtype=np.uint64)


def cli_quantize(x, scheme, **options):
    args = ["quantize", "--scheme", scheme, "--in", "-", "--out", "-", "--shape", f"{x.shape[0]},{x.shape[1]}"]
    for k, v in options.items():
        flag = "--" + k.replace("_", "-")
        args += [flag] if v is True else [flag, v]
    text = " ".join(f"0x{int(b):08x}" for b in x.view(np.uint32).reshape(-1))
    return json.loads(cli(*args, input=text).stdout)


def assert_same(q, want, prefix=""):
    np.testing.assert_array_equal(np.asarray(q.codes).view(np.uint8).reshape(-1), hexes(want[prefix + "codes"]))
    width = np.uint32 if q.scale_format == "f32" else np.uint8
    np.testing.assert_array_equal(np.asarray(q.scales).view(width).reshape(-1), hexes(want[prefix + "scales"]))
    assert list(q.block) == want[prefix + "block"]
    if prefix + "tensor_scale" in want:
        assert int(np.float32(q.tensor_scale).view(np.uint32)) == int(want[prefix + "tensor_scale"], 16)
    else:
        assert q.tensor_scale is None
    if prefix + "packed_scales" in want:
        np.testing.assert_array_equal(q.packed_scales, hexes(want[prefix + "packed_scales"]))


CASES = [
    ("tensor", {}), ("tensor", {"scale_format": "pow2"}), ("tensor", {"element": "e5m2"}),
    ("channel", {}), ("token", {"rounding": "rtz"}), ("block1x128", {}), ("block128x128", {}),
    ("block", {"block": 32, "scale_format": "ue8m0-packed"}), ("block", {"block": 16, "profile": "te"}),
    ("mx", {}), ("mx", {"element": "e2m1", "scale_rule": "rceil"}), ("mx", {"element": "e3m2", "scale_rule": "even"}),
    ("mx", {"element": "int8", "scale_rule": "ceil"}), ("mx", {"element": "e2m3", "nonfinite": "propagate"}),
    ("mx", {"profile": "te"}), ("mx", {"element": "e5m2", "block": 16, "scale_rule": "rne"}),
    ("nvfp4", {}), ("nvfp4", {"variant": "fast-math"}), ("nvfp4", {"variant": "4over6"}),
    ("nvfp4", {"variant": "4over6-mse", "zero_scale": "reference"}), ("nvfp4", {"hadamard": True}),
    ("nvfp4-2d", {}), ("nvfp4-1level", {}), ("tensor", {"amax_nan": "propagate"}),
    ("mx", {"axis": 0}), ("token", {"direction": "col"}), ("nvfp4", {"direction": "both"}),
    ("mx", {"element": "e2m1", "rounding": "sr-a", "sr_bits": 8, "sr_seed": 42}),
    ("tensor", {"rounding": "sr-c", "sr_bits": 12, "sr_seed": 7, "direction": "both"}),
    ("delayed", {}), ("delayed", {"direction": "both"}),
]


@pytest.mark.parametrize("specials", [False, True], ids=["finite", "nan-inf"])
@pytest.mark.parametrize("scheme,options", CASES, ids=[f"{s}-{'-'.join(map(str, o.values())) or 'default'}"
                                                      for s, o in CASES])
def test_quantize_matches_the_command_line(scheme, options, specials):
    x = tensor(specials=specials)
    want = cli_quantize(x, scheme, **options)
    q = lowbit.quantize(x, scheme, **options)
    direction = options.get("direction", "row")
    if direction == "col":
        assert_same(q, want, "col_")
        assert q.codes.shape == (x.shape[1], x.shape[0])
        return
    assert_same(q, want)
    assert q.codes.shape == x.shape and q.element == want["element"]
    if direction == "both":
        assert_same(q.columnwise, want, "col_")
    if scheme == "delayed":
        np.testing.assert_array_equal(q.state.history.view(np.uint32), hexes(want["amax_history"]))
        assert q.state.scale_bits == int(want["scale"], 16)
    # The amax, independently: numpy's largest |x| over the non-NaN elements (fmaxf ignores NaN).
    if options.get("amax_nan") == "propagate" and specials:
        assert np.isnan(q.amax)
    else:
        assert q.amax == np.nanmax(np.abs(x))


def test_delayed_state_carries_over():
    """Three steps with the state handed on equal three `lowbit quantize --state FILE` runs."""
    import os
    import tempfile

    state = lowbit.DelayedState(history=np.zeros(16, np.float32), algorithm="most_recent", margin=1)
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "state.json")
        with open(path, "w") as f:
            json.dump({"history": ["0x00000000"] * 16, "scale": "0x3f800000", "algorithm": "most_recent",
                       "margin": 1}, f)
        for step in range(3):
            x = tensor(4, 8, seed=step) * (10.0 ** step)
            want = cli_quantize(x, "delayed", state=path)
            before = state.history.copy()
            q = lowbit.quantize(x, "delayed", state=state)
            np.testing.assert_array_equal(state.history, before)  # the argument is not changed
            assert_same(q, want)
            state = q.state
        np.testing.assert_array_equal(state.history.view(np.uint32), hexes(json.load(open(path))["history"]))


def test_random_bits_match_a_bits_file(tmp_path):
    x = tensor(8, 32)
    r = np.random.default_rng(9).integers(0, 2**10, size=x.shape, dtype=np.uint32)
    (tmp_path / "bits.txt").write_text(" ".join(f"0x{int(v):x}" for v in r.reshape(-1)))
    want = cli_quantize(x, "mx", element="e2m1", rounding="sr-b", sr_bits=10, sr_bits_file=tmp_path / "bits.txt")
    assert_same(lowbit.quantize(x, "mx", element="e2m1", rounding="sr-b", sr_bits=10, random_bits=r), want)


@pytest.mark.parametrize("scheme,element", [("nvfp4", "e2m1"), ("mx", "e3m2"), ("mx", "e4m3"), ("nvfp4-1level", "e2m1")])
def test_packed_codes_and_cublaslt_scales_match_file_mode(tmp_path, scheme, element):
    x = tensor(40, 96)
    np.save(tmp_path / "x.npy", x)
    q = lowbit.quantize(x, scheme, element=element)
    packs = lowbit.format(element).bits in (4, 6)
    cli("quantize", "--scheme", scheme, "--element", element, "--in", tmp_path / "x.npy", "--out", tmp_path / "q",
        "--scale-layout", "cublaslt", *(["--pack"] if packs else []))
    stored = np.load(tmp_path / "q" / "codes.npy")
    if packs:
        np.testing.assert_array_equal(q.packed(), stored)
    else:  # 8-bit codes are stored one per byte and have no packing, on the command line as here
        np.testing.assert_array_equal(np.asarray(q.codes).view(np.uint8), stored)
        with pytest.raises(ValueError, match="packed: packs 4- and 6-bit elements"):
            q.packed()
    np.testing.assert_array_equal(q.scale_layout("cublaslt"), np.load(tmp_path / "q" / "scales.npy"))
    if q.tensor_scale is not None:
        ts = np.load(tmp_path / "q" / "tensor_scale.npy")
        assert ts.dtype == np.float32 and ts.reshape(-1)[0].view(np.uint32) == np.float32(q.tensor_scale).view(np.uint32)
    # And back: `lowbit dequantize` of that directory is the module's dequantize, rounded once to f32.
    cli("dequantize", "--in", tmp_path / "q", "--out", tmp_path / "d.npy")
    np.testing.assert_array_equal(q.dequantize(np.float32).view(np.uint32), np.load(tmp_path / "d.npy").view(np.uint32))


@pytest.mark.parametrize("scheme,options", [("tensor", {}), ("mx", {"axis": 0}), ("nvfp4", {}), ("block128x128", {})])
def test_dequantize_matches_the_command_line(scheme, options):
    x = tensor(specials=True)
    want = cli_quantize(x, scheme, **options)
    text = json.dumps(want)
    exact = cli("dequantize", "--in", "-", "--out", "-", "--exact", input=text).stdout.decode().split()
    got = lowbit.quantize(x, scheme, **options).dequantize()
    assert got.shape == x.shape
    np.testing.assert_array_equal(got.reshape(-1), np.array([float(v) for v in exact]))


def test_higher_rank_and_other_input_dtypes():
    x = tensor(12, 32).reshape(3, 4, 32)
    q = lowbit.quantize(x, "mx", element="e2m1")
    assert q.codes.shape == (3, 4, 32) and q.scales.shape == (12, 1) and q.packed().shape == (3, 4, 16)
    np.testing.assert_array_equal(np.asarray(q.codes).view(np.uint8),
                                  np.asarray(lowbit.quantize(x.reshape(12, 32), "mx", element="e2m1").codes)
                                  .view(np.uint8).reshape(3, 4, 32))
    b = x.astype(ml_dtypes.bfloat16)
    want = lowbit.quantize(b.astype(np.float32), "nvfp4")
    np.testing.assert_array_equal(np.asarray(lowbit.quantize(b, "nvfp4").codes).view(np.uint8),
                                  np.asarray(want.codes).view(np.uint8))
    assert q.scales.dtype == ml_dtypes.float8_e8m0fnu and lowbit.quantize(x, "nvfp4").scales.dtype == ml_dtypes.float8_e4m3fn
    assert lowbit.quantize(x, "tensor").scales.dtype == np.float32


def test_float64_is_rounded_once_into_f32_as_the_command_line_reads_it(tmp_path):
    # numpy's astype(float32) is one IEEE rounding (NaN payloads kept, overflow to Inf); the command line reads
    # a float64 .npy the same way (conformance/cli/test_npy_sources.py), and so does the package.
    rng = np.random.default_rng(3)
    x = rng.standard_normal((8, 64)) * np.exp(rng.uniform(-30, 30, (8, 1)))
    x[0, :3] = [np.frombuffer(np.uint64(0x7FF0_0000_0000_1234).tobytes(), np.float64)[0], 1e300, 5e-324]
    x[1, 0] = 1.0 + 2.0**-24 + 2.0**-60  # just above an f32 midpoint
    with np.errstate(over="ignore", invalid="ignore"):
        f = x.astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    for scheme in ("mx", "nvfp4", "tensor"):
        q, q32 = lowbit.quantize(x, scheme), lowbit.quantize(f, scheme)
        np.testing.assert_array_equal(np.asarray(q.codes).view(np.uint8), np.asarray(q32.codes).view(np.uint8))
        np.testing.assert_array_equal(np.asarray(q.scales).view(np.uint8), np.asarray(q32.scales).view(np.uint8))
        cli("quantize", "--scheme", scheme, "--in", tmp_path / "x.npy", "--out", tmp_path / scheme)
        np.testing.assert_array_equal(np.asarray(q.codes).view(np.uint8), np.load(tmp_path / scheme / "codes.npy"))
