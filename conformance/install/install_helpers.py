"""Shared by the installation tests (conformance/install.cmake registers them): the build under test, the
scratch install, the Debian package and its unpacked tree, the consumer project, and the jobs of docs/ci.md.

The build directory, source tree and tools come from the environment that ctest sets:
LOWBIT_SOURCE_DIR, LOWBIT_BUILD_DIR, LOWBIT_CMAKE, LOWBIT_CPACK, LOWBIT_CMAKE_GENERATOR, LOWBIT_CC,
LOWBIT_CXX.
"""
import json
import os
import pathlib
import re
import shutil
import stat
import subprocess
import xml.etree.ElementTree as ET

SOURCE = pathlib.Path(os.environ["LOWBIT_SOURCE_DIR"])
BUILD = pathlib.Path(os.environ["LOWBIT_BUILD_DIR"])
CMAKE = os.environ.get("LOWBIT_CMAKE", "cmake")
CPACK = os.environ.get("LOWBIT_CPACK", "cpack")
GENERATOR = os.environ.get("LOWBIT_CMAKE_GENERATOR", "")
CONSUMER = SOURCE / "conformance" / "install" / "consumer"
VERSION = re.search(r"project\(lowbit VERSION ([0-9.]+)", (SOURCE / "CMakeLists.txt").read_text()).group(1)

# What the consumer prints (consumer.cpp): f32 into e4m3 (OCP FP8 v1.0: max 448 = 0x7e, 0x7f is NaN) under
# rne without saturation.  448 is exact; 464 is the midpoint between 448 and 480 (beyond max), a tie that
# goes to the even 448; 465 lies above it and overflows (NaN: e4m3 has no infinity); 0.3 rounds to
# 0.3125 = 0x2a (5/4 * 2^-2); 2^-10 is half of the smallest subnormal 2^-9, a tie that goes to the even zero.
CONSUMER_LINES = [
    "0x43e00000 -> 0x7e - 448",
    "0x43e80000 -> 0x7e inexact 448",
    "0x43e88000 -> 0x7f inexact,overflow nan",
    "0x3e99999a -> 0x2a inexact 0.3125",
    "0x3a800000 -> 0x00 inexact,underflow 0",
]
# consumer_elements.cpp: 1.5 = 1.1b * 2^0 is 0 0111 100 in e4m3 (bias 7).
ELEMENTS_LINES = ["1.5 -> 0x3c"]


def run(args, *, cwd=None, env=None, check=True, timeout=600):
    """Run a command; its exit status, stdout and stderr.  A failure shows all three."""
    p = subprocess.run([str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    if check and p.returncode != 0:
        raise AssertionError(f"{' '.join(map(str, args))} exited {p.returncode}\nstdout:\n{p.stdout}\nstderr:\n{p.stderr}")
    return p


def install_prefix(prefix):
    """`cmake --install` into `prefix`, as README.md shows it (every component but the Python package's)."""
    run([CMAKE, "--install", BUILD, "--prefix", prefix])


def build_deb(out_dir):
    """The Debian package of the build under test, written by cpack into `out_dir`; its path."""
    run([CPACK, "--config", BUILD / "CPackConfig.cmake", "-G", "DEB", "-B", out_dir])
    debs = sorted(pathlib.Path(out_dir).glob("*.deb"))
    assert [d.name for d in debs] == [f"lowbit_{VERSION}_{deb_arch()}.deb"], debs
    return debs[0]


def deb_arch():
    return run(["dpkg", "--print-architecture"]).stdout.strip()


def unpack_deb(deb, root):
    run(["dpkg-deb", "-x", deb, root])
    return pathlib.Path(root)


def configure_consumer(build_dir, prefix_path, *extra, check=True):
    args = [CMAKE, "-S", CONSUMER, "-B", build_dir, f"-DCMAKE_PREFIX_PATH={prefix_path}",
            "-DCMAKE_BUILD_TYPE=Release", *extra]
    if GENERATOR:
        args += ["-G", GENERATOR]
    for var, lang in (("LOWBIT_CC", "C"), ("LOWBIT_CXX", "CXX")):
        if os.environ.get(var):
            args.append(f"-DCMAKE_{lang}_COMPILER={os.environ[var]}")
    return run(args, check=check)


def build_and_run_consumer(build_dir, prefix):
    """Configure the consumer project against `prefix` alone, build it, run its programs; its configure
    output.  Asserts that lowbit was found under `prefix` with include directories there."""
    prefix = pathlib.Path(prefix).resolve()
    configured = configure_consumer(build_dir, prefix).stdout
    found = re.search(r"consumer: lowbit (\S+) from (\S+)", configured)
    assert found, configured
    assert found.group(1) == VERSION
    assert pathlib.Path(found.group(2)).resolve() == prefix / "lib" / "cmake" / "lowbit"
    includes = re.search(r"consumer: lowbit::reference includes (\S+)", configured).group(1)
    assert [pathlib.Path(i).resolve() for i in includes.split(";")] == [prefix / "include"]
    run([CMAKE, "--build", build_dir])
    assert run([pathlib.Path(build_dir) / "consumer"]).stdout.splitlines() == CONSUMER_LINES
    assert run([pathlib.Path(build_dir) / "consumer_elements"]).stdout.splitlines() == ELEMENTS_LINES
    return configured


def junit_totals(path):
    """tests, failures, errors, skipped of a JUnit file's <testsuites> root (ElementTree parses it: a
    malformed file fails here)."""
    root = ET.parse(path).getroot()
    assert root.tag == "testsuites", root.tag
    return tuple(int(root.get(k)) for k in ("tests", "failures", "errors", "skipped"))


def assert_gate_passed(proc, junit, plugin_name):
    """The gate of the consumer plugin on convert-ocp: exit 0, f32 -> bf16 compared, the rest skipped."""
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith(f"plugin: {plugin_name} "), lines
    m = re.fullmatch(r"convert-ocp: (\d+) cases in 1 unit\(s\), (\d+) skipped, 0 mismatches  ok", lines[1])
    assert m and int(m.group(1)) > 0, lines
    assert lines[2] == f"all match: 1 suite(s), {m.group(1)} cases, 0 mismatches", lines
    tests, failures, errors, skipped = junit_totals(junit)
    assert (failures, errors) == (0, 0) and tests == skipped + 1, (tests, failures, errors, skipped)


def make_executable(path, text):
    path = pathlib.Path(path)
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


# ---- docs/ci.md ----------------------------------------------------------------------------------------

def ci_blocks():
    """The two YAML blocks of docs/ci.md: {"github": text, "gitlab": text}, told apart by their first line."""
    text = (SOURCE / "docs" / "ci.md").read_text()
    blocks = {}
    for block in re.findall(r"^```yaml\n(.*?)^```$", text, re.S | re.M):
        first = block.splitlines()[0]
        key = "github" if ".github/workflows/" in first else "gitlab" if ".gitlab-ci.yml" in first else None
        assert key and key not in blocks, first
        blocks[key] = block
    assert set(blocks) == {"github", "gitlab"}, blocks.keys()
    return blocks


def _indent(line):
    return len(line) - len(line.lstrip(" "))


def _section(lines, key, indent):
    """The lines of the mapping entry `key:` at `indent` (up to the next line at that indentation or less)."""
    for i, line in enumerate(lines):
        if _indent(line) == indent and line.strip() == f"{key}:":
            end = i + 1
            while end < len(lines) and (not lines[end].strip() or _indent(lines[end]) > indent):
                end += 1
            return lines[i + 1:end]
    raise AssertionError(f"docs/ci.md: no '{key}:' at indentation {indent}")


def _strip_comment(value):
    return re.sub(r"\s+#\s.*$", "", value).strip()


def ci_job_commands(job):
    """The shell commands of `job` ("lowbit-package" or "gate") in each YAML block, in order:
    {"github": [...], "gitlab": [...]}.  GitHub: every `run:` of the job's steps (a `|` block gives one
    command per line); GitLab: the job's `script:` items."""
    blocks = ci_blocks()
    gh = blocks["github"].splitlines()
    steps = _section(_section(_section(gh, "jobs", 0), job, 2), "steps", 4)
    github = []
    for i, line in enumerate(steps):
        m = re.match(r"^(\s*)(?:- )?run: (.*)$", line)
        if not m:
            continue
        value = m.group(2).strip()
        if value == "|":
            body_indent = None
            for body in steps[i + 1:]:
                if not body.strip():
                    continue
                body_indent = body_indent or _indent(body)
                if _indent(body) < body_indent:
                    break
                github.append(body.strip())
        else:
            github.append(_strip_comment(value))
    gl = blocks["gitlab"].splitlines()
    gitlab = [re.sub(r"^- ", "", l.strip()) for l in _section(_section(gl, job, 0), "script", 2) if l.strip()]
    return {"github": github, "gitlab": gitlab}


def ci_variables():
    """LOWBIT_REPO and LOWBIT_REF as both blocks name them (GitHub `env:`, GitLab `variables:`)."""
    out = {}
    for key, section in (("github", "env"), ("gitlab", "variables")):
        lines = _section(ci_blocks()[key].splitlines(), section, 0)
        out[key] = {l.split(":", 1)[0].strip(): _strip_comment(l.split(":", 1)[1]) for l in lines if l.strip()}
    return out


APT_GET_STAND_IN = r"""#!/usr/bin/env bash
# apt-get as the docs/ci.md tests run it, without root or network: `update` does nothing; `install` checks
# that every named Debian package is installed here and unpacks every .deb argument into $LOWBIT_CI_ROOT.
set -euo pipefail
case ${1:-} in
  update) exit 0 ;;
  install) shift ;;
  *) echo "apt-get stand-in: '${1:-}' is not something the CI jobs may run" >&2; exit 2 ;;
esac
for a in "$@"; do
  case $a in
    -y | --no-install-recommends) ;;
    -*) echo "apt-get stand-in: unexpected option $a" >&2; exit 2 ;;
    *.deb) dpkg-deb -x "$a" "$LOWBIT_CI_ROOT" ;;
    *)
      if ! dpkg-query -W -f='${Status}' "$a" 2>/dev/null | grep -q 'ok installed'; then
        echo "apt-get stand-in: Debian package '$a' is not installed on this machine" >&2
        exit 100
      fi ;;
  esac
done
"""


def ci_environment(scratch, variables):
    """The environment of a CI job's commands: the apt-get stand-in first on PATH, the scratch root's
    usr/bin and usr/include where /usr/bin and /usr/include would be, and the job's variables."""
    scratch = pathlib.Path(scratch)
    shims = scratch / "shims"
    shims.mkdir(exist_ok=True)
    make_executable(shims / "apt-get", APT_GET_STAND_IN)
    root = scratch / "root"
    root.mkdir(exist_ok=True)
    env = dict(os.environ)
    env.update(variables)
    env["LOWBIT_CI_ROOT"] = str(root)
    env["PATH"] = os.pathsep.join([str(shims), str(root / "usr" / "bin"), env["PATH"]])
    env["CPATH"] = os.pathsep.join(p for p in [str(root / "usr" / "include"), env.get("CPATH", "")] if p)
    return env


def run_ci_commands(commands, cwd, env, timeout):
    """Each command through bash, as the runners do, stopping at the first that fails; the list of
    (command, CompletedProcess)."""
    done = []
    for c in commands:
        p = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", c], cwd=cwd, env=env, capture_output=True,
                           text=True, timeout=timeout)
        done.append((c, p))
        if p.returncode != 0:
            break
    return done


def copy_plugin_source(dest):
    dest = pathlib.Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(CONSUMER / "plugin.c", dest)


def load_json(path):
    return json.loads(pathlib.Path(path).read_text())
