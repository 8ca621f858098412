"""`cmake --install` into a scratch prefix, and a project that finds it with find_package(lowbit)
(ctest install_consumer, quick tier)."""
import pathlib

import install_helpers as h


def test_find_package_builds_and_runs_the_consumer(tmp_path):
    prefix = tmp_path / "prefix"
    h.install_prefix(prefix)
    # The installed CMake package is relocatable: it names neither the source tree nor the build tree.
    for f in (prefix / "lib" / "cmake" / "lowbit").iterdir():
        text = f.read_text()
        assert str(h.SOURCE) not in text and str(h.BUILD) not in text, f
    configured = h.build_and_run_consumer(tmp_path / "consumer", prefix)
    assert f"consumer: lowbit_EXECUTABLE {prefix.resolve() / 'bin' / 'lowbit'}" in configured
    # The plugin built against lowbit::plugin, gated by the installed command line.
    junit = tmp_path / "gate.xml"
    gate = h.run([prefix / "bin" / "lowbit", "gate", "--plugin", tmp_path / "consumer" / "libconsumer_plugin.so",
                  "--suite", "convert-ocp", "--junit", junit], check=False)
    h.assert_gate_passed(gate, junit, "consumer-bf16")


def test_a_newer_major_version_is_not_found(tmp_path):
    prefix = tmp_path / "prefix"
    h.install_prefix(prefix)
    major = int(h.VERSION.split(".")[0])
    p = h.configure_consumer(tmp_path / "consumer", prefix.resolve(), f"-DLOWBIT_REQUIRED_VERSION={major + 1}.0",
                             check=False)
    assert p.returncode != 0
    assert f'compatible\n  with requested version "{major + 1}.0"' in p.stderr, p.stderr
    assert f"lowbit/lowbitConfig.cmake, version: {h.VERSION}" in p.stderr, p.stderr


def test_the_installed_files(tmp_path):
    prefix = tmp_path / "prefix"
    h.install_prefix(prefix)
    headers = {p.name for p in (h.SOURCE / "reference" / "include" / "lowbit").glob("*.hpp")} | {"plugin.h"}
    assert {p.name for p in (prefix / "include" / "lowbit").iterdir()} == headers
    suites = sorted(p.name for p in (h.SOURCE / "vectors" / "golden").iterdir() if p.is_dir())
    golden = prefix / "share" / "lowbit" / "vectors" / "golden"
    assert sorted(p.name for p in golden.iterdir()) == suites
    for name in ("bin/lowbit", "lib/liblowbit_reference.a", "share/lowbit/vectors/SPEC.md",
                 "share/lowbit/report/render.py", "share/doc/lowbit/accuracy/index.html"):
        assert (prefix / name).is_file(), name
    # Nothing else: the Python package's files (component python) are the wheel's alone.
    assert sorted(p.name for p in prefix.iterdir()) == ["bin", "include", "lib", "share"]
    assert sorted(p.name for p in (prefix / "bin").iterdir()) == ["lowbit"]
