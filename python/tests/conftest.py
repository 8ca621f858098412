"""Shared by the package's tests: the `lowbit` command line they compare the module against.

Run by ctest (python/CMakeLists.txt) in the virtual environment that tests/install_venv.sh installed the
package into, with LOWBIT naming the build's `lowbit` executable.
"""
import json
import os
import shutil
import subprocess

import numpy as np
import pytest

lowbit = pytest.importorskip("lowbit", reason="the lowbit package is not installed (pip install .)") \
    if os.environ.get("LOWBIT_REQUIRE_MODULE") != "1" else __import__("lowbit")

LOWBIT = os.environ.get("LOWBIT") or shutil.which("lowbit") or "lowbit"


def cli(*args, input=None, check=True):
    """Run the command line; returns the CompletedProcess (bytes in, bytes out)."""
    if isinstance(input, str):
        input = input.encode()
    run = subprocess.run([LOWBIT, *map(str, args)], input=input, capture_output=True, check=False)
    if check:
        assert run.returncode == 0, f"lowbit {' '.join(map(str, args))}: exit {run.returncode}: {run.stderr.decode()}"
    return run


def cli_json(*args, input=None):
    return json.loads(cli(*args, input=input).stdout)


def f32_patterns(n=20000, seed=7):
    """Seeded random f32 bit patterns of every class, and the edges of each class, as uint32."""
    rng = np.random.default_rng(seed)
    edges = []
    for sign in (0, 0x80000000):
        for mag in (0, 1, 0x7FFFFF, 0x800000, 0x3F800000, 0x3F400000, 0x43E00000, 0x43E80000, 0x43E80001,
                    0x7F7FFFFF, 0x7F800000, 0x7F800001, 0x7FC00000, 0x7FFFFFFF, 0x3A800000, 0x3B100000):
            edges.append(sign | mag)
    random = rng.integers(0, 2**32, size=n, dtype=np.uint64).astype(np.uint32)
    # Values near the ranges of the small formats: exponents -20 .. 20 with random mantissas.
    near = (rng.integers(107, 148, size=n, dtype=np.uint32) << 23) | rng.integers(0, 2**23, size=n, dtype=np.uint32)
    near |= rng.integers(0, 2, size=n, dtype=np.uint32) << 31
    return np.concatenate([np.array(edges, dtype=np.uint32), random, near])


@pytest.fixture(scope="module")
def patterns():
    return f32_patterns()
