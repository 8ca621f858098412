"""`lowbit contract check --plugin` (plugin.h's contract entry, appended to the table): the planted-bug plugin
runs every pass of every named contract through lowbit's own contracts and supplies the output and the
accumulator, which check compares (both equal, in a worker process and in process); its planted bug is caught
and named; a table of ABI version 1's first size (a plugin compiled before the entry was appended) still
loads, for the gate as before, and is told it has no contract entry; a plugin that declines fails the check.
"""
import json
import os
import subprocess

import numpy as np
import pytest

LOWBIT = os.environ.get("LOWBIT", "lowbit")
PLANTED = os.environ.get("LOWBIT_PLANTED_PLUGIN")
MISBEHAVING = os.environ.get("LOWBIT_MISBEHAVING_PLUGIN")

pytestmark = pytest.mark.skipif(not (PLANTED and MISBEHAVING),
                                reason="LOWBIT_PLANTED_PLUGIN / LOWBIT_MISBEHAVING_PLUGIN not set (built with the tests)")


def run(args, **env):
    e = {k: v for k, v in os.environ.items() if k not in ("LOWBIT_MISBEHAVE", "LOWBIT_PLANTED_CONTRACT_BUG")}
    e.update(env)
    p = subprocess.run([LOWBIT, *map(str, args)], capture_output=True, text=True, check=False, env=e, timeout=300)
    return p.returncode, p.stdout, p.stderr


def bf16_bits(a):
    b = np.asarray(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
    return ((b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype(np.uint16)


NAMED = [line.split("\t")[0] for line in run(["contract", "list"])[1].splitlines()]
READS = {"fprop": ("x", "w"), "dgrad": ("dy", "w"), "wgrad": ("dy", "x")}
PASSES = [(n, p) for n in NAMED for p in json.loads(run(["contract", "show", n, "--json"])[1])["passes"]]


def make_run(tmp_path, name, pass_name, seed=1):
    rng = np.random.default_rng(5)
    m, n, k = 3, 32, 256
    files = {}
    for t, shape in {"x": (m, k), "w": (n, k), "dy": (m, n), "bias": (n,)}.items():
        files[t] = tmp_path / f"{t}.npy"
        np.save(files[t], bf16_bits(rng.standard_normal(shape)))
    spec = json.loads(run(["contract", "show", name, "--json"])[1])["passes"][pass_name]
    args = ["contract", "run", "--contract", name, "--pass", pass_name, "--sr-seed", seed, "--out", tmp_path / "run"]
    storage = json.loads(run(["contract", "show", name, "--json"])[1])["storage"]
    for t in READS[pass_name] + (("bias",) if any(s["step"] == "bias" for s in spec["epilogue"]) else ()):
        if isinstance(storage.get(t), dict):
            # Stored already quantized: its parts from `lowbit quantize` with the storage's scheme (every
            # named storage recipe is a scheme alone).
            q = tmp_path / f"stored-{t}"
            rc, _, err = run(["quantize", "--in", files[t], "--in-format", "bf16", "--scheme",
                              storage[t]["quantized"]["quantization_format"], "--out", q])
            assert rc == 0, err
            for part in ("codes", "scales", "tensor_scale"):
                if (q / f"{part}.npy").exists():
                    args += [f"--{t}-{part.replace('_', '-')}", q / f"{part}.npy"]
            continue
        args += [f"--{t}", files[t]]
    rc, _, err = run(args)
    assert rc == 0, err
    return tmp_path / "run"


@pytest.mark.parametrize("name,pass_name", PASSES, ids=[f"{n}-{p}" for n, p in PASSES])
def test_the_planted_plugin_passes_every_named_pass(tmp_path, name, pass_name):
    d = make_run(tmp_path, name, pass_name)
    want = json.loads((d / "manifest.json").read_text())["stages"]
    size = {e["path"]: int(np.prod(e["shape"])) for e in want}
    for mode in ([], ["--in-process"]):
        rc, out, err = run(["contract", "check", "--contract", name, "--inputs", d, "--plugin", PLANTED,
                            "--sr-seed", 1, *mode])
        assert rc == 0, out + err
        # The plugin supplies the output and the accumulator and leaves every other stage unwritten.
        assert f"output.npy: {size['output.npy']} elements equal" in out
        assert f"accumulator.npy: {size['accumulator.npy']} elements equal" in out
        assert out.count("not supplied") == len(want) - 2
        assert out.endswith(f"ok: {size['output.npy'] + size['accumulator.npy']} elements equal\n")


def test_a_delayed_state_reaches_the_plugin(tmp_path):
    # te-delayed@sm90 run from a given state (scales 3 and 0.7, not the fresh 1, and not powers of two, which
    # would only shift the exponents): the plugin's contract entry gets the state in its request, and its
    # output equals the run's only if it quantized with those scales.
    rng = np.random.default_rng(3)
    for t, shape in {"x": (3, 64), "w": (32, 64), "bias": (32,)}.items():
        np.save(tmp_path / f"{t}.npy", bf16_bits(rng.standard_normal(shape)))
    hist = ["0x00000000"] * 7 + ["0x40400000"]
    state = {"layers": {"x": {"history": hist, "scale": "0x40400000"}, "w": {"history": hist, "scale": "0x3f333333"}}}
    (tmp_path / "state.json").write_text(json.dumps(state))
    rc, _, err = run(["contract", "run", "--contract", "te-delayed@sm90", "--x", tmp_path / "x.npy", "--w",
                      tmp_path / "w.npy", "--bias", tmp_path / "bias.npy", "--state", tmp_path / "state.json",
                      "--out", tmp_path / "run"])
    assert rc == 0, err
    # The decode scale fp32(1 / 3) = 0x3eaaaaab.
    assert np.load(tmp_path / "run" / "x.quantized.scales.npy").view(np.uint32).ravel().tolist() == [0x3EAAAAAB]
    # Without the state (TE's first step, scale 1) the output differs: the test can fail.
    rc, _, err = run(["contract", "run", "--contract", "te-delayed@sm90", "--x", tmp_path / "x.npy", "--w",
                      tmp_path / "w.npy", "--bias", tmp_path / "bias.npy", "--out", tmp_path / "fresh"])
    assert rc == 0, err
    assert (np.load(tmp_path / "fresh" / "output.npy") != np.load(tmp_path / "run" / "output.npy")).any()
    rc, out, err = run(["contract", "check", "--contract", "te-delayed@sm90", "--inputs", tmp_path / "run",
                        "--plugin", PLANTED, "--in-process"])
    assert rc == 0 and "output.npy: 96 elements equal" in out, out + err


def test_the_planted_bug_is_named(tmp_path):
    d = make_run(tmp_path, "te-current@sm90", "fprop")
    want = np.load(d / "output.npy")
    for mode in ([], ["--in-process"]):
        rc, out, _ = run(["contract", "check", "--contract", "te-current@sm90", "--inputs", d, "--plugin", PLANTED,
                          *mode], LOWBIT_PLANTED_CONTRACT_BUG="1")
        assert rc == 1
        assert f"output[0, 0]: expected 0x{int(want[0, 0]):04x} (" in out
        assert f"actual 0x{int(want[0, 0]) ^ 1:04x} (" in out
        assert "output.npy: 1 of" in out and out.endswith("FAILED: first differing stage output.npy\n")


def test_a_stochastic_pass_needs_the_runs_seed(tmp_path):
    d = make_run(tmp_path, "te-nvfp4@sm100", "wgrad", seed=7)
    # The run records its seed, and the check hands it to the plugin unless --sr-seed says otherwise.
    assert json.loads((d / "manifest.json").read_text())["sr_seed"] == 7
    for seed in ([], ["--sr-seed", 7]):
        rc, out, _ = run(["contract", "check", "--contract", "te-nvfp4@sm100", "--inputs", d, "--plugin", PLANTED,
                          *seed])
        assert rc == 0, out
    rc, out, _ = run(["contract", "check", "--contract", "te-nvfp4@sm100", "--inputs", d, "--plugin", PLANTED,
                      "--sr-seed", 8])
    assert rc == 1 and "FAILED: first differing stage" in out
    # A manifest without the seed (as runs before it was recorded wrote them) leaves the plugin none to use.
    m = json.loads((d / "manifest.json").read_text())
    del m["sr_seed"]
    (d / "manifest.json").write_text(json.dumps(m))
    rc, out, _ = run(["contract", "check", "--contract", "te-nvfp4@sm100", "--inputs", d, "--plugin", PLANTED])
    assert rc == 1 and "contract entry failed" in out and "seed" in out
    # A run made without a seed records none.
    no_seed = tmp_path / "no-seed"
    no_seed.mkdir()
    rc, _, err = run(["contract", "run", "--contract", "te-current@sm90", "--x", tmp_path / "x.npy", "--w",
                      tmp_path / "w.npy", "--bias", tmp_path / "bias.npy", "--out", no_seed / "run"])
    assert rc == 0, err
    assert "sr_seed" not in json.loads((no_seed / "run" / "manifest.json").read_text())


def test_abi_1s_first_table_still_loads(tmp_path):
    # A plugin compiled against the header before the contract entry was appended: struct_size 48.  The gate
    # takes it and runs its entries as the full table's (the same report as the planted plugin's it forwards
    # to); contract check is told it has no contract entry (exit 2), not refused for its size.
    args = ["gate", "--suite", "scheme-tensor", "--suite", "gemm-f32-sequential", "--suite", "convert-te", "--json", "-"]
    rc_full, full, _ = run([*args[:1], "--plugin", PLANTED, *args[1:]])
    rc_v1, v1, err = run([*args[:1], "--plugin", MISBEHAVING, *args[1:]], LOWBIT_MISBEHAVE="v1",
                         LOWBIT_PLANTED_PLUGIN=PLANTED)
    assert rc_v1 == rc_full, err
    a, b = json.loads(full), json.loads(v1)
    assert b["subject"] == "misbehaving (ABI 1's first table)"
    assert a["suites"] == b["suites"] and all(s["cases_compared"] > 0 for s in b["suites"])
    d = make_run(tmp_path, "te-current@sm90", "fprop")
    rc, out, err = run(["contract", "check", "--contract", "te-current@sm90", "--inputs", d, "--plugin", MISBEHAVING],
                       LOWBIT_MISBEHAVE="v1", LOWBIT_PLANTED_PLUGIN=PLANTED)
    assert rc == 2 and "has no contract entry point" in err and not out


def test_a_plugin_that_declines_fails(tmp_path):
    d = make_run(tmp_path, "te-current@sm90", "fprop")
    rc, out, _ = run(["contract", "check", "--contract", "te-current@sm90", "--inputs", d, "--plugin", MISBEHAVING],
                     LOWBIT_MISBEHAVE="decline", LOWBIT_PLANTED_PLUGIN=PLANTED)
    assert rc == 1 and out == "FAILED: misbehaving's contract entry declined the contract\n"


def test_bad_arguments(tmp_path):
    d = make_run(tmp_path, "te-current@sm90", "fprop")
    base = ["contract", "check", "--contract", "te-current@sm90", "--inputs", d]
    for extra, message in [([], "--results: required (or --plugin)"),
                           (["--plugin", PLANTED, "--results", tmp_path], "--plugin: not with --results"),
                           (["--results", tmp_path, "--sr-seed", 1], "--sr-seed: only with --plugin"),
                           (["--plugin", tmp_path / "none.so"], "--plugin"),
                           (["--plugin", PLANTED, "--timeout", 0], "--timeout")]:
        rc, out, err = run(base + extra)
        assert rc == 2 and message in err and not out, (extra, err)
