"""The Python package's conversion rows: lowbit.convert f32 -> e4m3, e5m2, e2m1, bf16 and f16 on one and two threads,
and the extension's batch call alone into a fresh output, on the same 2^24 inputs as lowbit_convert_bench (the first
2^24 outputs of std::mt19937 seeded 20240601, which numpy's RandomState reproduces).

Rows (run.sh puts them beside the C++ rows and the peers' in one table):
  BM_Convert/<t>/python              lowbit.convert(x, t, profile="cuda", threads=1): the policy of the C++ rows
  BM_Convert/<t>/python/threads:2    the same with threads=2
  BM_Convert/<t>/python_call         the extension's convert_into under that policy into np.empty(...) per call:
                                     the C++ batch call with one call's overhead and a fresh output, as
                                     lowbit.convert allocates its result; python / python_call is the cost of the
                                     package's own layer (argument checks, dtype handling)

Before anything is timed, lowbit.convert under the ml_dtypes profile must give ml_dtypes' astype codes for the
targets ml_dtypes has, and the timed call must give the codes of convert_into: a row never times wrong codes.
Rows are written as skipped, with the reason, when lowbit is not importable from this interpreter (run.sh's
LOWBIT_BENCH_PYTHON chooses it)."""

import numpy as np

from bench_rows import Rows, arguments

N = 1 << 24
TARGETS = ["e4m3", "e5m2", "e2m1", "bf16", "f16"]


def inputs():
    bits = np.random.RandomState(20240601).randint(0, 2**32, size=N, dtype=np.uint32)
    return bits.view(np.float32)


def names():
    for t in TARGETS:
        yield f"BM_Convert/{t}/python"
        yield f"BM_Convert/{t}/python/threads:2"
        yield f"BM_Convert/{t}/python_call"


def codes(a):
    a = np.asarray(a)
    return a.view(np.uint8 if a.itemsize == 1 else np.uint16)


def check_against_ml_dtypes(lowbit, x):
    try:
        import ml_dtypes
    except ImportError:
        return
    types = {"e4m3": ml_dtypes.float8_e4m3fn, "e5m2": ml_dtypes.float8_e5m2, "e2m1": ml_dtypes.float4_e2m1fn,
             "bf16": ml_dtypes.bfloat16}
    with np.errstate(all="ignore"):
        for t, dtype in types.items():
            if not np.array_equal(codes(lowbit.convert(x, t, profile="ml_dtypes", threads=1)), codes(x.astype(dtype))):
                raise SystemExit(f"python_rows.py: lowbit.convert(profile='ml_dtypes') differs from ml_dtypes into {t}")


def main():
    args = arguments(__doc__.split("\n")[0])
    rows = Rows("tools/bench/python_rows.py", args)
    try:
        import lowbit
        from lowbit import _lowbit
    except ImportError as e:
        for name in names():
            rows.skip(name, f"lowbit is not importable from this Python: {e}")
        rows.write()
        return
    rows.note("lowbit", lowbit.__version__)
    rows.note("lowbit.simd_target", _lowbit.simd_target())
    rows.note("numpy", np.__version__)
    x = inputs()
    check_against_ml_dtypes(lowbit, x)
    src = x.view(np.uint32)
    for t in TARGETS:
        policy = _lowbit.resolve(t, "cuda", None, None, None, None, None)
        width = np.uint8 if codes(lowbit.convert(x[:1], t, profile="cuda")).itemsize == 1 else np.uint16
        out = np.empty(N, dtype=width)
        _lowbit.convert_into(src, "f32", policy, out, None, None, None, 1)
        for threads in (1, 2):
            if not np.array_equal(codes(lowbit.convert(x, t, profile="cuda", threads=threads)), out):
                raise SystemExit(f"python_rows.py: lowbit.convert differs from convert_into into {t}, {threads} threads")
        suffix = {1: "", 2: "/threads:2"}
        for threads in (1, 2):
            rows.measure(f"BM_Convert/{t}/python{suffix[threads]}",
                         lambda t=t, threads=threads: lowbit.convert(x, t, profile="cuda", threads=threads), items=N,
                         threads=threads)
        rows.measure(f"BM_Convert/{t}/python_call",
                     lambda policy=policy, width=width: _lowbit.convert_into(src, "f32", policy,
                                                                             np.empty(N, dtype=width), None, None,
                                                                             None, 1), items=N)
    rows.write()


if __name__ == "__main__":
    main()
