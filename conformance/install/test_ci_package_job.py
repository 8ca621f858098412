"""docs/ci.md's package job, command for command (ctest install_ci_package_job, full tier: a fresh build of
lowbit): LOWBIT_REPO is a scratch repository holding the current commit (uncommitted changes are not in
it), and apt-get the stand-in of install_helpers.py.  The gate job then runs on the package it wrote."""

import install_helpers as h
from test_ci_jobs import run_gate_job


def test_the_package_job_then_the_gate_job(tmp_path):
    repo = tmp_path / "lowbit.git"
    h.run(["git", "init", "--quiet", "--bare", repo])
    h.run(["git", "-C", h.SOURCE, "push", "--quiet", repo, "HEAD:refs/heads/lowbit-ci-test"])
    env = h.ci_environment(tmp_path, {"LOWBIT_REPO": f"file://{repo}", "LOWBIT_REF": "lowbit-ci-test"})
    done = h.run_ci_commands(h.ci_job_commands("lowbit-package")["github"], tmp_path, env, timeout=3600)
    for command, p in done:
        assert p.returncode == 0, f"{command}\nexit {p.returncode}\n{p.stdout}\n{p.stderr}"
    head = h.run(["git", "-C", h.SOURCE, "rev-parse", "HEAD"]).stdout.strip()
    assert h.run(["git", "-C", tmp_path / "lowbit", "rev-parse", "HEAD"]).stdout.strip() == head
    assert [d.name for d in (tmp_path / "lowbit-deb").glob("*.deb")] == [f"lowbit_{h.VERSION}_{h.deb_arch()}.deb"]
    run_gate_job(tmp_path)
