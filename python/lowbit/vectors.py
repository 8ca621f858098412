"""Golden vectors (vectors/SPEC.md): the suites of ``lowbit vectors``, written to folders and read back as arrays.

``suites()`` lists them, ``generate(suite, out)`` writes one into a new folder with the bytes ``lowbit vectors
generate`` writes, and ``load(path)`` verifies a suite folder (manifest checksum and every file's SHA-256)
and gives its cases as numpy arrays in their formats' dtypes.

Example:
    >>> import lowbit, tempfile, os
    >>> out = os.path.join(tempfile.mkdtemp(), "nvfp4")
    >>> lowbit.vectors.generate("scheme-nvfp4", out)
    >>> suite = lowbit.vectors.load(out)
    >>> case = suite.cases[0]
    >>> case.name, case.inputs["x"].dtype.name, case.expected["codes"].dtype.name
    ('standard/random-1x16', 'float32', 'float4_e2m1fn')
"""
from __future__ import annotations

import io
import json
import os
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

import numpy as np

from . import _lowbit
from ._arrays import wrap_codes
from ._dtypes import UINT_OF_BYTES

__all__ = ["Case", "Suite", "SuiteInfo", "generate", "load", "suites"]


@dataclass(frozen=True)
class SuiteInfo:
    """A suite of ``lowbit vectors list``: its name, what it holds, and whether vectors/golden commits it."""

    name: str
    description: str
    committed: bool


@dataclass
class Case:
    """One test unit of a suite: a tensor case (scheme and gemm suites) or a scalar file (convert suites).

    `recipe` is the case's recipe object of the manifest (convert files: from, to, profile, rounding,
    overflow, subnormals, tininess); `inputs` and `expected` map array names ("x", "a", "b", "codes",
    "scales", "d", ...; convert files: "x" and "codes", with "flags" as uint8 masks) to arrays in their
    formats' dtypes (lowbit.Codes where a format has none).
    """

    name: str
    recipe: Dict[str, Any]
    inputs: Dict[str, np.ndarray] = field(default_factory=dict)
    expected: Dict[str, np.ndarray] = field(default_factory=dict)


@dataclass
class Suite:
    """A verified golden suite: its name, kind ("convert", "scheme" or "gemm"), manifest and cases."""

    name: str
    kind: str
    manifest: Dict[str, Any]
    cases: List[Case]


def suites() -> List[SuiteInfo]:
    """Every suite, in ``lowbit vectors list`` order.

    Example:
        >>> import lowbit
        >>> [s.name for s in lowbit.vectors.suites() if s.name.startswith("scheme-nvfp4")]
        ['scheme-nvfp4', 'scheme-nvfp4-2d', 'scheme-nvfp4-1level']
    """
    return [SuiteInfo(n, d, c) for n, d, c in _lowbit.vector_suites()]


def _shape_options(shape: Any, layout: Any) -> "tuple[Optional[str], Optional[str]]":
    """`shape` / `layout` as the command line's --shape / --layout texts: shape=True is --shape without a
    value (the default shapes), a str the value itself; None leaves the option out."""
    if shape is True:
        shape = ""
    elif shape is False:
        shape = None
    if shape is not None and not isinstance(shape, str):
        raise TypeError(f"shape: expected 'MxNxK[,...]' or 'RxC[,...]' (str) or True, not {type(shape).__name__}")
    if layout is not None and not isinstance(layout, str):
        raise TypeError(f"layout: expected one of nn, nt, tn, tt (str), not {type(layout).__name__}")
    return shape, layout


def generate(suite: str, out: "os.PathLike[str] | str", *, seed: int = 1, shape: Any = None,
             layout: Optional[str] = None) -> None:
    """Write golden suite `suite` into the new folder `out`, byte for byte what ``lowbit vectors generate
    --suite SUITE --out OUT --seed SEED [--shape SHAPE] [--layout LAYOUT]`` writes (the same library code).

    `shape` and `layout` make the on-demand suites of vectors/SPEC.md ("On-demand shapes and layouts"):
    GEMM suites at ``"MxNxK[,...]"`` with `layout` nn, nt, tn or tt (A's then B's storage), scheme suites at
    ``"RxC[,...]"``; ``shape=True`` gives the default shapes.  A bad value is a ValueError naming it.

    `out` must not exist or be an empty folder; the suite is written beside it and renamed into place, so a
    failure leaves nothing behind.  ValueError names `suite` (an unknown name), `seed` or `out`.

    Example:
        >>> import lowbit, tempfile, os
        >>> out = os.path.join(tempfile.mkdtemp(), "tensor")
        >>> lowbit.vectors.generate("scheme-tensor", out, seed=1)
        >>> sorted(os.listdir(out))[:2]
        ['case-000', 'case-001']
    """
    if not isinstance(suite, str):
        raise TypeError(f"suite: expected a suite name (str), not {type(suite).__name__}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or not 0 <= int(seed) < 2**64:
        raise ValueError(f"seed: {seed!r} is not a non-negative 64-bit integer")
    shape, layout = _shape_options(shape, layout)
    _lowbit.write_suite(suite, os.fspath(out), int(seed), shape, layout)


def _npy(bytes_: bytes, entry: Dict[str, Any]) -> np.ndarray:
    """An .npy file of a suite as an array of its format's dtype (codes) or as its float dtype."""
    raw = np.load(io.BytesIO(bytes_), allow_pickle=False)
    fmt = entry.get("format", "")
    if raw.dtype.kind == "u" and fmt and fmt != "uint32":
        raw = wrap_codes(raw.reshape(-1), fmt, raw.shape)
    raw.flags.writeable = False
    return raw


def _scalar(text: str, entry: Dict[str, Any]) -> Case:
    """A scalar file (lines of hexadecimal input, output and flags) as one case of three arrays."""
    src, dst = entry["from"], entry["to"]
    rows = [line.split() for line in text.splitlines() if line and not line.startswith("#")]
    width_in = _lowbit.format_info(src)["storage_bytes"]
    width_out = _lowbit.format_info(dst)["storage_bytes"]
    x = np.array([int(r[0], 16) for r in rows], UINT_OF_BYTES[width_in])
    codes = np.array([int(r[1], 16) for r in rows], UINT_OF_BYTES[width_out])
    expected = {"codes": wrap_codes(codes, dst, codes.shape)}
    if rows and len(rows[0]) > 2:
        expected["flags"] = np.array([int(r[2], 16) for r in rows], np.uint8)
    recipe = {k: entry[k] for k in ("from", "to", "rounding", "overflow", "subnormals", "tininess")}
    return Case(entry["path"], recipe, {"x": wrap_codes(x, src, x.shape)}, expected)


def load(path: "os.PathLike[str] | str") -> Suite:
    """Read and verify the golden suite folder `path` (as ``lowbit check`` does): its cases as arrays.

    A damaged suite (a checksum, a missing file, a malformed manifest) raises ValueError listing what is
    wrong, file by file.

    Example:
        >>> import lowbit, tempfile, os
        >>> out = os.path.join(tempfile.mkdtemp(), "gemm")
        >>> lowbit.vectors.generate("gemm-f32-sequential", out)
        >>> case = lowbit.vectors.load(out).cases[0]
        >>> sorted(case.inputs), sorted(case.expected), case.recipe["model"]
        (['a', 'b'], ['d'], 'f32-sequential')
    """
    name, manifest_text, files = _lowbit.load_suite(os.fspath(path))
    manifest = json.loads(manifest_text)
    kind = manifest.get("kind", "")
    cases: List[Case] = []
    if kind == "convert":
        for entry in manifest["files"]:
            text = files[entry["path"]].decode()
            case = _scalar(text, entry)
            case.recipe["profile"] = manifest.get("profile")
            cases.append(case)
    else:
        for c in manifest.get("cases", []):
            case = Case(c.get("name", f"case-{c['index']:03d}"), dict(c.get("recipe", {})))
            for entry in manifest["files"]:
                if entry.get("case") != c["index"]:
                    continue
                where = case.inputs if entry["role"] == "input" else case.expected
                where[entry.get("name", entry["path"])] = _npy(files[entry["path"]], entry)
            cases.append(case)
    return Suite(name, kind, manifest, cases)
