"""Shards and `lowbit merge` (conformance/checks/shard.hpp, tools/lowbit/merge_cmd.cpp), quick tier.

The byte-identity of merged output with the unsharded run's (conform reports apart from their timings,
timings.py; suite folders and the gate's report and JUnit exactly), the strict --shard option of every
command that takes it, each way a set of shards can be wrong (missing, duplicated, foreign, damaged: exit 1
naming it; unreadable: exit 2) with nothing written, and GPU fleets through tools/device-check with a
faked nvidia-smi and faked device binaries (no GPU is needed).  The split itself is recomputed here from
its definition (floor((I-1)n/N) .. floor(In/N)), not taken from lowbit.
"""
import hashlib
import json
import os
import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest

from timings import report_files

LOWBIT = os.environ.get("LOWBIT", "lowbit")
PLANTED = os.environ.get("LOWBIT_PLANTED_PLUGIN")
ROOT = Path(__file__).resolve().parents[2]
DEVICE_CHECK = ROOT / "tools" / "device-check"
CHECKS = ["--check", "semantics-peer-cases", "--check", "semantics-cuda-table", "--check", "round-trip"]


def run(*args, env=None, cwd=None):
    return subprocess.run([str(a) for a in args], capture_output=True, text=True, cwd=cwd,
                          env=None if env is None else {**os.environ, **env})


def lowbit(*args, **kw):
    return run(LOWBIT, *args, **kw)


def version():
    p = lowbit("--version")
    assert p.returncode == 0
    return p.stdout.split()[1]


def conform_shard(out, i, n, checks=CHECKS):
    p = lowbit("conform", *checks, "--shard", "%d/%d" % (i, n), "--out", out)
    assert p.returncode == 0, p.stderr
    return out


def rewrite(shard_dir, edit):
    """Change shard.json with `edit(doc)` and write a matching checksum: a consistent, altered result."""
    path = Path(shard_dir) / "shard.json"
    doc = json.loads(path.read_text())
    edit(doc)
    text = json.dumps(doc, indent=1) + "\n"
    path.write_text(text)
    (Path(shard_dir) / "shard.json.sha256").write_text(hashlib.sha256(text.encode()).hexdigest() + "  shard.json\n")


def split(n, i, count):
    return (i - 1) * n // count, i * n // count


def tree(folder):
    folder = Path(folder)
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def conform_run(tmp_path_factory):
    """The unsharded run of three checks and its three shards."""
    base = tmp_path_factory.mktemp("conform")
    p = lowbit("conform", *CHECKS, "--out", base / "unsharded")
    assert p.returncode == 0, p.stderr
    shards = [conform_shard(base / ("s%d" % i), i, 3) for i in (1, 2, 3)]
    return base, shards


def refused(p, code, *words, out=None):
    assert p.returncode == code, (p.returncode, p.stdout, p.stderr)
    for w in words:
        assert w in p.stderr, (w, p.stderr)
    assert "nothing written" in p.stderr
    if out is not None:
        assert not Path(out).exists()


# ---- --shard I/N -------------------------------------------------------------------------------------

BAD_SHARDS = ["0/4", "5/4", "1/0", "a/b", "1/4x", "/4", "1/", "", "-1/4", " 1/4", "1/4/2", "1 /4", "1/100001"]


@pytest.mark.parametrize("value", BAD_SHARDS)
def test_shard_option_is_strict_everywhere(value, tmp_path):
    out = tmp_path / "out"
    commands = [[LOWBIT, "conform", "--check", "semantics-rules", "--shard", value, "--out", out],
                [LOWBIT, "vectors", "generate", "--suite", "convert-ocp", "--shard", value, "--out", out],
                [DEVICE_CHECK, "--shard", value, "--out", out]]
    if PLANTED:
        commands.append([LOWBIT, "gate", "--plugin", PLANTED, "--suite", "convert-ocp", "--shard", value, "--out", out])
    for cmd in commands:
        p = run(*cmd)
        assert p.returncode == 2, (cmd, p.stdout, p.stderr)
        assert "--shard" in p.stderr and ("'%s'" % value) in p.stderr, (cmd, p.stderr)
        assert not out.exists(), cmd


def test_gate_shard_needs_out_and_out_needs_shard(tmp_path):
    if not PLANTED:
        pytest.skip("LOWBIT_PLANTED_PLUGIN is not set (conformance/cluster.cmake sets it)")
    p = lowbit("gate", "--plugin", PLANTED, "--suite", "convert-ocp", "--shard", "1/2")
    assert p.returncode == 2 and "--out" in p.stderr
    p = lowbit("gate", "--plugin", PLANTED, "--suite", "convert-ocp", "--out", tmp_path / "g")
    assert p.returncode == 2 and "--out" in p.stderr


# ---- conform -------------------------------------------------------------------------------------------


def test_shards_hold_the_split_of_every_check(conform_run):
    base, shards = conform_run
    unsharded = json.loads((base / "unsharded" / "conformance.json").read_text())
    inputs = {c["name"]: c["inputs"] for c in unsharded["checks"]}
    assert inputs["semantics-peer-cases"] > 0 and inputs["round-trip"] > 0
    for i, s in enumerate(shards, 1):
        doc = json.loads((s / "shard.json").read_text())
        assert doc["kind"] == "conform" and doc["shard"] == {"index": i, "count": 3}
        assert doc["lowbit_version"] == version() and doc["build_id"].startswith("sha256:")
        assert doc["options"] == {"tier": "quick", "checks": [CHECKS[k] for k in (1, 3, 5)]}
        for part in doc["space"]:
            assert (part["begin"], part["end"]) == split(inputs[part["name"]], i, 3)
        checksum = hashlib.sha256((s / "shard.json").read_bytes()).hexdigest()
        assert (s / "shard.json.sha256").read_text() == checksum + "  shard.json\n"
    # The shards' cases add up to the unsharded run's, check by check.
    for c in unsharded["checks"]:
        parts = [next(r for r in json.loads((s / "shard.json").read_text())["results"] if r["name"] == c["name"])
                 for s in shards]
        assert sum(r["cases"] for r in parts) == c["cases"] > 0


def test_merged_conform_report_is_the_unsharded_one_but_for_timings(conform_run, tmp_path):
    base, shards = conform_run
    merged = base / "merged-in-order"
    p = lowbit("merge", *shards, "--out", merged)
    assert p.returncode == 0, p.stderr
    assert "conformant (merged from 3 shards, quick tier" in p.stdout
    assert report_files(merged) == report_files(base / "unsharded")
    # The timings are the shards' sums and the earliest start.
    docs = [json.loads((s / "shard.json").read_text()) for s in shards]
    report = json.loads((merged / "conformance.json").read_text())
    assert report["started"] == min(d["run"]["started"] for d in docs)
    assert report["seconds"] == pytest.approx(sum(d["run"]["seconds"] for d in docs))
    # Any order of the folders gives the same files.
    again = base / "merged-reversed"
    assert lowbit("merge", *reversed(shards), "--out", again).returncode == 0
    assert tree(again) == tree(merged)


def test_more_shards_than_inputs_leave_some_empty(tmp_path):
    checks = ["--check", "semantics-rules"]
    assert lowbit("conform", *checks, "--out", tmp_path / "unsharded").returncode == 0
    n = 40  # semantics-rules has fewer cases than that
    shards = [conform_shard(tmp_path / ("s%d" % i), i, n, checks) for i in range(1, n + 1)]
    sizes = [json.loads((s / "shard.json").read_text())["space"][0] for s in shards]
    assert any(p["begin"] == p["end"] for p in sizes)
    assert lowbit("merge", *shards, "--out", tmp_path / "merged").returncode == 0
    assert report_files(tmp_path / "merged") == report_files(tmp_path / "unsharded")


# ---- vectors generate ------------------------------------------------------------------------------------


@pytest.mark.parametrize("suite,count", [("convert-ocp", 3), ("scheme-nvfp4", 4), ("gemm-exact", 2),
                                         ("scheme-tensor", 50)])
def test_merged_suite_is_the_unsharded_folder_byte_for_byte(suite, count, tmp_path):
    assert lowbit("vectors", "generate", "--suite", suite, "--out", tmp_path / "unsharded").returncode == 0
    shards = []
    for i in range(1, count + 1):
        d = tmp_path / ("s%d" % i)
        p = lowbit("vectors", "generate", "--suite", suite, "--shard", "%d/%d" % (i, count), "--out", d)
        assert p.returncode == 0, p.stderr
        assert not (d / "manifest.json").exists()  # a part is not a suite
        shards.append(d)
    p = lowbit("merge", *shards, "--out", tmp_path / "merged")
    assert p.returncode == 0, p.stderr
    expected = tree(tmp_path / "unsharded")
    assert len(expected) > 2 and tree(tmp_path / "merged") == expected


# ---- gate ------------------------------------------------------------------------------------------------


def test_merged_gate_is_the_unsharded_report_and_junit(tmp_path):
    if not PLANTED:
        pytest.skip("LOWBIT_PLANTED_PLUGIN is not set (conformance/cluster.cmake sets it)")
    suites = ["--suite", "convert-ocp", "--suite", "scheme-mx"]
    whole = lowbit("gate", "--plugin", PLANTED, *suites, "--junit", tmp_path / "junit.xml")
    assert whole.returncode == 1  # the planted ulp
    assert "e4m3/rne-nosat-keep-after/f32.txt" in whole.stdout
    shards = []
    for i in (1, 2, 3):
        d = tmp_path / ("s%d" % i)
        assert lowbit("gate", "--plugin", PLANTED, *suites, "--shard", "%d/3" % i, "--out", d).returncode in (0, 1)
        shards.append(d)
    merged = lowbit("merge", *shards, "--out", tmp_path / "merged")
    assert merged.returncode == 1, merged.stderr
    assert merged.stdout == whole.stdout
    assert (tmp_path / "merged" / "junit.xml").read_bytes() == (tmp_path / "junit.xml").read_bytes()


def test_gate_shards_record_their_shapes(tmp_path):
    """A gate shard names the --shape / --layout it ran: shards of one shaped run merge into its report, a shard
    of other shapes is foreign."""
    if not PLANTED:
        pytest.skip("LOWBIT_PLANTED_PLUGIN is not set (conformance/cluster.cmake sets it)")
    args = ["--suite", "scheme-mx", "--shape", "3x40,2x64"]
    whole = lowbit("gate", "--plugin", PLANTED, *args)
    for i in (1, 2):
        assert lowbit("gate", "--plugin", PLANTED, *args, "--shard", "%d/2" % i, "--out", tmp_path / str(i)).returncode in (0, 1)
    doc = json.loads((tmp_path / "1" / "shard.json").read_text())
    assert doc["options"]["shapes"] == {"shape": "3x40,2x64", "layout": None}
    merged = lowbit("merge", tmp_path / "1", tmp_path / "2", "--out", tmp_path / "m")
    assert merged.returncode == whole.returncode and merged.stdout == whole.stdout, merged.stderr
    other = tmp_path / "other"
    assert lowbit("gate", "--plugin", PLANTED, "--suite", "scheme-mx", "--shape", "5x40", "--shard", "2/2", "--out",
                  other).returncode in (0, 1)
    refused(lowbit("merge", tmp_path / "1", other, "--out", tmp_path / "m2"), 1,
            "%s: foreign shard: its options.shapes" % other, out=tmp_path / "m2")


# ---- what merge refuses ------------------------------------------------------------------------------------


def test_missing_shard(conform_run, tmp_path):
    _, s = conform_run
    refused(lowbit("merge", s[0], s[2], "--out", tmp_path / "m"), 1, "missing shard 2/3", "sbatch --array=2 ",
            out=tmp_path / "m")


def test_duplicated_shard(conform_run, tmp_path):
    _, s = conform_run
    copy = tmp_path / "copy"
    shutil.copytree(s[1], copy)
    refused(lowbit("merge", s[0], s[1], copy, s[2], "--out", tmp_path / "m"), 1,
            "%s: duplicated shard: 2/3 is also %s" % (copy, s[1]), out=tmp_path / "m")


def test_foreign_shards(conform_run, tmp_path):
    _, s = conform_run
    out = tmp_path / "m"
    # Other options: a shard of a run over other checks.
    other = conform_shard(tmp_path / "other", 2, 3, ["--check", "semantics-rules"])
    refused(lowbit("merge", s[0], other, s[2], "--out", out), 1, "%s: foreign shard: its options.checks" % other,
            out=out)
    # Another count: shard 2 of 4 of the same checks.
    four = conform_shard(tmp_path / "four", 2, 4)
    refused(lowbit("merge", s[0], four, s[2], "--out", out), 1, "of a run in 4 shards", out=out)
    # Another build, another version, another kind (checksums recomputed: consistent but foreign).
    for key, value, words in [("build_id", "sha256:" + "0" * 64, "its build_id"),
                              ("lowbit_version", "9.9.9", "its lowbit_version")]:
        bad = tmp_path / key
        shutil.copytree(s[1], bad)
        rewrite(bad, lambda d: d.__setitem__(key, value))
        refused(lowbit("merge", s[0], bad, s[2], "--out", out), 1, "%s: foreign shard: %s" % (bad, words), out=out)
    old = tmp_path / "old"
    for d in s:
        shutil.copytree(d, old / d.name)
        rewrite(old / d.name, lambda doc: doc.__setitem__("lowbit_version", "0.0.1"))
    refused(lowbit("merge", *(old / d.name for d in s), "--out", out), 1,
            "written by lowbit 0.0.1, this merge is lowbit " + version(), out=out)
    vec = tmp_path / "vec"
    assert lowbit("vectors", "generate", "--suite", "scheme-tensor", "--shard", "2/3", "--out", vec).returncode == 0
    refused(lowbit("merge", s[0], vec, s[2], "--out", out), 1, "%s: foreign shard: its kind" % vec, out=out)


def damaged_copy(src, where, change):
    shutil.copytree(src, where)
    change(where)
    return where


def test_damaged_shards(conform_run, tmp_path):
    _, s = conform_run
    out = tmp_path / "m"

    def append_byte(d):
        with open(d / "shard.json", "a") as f:
            f.write(" ")

    cases = [
        (lambda d: append_byte(d), "shard.json: damaged: its SHA-256 differs"),
        (lambda d: (d / "shard.json.sha256").unlink(), "shard.json.sha256: damaged: missing"),
        (lambda d: rewrite(d, lambda doc: doc["space"][2].__setitem__("begin", doc["space"][2]["begin"] + 1)),
         "damaged: 'round-trip' holds the range"),
        (lambda d: rewrite(d, lambda doc: doc["results"][0].__setitem__("cases", "many")),
         "damaged: shard.json.results[0].cases is not an unsigned integer"),
        (lambda d: rewrite(d, lambda doc: doc.pop("options")), "damaged: shard.json.options is missing"),
        (lambda d: rewrite(d, lambda doc: doc.__setitem__("schema", "lowbit-shard/2")), "foreign: schema"),
    ]
    for k, (change, words) in enumerate(cases):
        bad = damaged_copy(s[1], tmp_path / ("bad%d" % k), change)
        refused(lowbit("merge", s[0], bad, s[2], "--out", out), 1, str(bad), words, out=out)
    # Not JSON, with a checksum that matches.
    bad = tmp_path / "notjson"
    shutil.copytree(s[1], bad)
    text = (bad / "shard.json").read_text()[:40]
    (bad / "shard.json").write_text(text)
    (bad / "shard.json.sha256").write_text(hashlib.sha256(text.encode()).hexdigest() + "  shard.json\n")
    refused(lowbit("merge", s[0], bad, s[2], "--out", out), 1, "damaged: not JSON", out=out)


def test_damaged_vector_shard_files(tmp_path):
    shards = []
    for i in (1, 2):
        d = tmp_path / ("s%d" % i)
        assert lowbit("vectors", "generate", "--suite", "convert-ocp", "--shard", "%d/2" % i, "--out", d).returncode == 0
        shards.append(d)
    out = tmp_path / "m"
    victim = sorted((shards[1] / "files").rglob("*.txt"))[3]
    rel = victim.relative_to(shards[1])
    original = victim.read_bytes()
    victim.write_bytes(original.replace(b" ", b"  ", 1))
    refused(lowbit("merge", *shards, "--out", out), 1, "%s: damaged" % (shards[1] / rel), out=out)
    victim.write_bytes(original[:-1] + (b"0" if original[-2:-1] != b"0" else b"1"))
    refused(lowbit("merge", *shards, "--out", out), 1, "%s: damaged: its SHA-256 differs" % (shards[1] / rel), out=out)
    victim.unlink()
    elsewhere = tmp_path / "elsewhere.txt"
    elsewhere.write_bytes(original)
    victim.symlink_to(elsewhere)
    refused(lowbit("merge", *shards, "--out", out), 1, "damaged: is a symbolic link", out=out)
    victim.unlink()
    victim.write_bytes(original)
    # A path in shard.json that leaves the folder.
    rewrite(shards[1], lambda d: d["files"][0].__setitem__("path", "../../escape.txt"))
    refused(lowbit("merge", *shards, "--out", out), 1, "leaves the shard's files folder", out=out)


def test_unreadable_input_is_exit_2(conform_run, tmp_path):
    _, s = conform_run
    out = tmp_path / "m"
    refused(lowbit("merge", s[0], tmp_path / "absent", s[2], "--out", out), 2, "absent: not a folder", out=out)
    empty = tmp_path / "empty"
    empty.mkdir()
    refused(lowbit("merge", s[0], empty, s[2], "--out", out), 2, "%s: no shard.json" % empty, out=out)
    folder = tmp_path / "folder"
    (folder / "shard.json").mkdir(parents=True)
    refused(lowbit("merge", s[0], folder, s[2], "--out", out), 2, "no shard.json", out=out)
    p = lowbit("merge", *s)
    assert p.returncode == 2 and "--out" in p.stderr


def test_merged_suite_needs_a_new_folder(tmp_path):
    shards = []
    for i in (1, 2):
        d = tmp_path / ("s%d" % i)
        assert lowbit("vectors", "generate", "--suite", "gemm-exact", "--shard", "%d/2" % i, "--out", d).returncode == 0
        shards.append(d)
    out = tmp_path / "taken"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    p = lowbit("merge", *shards, "--out", out)
    assert p.returncode == 2 and "exists and is not an empty folder" in p.stderr
    assert [x.name for x in out.iterdir()] == ["keep.txt"]


# ---- GPU fleets: tools/device-check with a faked nvidia-smi and faked binaries ------------------------------

NODE_A = [("0", "GPU-0a0a0a0a-0000-4000-8000-000000000000", "NVIDIA H200", "570.86.15"),
          ("1", "GPU-1b1b1b1b-1111-4111-8111-111111111111", "NVIDIA H200", "570.86.15")]
NODE_B = [("0", "GPU-2c2c2c2c-2222-4222-8222-222222222222", "NVIDIA H100 80GB HBM3", "565.57.01"),
          ("1", "GPU-3d3d3d3d-3333-4333-8333-333333333333", "NVIDIA H100 80GB HBM3", "565.57.01")]
TESTS = ["lowbit_device_cvt_test", "lowbit_device_quantize_test", "lowbit_device_mma_test", "lowbit_device_gemm_test"]
BENCHES = ["lowbit_device_quantize_bench", "lowbit_device_gemm_bench", "lowbit_device_cvt_bench"]


def fake_node(where, gpus):
    """A PATH folder with an nvidia-smi that answers --query-gpu=... --format=csv for `gpus`."""
    where.mkdir(parents=True)
    smi = where / "nvidia-smi"
    smi.write_text(textwrap.dedent("""\
        #!/usr/bin/env python3
        import sys
        gpus = %r
        cols = {"index": 0, "uuid": 1, "name": 2, "driver_version": 3}
        query = [a.split("=", 1)[1] for a in sys.argv if a.startswith("--query-gpu=")][0].split(",")
        print(", ".join(query))
        for g in gpus:
            print(", ".join(g[cols[q]] if q in cols else "1 MHz" for q in query))
        """ % (gpus,)))
    smi.chmod(0o755)
    return where


@pytest.fixture(scope="module")
def fake_package(tmp_path_factory):
    """Device binaries that record the CUDA_VISIBLE_DEVICES they ran under, failing on FAKE_FAIL's GPU."""
    pkg = tmp_path_factory.mktemp("pkg")
    (pkg / "bin").mkdir()
    for t in TESTS:
        (pkg / "bin" / t).write_text(textwrap.dedent("""\
            #!/usr/bin/env bash
            for a; do case $a in --gtest_output=json:*) out=${a#--gtest_output=json:};; esac; done
            fail=""
            if [[ $CUDA_VISIBLE_DEVICES == "${FAKE_FAIL:-none}" ]]; then fail=', "failures": [{"failure": "planted"}]'; fi
            printf '{"testsuites": [{"name": "%s", "testsuite": [{"name": "on_%%s", "result": "COMPLETED", "time": "0s"%%s}]}]}' \\
              "$CUDA_VISIBLE_DEVICES" "$fail" >"$out"
            [[ -z $fail ]]
            """ % t))
    for b in BENCHES:
        (pkg / "bin" / b).write_text("#!/usr/bin/env bash\necho '{\"visible\": \"'$CUDA_VISIBLE_DEVICES'\"}' >\"$2\"\n")
    for f in (pkg / "bin").iterdir():
        f.chmod(0o755)
    (pkg / "VERSION").write_text(version() + "\n")
    return pkg


def device_task(pkg, node, out, *args, env=None):
    e = {"PATH": "%s:%s" % (node, os.environ["PATH"]), "LOWBIT_DEVICE_PREBUILT": str(pkg)}
    # The task sees the GPUs its scheduler gave it (CUDA_VISIBLE_DEVICES), or all of the node's.
    full = {**{k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"}, **e, **(env or {})}
    return subprocess.run([str(DEVICE_CHECK), *map(str, args), "--out", str(out)], capture_output=True, text=True,
                          env=full)


def test_fleet_report_names_every_gpu_with_its_own_results(fake_package, tmp_path):
    node_a = fake_node(tmp_path / "node-a", NODE_A)
    node_b = fake_node(tmp_path / "node-b", NODE_B)
    # Task 1 on node A: both GPUs, one process each.  Task 2 on node B, where the scheduler gave it GPU 1
    # only, which fails a test.
    t1 = device_task(fake_package, node_a, tmp_path / "t1", "--shard", "1/2", "--per-gpu")
    assert t1.returncode == 0, t1.stdout + t1.stderr
    t2 = device_task(fake_package, node_b, tmp_path / "t2", "--shard", "2/2", "--per-gpu",
                     env={"CUDA_VISIBLE_DEVICES": "1", "FAKE_FAIL": NODE_B[1][1]})
    assert t2.returncode == 1, t2.stdout + t2.stderr
    for t, n in (("t1", 2), ("t2", 1)):
        assert sorted(p.name for p in (tmp_path / t).glob("gpu*.log")) == ["gpu%d.log" % k for k in range(1, n + 1)]

    m = lowbit("merge", tmp_path / "t1", tmp_path / "t2", "--out", tmp_path / "fleet")
    assert m.returncode == 1, m.stderr  # a device test failed on one GPU
    fleet = json.loads((tmp_path / "fleet" / "device-fleet.json").read_text())
    assert fleet["tasks"] == 2 and fleet["passed"] is False
    got = [(g["task"], g["slot"], g["index"], g["uuid"], g["name"], g["driver_version"]) for g in fleet["gpus"]]
    assert got == [(1, 1, "0", NODE_A[0][1], "NVIDIA H200", "570.86.15"),
                   (1, 2, "1", NODE_A[1][1], "NVIDIA H200", "570.86.15"),
                   (2, 1, "1", NODE_B[1][1], "NVIDIA H100 80GB HBM3", "565.57.01")]
    for g in fleet["gpus"]:
        # Each GPU's tests ran in a process that saw that GPU alone.
        assert g["visible"] == g["uuid"]
        assert sorted(t["binary"] for t in g["tests"]) == sorted(TESTS)
        assert {t["name"] for t in g["tests"]} == {"on_" + g["uuid"]}
        failed = {t["result"] for t in g["tests"]} == {"failed"}
        assert failed == (g["uuid"] == NODE_B[1][1])
        assert all(b["visible"] == g["uuid"] for b in g["benchmarks"].values())
    md = (tmp_path / "fleet" / "device-fleet.md").read_text()
    for _, uuid, name, driver in NODE_A + NODE_B[1:]:
        assert uuid in md and name in md and driver in md
    assert NODE_B[0][1] not in md  # the GPU task 2 was not given
    assert "| 2/2 |" in md and "FAILURES" in md


def test_fleet_merge_refuses_a_missing_task_and_a_gpu_reported_twice(fake_package, tmp_path):
    node_a = fake_node(tmp_path / "node-a", NODE_A)
    assert device_task(fake_package, node_a, tmp_path / "t1", "--shard", "1/3").returncode == 0
    # The same GPU again, in task 2 (a second pod placed on the same device).
    assert device_task(fake_package, node_a, tmp_path / "t2", "--shard", "2/3").returncode == 0
    out = tmp_path / "fleet"
    refused(lowbit("merge", tmp_path / "t1", tmp_path / "t2", "--out", out), 1, "missing shard 3/3", out=out)
    assert device_task(fake_package, node_a, tmp_path / "t3", "--shard", "3/3",
                       env={"CUDA_VISIBLE_DEVICES": NODE_A[1][1]}).returncode == 0
    refused(lowbit("merge", tmp_path / "t1", tmp_path / "t2", tmp_path / "t3", "--out", out), 1,
            "duplicated GPU: " + NODE_A[0][1], out=out)


def test_fleet_task_without_a_gpu_stores_nothing(fake_package, tmp_path):
    empty = fake_node(tmp_path / "node-empty", [])
    p = device_task(fake_package, empty, tmp_path / "t1", "--shard", "1/1", "--per-gpu")
    assert p.returncode == 2 and "no GPU to run on" in p.stdout + p.stderr
    assert not (tmp_path / "t1" / "shard.json").exists()
    node_a = fake_node(tmp_path / "node-a", NODE_A)
    p = device_task(fake_package, node_a, tmp_path / "t2", "--shard", "1/1", env={"CUDA_VISIBLE_DEVICES": "7"})
    assert p.returncode == 2 and "CUDA_VISIBLE_DEVICES=7" in p.stdout + p.stderr
