"""The shell commands of docs/ci.md's CI jobs (ctest install_ci_gate_job, quick tier): both YAML blocks run
the same commands, and the gate job's commands pass on the package of the build under test and build,
gate and report as docs/ci.md says.  The YAML itself is not run (docs/ci.md, "What is tested").  The
package job's commands are test_ci_package_job.py's (full tier)."""
import pathlib

import install_helpers as h

JOBS = ("lowbit-package", "gate")


def test_github_and_gitlab_jobs_run_the_same_commands():
    for job in JOBS:
        commands = h.ci_job_commands(job)
        assert commands["github"], job
        assert commands["github"] == commands["gitlab"], job
    # Both name the lowbit checkout the package job builds (the repository's address is each host's own).
    variables = h.ci_variables()
    for key in ("github", "gitlab"):
        assert {"LOWBIT_REPO", "LOWBIT_REF"} <= set(variables[key]), (key, variables[key])
    assert variables["github"]["LOWBIT_REF"] == variables["gitlab"]["LOWBIT_REF"]


def test_the_package_job_ends_with_the_package_the_gate_job_installs():
    package, gate = (h.ci_job_commands(job)["github"] for job in JOBS)
    assert package[-1] == "cpack --config lowbit/build/CPackConfig.cmake -B lowbit-deb"
    assert any(c.startswith("apt-get install") and "./lowbit-deb/lowbit_*.deb" in c for c in gate), gate


def run_gate_job(scratch):
    """The gate job's commands in `scratch`, where lowbit-deb/ holds a package; asserts that they pass and
    that the gate compared f32 -> bf16 and wrote its JUnit file."""
    scratch = pathlib.Path(scratch)
    h.copy_plugin_source(scratch / "plugin" / "mykernel.c")
    env = h.ci_environment(scratch, {})
    done = h.run_ci_commands(h.ci_job_commands("gate")["github"], scratch, env, timeout=600)
    for command, p in done:
        assert p.returncode == 0, f"{command}\nexit {p.returncode}\n{p.stdout}\n{p.stderr}"
    assert len(done) == len(h.ci_job_commands("gate")["github"])
    # The installed lowbit ran (the stand-in root's), on the plugin the job compiled.
    gate_command, gate = done[-1]
    assert gate_command.startswith("lowbit gate ")
    assert (scratch / "root" / "usr" / "bin" / "lowbit").is_file()
    h.assert_gate_passed(gate, scratch / "lowbit-gate.xml", "consumer-bf16")


def test_the_gate_job(tmp_path):
    h.build_deb(tmp_path / "lowbit-deb")
    run_gate_job(tmp_path)


def test_the_gate_job_fails_on_a_mismatch(tmp_path):
    """A plugin one ulp off fails the job (exit 1) and the JUnit file names the failing unit."""
    h.build_deb(tmp_path / "lowbit-deb")
    source = (h.CONSUMER / "plugin.c").read_text()
    wrong = source.replace("return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);",
                           "return (uint16_t)((u + 0x8000u) >> 16); /* ties away from zero */")
    assert wrong != source
    (tmp_path / "plugin").mkdir()
    (tmp_path / "plugin" / "mykernel.c").write_text(wrong)
    env = h.ci_environment(tmp_path, {})
    commands = h.ci_job_commands("gate")["github"]
    done = h.run_ci_commands(commands, tmp_path, env, timeout=600)
    assert [c for c, _ in done] == commands
    assert [p.returncode for _, p in done] == [0] * (len(commands) - 1) + [1], done[-1][1].stdout
    tests, failures, errors, skipped = h.junit_totals(tmp_path / "lowbit-gate.xml")
    assert failures == 1 and errors == 0, (tests, failures, errors, skipped)
    assert "bf16/rne-nosat-keep-after/f32.txt" in (tmp_path / "lowbit-gate.xml").read_text()
