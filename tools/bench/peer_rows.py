"""The conversion peers reached from Python: ml_dtypes' astype (numpy's own for f16) and torch's Tensor.to, f32 -> e4m3, e5m2, e2m1, bf16
and f16, on the same 2^24 inputs as lowbit_convert_bench (the first 2^24 outputs of std::mt19937 seeded 20240601,
which numpy's RandomState reproduces) and on one and two threads where the peer has threads (torch).  The peers
round with their own rules (nearest even; ml_dtypes and torch send an fp8 overflow to NaN or infinity where the
`cuda` profile saturates), so their codes differ from the benchmark's on overflowing inputs; the rows compare
speed.  Rows of a peer that is not importable are written as skipped, with the reason."""

import numpy as np

from bench_rows import Rows, arguments

N = 1 << 24
TARGETS = ["e4m3", "e5m2", "e2m1", "bf16", "f16"]


def inputs():
    bits = np.random.RandomState(20240601).randint(0, 2**32, size=N, dtype=np.uint32)
    return bits.view(np.float32)


def ml_dtypes_rows(rows, x):
    try:
        import ml_dtypes
    except ImportError as e:
        for t in TARGETS:
            rows.skip(f"BM_Convert/{t}/{'numpy' if t == 'f16' else 'ml_dtypes'}", f"ml_dtypes is not importable: {e}")
        return
    rows.note("ml_dtypes", ml_dtypes.__version__)
    rows.note("numpy", np.__version__)
    # f16 is numpy's own cast (ml_dtypes has no float16 of its own).
    types = {"e4m3": ("ml_dtypes", ml_dtypes.float8_e4m3fn), "e5m2": ("ml_dtypes", ml_dtypes.float8_e5m2),
             "e2m1": ("ml_dtypes", ml_dtypes.float4_e2m1fn), "bf16": ("ml_dtypes", ml_dtypes.bfloat16),
             "f16": ("numpy", np.float16)}
    for t in TARGETS:
        impl, dtype = types[t]
        # NaN and overflowing inputs make numpy warn on every call; the warnings are not what is measured.
        with np.errstate(all="ignore"):
            rows.measure(f"BM_Convert/{t}/{impl}", lambda dtype=dtype: x.astype(dtype), items=N)


def torch_rows(rows, x):
    try:
        import torch
    except ImportError as e:
        for t in TARGETS:
            for suffix in ("", "/threads:2"):
                rows.skip(f"BM_Convert/{t}/torch{suffix}", f"torch is not importable: {e}")
        return
    rows.note("torch", torch.__version__)
    rows.note("torch.config", torch.__config__.parallel_info().replace("\n", "; "))
    types = {"e4m3": getattr(torch, "float8_e4m3fn", None), "e5m2": getattr(torch, "float8_e5m2", None),
             "e2m1": getattr(torch, "float4_e2m1fn_x2", None), "bf16": torch.bfloat16, "f16": torch.float16}
    xt = torch.from_numpy(x)
    for threads in (1, 2):
        torch.set_num_threads(threads)
        suffix = "" if threads == 1 else f"/threads:{threads}"
        for t in TARGETS:
            name = f"BM_Convert/{t}/torch{suffix}"
            dtype = types[t]
            # float4_e2m1fn_x2 packs two codes a byte and has no conversion from f32 (torch 2.8).
            if dtype is None or t == "e2m1":
                rows.skip(name, f"torch {torch.__version__} has no f32 -> {t} conversion")
                continue
            rows.measure(name, lambda dtype=dtype: xt.to(dtype), items=N, threads=threads)
    torch.set_num_threads(1)


def main():
    args = arguments(__doc__.split("\n")[0])
    rows = Rows("tools/bench/peer_rows.py", args)
    x = inputs()
    ml_dtypes_rows(rows, x)
    torch_rows(rows, x)
    rows.write()


if __name__ == "__main__":
    main()
