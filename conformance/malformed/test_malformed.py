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


# ---- the one writer (reference/include/lowbit/output.hpp): nothing lost, nothing replaced -------------------
# Every case asserts the exit status, the message and the file system afterwards: the previous output
# byte for byte, no temporary (.lowbit-tmp-*) and no lock file (.lowbit-lock-*) left.

GEMM_JSON = b'{"m": 1, "n": 1, "k": 1, "a": ["0x38"], "b": ["0x38"]}'
GEMM_OUT = b'{"d":["0x3f800000"]}\n'  # 1 x 1: e4m3 0x38 is 1.0, the exact product 1.0 in f32
OLD = b"previous output\n"


def gemm_to(out, env=None, **kw):
    p = subprocess.run([LOWBIT, "gemm", "--model", "exact", "--a", "-", "--out", str(out)], input=GEMM_JSON,
                       capture_output=True, check=False, timeout=120, env={**os.environ, **(env or {})}, **kw)
    return p.returncode, p.stdout, p.stderr.decode(errors="replace")


def writer_debris(d):
    return sorted(p.name for p in Path(d).iterdir() if p.name.startswith((".lowbit-tmp-", ".lowbit-lock-")))


@pytest.mark.parametrize("fault,at", [("ENOSPC", 1), ("EIO", 1)])
def test_a_failed_write_keeps_the_previous_file(tmp_path, fault, at):
    out = tmp_path / "out.json"
    out.write_bytes(OLD)
    rc, stdout, err = gemm_to(out, {"LOWBIT_FAULT_WRITE": f"{fault}:{at}"})
    assert rc == 2 and err.startswith("lowbit: --out: ") and str(out) in err and "byte 0: write failed" in err, err
    assert os.strerror(getattr(__import__("errno"), fault)) in err
    assert stdout == b"" and out.read_bytes() == OLD and writer_debris(tmp_path) == []


def test_the_fault_point_is_real_and_the_control_run_writes(tmp_path):
    out = tmp_path / "out.json"
    out.write_bytes(OLD)
    rc, _, err = gemm_to(out, {"LOWBIT_FAULT_WRITE": "ENOSPC:2"})  # only one write is made: no fault
    assert rc == 0, err
    assert out.read_bytes() == GEMM_OUT and writer_debris(tmp_path) == []


@pytest.mark.parametrize("at", [1, 3, 12])
def test_a_failed_write_in_a_suite_leaves_no_suite(tmp_path, at):
    rc, out, err = run_env(["vectors", "generate", "--suite", "scheme-nvfp4-1level", "--out", tmp_path / "s"],
                           {"LOWBIT_FAULT_WRITE": f"ENOSPC:{at}"})
    assert rc == 2 and "--out: " in err and "write failed: No space left on device" in err, err
    assert "files written" not in out.decode()
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def run_env(args, env, **kw):
    p = subprocess.run([LOWBIT, *map(str, args)], capture_output=True, check=False, timeout=300,
                       env={**os.environ, **env}, **kw)
    return p.returncode, p.stdout, p.stderr.decode(errors="replace")


def test_a_failed_write_keeps_the_previous_quantized_folder(tmp_path):
    (tmp_path / "in.npy").write_bytes(npy(shape=(2, 32), data=struct.pack("<64f", *range(64))))
    q = tmp_path / "q"
    rc, _, err = run(["quantize", "--scheme", "mx", "--in", tmp_path / "in.npy", "--out", q])
    assert rc == 0, err
    before = {p.name: p.read_bytes() for p in q.iterdir()}
    rc, _, err = run_env(["quantize", "--scheme", "mx", "--element", "e5m2", "--in", tmp_path / "in.npy", "--out", q],
                         {"LOWBIT_FAULT_WRITE": "EIO:2"})
    assert rc == 2 and "--out: " in err and "Input/output error" in err, err
    assert {p.name: p.read_bytes() for p in q.iterdir()} == before and writer_debris(tmp_path) == []


def test_stdout_write_errors_are_exit_2():
    with open("/dev/full", "wb") as full:
        p = subprocess.run([LOWBIT, "formats"], stdout=full, stderr=subprocess.PIPE, check=False, timeout=60)
    assert p.returncode == 2 and b"lowbit: standard output: write failed: No space left on device" in p.stderr
    with open("/dev/full", "wb") as full:
        p = subprocess.run([LOWBIT, "gemm", "--model", "exact", "--a", "-", "--out", "-"], input=GEMM_JSON,
                           stdout=full, stderr=subprocess.PIPE, check=False, timeout=60)
    assert p.returncode == 2 and b"standard output" in p.stderr and b"No space left on device" in p.stderr
    # A closed standard output.
    p = subprocess.run(["sh", "-c", f'"{LOWBIT}" formats >&-'], stderr=subprocess.PIPE, check=False, timeout=60)
    assert p.returncode == 2 and b"standard output: write failed" in p.stderr


def test_rlimit_fsize_is_a_write_error_and_keeps_the_previous_file(tmp_path):
    import resource
    import signal
    out = tmp_path / "out.npy"
    out.write_bytes(OLD)
    (tmp_path / "inA.npy").write_bytes(npy(descr="|u1", shape=(64, 64), data=b"\x38" * 4096))
    (tmp_path / "inB.npy").write_bytes(npy(descr="|u1", shape=(64, 64), data=b"\x38" * 4096))

    def limit():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # write() then fails with EFBIG instead of a signal
        resource.setrlimit(resource.RLIMIT_FSIZE, (1024, 1024))

    p = subprocess.run([LOWBIT, "gemm", "--model", "exact", "--a", tmp_path / "inA.npy", "--a-format", "e4m3",
                        "--b", tmp_path / "inB.npy", "--b-format", "e4m3", "--out", out],
                       capture_output=True, check=False, timeout=120, preexec_fn=limit)
    err = p.stderr.decode()
    assert p.returncode == 2 and str(out) in err and "byte 1024: write failed: File too large" in err, err
    assert out.read_bytes() == OLD and writer_debris(tmp_path) == []


def test_a_real_full_file_system(tmp_path):
    mnt = tmp_path / "small"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mnt)], capture_output=True).returncode:
        pytest.skip("mounting a tmpfs is not permitted here (needs CAP_SYS_ADMIN); the fault point covers ENOSPC")
    try:
        (mnt / "out.json").write_bytes(OLD)
        rc, out, err = run(["vectors", "generate", "--suite", "convert16-cuda", "--out", mnt / "s"])
        assert rc == 2 and "No space left on device" in err and "files written" not in out.decode(), err
        assert sorted(p.name for p in mnt.iterdir()) == ["out.json"]
        assert (mnt / "out.json").read_bytes() == OLD
    finally:
        subprocess.run(["umount", str(mnt)], check=False)


@pytest.mark.parametrize("kind", ["symlink-to-file", "dangling-symlink", "fifo", "socket", "folder"])
def test_a_target_that_is_not_a_file_is_refused(tmp_path, kind):
    import socket
    target = tmp_path / "out.json"
    victim = tmp_path / "in-victim"
    victim.write_bytes(OLD)
    if kind == "symlink-to-file":
        target.symlink_to(victim)
    elif kind == "dangling-symlink":
        target.symlink_to(tmp_path / "in-nowhere")
    elif kind == "fifo":
        os.mkfifo(target)
    elif kind == "socket":
        s = socket.socket(socket.AF_UNIX)
        s.bind(str(target))
    else:
        target.mkdir()
    rc, out, err = gemm_to(target)
    words = {"symlink-to-file": "symbolic link", "dangling-symlink": "symbolic link", "fifo": "FIFO",
             "socket": "socket", "folder": "folder"}[kind]
    assert rc == 2 and f"--out: {target}: exists and is a" in err and words in err, err
    assert out == b"" and victim.read_bytes() == OLD and writer_debris(tmp_path) == []
    assert not (tmp_path / "in-nowhere").exists()
    if kind.endswith("symlink"):
        assert target.is_symlink()


@pytest.mark.parametrize("device", ["/dev/null", "/dev/stdout", "/dev/full"])
def test_a_device_or_its_link_is_refused(device):
    before = os.lstat(device)
    rc, out, err = gemm_to(device)
    assert rc == 2 and f"--out: {device}: exists and is a" in err, err
    after = os.lstat(device)
    assert (before.st_ino, before.st_mode) == (after.st_ino, after.st_mode)


def test_a_device_node_in_a_scratch_folder_is_not_replaced(tmp_path):
    node = tmp_path / "out.json"
    try:
        os.mknod(node, 0o666 | __import__("stat").S_IFCHR, os.makedev(1, 3))  # the null device
    except PermissionError:
        pytest.skip("making a device node needs CAP_MKNOD; /dev/null is tested above")
    rc, _, err = gemm_to(node)
    assert rc == 2 and "character device" in err, err
    assert __import__("stat").S_ISCHR(os.lstat(node).st_mode) and writer_debris(tmp_path) == []


def test_planted_temporaries_are_not_followed_and_stale_ones_are_removed(tmp_path):
    victim = tmp_path / "in-victim"
    victim.write_bytes(OLD)
    # A link under a temporary's name (prefix, target name, 16 hex digits), and the old predictable names.
    planted = [".lowbit-tmp-out.json-0123456789abcdef", "out.json.tmp-lowbit", ".out.json.tmp.1"]
    for name in planted:
        (tmp_path / name).symlink_to(victim)
    stale = tmp_path / ".lowbit-tmp-out.json-fedcba9876543210"  # a file a killed run left
    stale.write_bytes(b"half")
    other = tmp_path / ".lowbit-tmp-out.json.bak-fedcba9876543210"  # another target's
    other.write_bytes(b"not ours")
    rc, _, err = gemm_to(tmp_path / "out.json")
    assert rc == 0, err
    assert (tmp_path / "out.json").read_bytes() == GEMM_OUT and victim.read_bytes() == OLD
    assert all((tmp_path / name).is_symlink() for name in planted)  # links are left alone, never followed
    assert not stale.exists() and other.read_bytes() == b"not ours"
    # A planted lock-file link is not followed either: refused, naming the lock.
    (tmp_path / ".lowbit-lock-x.json").symlink_to(victim)
    rc, _, err = gemm_to(tmp_path / "x.json")
    assert rc == 2 and ".lowbit-lock-x.json" in err and victim.read_bytes() == OLD, err
    assert not (tmp_path / "x.json").exists()


def test_concurrent_runs_into_one_file_leave_one_whole_output(tmp_path):
    out = tmp_path / "out.json"
    procs = [subprocess.Popen([LOWBIT, "gemm", "--model", "exact", "--a", "-", "--out", str(out)],
                              stdin=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(8)]
    for p in procs:
        p.communicate(GEMM_JSON, timeout=120)
    assert [p.returncode for p in procs] == [0] * 8
    assert out.read_bytes() == GEMM_OUT and writer_debris(tmp_path) == []


def _suite_intact(d):
    text = (d / "manifest.json").read_bytes()
    assert (d / "manifest.json.sha256").read_text() == hashlib.sha256(text).hexdigest() + "  manifest.json\n"
    for f in json.loads(text)["files"]:
        assert hashlib.sha256((d / f["path"]).read_bytes()).hexdigest() == f["sha256"], f["path"]


def test_concurrent_suite_runs_into_one_folder(tmp_path):
    out = tmp_path / "s"
    procs = [subprocess.Popen([LOWBIT, "vectors", "generate", "--suite", "scheme-mx", "--out", str(out)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(3)]
    results = [(p.wait(timeout=300), p.stderr.read().decode()) for p in procs]
    assert sorted(rc for rc, _ in results) == [0, 2, 2], results
    for rc, err in results:
        if rc == 2:
            assert "exists and is not an empty folder" in err, err
    _suite_intact(out)
    assert writer_debris(tmp_path) == []


@pytest.mark.parametrize("sig", ["SIGKILL", "SIGTERM", "SIGINT"])
def test_a_signal_mid_write_keeps_the_previous_output(tmp_path, sig):
    import signal
    import time
    (tmp_path / "in.npy").write_bytes(npy(shape=(256, 256), data=b"\x00\x00\x80\x3f" * 65536))
    q = tmp_path / "q"
    rc, _, err = run(["quantize", "--scheme", "mx", "--in", tmp_path / "in.npy", "--out", q])
    assert rc == 0, err
    before = {p.name: p.read_bytes() for p in q.iterdir()}
    # Stopped by the writer's fault point just before its second write (the folder half built), then
    # signalled, then continued so that a caught or default SIGTERM/SIGINT is delivered.
    p = subprocess.Popen([LOWBIT, "quantize", "--scheme", "mx", "--element", "e5m2", "--in", str(tmp_path / "in.npy"),
                          "--out", str(q)], env={**os.environ, "LOWBIT_FAULT_WRITE": "STOP:2"})
    deadline = time.time() + 60
    while time.time() < deadline and not _stopped(p.pid):
        time.sleep(0.02)
    assert _stopped(p.pid), "the writer never reached its second write"
    os.kill(p.pid, getattr(signal, sig))
    os.kill(p.pid, signal.SIGCONT)
    p.wait(timeout=60)
    assert p.returncode == -getattr(signal, sig)
    assert {f.name: f.read_bytes() for f in q.iterdir()} == before
    assert writer_debris(tmp_path)  # the killed run's staging folder and lock file are still there
    # The next run removes what the killed one left, and replaces the folder whole.
    rc, _, err = run(["quantize", "--scheme", "mx", "--element", "e5m2", "--in", tmp_path / "in.npy", "--out", q])
    assert rc == 0, err
    assert {f.name: f.read_bytes() for f in q.iterdir()} != before and writer_debris(tmp_path) == []


def _stopped(pid):
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1].startswith("T")
    except (FileNotFoundError, IndexError):
        return False


def test_output_that_is_an_input_is_refused(tmp_path):
    src = tmp_path / "in.safetensors"
    src.write_bytes(safetensors({"w": ("F32", (2, 32), W, None)}))
    before = src.read_bytes()
    _, err = fails(["quantize", "--scheme", "mx", "--in", src, "--out", src], "in.safetensors", "is the input")
    assert src.read_bytes() == before
    # The same file through a hard link.
    os.link(src, tmp_path / "in-link.safetensors")
    fails(["quantize", "--scheme", "mx", "--in", src, "--out", tmp_path / "in-link.safetensors"], "is the input")
    assert src.read_bytes() == before and writer_debris(tmp_path) == []


def test_a_quantized_folder_holding_the_input_is_not_replaced(tmp_path):
    (tmp_path / "in.npy").write_bytes(npy(shape=(2, 32), data=struct.pack("<64f", *range(64))))
    q = tmp_path / "q"
    assert run(["quantize", "--scheme", "mx", "--in", tmp_path / "in.npy", "--out", q])[0] == 0
    (q / "w.npy").write_bytes((tmp_path / "in.npy").read_bytes())
    before = {p.name: p.read_bytes() for p in q.iterdir()}
    fails(["quantize", "--scheme", "mx", "--in", q / "w.npy", "--out", q], "--out", "holds the input")
    assert {p.name: p.read_bytes() for p in q.iterdir()} == before and writer_debris(tmp_path) == []


# ---- strict numbers: read in full, range-checked, never clamped or defaulted --------------------------------

FOUR = b"0x3f800000 0x3f800000 0x3f800000 0x3f800000"


@pytest.mark.parametrize("args,culprits", [
    # 2147483647 segfaulted (signed overflow in (cols + block - 1) / block); 0 and '' silently meant 32.
    (["--block", "2147483647"], ["--block", "2147483647 is outside 1..1048576"]),
    (["--block", "2147483645"], ["--block", "outside"]),
    (["--block", "1048577"], ["--block", "outside"]),
    (["--block", "0"], ["--block", "0 is outside"]),
    (["--block", ""], ["--block", "'' is not a whole number"]),
    (["--block", "4abc"], ["--block", "'4abc' is not a whole number"]),
    (["--block", "0x20"], ["--block", "'0x20'"]),
    (["--block", "3e1"], ["--block", "'3e1'"]),
    (["--axis", "2"], ["--axis", "outside 0..1"]),
    (["--sr-bits", "33"], ["--sr-bits", "outside"]),
])
def test_quantize_file_mode_numbers(tmp_path, args, culprits):
    (tmp_path / "in.npy").write_bytes(npy(shape=(2, 32), data=struct.pack("<64f", *range(64))))
    out, _ = fails(["quantize", "--scheme", "mx", *args, "--in", tmp_path / "in.npy", "--out", tmp_path / "q"],
                   *culprits)
    assert out == b"" and leftovers(tmp_path) == []


@pytest.mark.parametrize("args,culprits", [
    (["--shape", "2,2,2"], ["--shape", "'2,2,2'"]),
    (["--shape", "4abc"], ["--shape", "'4abc'"]),
    (["--shape", "1,4junk"], ["--shape", "'1,4junk'"]),
    (["--shape", "-4"], ["--shape", "'-4'"]),
    (["--shape", "2147483648"], ["--shape", "2147483648"]),
    # An option of another scheme is refused, not ignored (the schemes' rows, reference/src/scale_schemes.cpp).
    (["--block", "4"], ["--block", "does not apply to the tensor scheme"]),
])
def test_quantize_text_mode_numbers(args, culprits):
    out, _ = fails(["quantize", "--scheme", "tensor", *args, "--in", "-", "--out", "-"], *culprits, stdin=FOUR)
    assert out == b""


def test_a_seed_beyond_64_bits_is_refused_not_clamped(tmp_path):
    fails(["vectors", "generate", "--suite", "scheme-mx", "--seed", str(1 << 64), "--out", tmp_path / "s"],
          "--seed", f"{1 << 64} is outside 0..{(1 << 63) - 1}")
    fails(["vectors", "generate", "--suite", "scheme-mx", "--seed", "1x", "--out", tmp_path / "s"], "--seed", "'1x'")
    assert leftovers(tmp_path) == []


@pytest.mark.parametrize("field,culprits", [
    ('"shape": [4.5]', ['"shape" must be a whole number, not 4.5']),
    ('"shape": [4294967297]', ['"shape": 4294967297 is outside']),  # wrapped to 1 before
    ('"shape": ["4"]', ['"shape" must be a whole number']),
    ('"shape": [0]', ['"shape": 0 is outside']),
    ('"shape": [2, -1]', ['"shape": -1 is outside']),
    ('"block": [1, 2.5]', ['"block"[1] must be a whole number']),
    ('"block": [1]', ['"block" must be [R, C]']),
    ('"scheme": 5, "x": 0', ['"scheme" must be a string']),
])
def test_dequantize_json_numbers(field, culprits):
    base = {"scheme": '"mx"', "element": '"e2m1"', "shape": "[4]", "block": "[1, 32]", "codes": '["0x4"]',
            "scales": '["0x7e"]'}
    key = field.split('"')[1]
    base[key] = field.split(": ", 1)[1].split(', "x"')[0]
    text = "{" + ", ".join(f'"{k}": {v}' for k, v in base.items()) + "}"
    out, _ = fails(["dequantize", "--in", "-"], "--in", *culprits, stdin=text.encode())
    assert out == b""


# ---- bounded text inputs: no unbounded read, no blocking open ---------------------------------------------

def test_an_endless_stdin_is_refused_at_the_limit():
    # --max-bytes 1M keeps the test small; the default (4 GiB) is the same check with a larger bound.
    with open("/dev/zero", "rb") as zero:
        p = subprocess.run([LOWBIT, "dequantize", "--in", "-", "--max-bytes", "1M"], stdin=zero, capture_output=True,
                           check=False, timeout=120)
    assert p.returncode == 2, p.stderr
    assert b"--in: '-' holds more than 1048576 bytes, the limit of one input (--max-bytes)" in p.stderr, p.stderr
    assert p.stdout == b""


def test_max_bytes_bounds_each_input_file(tmp_path):
    a = tmp_path / "in-a.npy"
    a.write_bytes(npy(descr="|u1", shape=(1024, 2048), data=b"\x38" * (1024 * 2048)))  # 2 MiB and a header
    b = tmp_path / "in-b.npy"
    b.write_bytes(npy(descr="|u1", shape=(2048, 1), data=b"\x38" * 2048))
    e4m3 = ["--a-format", "e4m3", "--b-format", "e4m3"]
    out, err = fails(["gemm", "--model", "exact", "--a", a, "--b", b, *e4m3, "--max-bytes", "1M"], "--a", "in-a.npy",
                     "over the limit of 1048576 bytes per input")
    assert out == b""
    rc, out, err = run(["gemm", "--model", "exact", "--a", a, "--b", b, *e4m3, "--max-bytes", "3M", "--out",
                        tmp_path / "d.npy"])
    assert rc == 0, err
    # e4m3 0x38 is 1.0: each element of D is the sum of 2048 products 1.0 * 1.0, 2048.0 (f32 0x45000000)
    assert (tmp_path / "d.npy").read_bytes()[-4096:] == struct.pack("<I", 0x45000000) * 1024


@pytest.mark.parametrize("value", ["0", "", "1X", "-5", "4.5", "5G5", str(1 << 63), "8388608T"])
def test_max_bytes_takes_a_byte_count(value):
    out, err = fails(["gemm", "--model", "exact", "--a", "-", "--max-bytes", value], "--max-bytes", stdin=GEMM_JSON)
    assert out == b""


def test_max_bytes_applies_to_the_commands_that_read_and_states_its_default():
    for cmd in (["gemm"], ["quantize"], ["dequantize"], ["verify-checkpoint"], ["check"], ["report"], ["merge"]):
        rc, out, _ = run([*cmd, "--help"])
        assert rc == 0 and b"--max-bytes" in out and b"default 4G" in out, cmd
    _, err = fails(["convert", "--to", "e4m3", "--max-bytes", "1M"], "--max-bytes")  # convert streams (its lines are bounded instead)


@pytest.mark.parametrize("option", ["--state", "--sr-bits-file"])
def test_a_fifo_or_device_as_a_named_input_is_refused_without_blocking(tmp_path, option):
    fifo = tmp_path / "in-fifo"
    os.mkfifo(fifo)
    extra = ["--scheme", "delayed"] if option == "--state" else ["--scheme", "mx", "--rounding", "sr-a", "--sr-bits", "8"]
    for culprit in (fifo, "/dev/zero"):
        out, _ = fails(["quantize", *extra, option, culprit, "--in", "-", "--out", "-"], option,
                       f"'{culprit}' is not a regular file", stdin=b"0x3f800000")
        assert out == b""


# ---- paths inside a suite never leave its folder (vectors/SPEC.md), symbolic links included -------------

def _link_out(golden, tmp_path, rel):
    """Move the suite's file `rel` out of the suite and leave a symbolic link to it (same bytes, same SHA-256)."""
    outside = tmp_path / "outside"
    outside.mkdir(exist_ok=True)
    moved = outside / rel.replace("/", "_")
    (golden / rel).rename(moved)
    (golden / rel).symlink_to(moved)
    return moved


def test_a_listed_file_that_is_a_link_leaving_the_suite_is_refused(tmp_path):
    golden, _ = _suite(tmp_path)
    rel = json.loads((golden / "manifest.json").read_text())["files"][0]["path"]
    moved = _link_out(golden, tmp_path, rel)
    _, err = fails(["check", "--vectors", golden, "--results", golden], "golden set damaged", rel,
                   "leads outside the folder", str(moved))
    assert (golden / rel).is_symlink() and moved.exists()


def test_a_manifest_that_is_a_link_leaving_the_suite_is_refused(tmp_path):
    golden, _ = _suite(tmp_path)
    _link_out(golden, tmp_path, "manifest.json")
    fails(["check", "--vectors", golden, "--results", golden], "golden set damaged", "manifest.json",
          "leads outside the folder")


def test_a_subfolder_that_is_a_link_leaving_the_suite_is_refused(tmp_path):
    golden, _ = _suite(tmp_path)
    rel = json.loads((golden / "manifest.json").read_text())["files"][0]["path"]
    assert "/" in rel, rel  # a case folder: case-000/...
    sub = rel.split("/")[0]
    _link_out(golden, tmp_path, sub)
    fails(["check", "--vectors", golden, "--results", golden], "golden set damaged", rel, "leads outside the folder")


def test_links_inside_the_suite_and_a_linked_suite_folder_are_read(tmp_path):
    # A link that stays inside the suite is a path of the suite; the suite folder itself may be reached
    # through a link (its files are resolved against where it really is).
    golden, _ = _suite(tmp_path)
    rel = json.loads((golden / "manifest.json").read_text())["files"][0]["path"]
    (golden / rel).rename(golden / "moved-inside")
    (golden / rel).symlink_to(golden / "moved-inside")
    linked = tmp_path / "linked-suite"
    linked.symlink_to(golden)
    rc, out, err = run(["check", "--vectors", linked, "--results", golden])
    assert rc == 0, err
    assert b", 0 mismatching, 0 skipped, 0 in error  ok" in out and b"all match" in out, out


def test_a_results_file_that_is_a_link_leaving_the_results_folder_is_a_problem(tmp_path):
    golden, _ = _suite(tmp_path)
    results = tmp_path / "in-results-copy"
    import shutil
    shutil.copytree(golden, results)
    rel = json.loads((golden / "manifest.json").read_text())["files"][0]["path"]
    assert rel.endswith("codes.npy"), rel  # an expected file, which the checker reads from the results
    _link_out(results, tmp_path, rel)
    rc, out, err = run(["check", "--vectors", golden, "--results", results])
    assert rc == 1, (rc, err)  # a results file the checker refuses to read is a failed unit, not a pass
    assert b"leads outside the folder" in out and b"FAILED" in out, out


# ---- echoed input: control characters escaped, length bounded (text.hpp echo_text) ----------------------

def test_a_10_mb_bad_line_is_not_echoed_whole():
    line = b"1" * 5_000_000 + b"x" * 5_000_000 + b"\n"
    rc, out, err = run(["convert", "--from", "text", "--to", "e4m3"], stdin=line)
    assert rc == 2 and out == b""
    assert err.startswith("lowbit: line 1: longer than 1048576 bytes"), err[:300]
    assert len(err) < 400, len(err)


def test_a_long_bad_value_is_cut_with_its_length():
    rc, out, err = run(["convert", "--from", "text", "--to", "e4m3"], stdin=b"1.5\n" + b"9" * 500_000 + b"z\n")
    assert rc == 2 and out == b"0x3c\n"
    assert "line 2: '" + "9" * 96 + "... (500001 bytes in all, the first 96 shown)' is not a number" in err, err[:300]
    assert len(err) < 400


@pytest.mark.parametrize("bad,shown", [
    (b"\x1b[2J\x1b[31mok\x1b[0m", "\\x1b[2J\\x1b[31mok\\x1b[0m"),  # clear the screen, colours
    (b"1\x00\x07\x7f", "1\\0\\x07\\x7f"),
    (b"\xc2\x9b" b"2J", "\\x9b2J"),  # the one-byte CSI, as UTF-8
    (b"\xff\xfe", "\\xff\\xfe"),  # not UTF-8
    (b"\r1.0 all match", None),  # a carriage return in a field: too many fields, the whole line escaped
])
def test_control_characters_in_a_bad_line_are_escaped(bad, shown):
    rc, out, err = run(["convert", "--to", "e4m3"], stdin=bad + b"\n")
    assert rc == 2 and out == b""
    raw = subprocess.run([LOWBIT, "convert", "--to", "e4m3"], input=bad + b"\n", capture_output=True).stderr
    assert all(b >= 0x20 or b == 0x0a for b in raw), raw  # no control byte but the final newline
    assert raw.count(b"\n") == 1
    assert shown is None or shown in err, err


def _rename_suite(golden, name):
    _rewrite(golden, lambda j: j.update(suite=name))


def test_a_suite_name_with_a_newline_and_ansi_codes_cannot_forge_a_report_line(tmp_path):
    golden, _ = _suite(tmp_path)
    _rename_suite(golden, "x: 0 cases\nall match: 99 suite(s), 0 cases, 0 mismatches\x1b[2K")
    p = subprocess.run([LOWBIT, "check", "--vectors", str(golden), "--results", str(golden)], capture_output=True)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.split(b"\n")
    assert b"\x1b" not in p.stdout
    assert lines[0].startswith(b"x: 0 cases\\nall match: 99 suite(s), 0 cases, 0 mismatches\\x1b[2K: "), lines[0]
    assert [l for l in lines if l.startswith(b"all match")] == [lines[-2]] and lines[-2].startswith(b"all match: 1 suite, "), lines


def test_a_damaged_manifest_field_is_escaped_in_the_message(tmp_path):
    golden, _ = _suite(tmp_path)
    _rewrite(golden, lambda j: _first(j, path="../\x1b]0;title\x07" + "a" * 300))
    _, err = fails(["check", "--vectors", golden, "--results", golden], "golden set damaged", "leaves the suite folder",
                   "\\x1b]0;title\\x07")
    assert "\x1b" not in err and "bytes in all" in err


def test_a_json_parse_error_is_escaped_and_bounded():
    text = b'{"m": 1, "n": 1, "k": 1, "a": ["' + b"\x1b[31m" + b"y" * 2_000_000
    rc, out, err = run(["gemm", "--model", "exact", "--a", "-"], stdin=text)
    assert rc == 2 and out == b""
    assert "--a: malformed JSON at byte" in err and "\x1b" not in err, err[:400]
    assert len(err) < 5000, len(err)


# ---- report --device-runs: fields of the wrong JSON type ------------------------------------------------

@pytest.mark.parametrize("field,value,named", [
    ("date", 20261130, '"date"'),
    ("tests", [7], '"tests"'),
    ("tests", [{"name": 5}], '"tests[].name"'),
    ("gpu", "h200", '"gpu"'),
])
def test_report_device_runs_with_a_number_where_a_string_belongs(tmp_path, field, value, named):
    runs = tmp_path / "in-runs"
    runs.mkdir()
    j = {"schema": "lowbit-device-check/1", "date": "2026-11-30T00:00:00Z", "gpu": {}, "binaries": {}, "tests": [],
         "benchmarks": {}, "missing": []}
    j[field] = value
    (runs / "run.json").write_text(json.dumps(j))
    out = tmp_path / "report"
    fails(["report", "--sections", "hardware", "--device-runs", runs, "--out", out], "--device-runs", "run.json", named)
    assert not out.exists()


# ---- bounded memory: declared sizes, nesting and outputs checked before allocating --------------------------
# Each run under an address-space limit (RLIMIT_AS, as `prlimit --as` sets it) far below what the input
# declares: a command that allocated what the file claims would die of it instead of exiting 2.

AS_LIMIT = 1 << 30  # 1 GiB of address space: the program and its libraries need a few hundred MB


def run_limited(args, stdin=b""):
    import resource

    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (AS_LIMIT, AS_LIMIT))

    env = dict(os.environ)
    preexec = limit
    if os.environ.get("LOWBIT_SANITIZED") == "1":
        # The ASan build (sanitize.cmake sets LOWBIT_SANITIZED) reserves terabytes of shadow address space at
        # start-up, so no address-space limit can hold it: the same bound is ASan's own instead, which aborts
        # on any single allocation over it (max_allocation_size_mb; the command then fails the test).
        preexec = None
        options = env.get("ASAN_OPTIONS", "")
        env["ASAN_OPTIONS"] = (options + ":" if options else "") + f"max_allocation_size_mb={AS_LIMIT >> 20}"
    p = subprocess.run([LOWBIT, *map(str, args)], input=stdin, capture_output=True, check=False, timeout=120,
                       preexec_fn=preexec, env=env)
    return p.returncode, p.stdout, p.stderr.decode(errors="replace")


def _sparse(path, head, size):
    """A sparse file: `head`, then a hole up to `size` bytes (a few KB on disk)."""
    with open(path, "wb") as f:
        f.write(head)
        f.truncate(size)


def test_a_sparse_npy_declaring_40_gb_is_refused_under_a_memory_limit(tmp_path):
    # The data really is there (a hole reads as zeros): the file is 40 GB long, so a size check against the
    # file alone would pass; the bound is the per-input limit of the reader and the 1 GiB address space.
    head = npy(shape=(100_000, 100_000), data=b"")
    _sparse(tmp_path / "in.npy", head, len(head) + 100_000 * 100_000 * 4)
    rc, out, err = run_limited(["gemm", "--model", "exact", "--a", tmp_path / "in.npy", "--b", tmp_path / "in.npy"])
    assert rc == 2 and out == b"", (rc, err)
    assert err.startswith("lowbit: --a: ") and "in.npy" in err, err
    assert "over the limit of 4294967296 bytes per input" in err, err  # the default of --max-bytes


def test_a_sparse_safetensors_declaring_40_gb_is_refused_under_a_memory_limit(tmp_path):
    n = 100_000
    data = safetensors({"w": ("F32", (n, n), b"", (0, n * n * 4))})
    _sparse(tmp_path / "in.safetensors", data, len(data) + n * n * 4)
    rc, out, err = run_limited(["quantize", "--scheme", "mx", "--in", tmp_path / "in.safetensors", "--out",
                                tmp_path / "q.safetensors"])
    assert rc == 2 and out == b"", (rc, err)
    assert "in.safetensors" in err, err
    assert leftovers(tmp_path) == []


def test_two_small_npy_operands_asking_for_a_4_gb_output_are_refused_before_allocating(tmp_path):
    # A is 32768 x 1, B is 1 x 32768 (32 KB each, u8 codes of e4m3): D would be 2^30 elements.
    (tmp_path / "in-a.npy").write_bytes(npy(descr="|u1", shape=(32768, 1), data=b"\x38" * 32768))
    (tmp_path / "in-b.npy").write_bytes(npy(descr="|u1", shape=(1, 32768), data=b"\x38" * 32768))
    rc, out, err = run_limited(["gemm", "--model", "exact", "--a", tmp_path / "in-a.npy", "--b", tmp_path / "in-b.npy",
                                "--a-format", "e4m3", "--b-format", "e4m3", "--out", tmp_path / "d.npy"])
    assert rc == 2 and out == b"", (rc, err)
    assert "D would be 32768x32768, 8589934592 bytes" in err and "over the limit of 4294967296 bytes" in err, err
    assert leftovers(tmp_path) == []


def test_json_nested_deeper_than_the_bound_is_refused_in_bounded_memory():
    rc, out, err = run_limited(["gemm", "--model", "exact", "--a", "-"], stdin=b"[" * 50_000_000)
    assert rc == 2 and out == b""
    assert "--a: JSON nested deeper than 64 levels" in err, err


def test_a_safetensors_header_of_nested_brackets_is_refused_in_bounded_memory(tmp_path):
    header = b'{"w": ' + b"[" * 98_000_000
    header += b" " * (-len(header) % 8)
    (tmp_path / "in.safetensors").write_bytes(struct.pack("<Q", len(header)) + header)
    rc, out, err = run_limited(["quantize", "--scheme", "mx", "--in", tmp_path / "in.safetensors", "--out",
                                tmp_path / "q.safetensors"])
    assert rc == 2 and out == b"", (rc, err)
    assert "in.safetensors" in err and "nested deeper than 64 levels" in err, err
    assert leftovers(tmp_path) == []


@pytest.mark.parametrize("command", ["gemm", "quantize", "verify-checkpoint", "report"])
def test_a_4_kb_file_declaring_40_gb_is_refused_by_every_reader_under_a_memory_limit(tmp_path, command):
    # Short files that declare 40 GB: the declared size is checked against the file's real size before any
    # allocation, by each command that reads tensors.
    n = 100_000
    small_npy = npy(shape=(n, n), data=b"\x00" * 4096)
    small_st = safetensors({"w": ("F32", (n, n), b"\x00" * 4096, (0, n * n * 4))})
    if command in ("gemm", "report"):
        (tmp_path / "in.npy").write_bytes(small_npy)
        culprit = "in.npy"
        args = {"gemm": ["gemm", "--model", "exact", "--a", tmp_path / "in.npy", "--b", tmp_path / "in.npy"],
                "report": ["report", "--sections", "input", "--input", tmp_path / "in.npy", "--out",
                           tmp_path / "report"]}[command]
    else:
        (tmp_path / "in.safetensors").write_bytes(small_st)
        culprit = "in.safetensors"
        args = {"quantize": ["quantize", "--scheme", "mx", "--in", tmp_path / "in.safetensors", "--out",
                             tmp_path / "q.safetensors"],
                "verify-checkpoint": ["verify-checkpoint", "--source", tmp_path / "in.safetensors", "--quantized",
                                      tmp_path / "in.safetensors"]}[command]
    rc, out, err = run_limited(args)
    assert rc == 2 and out == b"", (rc, err)
    assert culprit in err and "byte" in err, err
    assert leftovers(tmp_path) == []
