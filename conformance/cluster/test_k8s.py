"""The Kubernetes manifests of tools/k8s/, checked structurally with PyYAML and their pod scripts run here.

No cluster runs them (Debian 12's kubernetes-client is 1.20, older than Indexed Jobs, which are stable
from Kubernetes 1.24; tools/k8s/README.md).  What is checked: each sharded Job is batch/v1 with
`completionMode: Indexed`, parallelism within completions and within Kubernetes' and lowbit's bound of
10^5, SHARDS equal to completions, RESULTS equal to the shared volume's mountPath, the volume a
ReadWriteMany claim defined beside it, GPU limits on the device Job; and the pod script itself, run by
/bin/sh for every JOB_COMPLETION_INDEX with a stand-in lowbit that records its arguments, passes
--shard I/N with I = index + 1, stores each finished shard under RESULTS and nothing for a failed one.
"""
import os
import subprocess
import textwrap
from pathlib import Path

import pytest

yaml = pytest.importorskip("yaml", reason="PyYAML is pinned in requirements.txt (scripts/setup.sh installs it)")

K8S = Path(__file__).resolve().parents[2] / "tools" / "k8s"


def documents(name):
    with open(K8S / name) as f:
        return [d for d in yaml.safe_load_all(f) if d is not None]


def job(name):
    jobs = [d for d in documents(name) if d.get("kind") == "Job"]
    assert len(jobs) == 1, name
    return jobs[0]


def container(j):
    cs = j["spec"]["template"]["spec"]["containers"]
    assert len(cs) == 1
    return cs[0]


def env(c):
    return {e["name"]: e["value"] for e in c.get("env", [])}


def script(c):
    assert c["command"] == ["/bin/sh", "-c"]
    assert len(c["args"]) == 1
    return c["args"][0]


def claim():
    claims = [d for d in documents("lowbit-conform-job.yaml") if d.get("kind") == "PersistentVolumeClaim"]
    assert len(claims) == 1
    return claims[0]


SHARDED = ["lowbit-conform-job.yaml", "lowbit-device-job.yaml"]


@pytest.mark.parametrize("name", SHARDED)
def test_sharded_job_is_an_indexed_batch_v1_job(name):
    j = job(name)
    assert j["apiVersion"] == "batch/v1" and j["kind"] == "Job"
    spec = j["spec"]
    assert spec["completionMode"] == "Indexed"
    completions, parallelism = spec["completions"], spec["parallelism"]
    assert isinstance(completions, int) and isinstance(parallelism, int)
    assert 1 <= parallelism <= completions <= 100000
    assert spec["template"]["spec"]["restartPolicy"] == "Never"
    c = container(j)
    assert env(c)["SHARDS"] == str(completions)
    # RESULTS is where the shared claim is mounted.
    volumes = {v["name"]: v for v in spec["template"]["spec"]["volumes"]}
    mounts = {m["mountPath"]: m["name"] for m in c["volumeMounts"]}
    assert env(c)["RESULTS"] in mounts
    volume = volumes[mounts[env(c)["RESULTS"]]]
    assert volume["persistentVolumeClaim"]["claimName"] == claim()["metadata"]["name"]
    assert "JOB_COMPLETION_INDEX" in script(c)


def test_results_claim_is_shared_by_many_nodes():
    c = claim()
    assert c["apiVersion"] == "v1"
    assert c["spec"]["accessModes"] == ["ReadWriteMany"]


def test_device_job_requests_gpus_and_runs_every_gpu():
    c = container(job("lowbit-device-job.yaml"))
    gpus = c["resources"]["limits"]["nvidia.com/gpu"]
    assert isinstance(gpus, int) and gpus >= 1
    assert "tools/device-check --shard" in script(c) and "--per-gpu" in script(c)
    assert env(c)["LOWBIT_DEVICE_PREBUILT"]


def test_merge_job_joins_the_conform_shards():
    m = job("lowbit-merge-job.yaml")
    assert m["apiVersion"] == "batch/v1" and "completionMode" not in m["spec"]
    c = container(m)
    sharded = container(job("lowbit-conform-job.yaml"))
    assert env(c)["SHARDS"] == env(sharded)["SHARDS"] and env(c)["RESULTS"] == env(sharded)["RESULTS"]
    assert "lowbit merge" in script(c)


STAND_IN = textwrap.dedent("""\
    #!/bin/sh
    # Records its arguments; writes a result folder at --out unless FAIL is set.
    echo "$*" >>"$CALLS"
    [ -z "${FAIL:-}" ] || exit 2
    out=""
    prev=""
    for a in "$@"; do
      [ "$prev" = "--out" ] && out=$a
      prev=$a
    done
    mkdir -p "$out"
    echo "{}" >"$out/shard.json"
    echo "sum  shard.json" >"$out/shard.json.sha256"
    exit "${EXIT:-0}"
    """)


def pod(name, index, tmp_path, extra=None):
    """Run the Job's pod script for one completion index, with `lowbit` (and tools/device-check) stood in."""
    c = container(job(name))
    bin_dir = tmp_path / "bin"
    work = tmp_path / "work"
    for tool in (bin_dir / "lowbit", work / "tools" / "device-check"):
        tool.parent.mkdir(parents=True, exist_ok=True)
        tool.write_text(STAND_IN)
        tool.chmod(0o755)
    e = {"PATH": "%s:%s" % (bin_dir, os.environ["PATH"]), "JOB_COMPLETION_INDEX": str(index),
         "HOSTNAME": "%s-%d" % (job(name)["metadata"]["name"], index), "CALLS": str(tmp_path / "calls"),
         **env(c), "RESULTS": str(tmp_path / "results"), **(extra or {})}
    return subprocess.run(["/bin/sh", "-c", script(c)], cwd=work, env=e, capture_output=True, text=True)


@pytest.mark.parametrize("name,command", [("lowbit-conform-job.yaml", "conform --tier full"),
                                          ("lowbit-device-job.yaml", "--per-gpu")])
def test_each_index_runs_its_shard_and_stores_it(name, command, tmp_path):
    n = job(name)["spec"]["completions"]
    for index in range(n):
        p = pod(name, index, tmp_path)
        assert p.returncode == 0, p.stderr
    calls = (tmp_path / "calls").read_text().splitlines()
    assert len(calls) == n
    for index, call in enumerate(calls):
        assert "--shard %d/%d " % (index + 1, n) in call and command in call
        assert "--out %s/.partial/shard-%d-of-%d." % (tmp_path / "results", index + 1, n) in call
    stored = sorted(p.name for p in (tmp_path / "results").iterdir() if not p.name.startswith("."))
    assert stored == sorted("shard-%d-of-%d" % (i, n) for i in range(1, n + 1))
    assert list((tmp_path / "results" / ".partial").iterdir()) == []


def test_a_failed_pod_stores_nothing_and_fails_and_mismatches_are_stored(tmp_path):
    name = "lowbit-conform-job.yaml"
    p = pod(name, 2, tmp_path, {"FAIL": "1"})
    assert p.returncode == 2
    assert not (tmp_path / "results" / "shard-3-of-16").exists()
    # Exit 1 is a finished shard that found mismatches: stored, and the pod succeeds (the merge reports them).
    p = pod(name, 2, tmp_path, {"EXIT": "1"})
    assert p.returncode == 0
    assert (tmp_path / "results" / "shard-3-of-16" / "shard.json").exists()


def test_merge_pod_passes_every_stored_shard(tmp_path):
    name = "lowbit-conform-job.yaml"
    n = job(name)["spec"]["completions"]
    for index in range(n):
        assert pod(name, index, tmp_path).returncode == 0
    (tmp_path / "calls").unlink()
    assert pod("lowbit-merge-job.yaml", 0, tmp_path).returncode == 0
    call = (tmp_path / "calls").read_text().split()
    results = tmp_path / "results"
    assert call[0] == "merge" and call[-2:] == ["--out", str(results / "merged")]
    assert sorted(call[1:-2]) == sorted(str(results / ("shard-%d-of-%d" % (i, n))) for i in range(1, n + 1))
