"""The Debian package that cpack writes from the build under test: its control fields and files, and the
unpacked tree used with no source tree (ctest install_package, quick tier; the whole quick tier of
`lowbit conform` from the unpacked tree is test_package_conform.py, full tier)."""
import pathlib
import re
import sys

import pytest

import install_helpers as h

# The Debian 12 packages that hold the shared libraries the `lowbit` executable links (dpkg -S on each
# library that ldd lists: libc.so.6 and libm.so.6 are libc6's, libgcc_s.so.1 libgcc-s1's, libgmp.so.10
# libgmp10's, libhwy.so.1 libhwy1's, libstdc++.so.6 libstdc++6's, libtbb.so.12 libtbb12's, libopenblas.so.0
# one of OpenBLAS's three builds, which its shlibs file names by their common package libopenblas0).
DEBIAN_12_DEPENDS = {"libc6", "libgcc-s1", "libgmp10", "libhwy1", "libmpfr6", "libstdc++6", "libtbb12", "libopenblas0"}
# OpenBLAS's shlibs file (Debian 12) gives no minimum version, and names the package that stands for its
# pthread, OpenMP and serial builds, one of which holds the library ldd finds.
UNVERSIONED = {"libopenblas0"}
# Loaded only through OpenBLAS (its Fortran runtime), so OpenBLAS's package brings them: not lowbit's Depends.
THROUGH_OPENBLAS = {"libgfortran5", "libquadmath0"}
BUILD_OF = {"libopenblas0-pthread": "libopenblas0", "libopenblas0-openmp": "libopenblas0",
            "libopenblas0-serial": "libopenblas0"}
# What find_package(lowbit) needs besides (cmake/lowbitConfig.cmake.in), and what `lowbit report` runs.
RECOMMENDS = "libgmp-dev, libhwy-dev, libtbb-dev, nlohmann-json3-dev, libopenblas-dev"
SUGGESTS = "python3, python3-matplotlib"


@pytest.fixture(scope="module")
def deb(tmp_path_factory):
    return h.build_deb(tmp_path_factory.mktemp("deb"))


@pytest.fixture(scope="module")
def root(deb, tmp_path_factory):
    return h.unpack_deb(deb, tmp_path_factory.mktemp("root"))


def field(deb, name):
    return h.run(["dpkg-deb", "-f", deb, name]).stdout.strip()


def package_names(depends):
    return {re.match(r"\s*([a-z0-9][a-z0-9+.-]*)", d).group(1) for d in depends.split(",")}


def test_control_fields(deb):
    assert field(deb, "Package") == "lowbit"
    assert field(deb, "Version") == h.VERSION
    assert field(deb, "Architecture") == h.deb_arch()
    assert field(deb, "Recommends") == RECOMMENDS
    assert field(deb, "Suggests") == SUGGESTS
    # Every Depends entry carries a minimum version (dpkg-shlibdeps's symbols files), but OpenBLAS's.
    for d in field(deb, "Depends").split(","):
        if d.strip() in UNVERSIONED:
            continue
        assert re.fullmatch(r"\s*[a-z0-9+.-]+ \(>= [^)]+\)", d), d


def test_depends_covers_what_the_binary_links(deb, root):
    """Each shared library the packaged binary loads belongs to a package of Depends, and each package of
    Depends provides one of them."""
    ldd = h.run(["ldd", root / "usr" / "bin" / "lowbit"]).stdout
    libraries = re.findall(r"=> (/\S+) \(", ldd)
    assert libraries, ldd
    owners = set()
    for lib in libraries:
        resolved = pathlib.Path(lib).resolve()
        owner = h.run(["dpkg", "-S", resolved], check=False)
        if owner.returncode != 0:  # merged /usr: dpkg knows the /lib path, not the /usr/lib one, or back
            owner = h.run(["dpkg", "-S", lib])
        name = owner.stdout.split(":", 1)[0]
        owners.add(BUILD_OF.get(name, name))
    assert owners - THROUGH_OPENBLAS == package_names(field(deb, "Depends")), (owners, ldd)


def test_depends_on_debian_12(deb):
    release = pathlib.Path("/etc/debian_version")
    if not release.exists() or not release.read_text().startswith("12"):
        pytest.skip("the package names of DEBIAN_12_DEPENDS are Debian 12's; this machine runs another release")
    assert package_names(field(deb, "Depends")) == DEBIAN_12_DEPENDS


def test_contents(deb):
    listing = h.run(["dpkg-deb", "-c", deb]).stdout.splitlines()
    files = {line.split()[-1].removeprefix("./") for line in listing if not line.startswith("d")}
    assert all(f.startswith("usr/") for f in files), sorted(f for f in files if not f.startswith("usr/"))
    expected = {"usr/bin/lowbit", "usr/include/lowbit/plugin.h", "usr/include/lowbit/format.hpp",
                "usr/lib/liblowbit_reference.a", "usr/lib/cmake/lowbit/lowbitConfig.cmake",
                "usr/lib/cmake/lowbit/lowbitConfigVersion.cmake", "usr/lib/cmake/lowbit/lowbitTargets.cmake",
                "usr/share/lowbit/vectors/SPEC.md", "usr/share/lowbit/report/render.py",
                "usr/share/doc/lowbit/README.md", "usr/share/doc/lowbit/accuracy/index.html"}
    assert expected <= files, sorted(expected - files)
    # Every committed golden file, and nothing of the Python package (its own component).
    golden = h.SOURCE / "vectors" / "golden"
    committed = {"usr/share/lowbit/vectors/golden/" + str(p.relative_to(golden)) for p in golden.rglob("*") if p.is_file()}
    assert committed == {f for f in files if f.startswith("usr/share/lowbit/vectors/golden/")}
    assert not [f for f in files if "_lowbit" in f or f.endswith(".py") and "/report/" not in f]


def test_the_unpacked_command_line_runs_without_the_source_tree(root, tmp_path):
    lowbit = root / "usr" / "bin" / "lowbit"
    assert h.run([lowbit, "--version"]).stdout == f"lowbit {h.VERSION}\n"
    # The fast checks of the quick tier (all of it: test_package_conform.py), run outside the source tree.
    checks = ["semantics-peer-cases", "semantics-cuda-table", "semantics-ml_dtypes-table", "semantics-rules",
              "round-trip"]
    args = [lowbit, "conform", "--tier", "quick", "--out", tmp_path / "out"]
    for c in checks:
        args += ["--check", c]
    p = h.run(args, cwd=tmp_path)
    assert re.search(r"^conformant \(quick tier, [0-9.]+ s\)$", p.stdout, re.M), p.stdout
    report = h.load_json(tmp_path / "out" / "conformance.json")
    assert [(c["name"], c["status"]) for c in report["checks"]] == [(c, "ok") for c in checks]
    assert all(c["cases"] > 0 for c in report["checks"])
    # The accuracy report it points to is the package's copy.
    link = (tmp_path / "out" / report["accuracy_report"]["link"]).resolve()
    assert link == (root / "usr" / "share" / "doc" / "lowbit" / "accuracy" / "index.html").resolve()
    # The packaged golden sets verify against their manifests.
    golden = root / "usr" / "share" / "lowbit" / "vectors" / "golden"
    suites = len([d for d in (h.SOURCE / "vectors" / "golden").iterdir() if d.is_dir()])
    p = h.run([lowbit, "check", "--vectors", golden, "--results", golden], cwd=tmp_path)
    assert re.search(rf"^all match: {suites} suites, \d+ cases compared in (\d+) of \1 units, 0 mismatching, 0 skipped, "
                     r"0 in error$", p.stdout, re.M), p.stdout


def test_the_unpacked_report_runs_the_packaged_renderer(root, tmp_path):
    """`lowbit report` runs share/lowbit/report/render.py of the package: an interpreter wrapper records
    the script it is given, then runs it."""
    log = tmp_path / "renderer-args"
    wrapper = h.make_executable(tmp_path / "python", f'#!/bin/sh\nprintf "%s\\n" "$@" > "{log}"\nexec "{sys.executable}" "$@"\n')
    env = dict(h.os.environ, LOWBIT_PYTHON=str(wrapper))
    env.pop("LOWBIT_REPORT_RENDERER", None)
    h.run([root / "usr" / "bin" / "lowbit", "report", "--quick", "--out", tmp_path / "report"], cwd=tmp_path, env=env)
    script = pathlib.Path(log.read_text().splitlines()[0])
    assert script.resolve() == (root / "usr" / "share" / "lowbit" / "report" / "render.py").resolve()
    assert (tmp_path / "report" / "index.html").is_file()


def test_find_package_from_the_unpacked_package(root, tmp_path):
    h.build_and_run_consumer(tmp_path / "consumer", root / "usr")
