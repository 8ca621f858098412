"""The golden contract suites `contract-<name>` (vectors/SPEC.md "Contract suites"): every committed suite's
stages are what `lowbit contract run` writes for the same inputs, byte for byte; `lowbit check` requires the
output of every case and compares the intermediates a subject supplies; a suite in which nothing is required
is damaged; `lowbit gate` calls a plugin's contract entry (the planted plugin passes, its planted bug is named,
a table without the entry compares nothing and fails); suites at chosen layer shapes.
"""
import hashlib
import json
import os
import pathlib
import shutil
import subprocess

import numpy as np
import pytest

LOWBIT = os.environ.get("LOWBIT", "lowbit")
PLANTED = os.environ.get("LOWBIT_PLANTED_PLUGIN")
MISBEHAVING = os.environ.get("LOWBIT_MISBEHAVING_PLUGIN")
GOLDEN = pathlib.Path(__file__).resolve().parents[2] / "vectors" / "golden"
needs_plugins = pytest.mark.skipif(not (PLANTED and MISBEHAVING),
                                   reason="LOWBIT_PLANTED_PLUGIN / LOWBIT_MISBEHAVING_PLUGIN not set (built with the tests)")


def run(args, **env):
    e = {k: v for k, v in os.environ.items() if k not in ("LOWBIT_MISBEHAVE", "LOWBIT_PLANTED_CONTRACT_BUG")}
    e.update(env)
    p = subprocess.run([LOWBIT, *map(str, args)], capture_output=True, text=True, check=False, env=e, timeout=600)
    return p.returncode, p.stdout, p.stderr


NAMED = [line.split("\t")[0] for line in run(["contract", "list"])[1].splitlines()]
SUITES = [f"contract-{n}" for n in NAMED]


def manifest(suite_dir):
    return json.loads((suite_dir / "manifest.json").read_text())


def test_every_named_contract_has_a_committed_suite():
    assert NAMED and all((GOLDEN / s / "manifest.json").is_file() for s in SUITES)
    listed = [line.split("\t")[0] for line in run(["vectors", "list"])[1].splitlines()]
    assert [s for s in listed if s.startswith("contract-")] == SUITES


@pytest.mark.parametrize("suite", SUITES)
def test_committed_suite_is_what_contract_run_writes(tmp_path, suite):
    # Each case's inputs through `lowbit contract run`: the same stage files, the same bytes; every pass of the
    # contract appears, each on random, edge and nonfinite inputs.
    m = manifest(GOLDEN / suite)
    assert m["kind"] == "contract" and m["contract"] == suite[len("contract-"):]
    contract = json.loads(run(["contract", "show", m["contract"], "--json"])[1])
    assert m["document"] == contract
    assert sorted({c["recipe"]["pass"] for c in m["cases"]}) == sorted(contract["passes"])
    for case in m["cases"]:
        i = case["index"]
        files = [f for f in m["files"] if f["case"] == i]
        inputs = {f["name"]: GOLDEN / suite / f["path"] for f in files if f["role"] == "input"}
        expected = {pathlib.Path(f["path"]).name: f for f in files if f["role"] == "expected"}
        out = tmp_path / f"case-{i}"
        args = ["contract", "run", "--contract", m["contract"], "--pass", case["recipe"]["pass"], "--out", out]
        for name, path in inputs.items():
            # A stored operand's parts are named as the run's inputs: w.tensor_scale is --w-tensor-scale.
            args += [f"--{name.replace('.', '-').replace('_', '-')}", path]
        if "sr_seed" in case["recipe"]:
            args += ["--sr-seed", case["recipe"]["sr_seed"]]
        rc, _, err = run(args)
        assert rc == 0, err
        written = {p.name for p in out.iterdir() if p.suffix == ".npy"}
        assert written == set(expected), case["name"]
        for name, f in expected.items():
            assert (out / name).read_bytes() == (GOLDEN / suite / f["path"]).read_bytes(), f"{case['name']} {name}"
            # The output is required of a subject, every other stage optional.
            assert f.get("optional", False) == (name != "output.npy")


def copy_outputs(suite_dir, dest, skip_case=None):
    for c in manifest(suite_dir)["cases"]:
        if c["index"] == skip_case:
            continue
        d = dest / f"case-{c['index']:03d}"
        d.mkdir(parents=True)
        shutil.copy(suite_dir / d.name / "output.npy", d / "output.npy")


def test_check_requires_the_output_and_compares_what_is_supplied(tmp_path):
    suite = GOLDEN / "contract-te-current@sm90"
    n_cases = len(manifest(suite)["cases"])
    # The outputs alone: every case compared.
    results = tmp_path / "outputs"
    copy_outputs(suite, results)
    rc, out, err = run(["check", "--vectors", suite, "--results", results])
    assert rc == 0, out + err
    assert f"in {n_cases} of {n_cases} units, 0 mismatching" in out
    # One case without its output: that unit is in error, and the check fails.
    missing = tmp_path / "missing"
    copy_outputs(suite, missing, skip_case=4)
    rc, out, _ = run(["check", "--vectors", suite, "--results", missing])
    assert rc == 1 and "1 in error" in out and "case-004" in out
    # An intermediate supplied with one code changed is compared and named.
    acc = np.load(suite / "case-000" / "accumulator.npy")
    acc.view(np.uint32)[1, 2] ^= 1
    np.save(results / "case-000" / "accumulator.npy", acc)
    rc, out, _ = run(["check", "--vectors", suite, "--results", results])
    assert rc == 1 and "1 mismatching" in out
    assert "case-000/accumulator.npy[1, 2]: expected" in out


def test_a_suite_that_requires_nothing_is_damaged(tmp_path):
    # Every expected file optional: a subject giving nothing would pass, so the suite is refused (exit 2).
    suite = tmp_path / "s"
    shutil.copytree(GOLDEN / "contract-torchao-nvfp4@sm100", suite)
    m = manifest(suite)
    for f in m["files"]:
        if f["role"] == "expected":
            f["optional"] = True
    text = json.dumps(m, indent=1) + "\n"
    (suite / "manifest.json").write_text(text)
    (suite / "manifest.json.sha256").write_text(hashlib.sha256(text.encode()).hexdigest() + "  manifest.json\n")
    rc, _, err = run(["check", "--vectors", suite, "--results", tmp_path])
    assert rc == 2 and "has no expected file that a subject must give" in err


@needs_plugins
def test_gate_calls_the_contract_entry():
    args = ["gate", "--plugin", PLANTED]
    for s in SUITES:
        args += ["--suite", s]
    rc, out, err = run(args)
    assert rc == 0, out + err
    assert out.count("0 mismatching, 0 skipped, 0 in error  ok") == len(SUITES)
    # The planted plugin supplies the output and the accumulator: both compared.
    m = manifest(GOLDEN / "contract-te-current@sm90")
    sizes = {f["path"]: int(np.prod(f["shape"])) for f in m["files"]}
    want = sum(v for p, v in sizes.items() if p.endswith(("/output.npy", "/accumulator.npy")))
    rc, out, _ = run(["gate", "--plugin", PLANTED, "--suite", "contract-te-current@sm90"])
    assert f"contract-te-current@sm90: {want} cases compared" in out


@needs_plugins
def test_gate_names_the_planted_bug():
    rc, out, _ = run(["gate", "--plugin", PLANTED, "--suite", "contract-deepseek-v3@sm90"],
                     LOWBIT_PLANTED_CONTRACT_BUG="1")
    n_cases = len(manifest(GOLDEN / "contract-deepseek-v3@sm90")["cases"])
    assert rc == 1 and f"{n_cases} mismatching" in out
    assert "contract-deepseek-v3@sm90 case-000 fprop/random-16x24x160 case-000/output.npy[0, 0]: expected" in out


@needs_plugins
def test_a_table_without_the_contract_entry_compares_nothing():
    rc, out, _ = run(["gate", "--plugin", MISBEHAVING, "--suite", "contract-te-current@sm90"], LOWBIT_MISBEHAVE="v1",
                     LOWBIT_PLANTED_PLUGIN=PLANTED)
    n_cases = len(manifest(GOLDEN / "contract-te-current@sm90")["cases"])
    assert rc == 1 and f"{n_cases} skipped" in out and "no contract entry point" in out


def test_suites_at_layer_shapes(tmp_path):
    rc, _, err = run(["vectors", "generate", "--suite", "contract-te-block@sm90", "--shape", "8x136x264",
                      "--out", tmp_path / "s"])
    assert rc == 0, err
    m = manifest(tmp_path / "s")
    assert m["shapes"] == ["8x136x264"] and [c["shape"] for c in m["cases"]] == [[8, 136, 264]] * 9
    shapes = {pathlib.Path(f["path"]).name: f["shape"] for f in m["files"] if f["case"] == 6}  # wgrad, random
    assert shapes["dy.npy"] == [8, 136] and shapes["x.npy"] == [8, 264] and shapes["output.npy"] == [136, 264]
    rc, out, err = run(["check", "--vectors", tmp_path / "s", "--results", tmp_path / "s"])
    assert rc == 0, out + err
    for extra, message in [(["--shape", "8x136x264", "--layout", "nt"], "--layout"),
                           (["--shape", "8x136"], "--shape"),
                           (["--shape", "0x8x8"], "--shape")]:
        rc, _, err = run(["vectors", "generate", "--suite", "contract-te-block@sm90", *extra, "--out", tmp_path / "x"])
        assert rc == 2 and message in err and not (tmp_path / "x").exists()
