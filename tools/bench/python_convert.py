#!/usr/bin/env python3
"""lowbit.convert against its peers in one run: ml_dtypes' astype and, when installed, torch's Tensor.to,
on 2^24 f32 values into e4m3, e2m1 and bf16 (issue 19's benchmark), one thread each.

Prints one JSON object per line: the implementation, the target, items per second (median of the
repetitions), and the ratio to the peer measured in the same run.  Each pair is compared under the same
semantics (lowbit's ml_dtypes profile against ml_dtypes; lowbit's default rne/nosat policy against torch)
and its outputs are checked equal before it is timed, so every row computes the same codes.  The row
"lowbit batch call" is the extension's convert_into alone: the C++ batch path with one call's overhead,
into a preallocated output and into a fresh one (np.empty per call, as lowbit.convert allocates its
result), against which the package's own layer (input checks, dtype handling) is measured.  A fresh output
of 32 MiB and more costs its page faults on every call (glibc maps allocations that large anew each time),
which is the whole difference between the two for bf16 at 2^24 elements.

    python3 tools/bench/python_convert.py [--log2n 24] [--repeat 7]

Needs the lowbit package installed (pip install ., or scripts/run-tests.sh's build/python-venv).
"""
import argparse
import json
import platform
import statistics
import time

import ml_dtypes
import numpy as np

import lowbit
from lowbit import _lowbit

try:
    import torch
except ImportError:
    torch = None


def timed(fn, repeat):
    fn()  # warm: page faults of the output, caches
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def row(**fields):
    print(json.dumps(fields), flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--log2n", type=int, default=24)
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args()
    n = 1 << args.log2n
    # Uniformly random 32-bit patterns: every class of input, as tools/bench/convert_bench.cpp uses.
    x = np.random.default_rng(1).integers(0, 2**32, size=n, dtype=np.uint64).astype(np.uint32).view(np.float32)
    row(kind="setup", n=n, repeat=args.repeat, lowbit=lowbit.__version__, numpy=np.__version__,
        ml_dtypes=ml_dtypes.__version__, torch=None if torch is None else torch.__version__,
        simd_target=_lowbit.simd_target(), python=platform.python_version(), machine=platform.processor() or platform.machine())
    if torch is not None:
        torch.set_num_threads(1)
    targets = {"e4m3": ml_dtypes.float8_e4m3fn, "e2m1": ml_dtypes.float4_e2m1fn, "bf16": ml_dtypes.bfloat16}
    with np.errstate(all="ignore"):
        for fmt, dtype in targets.items():
            # ml_dtypes: lowbit under its profile computes the same codes.
            ours = lowbit.convert(x, fmt, profile="ml_dtypes", threads=1)
            peer = x.astype(dtype)
            assert np.array_equal(np.asarray(ours).view(np.uint8 if peer.itemsize == 1 else np.uint16),
                                  peer.view(np.uint8 if peer.itemsize == 1 else np.uint16)), fmt
            t_peer = timed(lambda: x.astype(dtype), args.repeat)
            t_ours = timed(lambda: lowbit.convert(x, fmt, profile="ml_dtypes", threads=1), args.repeat)
            policy = _lowbit.resolve(fmt, "ml_dtypes", None, None, None, None, None)
            out = np.empty(n, dtype=np.uint8 if peer.itemsize == 1 else np.uint16)
            src = x.view(np.uint32)
            t_call = timed(lambda: _lowbit.convert_into(src, "f32", policy, out, None, None, None, 1), args.repeat)
            t_fresh = timed(lambda: _lowbit.convert_into(src, "f32", policy, np.empty_like(out), None, None, None, 1),
                            args.repeat)
            row(impl="ml_dtypes astype", target=fmt, items_per_s=n / t_peer)
            row(impl="lowbit.convert", target=fmt, profile="ml_dtypes", items_per_s=n / t_ours,
                ratio_to_ml_dtypes=t_peer / t_ours)
            row(impl="lowbit batch call", target=fmt, profile="ml_dtypes", output="preallocated", items_per_s=n / t_call,
                python_layer_overhead=t_ours / t_call - 1)
            row(impl="lowbit batch call", target=fmt, profile="ml_dtypes", output="fresh", items_per_s=n / t_fresh,
                python_layer_overhead=t_ours / t_fresh - 1)
            # torch: float8 and bfloat16 casts round to nearest even without saturation, lowbit's default.
            tdtype = {"e4m3": "float8_e4m3fn", "bf16": "bfloat16"}.get(fmt)
            if torch is None or tdtype is None or not hasattr(torch, tdtype):
                continue
            tx = torch.from_numpy(x)
            tdt = getattr(torch, tdtype)
            ref = tx.to(tdt).view(torch.uint8 if fmt == "e4m3" else torch.int16).numpy()
            mine = np.asarray(lowbit.convert(x, fmt, threads=1)).view(ref.dtype)
            if not np.array_equal(ref, mine):  # NaN payloads may differ for bf16: compare where not NaN
                keep = ~np.isnan(x)
                assert np.array_equal(ref[keep], mine[keep]), fmt
            t_torch = timed(lambda: tx.to(tdt), args.repeat)
            t_ours = timed(lambda: lowbit.convert(x, fmt, threads=1), args.repeat)
            row(impl="torch Tensor.to", target=fmt, threads=1, items_per_s=n / t_torch)
            row(impl="lowbit.convert", target=fmt, profile=None, items_per_s=n / t_ours, ratio_to_torch=t_torch / t_ours)


if __name__ == "__main__":
    main()
