"""Golden vectors, `lowbit check` and `lowbit gate` (issue 6; vectors/SPEC.md).

Determinism (the committed sets regenerate byte for byte), tamper detection (exit 2 naming the file),
mismatch reports (exit 1 naming the suite, the case and both decoded values), the planted-bug plugin
(its convert with the planted ulp, its quantize passing every scheme suite and, with
LOWBIT_PLANTED_QUANTIZE_BUG=1, caught), the CUDA-host plugin, and JUnit XML read back with junitparser.  Expected values are worked out by hand
from docs/semantics.md in the comments; none is produced by lowbit.
"""
import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

LOWBIT = os.environ.get("LOWBIT", "lowbit")
GOLDEN = Path(os.environ.get("LOWBIT_GOLDEN", Path(__file__).resolve().parents[2] / "vectors" / "golden"))
PLANTED = os.environ.get("LOWBIT_PLANTED_PLUGIN")
CUDA = os.environ.get("LOWBIT_CUDA_PLUGIN")


def run(*args, env=None):
    p = subprocess.run([LOWBIT, *map(str, args)], capture_output=True, text=True, check=False,
                       env=None if env is None else {**os.environ, **env})
    return p.returncode, p.stdout, p.stderr


def manifest_cases(suite):
    return json.loads((GOLDEN / suite / "manifest.json").read_text())["cases"]


def suites():
    rc, out, err = run("vectors", "list")
    assert rc == 0, err
    return [line.split("\t") for line in out.splitlines()]


def committed():
    return [name for name, _ in suites() if not name.startswith("convert16-")]


# ---- vectors list / generate ----------------------------------------------------------------------


def test_list_is_name_tab_description():
    rows = suites()
    names = [r[0] for r in rows]
    assert all(len(r) == 2 and r[0] and r[1] for r in rows)
    assert len(names) == len(set(names))
    for profile in ["ocp", "cuda", "ml_dtypes", "llvm", "te", "torchao", "microxcaling", "p3109"]:
        assert f"convert-{profile}" in names and f"convert16-{profile}" in names
    for scheme in ["tensor", "delayed", "channel", "token", "block", "mx", "nvfp4", "nvfp4-2d", "nvfp4-1level"]:
        assert f"scheme-{scheme}" in names
    for model in ["exact", "f32-sequential", "hopper-fp8", "blackwell-mxf4nvf4", "hopper-fp8-blockscaled"]:
        assert f"gemm-{model}" in names


def test_committed_sets_are_every_committed_suite_and_under_30_mb():
    on_disk = sorted(p.name for p in GOLDEN.iterdir() if p.is_dir())
    assert on_disk == sorted(committed())
    total = sum(f.stat().st_size for f in GOLDEN.rglob("*") if f.is_file())
    assert total <= 30 * 1000 * 1000, total


def test_committed_sets_regenerate_byte_for_byte(tmp_path):
    """The generator run now gives the committed manifests (which hold every file's SHA-256)."""
    for name in committed():
        out = tmp_path / name
        rc, _, err = run("vectors", "generate", "--suite", name, "--out", out)
        assert rc == 0, err
        for f in ["manifest.json", "manifest.json.sha256"]:
            assert (out / f).read_bytes() == (GOLDEN / name / f).read_bytes(), f"{name}/{f} differs from the committed one"


def test_committed_sets_are_intact():
    # Verifies every committed file against its manifest, then compares the set with itself.
    rc, out, err = run("check", "--vectors", GOLDEN, "--results", GOLDEN)
    assert rc == 0, out + err
    assert out.splitlines()[-1].startswith("all match: ") and "0 mismatching, 0 skipped, 0 in error" in out.splitlines()[-1]


def test_seed_changes_only_the_random_cases(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    assert run("vectors", "generate", "--suite", "convert-cuda", "--out", a)[0] == 0
    assert run("vectors", "generate", "--suite", "convert-cuda", "--out", b, "--seed", "7")[0] == 0
    ma = {f["path"]: f["sha256"] for f in json.loads((a / "manifest.json").read_text())["files"]}
    mb = {f["path"]: f["sha256"] for f in json.loads((b / "manifest.json").read_text())["files"]}
    assert ma.keys() == mb.keys()
    # 8-bit sources are exhaustive (only the header's seed differs); f32 files carry random cases.
    a_e4m3 = (a / "e2m1/rne-satfinite-keep-after/e4m3.txt").read_text().splitlines()
    b_e4m3 = (b / "e2m1/rne-satfinite-keep-after/e4m3.txt").read_text().splitlines()
    assert a_e4m3[3:] == b_e4m3[3:] and len(a_e4m3) == 256 + 3
    assert ma["e4m3/rne-satfinite-keep-after/f32.txt"] != mb["e4m3/rne-satfinite-keep-after/f32.txt"]


def test_manifest_checksums_agree_with_hashlib():
    d = GOLDEN / "scheme-mx"
    manifest = (d / "manifest.json").read_bytes()
    assert (d / "manifest.json.sha256").read_text() == hashlib.sha256(manifest).hexdigest() + "  manifest.json\n"
    m = json.loads(manifest)
    assert m["schema"] == 2 and m["generator"] == 2 and m["suite"] == "scheme-mx" and m["kind"] == "scheme"
    for f in m["files"]:
        data = (d / f["path"]).read_bytes()
        assert hashlib.sha256(data).hexdigest() == f["sha256"] and len(data) == f["bytes"]
    # Key order and layout: sorted keys, one-space indent, a final newline (SPEC.md).
    assert manifest.decode() == json.dumps(m, indent=1, sort_keys=True, ensure_ascii=True) + "\n"


def test_npy_files_are_numpy_readable_and_match_the_manifest():
    np = pytest.importorskip("numpy")
    d = GOLDEN / "scheme-nvfp4"
    m = json.loads((d / "manifest.json").read_text())
    for f in m["files"]:
        a = np.load(d / f["path"])
        assert list(a.shape) == f["shape"] and a.dtype.str == f["dtype"], f["path"]
    # An all-ones tensor is not among the cases, but every codes file holds e2m1 codes (< 16), and every
    # block scale is a ue4m3 code (positive E4M3: at most 0x7e, 448).
    for f in m["files"]:
        if f["name"] == "codes":
            assert int(np.load(d / f["path"]).max()) < 16
        if f["name"] == "scales":
            assert f["format"] == "ue4m3" and int(np.load(d / f["path"]).max()) <= 0x7E


def test_an_earlier_schema_is_refused_naming_it(tmp_path):
    d = tmp_path / "scheme-nvfp4"
    shutil.copytree(GOLDEN / "scheme-nvfp4", d)
    m = json.loads((d / "manifest.json").read_text())
    m["schema"] = 1
    text = json.dumps(m, indent=1, sort_keys=True, ensure_ascii=True) + "\n"
    (d / "manifest.json").write_text(text)
    (d / "manifest.json.sha256").write_text(hashlib.sha256(text.encode()).hexdigest() + "  manifest.json\n")
    rc, out, err = run("check", "--vectors", d, "--results", d)
    assert rc == 2 and '"schema": 1' in out + err and "regenerate" in out + err, out + err


def test_scalar_lines_follow_semantics():
    # docs/semantics.md §3 (cuda, f32 inputs): 480 -> 0x7e (satfinite), 0.3 -> 0x2a; +inf -> 0x7e; 1 -> 0x38.
    lines = (GOLDEN / "convert-cuda/e4m3/rne-satfinite-keep-after/f32.txt").read_text().splitlines()
    assert lines[0] == "#lowbit-vectors scalar schema 2 generator 2"
    assert lines[1] == "#from f32 to e4m3 profile cuda rounding rne overflow satfinite subnormals keep tininess after"
    cases = {l.split()[0]: l.split()[1:] for l in lines[3:]}
    assert int(lines[2].split()[1]) == len(lines) - 3
    assert cases["7f800000"] == ["7e", "05"]  # +inf under satfinite: max, overflow | inexact
    assert cases["3f800000"] == ["38", "00"]
    assert cases["00000000"] == ["00", "00"]


# ---- check: tampering, mismatches, arguments -----------------------------------------------------


@pytest.fixture
def cuda_copy(tmp_path):
    golden = tmp_path / "golden"
    results = tmp_path / "results"
    shutil.copytree(GOLDEN / "convert-cuda", golden)
    shutil.copytree(GOLDEN / "convert-cuda", results)
    return golden, results


def flip_byte(path, offset):
    b = bytearray(path.read_bytes())
    b[offset] ^= 0x01
    path.write_bytes(bytes(b))


def test_identical_results_pass_and_junit_parses(cuda_copy, tmp_path):
    junitparser = pytest.importorskip("junitparser")
    golden, results = cuda_copy
    rc, out, err = run("check", "--vectors", golden, "--results", results, "--junit", tmp_path / "j.xml")
    assert rc == 0, out + err
    xml = junitparser.JUnitXml.fromfile(str(tmp_path / "j.xml"))
    cases = [c for s in xml for c in s]
    assert len(cases) == len(json.loads((golden / "manifest.json").read_text())["files"])
    assert all(c.is_passed for c in cases)


@pytest.mark.parametrize("target", ["e4m3/rne-satfinite-keep-after/f32.txt", "manifest.json"])
def test_a_flipped_byte_in_the_golden_set_is_exit_2_naming_the_file(cuda_copy, target):
    golden, results = cuda_copy
    flip_byte(golden / target, 200)
    # A wrong result in the results as well: damage (2) takes precedence over a mismatch (1).
    flip_byte(results / "e5m2/rne-satfinite-keep-after/f32.txt", 150)
    rc, out, err = run("check", "--vectors", golden, "--results", results)
    assert rc == 2, out + err
    assert target in err and "golden set damaged" in err


def test_missing_golden_file_or_checksum_is_exit_2(cuda_copy):
    golden, results = cuda_copy
    (golden / "e2m1/rne-satfinite-keep-after/e4m3.txt").unlink()
    rc, _, err = run("check", "--vectors", golden, "--results", results)
    assert rc == 2 and "e2m1/rne-satfinite-keep-after/e4m3.txt" in err
    (golden / "manifest.json.sha256").unlink()
    rc, _, err = run("check", "--vectors", golden, "--results", results)
    assert rc == 2 and "manifest.json.sha256" in err


def rewrite_line(path, index, fields):
    """Replace the fields of case `index` (0-based, after the 3 header lines)."""
    lines = path.read_text().splitlines()
    old = lines[3 + index].split()
    lines[3 + index] = " ".join(fields(old))
    path.write_text("\n".join(lines) + "\n")
    return old


def test_one_wrong_code_is_exit_1_naming_suite_case_and_both_values(cuda_copy, tmp_path):
    junitparser = pytest.importorskip("junitparser")
    golden, results = cuda_copy
    f = "e4m3/rne-satfinite-keep-after/f32.txt"
    lines = (results / f).read_text().splitlines()
    index = next(i for i, l in enumerate(lines[3:]) if l.startswith("3f800000 "))  # 1.0 -> 0x38
    rewrite_line(results / f, index, lambda o: [o[0], "39", o[2]])
    rc, out, err = run("check", "--vectors", golden, "--results", results, "--junit", tmp_path / "j.xml")
    assert rc == 1, out + err
    line = next(l for l in out.splitlines() if f in l and "expected" in l)
    assert "convert-cuda" in line and f"case {index}" in line
    # 0x38 is 1 in e4m3, 0x39 is 1.125 (docs/semantics.md §1: bias 7, 3 mantissa bits).
    assert "input 0x3f800000 (1)" in line and "expected 0x38 (1)" in line and "actual 0x39 (1.125)" in line
    xml = junitparser.JUnitXml.fromfile(str(tmp_path / "j.xml"))
    failed = [c for s in xml for c in s if not c.is_passed]
    assert [c.name for c in failed] == [f]
    assert "1.125" in failed[0].result[0].text


def test_flags_are_compared_when_the_results_have_them(cuda_copy):
    golden, results = cuda_copy
    f = "e4m3/rne-satfinite-keep-after/f32.txt"
    rewrite_line(results / f, 0, lambda o: [o[0], o[1], "10"])
    rc, out, _ = run("check", "--vectors", golden, "--results", results)
    assert rc == 1 and "flags 0x10" in out
    # Without a flags column the flags are not compared.
    text = "".join(" ".join(l.split()[:2]) + "\n" for l in (golden / f).read_text().splitlines()[3:])
    (results / f).write_text(text)
    rc, out, _ = run("check", "--vectors", golden, "--results", results)
    assert rc == 0, out


def test_missing_results_and_other_inputs_are_exit_1_named(cuda_copy):
    golden, results = cuda_copy
    (results / "f16/rne-nosat-keep-after/f32.txt").unlink()
    rewrite_line(results / "bf16/rne-nosat-keep-after/f32.txt", 2, lambda o: ["3f800001", o[1], o[2]])
    rc, out, _ = run("check", "--vectors", golden, "--results", results)
    assert rc == 1
    assert "f16/rne-nosat-keep-after/f32.txt" in out and "missing" in out
    assert "other data" in out


def test_tensor_mismatch_names_case_element_and_values(tmp_path):
    np = pytest.importorskip("numpy")
    results = tmp_path / "r"
    shutil.copytree(GOLDEN / "scheme-mx", results)
    p = results / "case-000/codes.npy"
    a = np.load(p)
    want = int(a[0, 5])
    a[0, 5] = want ^ 1
    np.save(p, a)
    rc, out, _ = run("check", "--vectors", GOLDEN / "scheme-mx", "--results", results)
    assert rc == 1
    line = next(l for l in out.splitlines() if "codes.npy[0, 5]" in l)
    assert "scheme-mx case-000" in line and f"expected 0x{want:02x}" in line and f"actual 0x{want ^ 1:02x}" in line
    # A changed input: the subject ran on other data.
    shutil.copy(GOLDEN / "scheme-mx/case-000/codes.npy", p)
    x = np.load(results / "case-001/x.npy")
    x[0, 0] = 12345.0
    np.save(results / "case-001/x.npy", x)
    rc, out, _ = run("check", "--vectors", GOLDEN / "scheme-mx", "--results", results)
    assert rc == 1 and "case-001/x.npy" in out and "other data" in out


def test_bad_arguments_are_exit_2(tmp_path):
    assert run("check", "--vectors", tmp_path / "nope", "--results", tmp_path)[0] == 2
    assert run("check", "--vectors", tmp_path, "--results", tmp_path)[0] == 2  # no manifest anywhere
    assert run("check", "--vectors", GOLDEN / "gemm-exact", "--results", GOLDEN / "gemm-exact", "--max-report", "-1")[0] == 2
    rc, _, err = run("vectors", "generate", "--suite", "convert-nope", "--out", tmp_path / "x")
    assert rc == 2 and "convert-nope" in err and not (tmp_path / "x").exists()
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "keep.txt").write_text("x")
    rc, _, err = run("vectors", "generate", "--suite", "gemm-exact", "--out", tmp_path / "full")
    assert rc == 2 and "not an empty folder" in err
    assert sorted(p.name for p in (tmp_path / "full").iterdir()) == ["keep.txt"]
    assert not any(p.name.startswith((".lowbit-tmp-", ".lowbit-lock-")) for p in tmp_path.iterdir())


# ---- the gate ------------------------------------------------------------------------------------


@pytest.mark.skipif(not PLANTED, reason="LOWBIT_PLANTED_PLUGIN not set (the plugin is built with the tests)")
def test_gate_catches_the_planted_one_ulp_error(tmp_path):
    junitparser = pytest.importorskip("junitparser")
    rc, out, err = run("gate", "--plugin", PLANTED, "--suite", "convert-cuda", "--suite", "gemm-f32-sequential",
                       "--junit", tmp_path / "g.xml")
    assert rc == 1, out + err
    bad = [l for l in out.splitlines() if "expected" in l]
    assert bad, out
    # Only f32 -> e4m3 under rne fails, and only inputs in [8, 16): one ulp (0.5 there) too low.
    assert all("e4m3/rne-" in l and "/f32.txt" in l for l in bad)
    first = bad[0]
    assert "convert-cuda" in first and "case " in first
    exp = int(first.split("expected 0x")[1][:2], 16)
    act = int(first.split("actual 0x")[1][:2], 16)
    assert exp - act == 1 and 0x50 <= act < 0x58  # e4m3 codes of [8, 16): 0x50..0x57
    assert "gemm-f32-sequential:" in out and "gemm-f32-sequential" in [l.split(":")[0] for l in out.splitlines() if l.endswith("ok")]
    xml = junitparser.JUnitXml.fromfile(str(tmp_path / "g.xml"))
    failed = sorted({c.name for s in xml for c in s if c.result and c.result[0].__class__.__name__ == "Failure"})
    assert failed == ["e4m3/rne-nosat-keep-after/f32.txt", "e4m3/rne-satfinite-keep-after/f32.txt"]


@pytest.mark.skipif(not PLANTED, reason="LOWBIT_PLANTED_PLUGIN not set")
def test_gate_reports_unimplemented_recipes_as_skipped():
    # The planted plugin's gemm runs only the f32-sequential model; the others answer UNSUPPORTED.
    cases = len(json.loads((GOLDEN / "gemm-exact/manifest.json").read_text())["cases"])
    rc, out, err = run("gate", "--plugin", PLANTED, "--suite", "gemm-exact", "--suite", "convert-p3109")
    assert rc == 0, out + err
    # gemm-exact compares nothing, but the run as a whole does (convert-p3109) and requires nothing more.
    assert f"gemm-exact: 0 cases compared in 0 of {cases} units, 0 mismatching, {cases} skipped, 0 in error  nothing compared" in out
    recipe = json.dumps(manifest_cases("gemm-exact")[0]["recipe"], separators=(",", ":"), sort_keys=True)
    same = [c for c in manifest_cases("gemm-exact") if c["recipe"] == manifest_cases("gemm-exact")[0]["recipe"]]
    assert f"  gemm-exact: the plugin's gemm declined recipe {recipe} ({len(same)} units: case-000 random-4x3x1, " in out
    line = next(l for l in out.splitlines() if l.startswith("convert-p3109:"))
    assert line.endswith("0 mismatching, 0 skipped, 0 in error  ok"), line
    # Required, it fails the run, naming it.
    rc, out, err = run("gate", "--plugin", PLANTED, "--suite", "gemm-exact", "--suite", "convert-p3109",
                       "--require", "gemm-*")
    assert rc == 1 and "why: required suite gemm-exact (--require gemm-*) compared nothing" in out, out + err


SCHEMES = ["tensor", "delayed", "channel", "token", "block", "mx", "nvfp4", "nvfp4-2d", "nvfp4-1level"]


@pytest.mark.skipif(not PLANTED, reason="LOWBIT_PLANTED_PLUGIN not set")
def test_gate_passes_every_scheme_suite_through_the_quantize_entry_point(tmp_path):
    """The planted plugin's quantize is lowbit's reference quantizer behind the C ABI: every case of
    every scheme suite runs (none skipped) and matches, delayed scaling's history and scale included."""
    junitparser = pytest.importorskip("junitparser")
    args = [a for s in SCHEMES for a in ("--suite", f"scheme-{s}")]
    rc, out, err = run("gate", "--plugin", PLANTED, *args, "--junit", tmp_path / "q.xml")
    assert rc == 0, out + err
    for s in SCHEMES:
        cases = len(json.loads((GOLDEN / f"scheme-{s}/manifest.json").read_text())["cases"])
        line = next(l for l in out.splitlines() if l.startswith(f"scheme-{s}: "))
        assert line.endswith(f" compared in {cases} of {cases} units, 0 mismatching, 0 skipped, 0 in error  ok"), line
    xml = junitparser.JUnitXml.fromfile(str(tmp_path / "q.xml"))
    cases = [c for s in xml for c in s]
    assert cases and all(c.is_passed for c in cases)


@pytest.mark.skipif(not PLANTED, reason="LOWBIT_PLANTED_PLUGIN not set")
def test_gate_catches_a_wrong_quantized_code_and_names_it(tmp_path):
    """LOWBIT_PLANTED_QUANTIZE_BUG=1: e4m3 codes of [8, 16) above 8 (0x51..0x57 in magnitude) come back one
    ulp (1.0 there) too small.  The gate names the suite, the case, the element and both decoded values."""
    junitparser = pytest.importorskip("junitparser")
    manifest = json.loads((GOLDEN / "scheme-tensor/manifest.json").read_text())
    rc, out, err = run("gate", "--plugin", PLANTED, "--suite", "scheme-tensor", "--suite", "scheme-mx",
                       "--max-report", "1000", "--junit", tmp_path / "q.xml", env={"LOWBIT_PLANTED_QUANTIZE_BUG": "1"})
    assert rc == 1, out + err
    bad = [l.strip() for l in out.splitlines() if "expected 0x" in l]
    assert bad, out
    for line in bad:
        assert line.startswith(("scheme-tensor case-", "scheme-mx case-")) and "/codes.npy[" in line, line
        exp = int(line.split("expected 0x")[1][:2], 16)
        act = int(line.split("actual 0x")[1][:2], 16)
        # One code lower in the same sign and binade: e4m3 magnitudes 0x51..0x57 are 9..15 (bias 7,
        # exponent field 10, 3 mantissa bits, so a step of 1.0).
        assert exp - act == 1 and 0x50 <= (act & 0x7F) <= 0x56, line
        v_exp = float(line.split(f"expected 0x{exp:02x} (")[1].split(")")[0])
        v_act = float(line.split(f"actual 0x{act:02x} (")[1].split(")")[0])
        sign = -1 if exp & 0x80 else 1
        assert v_exp == sign * (8 + (exp & 7)) and v_act == sign * (8 + (act & 7)), line
    # Only e4m3 recipes fail: in scheme-tensor the e4m3 and e4m3-pow2 cases, never e5m2.
    tensor_bad = {int(l.split("case-")[1][:3]) for l in bad if l.startswith("scheme-tensor")}
    names = {c["index"]: c["name"] for c in manifest["cases"]}
    assert tensor_bad and all(names[i].startswith("e4m3") for i in tensor_bad)
    xml = junitparser.JUnitXml.fromfile(str(tmp_path / "q.xml"))
    failed = {c.name for s in xml for c in s if c.result and c.result[0].__class__.__name__ == "Failure"}
    # JUnit names a tensor case "case-NNN <recipe>/<tensor>".
    assert {f"case-{i:03d} {names[i]}" for i in tensor_bad} <= failed, failed
    # Without the switch the same plugin passes the same suites.
    rc, out, err = run("gate", "--plugin", PLANTED, "--suite", "scheme-tensor", "--suite", "scheme-mx")
    assert rc == 0, out + err


@pytest.mark.skipif(not CUDA, reason="the CUDA toolkit's headers were not found at configure time")
def test_gate_passes_the_cuda_host_plugin_under_the_cuda_profile():
    rc, out, err = run("gate", "--plugin", CUDA, "--suite", "convert-cuda")
    assert rc == 0, out + err
    # The toolkit converts from f32 into 19 (target, rounding, saturation) combinations.
    line = next(l for l in out.splitlines() if l.startswith("convert-cuda: "))
    assert " compared in 19 of 207 units, 0 mismatching, 188 skipped, 0 in error  ok" in line, line


def test_gate_bad_plugin_is_exit_2(tmp_path):
    rc, _, err = run("gate", "--plugin", tmp_path / "missing.so", "--suite", "convert-te")
    assert rc == 2 and "missing.so" in err
    (tmp_path / "junk.so").write_text("not a library")
    rc, _, err = run("gate", "--plugin", tmp_path / "junk.so", "--suite", "convert-te")
    assert rc == 2 and "junk.so" in err
    rc, _, err = run("gate", "--plugin", tmp_path / "junk.so", "--suite", "nope")
    assert rc == 2 and "nope" in err


def test_only_selects_the_files_a_subject_implements(tmp_path):
    results = tmp_path / "r"
    f = "e4m3/rne-satfinite-keep-after/f32.txt"
    (results / f).parent.mkdir(parents=True)
    shutil.copy(GOLDEN / "convert-te" / f, results / f)
    rc, out, _ = run("check", "--vectors", GOLDEN / "convert-te", "--results", results)
    assert rc == 1 and "missing" in out
    rc, out, _ = run("check", "--vectors", GOLDEN / "convert-te", "--results", results, "--only", f)
    assert rc == 0 and "in 1 of 49 units, 0 mismatching, 48 skipped, 0 in error  ok" in out, out
    assert ("  convert-te: not selected by --only (48 units: bf16/rne-nosat-keep-after/e2m1.txt, "
            "bf16/rne-nosat-keep-after/e4m3.txt, bf16/rne-nosat-keep-after/e5m2.txt, ...)") in out
    rc, out, _ = run("check", "--vectors", GOLDEN / "convert-te", "--results", results, "--only", "convert-te/e4m3/*/f32.txt")
    assert rc == 0, out
