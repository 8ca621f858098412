"""The differential harness every peer test shares: input generators, the `lowbit` side, the comparison.

A peer test names a cast (source format, target format, lowbit profile) and a function that runs the real
library on an array of source codes; the harness builds the inputs, runs both sides and reports every
mismatch with the input, the peer's code and lowbit's.  Expected codes always come from the peer.

Inputs (`cast_inputs`):
  * a source of 8 or 16 bits: every code;
  * f32: the boundary patterns of every class, NaNs of both signs with single-bit, all-ones and quiet and
    signaling payloads, every midpoint between neighbouring target values (the overflow threshold
    included) and 1 and 2 f32 ulps either side, and 10^6 seeded-random bit patterns.
Target values come from ml_dtypes' decoding of every target code, never from lowbit.

lowbit runs through `lowbit convert --raw` (`LOWBIT` names the executable).  `require` imports a peer:
without it the test skips with the reason, or fails where LOWBIT_REQUIRE_PEERS=1 (the `peers` CTest
label sets it, so that a tier that was asked to compare never passes on nothing).
"""
import dataclasses
import importlib
import io
import json
import os
import subprocess
import tempfile
import warnings

import numpy as np
import pytest

LOWBIT = os.environ.get("LOWBIT", "lowbit")

UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32}

# lowbit format name -> (storage bytes, ml_dtypes / numpy type name): how codes are decoded independently.
FORMATS = {
    "f32": (4, "float32"),
    "bf16": (2, "bfloat16"),
    "f16": (2, "float16"),
    "e4m3": (1, "float8_e4m3fn"),
    "e5m2": (1, "float8_e5m2"),
    "e4m3fnuz": (1, "float8_e4m3fnuz"),
    "e5m2fnuz": (1, "float8_e5m2fnuz"),
    "e4m3b11fnuz": (1, "float8_e4m3b11fnuz"),
    "e4m3ieee": (1, "float8_e4m3"),
    "e3m4": (1, "float8_e3m4"),
    "e8m0": (1, "float8_e8m0fnu"),
    "e2m3": (1, "float6_e2m3fn"),
    "e3m2": (1, "float6_e3m2fn"),
    "e2m1": (1, "float4_e2m1fn"),
}
# Codes per format where not every byte pattern is a code (fp6 and fp4 use the low bits of a byte).
CODE_BITS = {"e2m3": 6, "e3m2": 6, "e2m1": 4}


def require(module, why=None):
    """Import a peer module, or skip (fail under LOWBIT_REQUIRE_PEERS=1) with the reason."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        reason = f"{module} is not installed ({why or 'pip install -r requirements-peers.txt'}): {e}"
        if os.environ.get("LOWBIT_REQUIRE_PEERS") == "1":
            pytest.fail(reason)
        pytest.skip(reason)


def numpy_dtype(fmt):
    name = FORMATS[fmt][1]
    if name in ("float32", "float16"):
        return np.dtype(name)
    import ml_dtypes
    return np.dtype(getattr(ml_dtypes, name))


def width(fmt):
    return FORMATS[fmt][0]


def code_dtype(fmt):
    return UINT[width(fmt)]


# ---- inputs ------------------------------------------------------------------------------------------

def every_code(fmt):
    bits = CODE_BITS.get(fmt, 8 * width(fmt))
    return np.arange(1 << bits, dtype=np.uint64).astype(code_dtype(fmt))


def finite_values(fmt):
    """Every finite value of a format, decoded by ml_dtypes (f64, sorted, unique; -0 folded into 0)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        v = every_code(fmt).view(numpy_dtype(fmt)).astype(np.float64)
    v = v[np.isfinite(v)]
    return np.unique(v + 0.0)


def f32_boundaries():
    """Zeros, the smallest and largest subnormals, normals, the largest finite value and infinity, each sign."""
    mags = [0, 1, 2, 3, 0x3FFFFF, 0x400000, 0x400001, 0x5FFFFF, 0x600000, 0x7FFFFE, 0x7FFFFF, 0x800000,
            0x800001, 0x1000000, 0x3F000000, 0x3F7FFFFF, 0x3F800000, 0x3F800001, 0x3FC00000, 0x40000000,
            0x7E800000, 0x7EFFFFFF, 0x7F000000, 0x7F000001, 0x7F400000, 0x7F7FFFFF, 0x7F800000]
    return np.array([s | m for s in (0, 0x80000000) for m in mags], dtype=np.uint32)


def f32_nans():
    """Signed NaN payloads: quiet and signaling, every single payload bit, all ones, alternating bits."""
    payloads = {1 << b for b in range(23)} | {(1 << 22) | (1 << b) for b in range(22)}
    payloads |= {0x7FFFFF, 0x3FFFFF, 0x555555, 0x2AAAAA, 0x400001, 0x200000, 0x1FFFFF, 0x000100, 0x7FE000}
    return np.array([s | 0x7F800000 | p for s in (0, 0x80000000) for p in sorted(payloads)], dtype=np.uint32)


def f32_around(values):
    """Each f32 value and its neighbours 1 and 2 ulps either side, both signs (f32 bit patterns)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # values beyond f32's range become its infinity
        x = np.unique(np.abs(np.asarray(values, dtype=np.float64)).astype(np.float32)).view(np.uint32).astype(np.int64)
    out = [x + d for d in (-2, -1, 0, 1, 2)]
    a = np.concatenate(out)
    a = a[(a >= 0) & (a <= 0x7F800000)].astype(np.uint32)
    return np.unique(np.concatenate([a, a | np.uint32(0x80000000)]))


def target_midpoints(fmt):
    """Every midpoint between neighbouring finite values of `fmt`, with the overflow threshold (half an
    ulp above the largest value) and the midpoint between zero and the smallest value."""
    v = finite_values(fmt)
    v = v[v >= 0]
    mids = (v[:-1] + v[1:]) / 2
    top = v[-1] + (v[-1] - v[-2]) / 2 if v.size > 1 else v[-1] * 1.5
    extra = [top, v[-1] * 2, v[0] / 2 if v[0] > 0 else 0.0]
    return np.concatenate([v, mids, np.array(extra)])


def random_f32(n, seed):
    rng = np.random.default_rng(seed)
    return rng.integers(0, 2**32, size=n, dtype=np.uint64).astype(np.uint32)


def f32_cases(target, n_random=1_000_000, seed=20261201, midpoint_limit=None):
    """The f32 inputs of one cast into `target` (see the module docstring)."""
    around = f32_around(target_midpoints(target))
    if midpoint_limit is not None and around.size > midpoint_limit:
        pick = np.random.default_rng(seed + 1).choice(around.size, midpoint_limit, replace=False)
        around = np.sort(around[pick])
    parts = [f32_boundaries(), f32_nans(), around]
    if n_random:
        parts.append(random_f32(n_random, seed))
    return np.concatenate(parts)


def cast_inputs(source, target, n_random=1_000_000, seed=20261201, midpoint_limit=None):
    if source == "f32":
        return f32_cases(target, n_random, seed, midpoint_limit)
    if width(source) > 2:
        raise ValueError(f"no generator for source {source}")
    return every_code(source)


def is_nan(source, codes):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return np.isnan(codes.view(numpy_dtype(source)).astype(np.float32))


# ---- the lowbit side ---------------------------------------------------------------------------------

@dataclasses.dataclass
class Run:
    codes: np.ndarray
    returncode: int
    stdout: bytes
    stderr: str


def lowbit_raw(source, target, profile, codes, extra=()):
    """`lowbit convert --raw` over the codes; the result's codes are those written before any error."""
    args = [LOWBIT, "convert", "--raw", "--from", source, "--to", target]
    if profile:
        args += ["--profile", profile]
    args += list(extra)
    run = subprocess.run(args, input=np.ascontiguousarray(codes).tobytes(), capture_output=True, check=False)
    out = np.frombuffer(run.stdout, dtype=code_dtype(target))
    return Run(out, run.returncode, run.stdout, run.stderr.decode(errors="replace"))


def lowbit_codes(source, target, profile, codes, extra=()):
    run = lowbit_raw(source, target, profile, codes, extra)
    assert run.returncode == 0, f"lowbit convert --raw {source} -> {target} --profile {profile}: {run.stderr}"
    assert run.codes.size == codes.size, "one code per input"
    return run.codes


def code_texts(codes, fmt):
    """Codes as the "0x..." strings of lowbit's JSON (all hex digits of the storage)."""
    digits = 2 * width(fmt) if fmt in FORMATS else 2
    return [f"0x{int(x):0{digits}x}" for x in np.asarray(codes).reshape(-1)]


def lowbit_nvfp4(x, two_level):
    """torchao's NVFP4 on the lowbit side: (codes, block scales, tensor scale bits or None) of `lowbit quantize`
    --scheme nvfp4-1level, or --scheme nvfp4 --profile torchao (two levels)."""
    return lowbit_scheme(x, ["--scheme", "nvfp4", "--profile", "torchao"] if two_level else ["--scheme", "nvfp4-1level"])


def lowbit_scheme(x, args):
    """(codes, scales, tensor scale bits or None) of `lowbit quantize ARGS --in x.npy --out DIR`."""
    with tempfile.TemporaryDirectory() as d:
        np.save(os.path.join(d, "x.npy"), np.ascontiguousarray(x, dtype=np.float32))
        p = subprocess.run([LOWBIT, "quantize", *args, "--in", os.path.join(d, "x.npy"), "--out",
                            os.path.join(d, "q")], capture_output=True, text=True, check=False)
        assert p.returncode == 0, p.stderr
        codes = np.load(os.path.join(d, "q", "codes.npy"))
        scales = np.load(os.path.join(d, "q", "scales.npy"))
        tp = os.path.join(d, "q", "tensor_scale.npy")
        ts = int(np.load(tp).view(np.uint32)[0]) if os.path.exists(tp) else None
    return codes, scales, ts


def lowbit_gemm(model, fa, fb, a, b, c, scale_format=None, sa=None, sb=None):
    """`lowbit gemm --model M` on codes: A (m x k of fa), B (k x n of fb), C (m x n f32 codes) and, for the
    block-scaled models, the scale codes; returns D's codes (m x n)."""
    m, k = a.shape
    n = b.shape[1]
    doc = {"m": m, "n": n, "k": k, "a_format": fa, "b_format": fb, "a": code_texts(a, fa), "b": code_texts(b, fb),
           "c": code_texts(c, "f32")}
    if scale_format is not None:
        doc |= {"scale_format": scale_format, "a_scales": code_texts(sa, "e8m0"), "b_scales": code_texts(sb, "e8m0")}
    run = subprocess.run([LOWBIT, "gemm", "--model", model], input=json.dumps(doc).encode(), capture_output=True,
                         check=False)
    assert run.returncode == 0, f"lowbit gemm --model {model}: {run.stderr.decode()}"
    d = json.loads(run.stdout)["d"]
    flat = [x for row in d for x in (row if isinstance(row, list) else [row])]
    return np.array([int(x, 16) for x in flat], dtype=np.uint64).reshape(m, n)


# ---- the comparison ----------------------------------------------------------------------------------

def hexs(v, fmt):
    return f"0x{int(v):0{2 * width(fmt)}x}"


@dataclasses.dataclass
class Comparison:
    label: str
    source: str
    target: str
    inputs: np.ndarray
    expected: np.ndarray
    got: np.ndarray
    peer_name: str = "peer"

    @property
    def bad(self):
        return np.nonzero(self.expected != self.got)[0]

    def report(self, limit=12):
        bad = self.bad
        lines = [f"{self.label}: {bad.size} of {self.inputs.size} differ ({self.source} -> {self.target}; "
                 f"input, {self.peer_name}, lowbit)"]
        for i in bad[:limit]:
            lines.append(f"  {hexs(self.inputs[i], self.source)} {hexs(self.expected[i], self.target)} "
                         f"{hexs(self.got[i], self.target)}")
        return "\n".join(lines)


def compare(label, source, target, profile, inputs, peer_codes, peer_name="peer", extra=()):
    """Run lowbit on the inputs and compare with the peer's codes; returns the Comparison."""
    expected = np.asarray(peer_codes).astype(code_dtype(target))
    assert expected.shape == inputs.shape, "the peer gives one code per input"
    got = lowbit_codes(source, target, profile, inputs, extra)
    return Comparison(label, source, target, inputs, expected, got, peer_name)


def assert_same(comparison):
    assert comparison.inputs.size > 0, "nothing was compared"
    assert comparison.bad.size == 0, comparison.report()


# ---- fixtures: what the peers gave, for the quick tier ---------------------------------------------------
# One .npz per peer run.  "meta" is JSON: {"meta": {...peer, version, how it was run...}, "cases": [{"case": k,
# "profile", "source", "target", "inputs": key, "label"}]}; each case's peer codes are the array "o<k>", its
# inputs the array named by its "inputs" key (shared between cases with the same inputs).

def fixture_inputs(source, target, seed=20261201):
    """A small version of cast_inputs: every 8-bit code; for bf16 and f16 the zeros, infinities and the
    subnormal and normal boundaries, 96 seeded NaN codes and 320 seeded codes; for f32 the boundaries, the
    NaN payloads, 400 of the midpoint neighbours and 96 random patterns."""
    if source == "f32":
        return f32_cases(target, n_random=96, seed=seed, midpoint_limit=400)
    if width(source) == 1:
        return every_code(source)
    codes = every_code(source)
    rng = np.random.default_rng(seed)
    nan = codes[is_nan(source, codes)]
    fixed = np.array([0x0000, 0x0001, 0x0002, 0x03FF, 0x0400, 0x007F, 0x0080, 0x7BFF, 0x7C00, 0x7F7F, 0x7F80],
                     dtype=np.uint16)
    picks = [fixed, fixed | np.uint16(0x8000), rng.choice(nan, 96, replace=False), rng.choice(codes, 320, replace=False)]
    return np.unique(np.concatenate(picks))


class FixtureWriter:
    def __init__(self, meta):
        self.meta = meta
        self.arrays = {}
        self.rows = []

    def add_arrays(self, row, **arrays):
        """A case of named arrays (a GEMM's operands, the peer's result, the mask of compared outputs)."""
        k = len(self.rows)
        for name, arr in arrays.items():
            if arr is not None:
                self.arrays[f"{name}{k}"] = np.ascontiguousarray(arr)
        self.rows.append(dict(row, case=k, arrays=[n for n, v in arrays.items() if v is not None]))

    def add(self, row, inputs_key, inputs, outputs):
        if inputs_key in self.arrays:
            assert np.array_equal(self.arrays[inputs_key], inputs), inputs_key
        self.arrays[inputs_key] = np.ascontiguousarray(inputs)
        k = len(self.rows)
        self.arrays[f"o{k}"] = np.ascontiguousarray(outputs)
        self.rows.append(dict(row, case=k, inputs=inputs_key))

    def save(self, path):
        arrays = dict(self.arrays)
        doc = json.dumps({"meta": self.meta, "cases": self.rows}, sort_keys=True, indent=0)
        arrays["meta"] = np.frombuffer(doc.encode(), dtype=np.uint8)
        buf = io.BytesIO()
        np.savez_compressed(buf, **arrays)
        tmp = f"{path}.tmp"
        with open(tmp, "wb") as f:
            f.write(buf.getvalue())
        os.replace(tmp, path)


def load_fixture(path):
    """(meta, [(row, inputs, outputs)]) of a fixture file."""
    with np.load(path) as z:
        doc = json.loads(bytes(z["meta"]).decode())
        cases = []
        for row in doc["cases"]:
            if "arrays" in row:
                cases.append((row, {n: z[f"{n}{row['case']}"] for n in row["arrays"]}, None))
            else:
                cases.append((row, z[row["inputs"]], z[f"o{row['case']}"]))
    return doc["meta"], cases
