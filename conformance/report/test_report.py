"""`lowbit report`: the contents of report.json, its determinism, the rendered files, bad arguments, and the
link from `lowbit conform`.

The GEMM numbers are checked against README.md's table (from conformance/gemm/test_exact.cpp's experiment);
the profile table against `lowbit profiles --diff --json`; model names against `lowbit gemm --list-models`.
"""
import json
import os
import struct
import subprocess
import sys

import pytest

LOWBIT = os.environ.get("LOWBIT", "lowbit")
CI = os.environ.get("CI") == "true"


def run(args, env=None):
    p = subprocess.run([LOWBIT, *args], capture_output=True, text=True, check=False,
                       env=dict(os.environ, **(env or {})))
    return p.returncode, p.stdout, p.stderr


def have_matplotlib():
    try:
        import matplotlib  # noqa: F401
        return True
    except ImportError:
        return False


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    """One quick report, rendered when matplotlib is there (report.json alone otherwise)."""
    out = tmp_path_factory.mktemp("quick")
    devices = tmp_path_factory.mktemp("device")
    run_file = {
        "schema": "lowbit-device-check/1", "date": "2026-11-29T23:59:56Z", "elapsed_seconds": 3,
        "gpu": {"name": "Test GPU", "driver_version": "1.0"},
        "binaries": {"cvt_test": {"exit": 0, "seconds": 1}},
        "tests": [{"binary": "cvt_test", "suite": "S", "name": "T", "result": "passed", "seconds": "0.1s",
                   "failures": [], "properties": {"mismatches": "0"}}],
        "benchmarks": {"cvt_bench": {"gpu": "Test GPU", "sweeps": [{"instruction": "cvt.x", "median_ms": 1.5}]}},
        "missing": []}
    (devices / "2026-11-29-test.json").write_text(json.dumps(run_file))
    older = dict(run_file, date="2025-01-01T00:00:00Z")
    (devices / "2025-01-01-test.json").write_text(json.dumps(older))
    (devices / "notes.json").write_text('{"something": "else"}')
    args = ["report", "--quick", "--out", str(out), "--device-runs", str(devices)]
    if not have_matplotlib():
        if CI:
            pytest.fail("matplotlib is missing (scripts/setup.sh installs it from requirements.txt)")
        args.append("--json-only")
    rc, stdout, err = run(args)
    assert rc == 0, err
    with open(out / "report.json") as f:
        text = f.read()
    return out, json.loads(text), text, args


def test_sections_and_shapes(quick):
    _, r, _, _ = quick
    assert r["schema"] == "lowbit-report/1" and r["mode"] == "quick"
    dists = [d["name"] for d in r["distributions"]]
    assert dists == ["gaussian", "laplace", "student-t3", "log-uniform", "llm-activations", "weight-like"]
    configs = [c["name"] for c in r["configs"]]
    for needed in ["none/bf16", "tensor/e4m3", "delayed/e4m3", "channel/e4m3", "token/e4m3", "block1x128/e4m3",
                   "block128x128/e4m3", "mx/e4m3", "mx/e2m1", "mx/int8", "nvfp4/e2m1", "nvfp4-2d/e2m1",
                   "nvfp4-1level/e2m1"]:
        assert needed in configs
    q = {(x["distribution"], x["config"]): x for x in r["quantization"]}
    assert len(q) == len(dists) * len(configs) == len(r["quantization"])
    for x in r["quantization"]:
        for key in ("sqnr_db", "rmse", "max_abs_error", "max_rel_error", "flushed_to_zero", "saturated"):
            assert isinstance(x[key], (int, float)) and not isinstance(x[key], bool), (x["config"], key)
        assert 0 <= x["flushed_to_zero"] <= 1 and 0 <= x["saturated"] <= 1
        h = x["rel_error_log2_hist"]
        assert sum(h["counts"]) + h["exact"] + h["zero_inputs"] == x["elements"]
    # Sanity of the physics: more bits, more SQNR; f16 beats bf16 by about 3 mantissa bits (18 dB).
    g = lambda c: q[("gaussian", c)]["sqnr_db"]
    assert g("none/f16") > g("none/bf16") > g("tensor/e4m3") > g("tensor/e2m1")
    assert 15 < g("none/f16") - g("none/bf16") < 21
    # An e4m3 cast of N(0,1) data: about 31 dB (3 mantissa bits: 6.02 * 4 + 7.3 dB for a uniform error).
    assert 29 < g("tensor/e4m3") < 34
    # Outlier channels: per-tensor e2m1 flushes almost everything, per-channel e4m3 almost nothing.
    assert q[("llm-activations", "tensor/e2m1")]["flushed_to_zero"] > 0.9
    assert q[("llm-activations", "channel/e4m3")]["flushed_to_zero"] < 0.01
    # MX's floor rule clips (OCP MX v1.0 §6.3); rceil never does.
    assert q[("gaussian", "mx/e4m3")]["saturated"] > 0
    assert q[("gaussian", "mx/e4m3/rceil")]["saturated"] == 0
    assert q[("gaussian", "none/bf16")]["saturated"] == 0


def list_models():
    rc, out, err = run(["gemm", "--list-models"])
    assert rc == 0, err
    return [line.split("\t")[0] for line in out.splitlines()]


def test_gemm_error_vs_k(quick):
    _, r, _, _ = quick
    rows = r["gemm_error_vs_k"]
    models = list_models()
    for row in rows:
        assert set(row) == {"model", "k", "norm_rel_error", "max_rel_error", "median_rel_error"}
        assert row["model"] in models
        assert row["k"] in (64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)
        for key in ("norm_rel_error", "max_rel_error", "median_rel_error"):
            assert isinstance(row[key], (int, float)) and row[key] >= 0
    # Every model the experiment ran appears at every K it lists, and every model of --list-models is run
    # or skipped with a reason (the quick mode runs a subset).
    ran = r["gemm_experiment"]["models"]
    have = {(x["model"], x["k"]) for x in rows}
    skipped = {s["model"] for s in r["gemm_skipped"]}
    for m in ran:
        for k in r["gemm_experiment"]["k"]:
            assert (m, k) in have or m in skipped, (m, k)
    for m in models:
        assert m in ran or m in skipped or r["mode"] == "quick", m
    g = {(x["model"], x["k"]): x for x in rows}
    # README.md's table (conformance/gemm/test_exact.cpp): the same experiment, the same numbers.
    readme = {("hopper-fp8", 4096): (1.33e-3, 0.0217), ("hopper-fp8", 16384): (3.10e-3, 0.0584),
              ("hopper-fp8-promote128", 4096): (1.30e-4, 0.00348), ("hopper-fp8-promote128", 16384): (1.30e-4, 0.00307)}
    for key, (norm, max_rel) in readme.items():
        assert key in g, key
        assert g[key]["norm_rel_error"] == pytest.approx(norm, rel=0.02), key
        assert g[key]["max_rel_error"] == pytest.approx(max_rel, rel=0.03), key
    # f32 accumulation of e4m3 products is far more accurate than the FP8 tensor core without promotion.
    assert g[("f32-sequential", 16384)]["norm_rel_error"] < 1e-5


def test_contract_errors(quick):
    """Every named contract's fprop at every K on both input pairs, against the exact layer."""
    _, r, _, _ = quick
    ex, rows = r["contract_experiment"], r["contract_errors"]
    names = run(["contract", "list"])[1].split("\n")
    named = [line.split("\t")[0] for line in names if line.strip()]
    assert {x["contract"] for x in rows} == set(named)
    pairs = [i["name"] for i in ex["inputs"]]
    assert len(rows) == len(named) * len(pairs) * len(ex["k"])
    for row in rows:
        assert set(row) == {"contract", "inputs", "k", "output_format", "norm_rel_error", "max_rel_error"}
        assert row["inputs"] in pairs and row["k"] in ex["k"] and row["output_format"] == "bf16"
        assert 0 < row["norm_rel_error"] < 1
    e = {(x["contract"], x["inputs"], x["k"]): x["norm_rel_error"] for x in rows}
    # What a recipe loses: an FP8 layer's output stays within a few percent of the exact one; NVFP4's 4-bit
    # elements (2 significant bits against e4m3's 4) lose about four times as much on every input and K.
    for (c, i, k), err in e.items():
        if "nvfp4" in c:
            assert err > 2.5 * e[("te-current@sm90", i, k)], (c, i, k)
        else:
            assert err < 0.06, (c, i, k)


def test_profile_differences_match_profiles_diff(quick):
    _, r, _, _ = quick
    rc, out, err = run(["profiles", "--diff", "--json"])
    assert rc == 0, err
    diff = json.loads(out)
    pd = r["profile_differences"]
    for p in ("ocp", "cuda", "ml_dtypes", "llvm", "te", "torchao", "p3109"):
        assert p in pd["profiles"]
    assert [(x["target"], x["input"]) for x in pd["rows"]] == [(x["target"], x["input"]) for x in diff]
    for mine, theirs in zip(pd["rows"], diff):
        for p in pd["profiles"]:
            a, b = mine["results"][p], theirs["results"][p]
            assert (a is None) == (b is None)
            if a is not None:
                assert a["code"] == b["code"], (mine["target"], mine["input"], p)


def test_hardware_runs_latest_first(quick):
    _, r, _, _ = quick
    runs = r["hardware_runs"]
    assert [x["file"] for x in runs] == ["2026-11-29-test.json", "2025-01-01-test.json"]
    assert runs[0]["gpu"]["name"] == "Test GPU"
    assert runs[0]["tests"][0]["result"] == "passed"
    assert runs[0]["benchmarks"]["cvt_bench"]["sweeps"][0]["median_ms"] == 1.5


def test_deterministic(quick, tmp_path):
    out, r, text, args = quick
    args = [a if a != str(out) else str(tmp_path) for a in args]
    if "--json-only" not in args:
        args.append("--json-only")
    rc, _, err = run(args)
    assert rc == 0, err
    again = (tmp_path / "report.json").read_text()
    # Only "run" (date, seconds) may differ, and it is the last key.
    assert text[:text.index('"run"')] == again[:again.index('"run"')]
    assert list(r)[-1] == "run"


def test_rendered_files(quick):
    out, r, _, args = quick
    if "--json-only" in args:
        pytest.skip("matplotlib is not installed: nothing rendered")
    page = (out / "index.html").read_text()
    md = (out / "report.md").read_text()
    for name in ("sqnr_by_scheme", "gemm_error_vs_k", "sqnr_heatmap", "error_histograms"):
        png = (out / "figures" / (name + ".png")).read_bytes()
        assert png.startswith(b"\x89PNG\r\n\x1a\n")
        assert "figures/%s.png" % name in md
    # Self-contained: every image is a data: URI, nothing is loaded from elsewhere.
    assert page.count('src="data:image/png;base64,') == 4
    assert "http://" not in page and "https://" not in page and "<script" not in page
    assert "hopper-fp8-promote128" in page and "Test GPU" in page
    assert not [f for f in os.listdir(out) if ".tmp" in f]


def npy_bytes(values, shape):
    header = "{'descr': '<f4', 'fortran_order': False, 'shape': (%s), }" % "".join("%d," % d for d in shape)
    header += " " * (63 - (len(header) + 10) % 64) + "\n"
    return (b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode()
            + struct.pack("<%df" % len(values), *values))


def safetensors_bytes(tensors):
    head, data = {}, b""
    for name, (dtype, shape, raw) in tensors.items():
        head[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    h = json.dumps(head).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + data


def test_input_files(tmp_path):
    values = [((i * 37) % 101 - 50) / 7.0 for i in range(64 * 32)]
    npy = tmp_path / "act.npy"
    npy.write_bytes(npy_bytes(values, (64, 32)))
    rc, _, err = run(["report", "--quick", "--json-only", "--out", str(tmp_path / "a"), "--input", str(npy),
                      "--sections", "input"])
    assert rc == 0, err
    r = json.loads((tmp_path / "a" / "report.json").read_text())
    t = r["input"]["tensors"]
    assert r["input"]["file"] == "act.npy" and t[0]["name"] == "act" and t[0]["shape"] == [64, 32]
    assert r["sections"] == ["input"] and r["quantization"] == [] and r["gemm_error_vs_k"] == []
    res = {x["config"]: x for x in t[0]["results"]}
    assert "delayed/e4m3" not in res and res["none/f16"]["sqnr_db"] > res["tensor/e2m1"]["sqnr_db"]
    st = tmp_path / "w.safetensors"
    st.write_bytes(safetensors_bytes({
        "w": ("F32", [16, 32], struct.pack("<512f", *values[:512])),
        "ids": ("I32", [4], struct.pack("<4i", 1, 2, 3, 4))}))
    rc, _, err = run(["report", "--quick", "--json-only", "--out", str(tmp_path / "b"), "--input", str(st),
                      "--sections", "input,profiles"])
    assert rc == 0, err
    t = {x["name"]: x for x in json.loads((tmp_path / "b" / "report.json").read_text())["input"]["tensors"]}
    assert "results" in t["w"] and "I32" in t["ids"]["skipped"]


@pytest.mark.parametrize("args,name", [
    (["--input", "/nonexistent/x.npy"], "--input"),
    (["--input", "/etc/hostname"], "--input"),
    (["--device-runs", "/nonexistent/dir"], "--device-runs"),
    (["--bogus"], "--bogus"),
    (["--sections", "gemm,nonsense"], "--sections"),
])
def test_bad_arguments(tmp_path, args, name):
    rc, out, err = run(["report", "--quick", "--json-only", "--out", str(tmp_path / "o"), *args])
    assert rc == 2, (rc, err)
    assert name in err
    assert not (tmp_path / "o" / "report.json").exists()


def test_sections_render(tmp_path):
    if not have_matplotlib():
        pytest.skip("matplotlib is not installed")
    rc, _, err = run(["report", "--quick", "--sections", "profiles,hardware", "--out", str(tmp_path)])
    assert rc == 0, err
    page = (tmp_path / "index.html").read_text()
    assert "Not in this report" in page and "<img" not in page


def test_out_is_a_file(tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    rc, _, err = run(["report", "--quick", "--json-only", "--out", str(f)])
    assert rc == 2 and "--out" in err


def test_render_without_matplotlib_says_so(tmp_path):
    # An interpreter without site-packages stands for a machine without matplotlib.
    wrapper = tmp_path / "python-bare"
    wrapper.write_text('#!/bin/sh\nexec "%s" -S "$@"\n' % sys.executable)
    wrapper.chmod(0o755)
    rc, _, err = run(["report", "--quick", "--sections", "profiles", "--out", str(tmp_path / "o")],
                     env={"LOWBIT_PYTHON": str(wrapper)})
    assert rc == 2
    assert "matplotlib" in err and "requirements.txt" in err
    assert (tmp_path / "o" / "report.json").exists() and not (tmp_path / "o" / "index.html").exists()


def test_conform_links_to_the_report(tmp_path):
    rc, out, err = run(["conform", "--check", "semantics-rules", "--out", str(tmp_path)])
    assert rc == 0, err
    assert "reports/accuracy/index.html" in out and "lowbit report" in out
    md = (tmp_path / "conformance.md").read_text()
    assert "## Accuracy report" in md and "accuracy/index.html" in md
    j = json.loads((tmp_path / "conformance.json").read_text())
    assert j["accuracy_report"]["command"] == "lowbit report --out reports/accuracy"
