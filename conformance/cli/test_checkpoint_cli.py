"""`lowbit quantize` / `lowbit dequantize` file mode (.npy in, directory out), checkpoint mode
(safetensors in and out) and `lowbit verify-checkpoint` (reference/README.md "Files").

Expected bytes come from the conventions of docs/semantics.md §4 ("Packing and layouts"), worked by hand
or restated here in numpy: FP4 element 0 in the low nibble; FP6 code i in bits 6i..6i+5 of a
little-endian 24-bit group; cuBLASLt scale tiles of 128x4 at (r % 32) * 16 + ((r % 128) / 32) * 4 + c % 4.
File mode is also checked against the text mode, whose own tests compare it with independent
implementations (test_schemes_cli.py).
"""
import json
import os
import struct
import subprocess

import numpy as np
import pytest

LOWBIT = os.environ.get("LOWBIT", "lowbit")


def run(*args):
    p = subprocess.run([LOWBIT, *map(str, args)], capture_output=True, check=False)
    return p.returncode, p.stdout.decode(), p.stderr.decode()


def ok(*args):
    rc, out, err = run(*args)
    assert rc == 0, err
    return out


def fails(args, *names, rc_expected=2):
    rc, out, err = run(*args)
    assert rc == rc_expected, f"expected exit {rc_expected}, got {rc}: {err}"
    for n in names:
        assert n in err, f"{n!r} not named in: {err}"
    return err


def text_quantize(args, values, shape):
    bits = np.asarray(values, dtype=np.float32).view(np.uint32).ravel()
    p = subprocess.run([LOWBIT, "quantize", *args, "--shape", f"{shape[0]},{shape[1]}", "--in", "-", "--out", "-"],
                       input=" ".join(f"0x{b:08x}" for b in bits).encode(), capture_output=True, check=False)
    assert p.returncode == 0, p.stderr.decode()
    return json.loads(p.stdout)


def hexes(xs):
    return [int(x, 16) for x in xs]


def leftovers(parent):
    """Anything a failed write could leave behind: temporary or half-written entries."""
    return sorted(n for n in os.listdir(parent) if "lowbit" in n)


RNG = np.random.default_rng(2024)


def tensor(rows, cols):
    mant = RNG.uniform(1, 2, (rows, cols))
    exp = RNG.integers(-6, 6, (rows, cols))
    v = (np.where(RNG.random((rows, cols)) < 0.5, -1, 1) * mant * np.exp2(exp)).astype(np.float32)
    v[RNG.random((rows, cols)) < 0.05] = 0
    return v


# ---- safetensors written by hand (the format: 8-byte LE header length, JSON header, data) ------------

DTYPES = {"F32": np.float32, "F16": np.float16, "BF16": np.uint16, "U8": np.uint8, "U32": np.uint32, "I32": np.int32}


def write_st(path, tensors, metadata=None):
    header, blobs, off = {}, [], 0
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, (dtype, a) in tensors.items():
        raw = np.ascontiguousarray(a).tobytes()
        header[name] = {"dtype": dtype, "shape": list(a.shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def read_st(path):
    data = open(path, "rb").read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    meta = header.pop("__metadata__", {})
    out = {}
    for name, e in header.items():
        b, t = e["data_offsets"]
        raw = data[8 + n + b:8 + n + t]
        out[name] = (e["dtype"], np.frombuffer(raw, dtype=DTYPES.get(e["dtype"], np.uint8)).reshape(e["shape"]).copy())
    return out, meta


def verify(a, b, *extra):
    rc, out, err = run("verify-checkpoint", "--source", a, "--quantized", b, "--json", *extra)
    assert rc in (0, 1), err
    return rc, json.loads(out)


def differing(report):
    return {(t["name"], d["block"]) for t in report["tensors"] for d in t["differences"]}


# ---- file mode: quantize FILE.npy --out DIR -----------------------------------------------------------

@pytest.mark.parametrize("scheme", [
    ["--scheme", "mx"],
    ["--scheme", "mx", "--element", "e2m1", "--scale-rule", "rceil"],
    ["--scheme", "nvfp4"],
    ["--scheme", "nvfp4-1level"],
    ["--scheme", "tensor"],
    ["--scheme", "token"],
    ["--scheme", "block", "--block", "32", "--scale-format", "pow2"],
])
def test_file_mode_holds_what_text_mode_prints(tmp_path, scheme):
    x = tensor(5, 70)
    np.save(tmp_path / "x.npy", x)
    ok("quantize", *scheme, "--in", tmp_path / "x.npy", "--out", tmp_path / "q")
    j = text_quantize(scheme, x, x.shape)
    meta = json.load(open(tmp_path / "q" / "quantized.json"))
    codes = np.load(tmp_path / "q" / "codes.npy")
    scales = np.load(tmp_path / "q" / "scales.npy")
    assert codes.dtype == np.uint8 and codes.shape == x.shape
    assert codes.ravel().tolist() == hexes(j["codes"])
    # Every scale in its own dtype: f32 decode scales as '<f4' values (their bits are the text mode's).
    assert scales.dtype == (np.float32 if meta["scale_format"] == "f32" else np.uint8)
    bits = scales.view(np.uint32) if scales.dtype == np.float32 else scales
    assert bits.ravel().tolist() == hexes(j["scales"])
    assert list(scales.shape) == meta["scale_shape"] and meta["version"] == 2
    for key in ("scheme", "element", "block"):
        assert meta[key] == j[key]
    assert meta["shape"] == [5, 70] and meta["packing"] == "none" and meta["scale_layout"] == "row-major"
    if "tensor_scale" in j:
        ts = np.load(tmp_path / "q" / "tensor_scale.npy")
        assert ts.dtype == np.float32 and ts.view(np.uint32).tolist() == [int(j["tensor_scale"], 16)]
        assert meta["tensor_scale"] == j["tensor_scale"]
    else:
        assert not (tmp_path / "q" / "tensor_scale.npy").exists()
    # Dequantizing the directory gives the bits the text mode's dequantize gives.
    ok("dequantize", "--in", tmp_path / "q", "--out", tmp_path / "y.npy")
    y = np.load(tmp_path / "y.npy")
    p = subprocess.run([LOWBIT, "dequantize", "--in", "-", "--out", "-"], input=json.dumps(j).encode(),
                       capture_output=True, check=True)
    assert y.dtype == np.float32 and y.shape == x.shape
    assert y.view(np.uint32).ravel().tolist() == [int(t, 16) for t in p.stdout.split()]
    assert leftovers(tmp_path) == []


def test_fp4_packing_hand_worked(tmp_path):
    # MX e2m1, amax 6: floor(log2 6) - emax(e2m1) = 2 - 2 = 0, scale 2^0 (e8m0 0x7f). e2m1 codes:
    # 1.0 -> 0x2, -0.5 -> 0x9, 6.0 -> 0x7, 0.5 -> 0x1, 3.0 -> 0x5. Element 0 low nibble:
    # bytes 0x92, 0x17, then 0x05 (the odd count's zero high nibble).
    x = np.array([1.0, -0.5, 6.0, 0.5, 3.0], dtype=np.float32)
    np.save(tmp_path / "x.npy", x)
    ok("quantize", "--scheme", "mx", "--element", "e2m1", "--pack", "--in", tmp_path / "x.npy", "--out", tmp_path / "q")
    codes = np.load(tmp_path / "q" / "codes.npy")
    assert codes.shape == (3,) and codes.tolist() == [0x92, 0x17, 0x05]
    assert np.load(tmp_path / "q" / "scales.npy").tolist() == [[0x7F]]
    meta = json.load(open(tmp_path / "q" / "quantized.json"))
    assert meta["packing"] == "fp4x2" and meta["shape"] == [5]
    ok("dequantize", "--in", tmp_path / "q", "--out", tmp_path / "y.npy")
    assert np.load(tmp_path / "y.npy").tolist() == x.tolist()


def test_fp6_packing_hand_worked(tmp_path):
    # MX e2m3 (bias 1, max 7.5), amax 7.5: scale 2^0. Codes 1.0 -> 0x08, 2.0 -> 0x10, 4.0 -> 0x18,
    # 7.5 -> 0x1f, 0.5 -> 0x04 (subnormal 4/8). Group 0: 0x08 | 0x10 << 6 | 0x18 << 12 | 0x1f << 18 =
    # 0x7d8408 -> bytes 08 84 7d; group 1: 0x04 and three zero codes -> 04 00 00. Rows pack separately.
    x = np.array([[1.0, 2.0, 4.0, 7.5, 0.5], [0.5, 1.0, 2.0, 4.0, 7.5]], dtype=np.float32)
    np.save(tmp_path / "x.npy", x)
    ok("quantize", "--scheme", "mx", "--element", "e2m3", "--pack", "--in", tmp_path / "x.npy", "--out", tmp_path / "q")
    codes = np.load(tmp_path / "q" / "codes.npy")
    # Row 1: 0x04 | 0x08 << 6 | 0x10 << 12 | 0x18 << 18 = 0x610204 -> 04 02 61; then 0x1f -> 1f 00 00.
    assert codes.tolist() == [[0x08, 0x84, 0x7D, 0x04, 0x00, 0x00], [0x04, 0x02, 0x61, 0x1F, 0x00, 0x00]]
    ok("dequantize", "--in", tmp_path / "q", "--out", tmp_path / "y.npy")
    assert np.load(tmp_path / "y.npy").tolist() == x.tolist()


def test_cublaslt_scale_layout(tmp_path):
    # 40 rows x 96 columns of MX e4m3: 40 x 3 scales, padded to 128 x 4 -> one 512-byte tile; scale (r, c)
    # at (r % 32) * 16 + (r // 32) * 4 + c.
    x = tensor(40, 96)
    np.save(tmp_path / "x.npy", x)
    ok("quantize", "--scheme", "mx", "--in", tmp_path / "x.npy", "--out", tmp_path / "rm")
    ok("quantize", "--scheme", "mx", "--scale-layout", "cublaslt", "--in", tmp_path / "x.npy", "--out", tmp_path / "lt")
    rm = np.load(tmp_path / "rm" / "scales.npy")
    lt = np.load(tmp_path / "lt" / "scales.npy")
    assert rm.shape == (40, 3) and lt.shape == (512,)
    expected = np.zeros(512, dtype=np.uint8)
    for r in range(40):
        for c in range(3):
            expected[(r % 32) * 16 + (r // 32) * 4 + c] = rm[r, c]
    assert lt.tolist() == expected.tolist()
    assert json.load(open(tmp_path / "lt" / "quantized.json"))["scale_layout"] == "cublaslt"
    ok("dequantize", "--in", tmp_path / "lt", "--out", tmp_path / "a.npy")
    ok("dequantize", "--in", tmp_path / "rm", "--out", tmp_path / "b.npy")
    assert np.load(tmp_path / "a.npy").tobytes() == np.load(tmp_path / "b.npy").tobytes()


def test_input_dtypes_and_ranks(tmp_path):
    ml_dtypes = pytest.importorskip("ml_dtypes", reason="ml_dtypes is not installed (pip install -r requirements.txt)")
    x = tensor(6, 32).reshape(2, 3, 32)
    xb = x.astype(ml_dtypes.bfloat16)
    np.save(tmp_path / "b.npy", xb.view(np.uint16))
    np.save(tmp_path / "f.npy", xb.astype(np.float32))
    np.save(tmp_path / "h.npy", x.astype(np.float16))
    np.save(tmp_path / "hf.npy", x.astype(np.float16).astype(np.float32))
    ok("quantize", "--scheme", "mx", "--in-format", "bf16", "--in", tmp_path / "b.npy", "--out", tmp_path / "qb")
    ok("quantize", "--scheme", "mx", "--in", tmp_path / "f.npy", "--out", tmp_path / "qf")
    ok("quantize", "--scheme", "mx", "--in", tmp_path / "h.npy", "--out", tmp_path / "qh")
    ok("quantize", "--scheme", "mx", "--in", tmp_path / "hf.npy", "--out", tmp_path / "qhf")
    for a, b in (("qb", "qf"), ("qh", "qhf")):
        for f in ("codes.npy", "scales.npy"):
            assert np.load(tmp_path / a / f).tobytes() == np.load(tmp_path / b / f).tobytes()
    assert np.load(tmp_path / "qb" / "codes.npy").shape == (2, 3, 32)
    assert np.load(tmp_path / "qb" / "scales.npy").shape == (6, 1)  # leading dims flatten into rows
    ok("dequantize", "--in", tmp_path / "qb", "--out", tmp_path / "y.npy")
    assert np.load(tmp_path / "y.npy").shape == (2, 3, 32)


def test_rerun_replaces_a_previous_output(tmp_path):
    np.save(tmp_path / "x.npy", tensor(2, 32))
    ok("quantize", "--scheme", "nvfp4", "--in", tmp_path / "x.npy", "--out", tmp_path / "q")
    ok("quantize", "--scheme", "mx", "--in", tmp_path / "x.npy", "--out", tmp_path / "q")
    assert sorted(os.listdir(tmp_path / "q")) == ["codes.npy", "quantized.json", "scales.npy"]
    assert json.load(open(tmp_path / "q" / "quantized.json"))["scheme"] == "mx"


def _bad_npy_files(d):
    x = tensor(2, 32)
    np.save(d / "good.npy", x)
    good = open(d / "good.npy", "rb").read()
    (d / "magic.npy").write_bytes(b"\x92" + good[1:])
    (d / "short.npy").write_bytes(good[:-3])
    np.save(d / "ints.npy", np.zeros((2, 3), dtype=np.int32))
    np.save(d / "u16.npy", np.zeros((2, 3), dtype=np.uint16))
    np.save(d / "empty.npy", np.zeros((0, 4), dtype=np.float32))


@pytest.mark.parametrize("name,extra,culprits", [
    ("missing.npy", [], ["missing.npy"]),
    ("magic.npy", [], ["magic.npy", "byte 0"]),
    ("short.npy", [], ["short.npy", "byte"]),
    ("ints.npy", [], ["ints.npy", "descr"]),
    ("u16.npy", [], ["u16.npy", "descr", "--in-format", "bf16"]),
    ("good.npy", ["--in-format", "bf16"], ["good.npy", "descr"]),
    ("empty.npy", [], ["empty.npy", "shape"]),
    ("good.npy", ["--pack"], ["--pack", "e4m3"]),
    ("good.npy", ["--scheme", "tensor", "--scale-layout", "cublaslt"], ["--scale-layout", "f32"]),
    ("good.npy", ["--scale-layout", "swizzled"], ["--scale-layout"]),
    ("good.npy", ["--direction", "both"], ["--direction"]),
    ("good.npy", ["--element", "bf16", "--scheme", "tensor"], ["--element", "bf16"]),
])
def test_bad_inputs_leave_nothing(tmp_path, name, extra, culprits):
    _bad_npy_files(tmp_path)
    scheme = [] if "--scheme" in extra else ["--scheme", "mx"]
    fails(["quantize", *scheme, *extra, "--in", tmp_path / name, "--out", tmp_path / "q"], *culprits)
    assert not (tmp_path / "q").exists()
    assert leftovers(tmp_path) == []


def test_an_unrelated_directory_is_not_replaced(tmp_path):
    np.save(tmp_path / "x.npy", tensor(2, 32))
    (tmp_path / "q").mkdir()
    (tmp_path / "q" / "notes.txt").write_text("keep")
    fails(["quantize", "--scheme", "mx", "--in", tmp_path / "x.npy", "--out", tmp_path / "q"], "--out", "quantized.json")
    assert os.listdir(tmp_path / "q") == ["notes.txt"]
    assert leftovers(tmp_path) == []


def test_text_mode_options_stay_text_mode():
    p = subprocess.run([LOWBIT, "quantize", "--scheme", "mx", "--pack", "--in", "-", "--out", "-"],
                       input=b"0x3f800000", capture_output=True, check=False)
    assert p.returncode == 2 and b"--pack" in p.stderr and p.stdout == b""


# ---- dequantize DIR: bad directories ------------------------------------------------------------------

def _quantized_dir(tmp_path, *args):
    np.save(tmp_path / "x.npy", tensor(2, 32))
    ok("quantize", *args, "--in", tmp_path / "x.npy", "--out", tmp_path / "q")
    return tmp_path / "q"


def _edit_json(d, **changes):
    j = json.load(open(d / "quantized.json"))
    j.update(changes)
    json.dump(j, open(d / "quantized.json", "w"))


@pytest.mark.parametrize("break_it,culprits", [
    (lambda d: os.remove(d / "quantized.json"), ["quantized.json"]),
    (lambda d: (d / "quantized.json").write_text('{"scheme": "mx",'), ["quantized.json", "byte"]),
    (lambda d: _edit_json(d, scheme="nope"), ["quantized.json", '"scheme"']),
    (lambda d: _edit_json(d, packing="fp4x2"), ["quantized.json", '"packing"']),
    (lambda d: _edit_json(d, files={"codes": "../x.npy", "scales": "scales.npy"}), ["quantized.json", "files.codes"]),
    (lambda d: np.save(d / "codes.npy", np.zeros((2, 31), dtype=np.uint8)), ["codes.npy", "shape"]),
    (lambda d: np.save(d / "codes.npy", np.zeros((2, 32), dtype=np.uint16)), ["codes.npy", "descr"]),
    (lambda d: np.save(d / "scales.npy", np.zeros((2, 1), dtype=np.uint32)), ["scales.npy", "descr"]),
    (lambda d: os.remove(d / "scales.npy"), ["scales.npy"]),
    (lambda d: _edit_json(d, version=1), ["quantized.json", '"version"', "old layout", "'<u4' bit patterns",
                                          "quantize the tensor again"]),
    (lambda d: _edit_json(d, version=3), ["quantized.json", '"version"', "not a version this lowbit reads"]),
    (lambda d: _edit_json(d, version="2"), ["quantized.json", '"version"']),
])
def test_bad_directories_exit_2(tmp_path, break_it, culprits):
    d = _quantized_dir(tmp_path, "--scheme", "mx")
    break_it(d)
    fails(["dequantize", "--in", d, "--out", tmp_path / "y.npy"], *culprits)
    assert not (tmp_path / "y.npy").exists()
    assert leftovers(tmp_path) == []


def test_an_element_code_out_of_range_names_the_byte(tmp_path):
    d = _quantized_dir(tmp_path, "--scheme", "mx", "--element", "e2m1")
    codes = np.load(d / "codes.npy")
    codes[1, 3] = 0x1F  # not a 4-bit code
    np.save(d / "codes.npy", codes)
    header = os.path.getsize(d / "codes.npy") - codes.size
    fails(["dequantize", "--in", d, "--out", tmp_path / "y.npy"], "codes.npy", f"byte {header + 35}", "e2m1")
    assert not (tmp_path / "y.npy").exists()


# ---- checkpoints: written by lowbit, corrupted, verified ----------------------------------------------

def _source(tmp_path):
    w1 = tensor(4, 64)
    w2 = (tensor(16, 32).view(np.uint32) >> 16).astype(np.uint16)  # bf16 bit patterns (f32 truncated)
    bias = tensor(1, 8).ravel()
    write_st(tmp_path / "a.safetensors", {"w1": ("F32", w1), "w2": ("BF16", w2), "bias": ("F32", bias)})
    return tmp_path / "a.safetensors"


def test_lowbit_checkpoint_round_trip_and_metadata(tmp_path):
    a = _source(tmp_path)
    ok("quantize", "--scheme", "mx", "--in", a, "--out", tmp_path / "b.safetensors")
    tensors, meta = read_st(tmp_path / "b.safetensors")
    assert set(tensors) == {"bias", "w1.data", "w1.block_scales", "w2.data", "w2.block_scales"}
    assert tensors["w1.data"][0] == "U8" and tensors["w1.data"][1].shape == (4, 64)
    assert tensors["w1.block_scales"][1].shape == (4, 2)
    assert meta["w1.quantization_format"] == "mx" and meta["w1.element"] == "e4m3"
    assert meta["w1.block_size"] == "32" and meta["w1.scale_rule"] == "floor"
    assert meta["w1.layout"] == "row-major" and meta["w1.packing"] == "none"
    # The codes are what file mode writes for the same tensor.
    np.save(tmp_path / "w1.npy", read_st(a)[0]["w1"][1])
    ok("quantize", "--scheme", "mx", "--in", tmp_path / "w1.npy", "--out", tmp_path / "q")
    assert np.load(tmp_path / "q" / "codes.npy").tobytes() == tensors["w1.data"][1].tobytes()
    rc, rep = verify(a, tmp_path / "b.safetensors")
    assert rc == 0 and rep["identical"] and differing(rep) == set()
    out = ok("verify-checkpoint", "--source", a, "--quantized", tmp_path / "b.safetensors")
    assert "w1: mx e4m3" in out and "identical" in out


def test_corrupted_scale_and_code_are_named(tmp_path):
    a = _source(tmp_path)
    ok("quantize", "--scheme", "mx", "--in", a, "--out", tmp_path / "b.safetensors")
    tensors, meta = read_st(tmp_path / "b.safetensors")
    tensors["w1.block_scales"][1][1, 1] += 1  # row 1, second block: block 1 * 2 + 1 = 3
    tensors["w1.data"][1][2, 5] ^= 0x01       # row 2, first block: block 2 * 2 + 0 = 4
    write_st(tmp_path / "c.safetensors", tensors, meta)
    rc, rep = verify(a, tmp_path / "c.safetensors")
    assert rc == 1 and not rep["identical"]
    assert differing(rep) == {("w1", 3), ("w1", 4)}
    d = {x["block"]: x for t in rep["tensors"] if t["name"] == "w1" for x in t["differences"]}
    assert d[3]["rows"] == [1, 1] and d[3]["cols"] == [32, 63] and "codes" not in d[3]
    assert int(d[3]["scale"]["actual"], 16) == int(d[3]["scale"]["expected"], 16) + 1
    assert d[4]["rows"] == [2, 2] and d[4]["cols"] == [0, 31] and "scale" not in d[4]
    assert (d[4]["codes"]["differ"], d[4]["codes"]["first"]["row"], d[4]["codes"]["first"]["col"]) == (1, 2, 5)
    rc, out, _ = run("verify-checkpoint", "--source", a, "--quantized", tmp_path / "c.safetensors")
    assert rc == 1
    assert "block 3 (rows 1..1, cols 32..63): scale expected" in out
    assert "block 4 (rows 2..2, cols 0..31): 1 code differs, first at (2, 5)" in out
    assert "w2: mx e4m3" in out and "identical" in out
    rc, rep = verify(a, tmp_path / "c.safetensors", "--max-report", "1")
    assert rc == 1 and rep["differing_blocks"] == 2 and rep["reported_blocks"] == 1


def test_packed_cublaslt_checkpoint_corruption(tmp_path):
    a = _source(tmp_path)
    ok("quantize", "--scheme", "nvfp4", "--pack", "--scale-layout", "cublaslt", "--tensor", "w2", "--in", a,
       "--out", tmp_path / "b.safetensors")
    tensors, meta = read_st(tmp_path / "b.safetensors")
    assert "w1" in tensors and "w1.data" not in tensors  # only the named tensor is quantized
    assert tensors["w2.data"][1].shape == (16, 16) and tensors["w2.block_scales"][1].shape == (512,)
    assert tensors["w2.tensor_scale"][0] == "F32" and meta["w2.packing"] == "fp4x2"
    assert verify(a, tmp_path / "b.safetensors")[0] == 0
    # Scale (5, 1) lives at (5 % 32) * 16 + 0 * 4 + 1 = 81: block 5 * 2 + 1 = 11.
    tensors["w2.block_scales"][1][81] ^= 0x01
    # Byte 3 of row 9 holds elements 6 (low nibble) and 7 (high nibble): flip element 7 -> block 9 * 2 = 18.
    tensors["w2.data"][1][9, 3] ^= 0x10
    write_st(tmp_path / "c.safetensors", tensors, meta)
    rc, rep = verify(a, tmp_path / "c.safetensors")
    assert rc == 1 and differing(rep) == {("w2", 11), ("w2", 18)}
    first = [x for t in rep["tensors"] for x in t["differences"] if x["block"] == 18][0]["codes"]["first"]
    assert (first["row"], first["col"]) == (9, 7)
    # A non-zero padding byte of the tiled layout (row 16 is past the last of 16 rows) is reported too.
    tensors, meta = read_st(tmp_path / "b.safetensors")
    tensors["w2.block_scales"][1][(16 % 32) * 16] = 0x38
    write_st(tmp_path / "d.safetensors", tensors, meta)
    rc, rep = verify(a, tmp_path / "d.safetensors")
    assert rc == 1 and differing(rep) == set()
    assert any("padding" in n and "offset 256" in n for t in rep["tensors"] for n in t["notes"])


# ---- a pair written by Python's safetensors package and numpy ----------------------------------------

E2M1 = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])


def e2m1_rne(v):
    """Codes of v (finite, |v| <= 6 after the MX scaling) rounded to nearest, ties to the even code."""
    a = np.abs(v)
    idx = np.searchsorted(E2M1, a)  # E2M1[idx-1] < a <= E2M1[idx]
    idx = np.clip(idx, 1, 7)
    lo, hi = E2M1[idx - 1], E2M1[idx]
    pick_hi = (a - lo > hi - a) | ((a - lo == hi - a) & (idx % 2 == 0))
    code = np.where(a == 0, 0, np.where(pick_hi, idx, idx - 1))
    return (code | np.where(np.signbit(v), 8, 0)).astype(np.uint8)


def numpy_mx_fp4(x, high_nibble_first=False):
    """OCP MX v1.0 with e2m1 elements, blocks of 32, floor rule (docs/semantics.md §4), packed two per byte."""
    rows, cols = x.shape
    blocks = x.reshape(rows, cols // 32, 32).astype(np.float64)
    amax = np.abs(blocks).max(axis=2)
    e = np.where(amax > 0, np.floor(np.log2(np.where(amax > 0, amax, 1))) - 2, -127).clip(-127, 127).astype(int)
    q = e2m1_rne(np.clip(blocks / np.exp2(e)[..., None], -6, 6)).reshape(rows, cols)
    lo, hi = (q[:, 1::2], q[:, 0::2]) if high_nibble_first else (q[:, 0::2], q[:, 1::2])
    return (lo | (hi << 4)).astype(np.uint8), (e + 127).astype(np.uint8)


def numpy_swizzle(scales):
    """The cuBLASLt 128x4 tiling: pad, view each tile as (4, 32, 4) [row block of 32, row, col], and
    store it as (32, 4, 4) [row, row block, col]."""
    rows, cols = scales.shape
    pr, pc = -(-rows // 128) * 128, -(-cols // 4) * 4
    p = np.zeros((pr, pc), dtype=np.uint8)
    p[:rows, :cols] = scales
    t = p.reshape(pr // 128, 4, 32, pc // 4, 4).transpose(0, 3, 2, 1, 4)
    return np.ascontiguousarray(t).reshape(-1)


def test_pair_written_by_safetensors_package(tmp_path):
    st = pytest.importorskip("safetensors.numpy", reason="safetensors is not installed")
    x = tensor(8, 64)
    st.save_file({"layer.weight": x, "layer.bias": x[0].copy()}, str(tmp_path / "a.safetensors"))
    codes, scales = numpy_mx_fp4(x)
    meta = {"layer.weight.quantization_format": "mx", "layer.weight.element": "e2m1",
            "layer.weight.block_size": "32", "layer.weight.scale_rule": "floor", "layer.weight.packing": "fp4x2"}
    st.save_file({"layer.weight.data": codes, "layer.weight.block_scales": scales},
                 str(tmp_path / "b.safetensors"), metadata=meta)
    rc, rep = verify(tmp_path / "a.safetensors", tmp_path / "b.safetensors")
    assert rc == 0, rep
    # The same with the scales in cuBLASLt's layout.
    st.save_file({"layer.weight.data": codes, "layer.weight.block_scales": numpy_swizzle(scales)},
                 str(tmp_path / "c.safetensors"), metadata={**meta, "layer.weight.layout": "cublaslt"})
    assert verify(tmp_path / "a.safetensors", tmp_path / "c.safetensors")[0] == 0
    # An exporter that puts element 0 in the high nibble: every block whose codes are not pairwise
    # symmetric differs, and no scale does.
    bad, _ = numpy_mx_fp4(x, high_nibble_first=True)
    st.save_file({"layer.weight.data": bad, "layer.weight.block_scales": scales},
                 str(tmp_path / "d.safetensors"), metadata=meta)
    rc, rep = verify(tmp_path / "a.safetensors", tmp_path / "d.safetensors")
    q = codes.reshape(8, 2, 16)
    expected = {("layer.weight", r * 2 + b) for r in range(8) for b in range(2)
                if np.any((q[r, b] & 0xF) != (q[r, b] >> 4))}
    assert rc == 1 and differing(rep) == expected and expected
    assert all("scale" not in d for t in rep["tensors"] for d in t["differences"])


# ---- verify-checkpoint: bad files and metadata ---------------------------------------------------------

def _pair(tmp_path):
    a = _source(tmp_path)
    ok("quantize", "--scheme", "mx", "--tensor", "w1", "--in", a, "--out", tmp_path / "b.safetensors")
    return a, read_st(tmp_path / "b.safetensors")


def _meta(**changes):
    def f(tensors, meta):
        meta.update(changes)
        for k, v in changes.items():
            if v is None:
                del meta[k]
    return f


def _drop(name):
    return lambda tensors, meta: tensors.pop(name)


def _retype(name, dtype, arr):
    def f(tensors, meta):
        tensors[name] = (dtype, arr)
    return f


@pytest.mark.parametrize("break_it,culprits", [
    (_meta(**{"w1.quantization_format": "mxx"}), ["b.safetensors", "w1.quantization_format"]),
    (_meta(**{"w1.scale_rule": "round"}), ["b.safetensors", "w1.scale_rule"]),
    (_meta(**{"w1.block_size": "abc"}), ["b.safetensors", "w1.block_size"]),
    (_meta(**{"w1.block_size": "2x32"}), ["b.safetensors", "w1.block_size"]),
    (_meta(**{"w1.element": "e9m9"}), ["b.safetensors", "w1.element"]),
    (_meta(**{"w1.layout": "tiled"}), ["b.safetensors", "w1.layout"]),
    (_meta(**{"w1.packing": "fp4x2"}), ["b.safetensors", "w1.packing"]),
    (_meta(**{"w1.rounding": "sr-a"}), ["b.safetensors", "w1.rounding"]),
    (_meta(**{"w9.quantization_format": "mx"}), ["a.safetensors", '"w9"']),
    (_drop("w1.data"), ["b.safetensors", "w1.data"]),
    (_drop("w1.block_scales"), ["b.safetensors", "w1.block_scales"]),
    (_retype("w1.data", "F32", np.zeros((4, 64), dtype=np.float32)), ["b.safetensors", "w1.data", "F32"]),
    (_retype("w1.data", "U8", np.zeros((4, 63), dtype=np.uint8)), ["b.safetensors", "w1.data", "shape"]),
    (_retype("w1.block_scales", "U8", np.zeros((4, 3), dtype=np.uint8)), ["b.safetensors", "w1.block_scales"]),
    (_meta(**{"w1.quantization_format": None}), ["b.safetensors", "__metadata__"]),
])
def test_verify_bad_metadata_and_tensors_exit_2(tmp_path, break_it, culprits):
    a, (tensors, meta) = _pair(tmp_path)
    break_it(tensors, meta)
    write_st(tmp_path / "b.safetensors", tensors, meta)
    rc, out, err = run("verify-checkpoint", "--source", a, "--quantized", tmp_path / "b.safetensors")
    assert rc == 2, err
    for c in culprits:
        assert c in err, (c, err)
    assert out == ""


def test_verify_bad_files_exit_2(tmp_path):
    a, _ = _pair(tmp_path)
    b = tmp_path / "b.safetensors"
    fails(["verify-checkpoint", "--source", tmp_path / "none.safetensors", "--quantized", b], "none.safetensors")
    raw = open(b, "rb").read()
    (tmp_path / "t.safetensors").write_bytes(raw[:-5])
    fails(["verify-checkpoint", "--source", a, "--quantized", tmp_path / "t.safetensors"], "t.safetensors")
    (tmp_path / "h.safetensors").write_bytes(struct.pack("<Q", 1 << 40) + raw[8:])
    fails(["verify-checkpoint", "--source", a, "--quantized", tmp_path / "h.safetensors"], "h.safetensors", "byte")
    # A source tensor of the wrong dtype.
    tensors, meta = read_st(a)
    tensors["w1"] = ("I32", np.zeros((4, 64), dtype=np.int32))
    write_st(tmp_path / "i.safetensors", tensors, meta)
    fails(["verify-checkpoint", "--source", tmp_path / "i.safetensors", "--quantized", b], "i.safetensors", '"w1"', "I32")


def test_checkpoint_mode_bad_inputs_leave_nothing(tmp_path):
    a = _source(tmp_path)
    out = tmp_path / "b.safetensors"
    fails(["quantize", "--scheme", "mx", "--tensor", "nope", "--in", a, "--out", out], "a.safetensors", '"nope"')
    fails(["quantize", "--scheme", "delayed", "--in", a, "--out", out], "--scheme")
    fails(["quantize", "--scheme", "mx", "--in", a, "--out", tmp_path / "b.npy"], "--out")
    (tmp_path / "bad.safetensors").write_bytes(b"\x00" * 4)
    fails(["quantize", "--scheme", "mx", "--in", tmp_path / "bad.safetensors", "--out", out], "bad.safetensors")
    assert not out.exists() and leftovers(tmp_path) == []
