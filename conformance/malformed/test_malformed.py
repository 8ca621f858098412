"""The malformed-input catalogue (CATALOGUE.md): the cases no other test file covers, one test each.

Every case: exit status 2, a message on stderr naming the culprit (option, file, byte offset, key or
line), nothing on stdout, and no output file or temporary left behind.  Cases that other files test
already are indexed in CATALOGUE.md, not repeated here.
"""
import hashlib
import json
import os
import struct
import subprocess
from pathlib import Path

import pytest

LOWBIT = os.environ.get("LOWBIT", "lowbit")


def run(args, stdin=b""):
    p = subprocess.run([LOWBIT, *map(str, args)], input=stdin, capture_output=True, check=False, timeout=120)
    return p.returncode, p.stdout, p.stderr.decode(errors="replace")


def fails(args, *culprits, stdin=b""):
    rc, out, err = run(args, stdin)
    assert rc == 2, f"expected exit 2, got {rc}; stderr: {err}"
    assert err.startswith("lowbit: "), err
    for c in culprits:
        assert str(c).lower() in err.lower(), f"stderr does not name {c!r}: {err}"
    return out, err


def leftovers(d):
    """Anything in d that is not an input this test wrote (names starting with 'in')."""
    return sorted(p.name for p in Path(d).iterdir() if not p.name.startswith("in"))


# ---- hand-made files -------------------------------------------------------------------------------

def npy(descr="<f4", shape=(2, 3), data=None, magic=b"\x93NUMPY", version=(1, 0), fortran=False):
    header = "{'descr': '%s', 'fortran_order': %s, 'shape': (%s), }" % (
        descr, "True" if fortran else "False", "".join(f"{s}, " for s in shape).rstrip(" ") if len(shape) != 1
        else f"{shape[0]},")
    header = header.replace(", )", ")")
    pad = 64 - (10 + len(header) + 1) % 64
    header = header + " " * pad + "\n"
    if data is None:
        n = 1
        for s in shape:
            n *= s
        data = b"\x00" * (n * int(descr[2:]))
    return magic + bytes(version) + struct.pack("<H", len(header)) + header.encode() + data


def safetensors(tensors, header_len=None):
    """tensors: name -> (dtype, shape, data bytes, offsets or None)."""
    header, buf = {}, b""
    for name, (dtype, shape, data, offsets) in tensors.items():
        header[name] = {"dtype": dtype, "shape": list(shape),
                        "data_offsets": list(offsets) if offsets else [len(buf), len(buf) + len(data)]}
        buf += data
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h) if header_len is None else header_len) + h + buf


GOOD_NPY = npy(data=struct.pack("<6f", 1, 2, 3, 4, 5, 6))

BAD_NPY = {
    "magic": (b"\x93NUMPZ" + GOOD_NPY[6:], ["byte", "magic"]),
    "version": (npy(version=(9, 0)), ["version"]),
    "truncated-header": (GOOD_NPY[:40], ["byte"]),
    "truncated-data": (GOOD_NPY[:-5], ["byte"]),
    "lying-header-length": (GOOD_NPY[:8] + struct.pack("<H", 60000) + GOOD_NPY[10:], ["byte"]),
    "shape-overflow": (npy(shape=(1 << 40, 1 << 40), data=b""), ["shape"]),
    "huge-allocation": (npy(shape=(1 << 40,), data=b"\x00" * 16), ["byte"]),
    "unknown-dtype": (npy(descr="<c8", data=b"\x00" * 48), ["byte", "<c8"]),
    "big-endian": (npy(descr=">f4"), ["byte", ">f4"]),
}


# ---- quantize FILE.npy ----------------------------------------------------------------------------

@pytest.mark.parametrize("case", sorted(BAD_NPY))
def test_quantize_bad_npy(tmp_path, case):
    data, culprits = BAD_NPY[case]
    (tmp_path / "in.npy").write_bytes(data)
    out, _ = fails(["quantize", "--scheme", "mx", "--in", tmp_path / "in.npy", "--out", tmp_path / "q"],
                   "in.npy", *culprits)
    assert out == b"" and leftovers(tmp_path) == []


# ---- gemm --a A.npy --b B.npy --out D.npy ---------------------------------------------------------

E4M3_2x2 = npy(descr="|u1", shape=(2, 2), data=bytes([0x38, 0x38, 0x38, 0x38]))

BAD_GEMM = {
    "a-magic": ({"inA.npy": b"XXXXXX" + E4M3_2x2[6:]}, ["inA.npy", "byte", "magic"]),
    "a-truncated": ({"inA.npy": E4M3_2x2[:-1]}, ["inA.npy", "byte"]),
    "a-shape-overflow": ({"inA.npy": npy(descr="|u1", shape=(1 << 33, 1 << 33), data=b"")}, ["inA.npy"]),
    "a-huge": ({"inA.npy": npy(descr="|u1", shape=(1 << 20, 1 << 20), data=b"\x00" * 4)}, ["inA.npy"]),
    "a-rank": ({"inA.npy": npy(descr="|u1", shape=(4,), data=b"\x38" * 4)}, ["inA.npy", "2-D"]),
    "a-dtype": ({"inA.npy": npy(descr="<f8", shape=(2, 2))}, ["inA.npy", "F64"]),
    "b-inner-dimension": ({"inB.npy": npy(descr="|u1", shape=(3, 2), data=b"\x38" * 6)}, ["--b"]),
    "b-missing": ({"inB.npy": None}, ["inB.npy"]),
}


@pytest.mark.parametrize("case", sorted(BAD_GEMM))
def test_gemm_bad_npy(tmp_path, case):
    files, culprits = BAD_GEMM[case]
    paths = {"inA.npy": E4M3_2x2, "inB.npy": E4M3_2x2, **files}
    for name, data in paths.items():
        if data is not None:
            (tmp_path / name).write_bytes(data)
    out, _ = fails(["gemm", "--model", "exact", "--a", tmp_path / "inA.npy", "--a-format", "e4m3", "--b",
                    tmp_path / "inB.npy", "--b-format", "e4m3", "--out", tmp_path / "d.npy"], *culprits)
    assert out == b"" and leftovers(tmp_path) == []


def test_gemm_good_npy_control(tmp_path):
    (tmp_path / "inA.npy").write_bytes(E4M3_2x2)
    (tmp_path / "inB.npy").write_bytes(E4M3_2x2)
    rc, _, err = run(["gemm", "--model", "exact", "--a", tmp_path / "inA.npy", "--a-format", "e4m3", "--b",
                      tmp_path / "inB.npy", "--b-format", "e4m3", "--out", tmp_path / "d.npy"])
    assert rc == 0, err
    assert leftovers(tmp_path) == ["d.npy"]


# ---- text inputs with an output file: nothing left behind ------------------------------------------

@pytest.mark.parametrize("args,stdin,culprits", [
    (["gemm", "--model", "exact", "--a", "-"], b'{"m": 1, "n": 1,', ["--a", "byte"]),
    (["gemm", "--model", "exact", "--a", "-"], b'{"m": 1, "n": 1, "k": 1, "a": ["0x38"], "b": ["0x38"], "c": [1]}',
     ['"c"']),
    (["gemm", "--model", "exact", "--a", "-"], b'{"m": 0, "n": 1, "k": 1, "a": [], "b": ["0x38"]}', ['"m"']),
    (["gemm", "--model", "hopper-fp8", "--a", "-"],
     b'{"m": 1, "n": 1, "k": 1, "a": ["0x38"], "b": ["0x38"], "a_format": "f64", "b_format": "e4m3"}',
     ['"a_format"']),
    (["dequantize", "--in", "-"], b'{"scheme": "mx", "element": "e2m1", "shape": [4], "block": [1, 4],'
                                  b' "codes": ["0x4"], "scales": ["0x7e"]}', ["codes"]),
    (["dequantize", "--in", "-"], b'{"scheme": "mx", "element": "bf16", "shape": [1], "block": [1, 1],'
                                  b' "codes": ["0x4"], "scales": ["0x7e"]}', ['"element"']),
    # Found by fuzz_cli: a number beyond a double (nlohmann's out_of_range, not a parse_error) aborted
    # gemm and dequantize before the fix in gemm_cmd.cpp / quantize_cmd.cpp.
    (["gemm", "--model", "ampere-f16-f16acc", "--a", "-"], b"31e431", ["--a", "malformed JSON"]),
    (["gemm", "--model", "exact", "--a", "-"], b'{"m": 1e999, "n": 1, "k": 1, "a": ["0x38"], "b": ["0x38"]}',
     ["--a", "malformed JSON"]),
    (["dequantize", "--in", "-"], b'{"scheme": "mx", "shape": [-1e400]}', ["--in", "malformed JSON"]),
])
def test_text_input_errors_leave_no_output_file(tmp_path, args, stdin, culprits):
    out, _ = fails([*args, "--out", tmp_path / "out.json"], *culprits, stdin=stdin)
    assert out == b"" and leftovers(tmp_path) == []


@pytest.mark.parametrize("args,stdin,culprits", [
    (["--scheme", "mx"], b"0x3f800000 0x3f80000g", ["value 2"]),
    (["--scheme", "mx"], b"", ["0 values"]),
    (["--scheme", "mx", "--in-format", "bf16"], b"0x3f800000", ["value 1"]),
    (["--scheme", "mx", "--in-format", "f16"], b"0x3c00 nan", ["value 2"]),
    (["--scheme", "tensor", "--shape", "0,4"], b"", ["--shape"]),
])
def test_quantize_text_errors_write_nothing(args, stdin, culprits):
    out, _ = fails(["quantize", *args, "--in", "-", "--out", "-"], *culprits, stdin=stdin)
    assert out == b""


# ---- quantize FILE.safetensors -----------------------------------------------------------------------

W = struct.pack("<64f", *range(64))
BAD_SAFETENSORS = {
    "too-short": (b"\x00" * 4, ["byte"]),
    "lying-header-length": (struct.pack("<Q", 1 << 40) + b"{}", ["byte"]),
    "header-not-json": (struct.pack("<Q", 8) + b"{not js}", ["byte"]),
    "truncated-data": (safetensors({"w": ("F32", (2, 32), W, None)})[:-4], ["byte"]),
    "offsets-lie": (safetensors({"w": ("F32", (2, 32), W, (0, 200))}), ['key "w.data_offsets"']),
    "shape-overflow": (safetensors({"w": ("F32", (1 << 40, 1 << 40), W, (0, 256))}), ['key "w.shape"', "overflow"]),
    "huge-allocation": (safetensors({"w": ("F32", (1 << 20, 1 << 20), W, (0, 1 << 42))}), ['key "w.data_offsets"']),
    "dtype-mismatch": (safetensors({"w": ("I32", (2, 32), W, None)}), ["F32"]),
    "unknown-dtype": (safetensors({"w": ("C64", (2, 32), W, None)}), ['key "w.dtype"', "C64"]),
    # Found by fuzz_files: a number beyond a double escaped the reader (abort) before the fix in io.cpp.
    "number-overflow": (struct.pack("<Q", 62) + b'{"w":{"dtype":"F32","shape":[1e999],"data_offsets":[0,4]}}    ' +
                        b"\x00" * 4, ["byte 8", "invalid JSON header"]),
}


@pytest.mark.parametrize("case", sorted(BAD_SAFETENSORS))
def test_quantize_bad_safetensors(tmp_path, case):
    data, culprits = BAD_SAFETENSORS[case]
    (tmp_path / "in.safetensors").write_bytes(data)
    out, _ = fails(["quantize", "--scheme", "mx", "--in", tmp_path / "in.safetensors", "--out",
                    tmp_path / "q.safetensors"], "in.safetensors", *culprits)
    assert out == b"" and leftovers(tmp_path) == []


# ---- lowbit check: damaged golden sets whose checksums still agree ----------------------------------
# A flipped byte, a missing file and a missing checksum are in conformance/vectors/test_vectors.py.  These
# golden sets are damaged *consistently* (the manifest and its checksum line agree), so only the
# manifest's own checks can catch them.

def _suite(tmp_path):
    golden = tmp_path / "in-golden"
    rc, _, err = run(["vectors", "generate", "--suite", "scheme-nvfp4-1level", "--out", golden])
    assert rc == 0, err
    results = tmp_path / "in-results"
    results.mkdir()
    return golden, results


def _rewrite(golden, edit=None, text=None):
    m = golden / "manifest.json"
    if text is None:
        j = json.loads(m.read_text())
        edit(j)
        text = json.dumps(j, indent=1)
    m.write_text(text)
    (golden / "manifest.json.sha256").write_text(hashlib.sha256(text.encode()).hexdigest() + "  manifest.json\n")


def _first(j, **kv):
    j["files"][0].update(kv)


DAMAGE = {
    "checksum-not-sha256": (lambda g: (g / "manifest.json.sha256").write_text("abc\n"), ["manifest.json.sha256"]),
    "manifest-not-json": (lambda g: _rewrite(g, text='{"schema": 1,'), ["manifest.json", "JSON"]),
    "manifest-wrong-schema": (lambda g: _rewrite(g, lambda j: j.update(schema=99)), ["manifest.json", "schema"]),
    "manifest-no-files": (lambda g: _rewrite(g, lambda j: j.pop("files")), ["manifest.json"]),
    "path-leaves-folder": (lambda g: _rewrite(g, lambda j: _first(j, path="../escape.npy")), ["../escape.npy"]),
    "absolute-path": (lambda g: _rewrite(g, lambda j: _first(j, path="/etc/passwd")), ["/etc/passwd"]),
    "entry-without-sha256": (lambda g: _rewrite(g, lambda j: j["files"][0].pop("sha256")), ["manifest.json"]),
    "listed-file-missing": (lambda g: _rewrite(g, lambda j: _first(j, path="case-000/nothing.npy")),
                            ["case-000/nothing.npy"]),
    "schema-not-a-number": (lambda g: _rewrite(g, lambda j: j.update(schema="1")), ["manifest.json"]),
    "sha256-not-a-string": (lambda g: _rewrite(g, lambda j: _first(j, sha256=12)), ["manifest.json"]),
    "index-not-a-number": (lambda g: _rewrite(g, lambda j: j["cases"][0].update(index="0")), ["manifest.json"]),
    "files-entry-not-object": (lambda g: _rewrite(g, lambda j: j["files"].append(7)), ["manifest.json"]),
}


@pytest.mark.parametrize("case", sorted(DAMAGE))
def test_check_damaged_golden_set(tmp_path, case):
    golden, results = _suite(tmp_path)
    damage, culprits = DAMAGE[case]
    damage(golden)
    out, err = fails(["check", "--vectors", golden, "--results", results, "--junit", tmp_path / "j.xml"], *culprits)
    assert "golden set damaged" in err
    assert leftovers(tmp_path) == []  # no JUnit file for a damaged set
