"""README.md's command-line examples print what README shows (ctest readme_console, quick tier).

Every ```console block runs, in README order, in one scratch folder where `vectors` and `build` are
links to the source tree's vectors/ and to the build directory (so README's paths, written from the
repository root, resolve and nothing is written into the tree), and where each ```python block whose first
line names a file is that file.  Each command runs in bash with the built `lowbit` first on PATH (and
`python3` this test's interpreter), stdout and stderr together, and its output must equal README's lines exactly.  conformance/readme/README.md says
how a block is marked to be skipped and which ones are.
"""
import os
import pathlib
import subprocess
import sys

import pytest

import readme_examples as rx

SOURCE = pathlib.Path(os.environ["LOWBIT_SOURCE_DIR"])
BUILD = pathlib.Path(os.environ["LOWBIT_BUILD_DIR"])
LOWBIT = pathlib.Path(os.environ["LOWBIT"])
README = SOURCE / "README.md"

BLOCKS = rx.blocks(README)
CONSOLE = [b for b in BLOCKS if b.kind == "console"]


@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    d = tmp_path_factory.mktemp("readme")
    (d / "vectors").symlink_to(SOURCE / "vectors")
    (d / "conformance").symlink_to(SOURCE / "conformance")  # the checkpoint fixtures README verifies
    (d / "build").symlink_to(BUILD)
    for b in BLOCKS:
        if b.file_name:
            (d / b.file_name).write_text("\n".join(b.body) + "\n")
    return d


def environment(scratch):
    """The built lowbit first on PATH, and `python3` the interpreter that runs this test (the one that has
    requirements.txt's packages, as the command-line tests do)."""
    shims = scratch / ".shims"
    if not shims.exists():
        shims.mkdir()
        (shims / "python3").write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
        (shims / "python3").chmod(0o755)
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(LOWBIT.parent), str(shims), env["PATH"]])
    # What a user's shell would not have set.
    for var in ("LOWBIT_PLANTED_QUANTIZE_BUG", "LOWBIT_REPORT_RENDERER"):
        env.pop(var, None)
    return env


def test_readme_has_examples():
    assert len(CONSOLE) >= 10, [b.line for b in CONSOLE]
    assert all(rx.commands(b) for b in CONSOLE)
    # Every marker says why, and the set stays small (conformance/readme/README.md).
    marked = [b for b in BLOCKS if b.marker]
    assert all(b.marker[1].strip() for b in marked)
    assert len(marked) <= 4, [(b.line, b.marker) for b in marked]


@pytest.mark.parametrize("block", CONSOLE, ids=[f"README.md:{b.line}" for b in CONSOLE])
def test_console_block(block, scratch):
    if block.marker and block.marker[0] == "skip":
        pytest.skip(f"README.md line {block.line}: {block.marker[1]}")
    if block.marker and block.marker[0] == "needs" and not (scratch / block.marker[1]).exists():
        pytest.skip(f"README.md line {block.line}: needs {block.marker[1]}, which this build does not have")
    failures = []
    for cmd in rx.commands(block):
        p = subprocess.run(["bash", "-c", cmd.text], cwd=scratch, env=environment(scratch), stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, timeout=300)
        actual = rx.output_lines(p.stdout)
        if actual != cmd.expected:
            failures.append(f"README.md line {cmd.line}: $ {cmd.text}\n--- README shows\n" + "\n".join(cmd.expected)
                            + "\n--- the command printed (exit " + str(p.returncode) + ")\n" + "\n".join(actual))
    assert not failures, "\n\n".join(failures)
