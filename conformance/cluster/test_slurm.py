"""A sharded `lowbit conform` on a real one-node Slurm (tools/slurm/local-cluster): a 4-task job array of a
reduced sweep (tools/slurm/lowbit-shard.sbatch), waited for and merged with `lowbit merge`, gives the report
of the unsharded run, byte for byte apart from the timings (timings.py); then a task killed mid-run
(suspended while running, so that it is caught mid-run for certain, then cancelled) leaves its shard
missing, the merge refuses (exit 1, naming shard 2/4 and the array index to resubmit) and writes nothing,
and resubmitting only that index completes the run.

Needs Debian's slurm-wlm and munge (scripts/setup.sh installs them); without them the test is skipped,
saying so.  CTest label `cluster` (conformance/README.md gives its tier and measured time).
"""
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from timings import report_files

LOWBIT = os.environ.get("LOWBIT", "lowbit")
ROOT = Path(__file__).resolve().parents[2]
LOCAL_CLUSTER = ROOT / "tools" / "slurm" / "local-cluster"
SHARD_SCRIPT = ROOT / "tools" / "slurm" / "lowbit-shard.sbatch"
# The reduced sweep: a table of peer cases, every code of every format of at most 16 bits, and the
# stochastic sweep (long enough per task to be caught running).
SWEEP = ["conform", "--tier", "quick", "--check", "semantics-peer-cases", "--check", "round-trip",
         "--check", "stochastic"]
TOOLS = ["munged", "slurmctld", "slurmd", "sbatch", "squeue", "scontrol", "scancel"]


def have(tool):
    return shutil.which(tool) or os.path.exists("/usr/sbin/" + tool)


@pytest.fixture
def slurm(tmp_path):
    missing = [t for t in TOOLS if not have(t)]
    if missing:
        pytest.skip("Slurm is not installed here (no %s; scripts/setup.sh installs slurm-wlm and munge)"
                    % ", ".join(missing))
    where = tmp_path / "slurm"
    p = subprocess.run([str(LOCAL_CLUSTER), "start", str(where)], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    env = {**os.environ, "SLURM_CONF": str(where / "slurm.conf"), "PATH": os.environ["PATH"] + ":/usr/sbin"}
    try:
        yield env
    finally:
        subprocess.run([str(LOCAL_CLUSTER), "stop", str(where)], check=False, capture_output=True)


def slurm_cmd(env, *args, check=True):
    p = subprocess.run(list(args), env=env, capture_output=True, text=True, check=False)
    if check:
        assert p.returncode == 0, "%s: %s %s" % (" ".join(args), p.stdout, p.stderr)
    return p


def submit(env, array, results, logs):
    p = slurm_cmd(env, "sbatch", "--parsable", "--array=" + array, "-o", str(logs / "%A_%a.out"),
                  str(SHARD_SCRIPT), "4", str(results), LOWBIT, *SWEEP)
    return p.stdout.strip().split(";")[0]


def tasks(env, job):
    """{array index: (state, exit code)} of a job array, from scontrol (no accounting database here)."""
    p = slurm_cmd(env, "scontrol", "-o", "show", "job", job)
    out = {}
    for line in p.stdout.splitlines():
        index = re.search(r"\bArrayTaskId=(\S+)", line)
        state = re.search(r"\bJobState=(\S+)", line)
        code = re.search(r"\bExitCode=(\S+)", line)
        if index and state:
            out[index.group(1)] = (state.group(1), code.group(1) if code else "")
    return out


def wait(env, job, timeout=600):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not slurm_cmd(env, "squeue", "-h", "-j", job, check=False).stdout.strip():
            return tasks(env, job)
        time.sleep(0.2)
    pytest.fail("job %s still queued after %d s" % (job, timeout))


def merge(out, *dirs):
    return subprocess.run([LOWBIT, "merge", *map(str, dirs), "--out", str(out)], capture_output=True, text=True)


def results_of(folder):
    return sorted(folder.glob("shard-*-of-4"))


def catch_task_running(env, job, index, logs, timeout=300):
    """Suspend array task `index` once lowbit runs in it: True, or False when it ended first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        state = tasks(env, job).get(index, ("PENDING", ""))[0]
        log = logs / ("%s_%s.out" % (job, index))
        if state == "RUNNING" and log.exists() and "[1/3]" in log.read_text(errors="replace"):
            return slurm_cmd(env, "scontrol", "suspend", "%s_%s" % (job, index), check=False).returncode == 0
        if state not in ("PENDING", "RUNNING", "CONFIGURING"):
            return False
        time.sleep(0.05)
    pytest.fail("task %s of job %s did not start within %d s" % (index, job, timeout))


def test_job_array_merges_into_the_unsharded_report_and_recovers_a_killed_task(slurm, tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    # The unsharded run, for comparison (outside Slurm; same --out depth as the merges, so the report's
    # relative link to the accuracy report is the same).
    unsharded = tmp_path / "unsharded"
    p = subprocess.run([LOWBIT, *SWEEP, "--out", str(unsharded)], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    expected = report_files(unsharded)
    assert "| round-trip | quick | 675920 | 0 | <timing> | ok |" in expected["conformance.md"]

    # A 4-task array, waited for and merged.
    run1 = tmp_path / "run1"
    job = submit(slurm, "1-4", run1, logs)
    states = wait(slurm, job)
    assert states == {str(i): ("COMPLETED", "0:0") for i in range(1, 5)}, states
    assert [d.name for d in results_of(run1)] == ["shard-%d-of-4" % i for i in range(1, 5)]
    merged = tmp_path / "merged1"
    m = merge(merged, *results_of(run1))
    assert m.returncode == 0, m.stderr
    assert "conformant (merged from 4 shards, quick tier" in m.stdout
    assert report_files(merged) == expected

    # The fault: task 2 of a new array is caught running and cancelled; the others complete.
    for attempt in range(3):
        run2 = tmp_path / ("run2-%d" % attempt)
        job = submit(slurm, "1-4", run2, logs)
        caught = catch_task_running(slurm, job, "2", logs)
        if caught:
            assert tasks(slurm, job)["2"][0] == "SUSPENDED"
            # A stopped process would hold SIGTERM until resumed: SIGKILL every process of the task (the
            # batch shell too, --full), then cancel it.
            slurm_cmd(slurm, "scancel", "--signal=KILL", "--full", "%s_2" % job)
            slurm_cmd(slurm, "scancel", "%s_2" % job, check=False)
        states = wait(slurm, job)
        if caught:
            break
    else:
        pytest.fail("task 2 ended before it could be caught running, three times")
    assert states["2"][0] == "CANCELLED", states
    assert all(states[i] == ("COMPLETED", "0:0") for i in "134"), states
    assert [d.name for d in results_of(run2)] == ["shard-1-of-4", "shard-3-of-4", "shard-4-of-4"]

    # The merge refuses, naming the missing shard and the index to resubmit, and writes nothing.
    merged = tmp_path / "merged2"
    m = merge(merged, *results_of(run2))
    assert m.returncode == 1, m.stderr
    assert "missing shard 2/4" in m.stderr and "sbatch --array=2 " in m.stderr, m.stderr
    assert not merged.exists()

    # Only the missing index, resubmitted with the same arguments, completes the run.
    job = submit(slurm, "2", run2, logs)
    assert wait(slurm, job) == {"2": ("COMPLETED", "0:0")}
    m = merge(merged, *results_of(run2))
    assert m.returncode == 0, m.stderr
    assert report_files(merged) == expected
