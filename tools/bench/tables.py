"""The tables of tools/bench/RESULTS.md from one run's JSON files (tools/bench/run.sh writes them).

    python3 tools/bench/tables.py DIR

Every *.json in DIR is read (Google Benchmark's output, or a rows script's, bench_rows.py): each row's median.
Conversion rows (BM_Convert/<target>/<impl>[/threads:<t>]) are items per second, one column per implementation
found, so a new rows script's implementations appear as new columns; GEMM rows (BM_Gemm/<impl>/n:<n>/threads:<t>)
are wall times per GEMM with their ratio to the fastest f32 peer at the same size and thread count; scheme rows
(BM_Scheme, BM_Plain, ...) are ratios to the plain conversion into the same element.  The targets of
tools/bench/README.md are checked against the same numbers and printed as met or missed, by how much.
"""

import glob
import json
import os
import sys

F32_PEERS = ["eigen_f32", "eigen_f32_portable", "openblas_sgemm"]
MODELS = ["hopper-fp8", "hopper-fp8-promote128", "hopper-fp8-block-scaled", "hopper-fp8-mma-sync", "hopper-f16",
          "hopper-bf16", "hopper-tf32"]
CONVERT_TARGETS = ["e4m3", "e5m2", "e2m1", "bf16"]


def load(directory):
    rows, contexts = {}, {}
    for path in sorted(glob.glob(os.path.join(directory, "*.json"))):
        with open(path) as f:
            data = json.load(f)
        contexts[os.path.basename(path)] = data.get("context", {})
        for b in data.get("benchmarks", []):
            if b.get("aggregate_name", "median") != "median" and not b.get("error_occurred"):
                continue
            name = b.get("run_name", b["name"])
            if name.endswith("/real_time"):
                name = name[: -len("/real_time")]
            rows[name] = b
    return rows, contexts


def ok(b):
    return b is not None and not b.get("error_occurred")


def ms(b):
    return b["real_time"] * {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}[b.get("time_unit", "ns")]


def rate(b):
    if not ok(b):
        return "-"
    v = b.get("items_per_second", 0.0)
    for unit, scale in (("G/s", 1e9), ("M/s", 1e6), ("k/s", 1e3)):
        if v >= scale:
            return f"{v / scale:.3g} {unit}"
    return f"{v:.3g} /s"


def verdict(value, limit, below=True):
    met = value <= limit if below else value >= limit
    return "met" if met else f"**missed** by {value / limit:.2f}x" if below else f"**missed** ({value / limit:.0%} of it)"


class Report:
    def __init__(self, rows):
        self.rows = rows
        self.targets = []

    def target(self, what, value, limit, text, below=True):
        self.targets.append((what, text, verdict(value, limit, below)))

    # ---- conversions -----------------------------------------------------------------------------------
    def convert(self):
        r = self.rows
        names = [n for n in r if n.startswith("BM_Convert/")]
        if not names:
            return
        impls = []
        for n in names:
            impl = "/".join(n.split("/")[2:])
            if impl not in impls:
                impls.append(impl)
        order = ["floor", "floor_stream", "simd", "floor/threads:2", "floor_stream/threads:2", "simd/threads:2",
                 "simd_flags", "scalar", "exact", "cuda_host", "eigen", "python", "python/threads:2", "python_call"]
        impls.sort(key=lambda i: (order.index(i) if i in order else len(order), i))
        print("## Conversions f32 -> target over 2^24 random 32-bit patterns, items per second\n")
        print("| target | " + " | ".join(impls) + " |")
        print("|---" * (len(impls) + 1) + "|")
        for t in ["e4m3", "e5m2", "e2m1", "bf16", "f16"]:
            print(f"| {t} | " + " | ".join(rate(r.get(f"BM_Convert/{t}/{i}")) for i in impls) + " |")
        print("\nsimd against the memory floor (the faster of its two kinds) and against itself on one thread:\n")
        print("| target | floor, 1 thread | simd / floor | floor, 2 threads | simd / floor | simd 2 threads / 1 |")
        print("|---|---|---|---|---|---|")
        for t in CONVERT_TARGETS + ["f16"]:
            cells = [t]
            floor1 = [r.get(f"BM_Convert/{t}/{k}") for k in ("floor", "floor_stream")]
            floor2 = [r.get(f"BM_Convert/{t}/{k}/threads:2") for k in ("floor", "floor_stream")]
            s1, s2 = r.get(f"BM_Convert/{t}/simd"), r.get(f"BM_Convert/{t}/simd/threads:2")
            f1 = max((b["items_per_second"] for b in floor1 if ok(b)), default=None)
            f2 = max((b["items_per_second"] for b in floor2 if ok(b)), default=None)
            if f1 and ok(s1):
                cells += [f"{f1 / 1e9:.3g} G/s", f"{s1['items_per_second'] / f1:.0%}"]
                if t in CONVERT_TARGETS:
                    self.target(f"f32 -> {t} on one thread", s1["items_per_second"] / f1, 0.9,
                                f"{s1['items_per_second'] / f1:.0%} of the floor (target >= 90%)", below=False)
            else:
                cells += ["-", "-"]
            if f2 and ok(s2):
                cells += [f"{f2 / 1e9:.3g} G/s", f"{s2['items_per_second'] / f2:.0%}"]
            else:
                cells += ["-", "-"]
            if ok(s1) and ok(s2):
                speedup = s2["items_per_second"] / s1["items_per_second"]
                cells.append(f"{speedup:.2f}x")
                if t in CONVERT_TARGETS and f1 and f2:
                    allows = f2 / f1
                    self.target(f"f32 -> {t} on two threads", speedup, min(1.7, allows * 0.9),
                                f"{speedup:.2f}x one thread (target >= 1.7x where memory allows: the floor gains "
                                f"{allows:.2f}x)", below=False)
            else:
                cells.append("-")
            print("| " + " | ".join(cells) + " |")
        print()
        self.python()

    def faster_than(self, v, peer, what, limit, fmt):
        """The cell of a rate `v` over a peer's row, "-" without the row; with `what`, the target of at least `limit`."""
        if not ok(peer):
            return "-"
        ratio = v / peer["items_per_second"]
        if what:
            self.target(what, ratio, limit, f"{ratio:{fmt}}x (target >= {limit:g}x)", below=False)
        return f"{ratio:{fmt}}x"

    def python(self):
        """The Python package's rows (python_rows.py) against its peers in the same run (the targets of the Python
        package's issue: >= 20x ml_dtypes' astype, >= 2x torch's Tensor.to on one thread, the package's layer within
        10% of the extension's batch call)."""
        r = self.rows
        if not any(ok(r.get(f"BM_Convert/{t}/python")) for t in CONVERT_TARGETS + ["f16"]):
            return
        print("The Python package (`lowbit.convert`, one thread) against the C++ batch path, its own batch call and "
              "the Python peers:\n")
        print("| target | lowbit.convert | / C++ simd | layer's cost against the batch call | / ml_dtypes (numpy for f16) "
              "| / torch, 1 thread | 2 threads / 1 |")
        print("|---|---|---|---|---|---|---|")
        for t in CONVERT_TARGETS + ["f16"]:
            py = r.get(f"BM_Convert/{t}/python")
            if not ok(py):
                continue
            v = py["items_per_second"]
            cells = [t, rate(py)]
            simd = r.get(f"BM_Convert/{t}/simd")
            cells.append(f"{v / simd['items_per_second']:.0%}" if ok(simd) else "-")
            call = r.get(f"BM_Convert/{t}/python_call")
            if ok(call):
                cost = call["items_per_second"] / v - 1
                cells.append(f"{cost:+.1%}")
                self.target(f"Python layer, {t}", cost, 0.10, f"{cost:+.1%} against the batch call (target <= 10%)")
            else:
                cells.append("-")
            peer = r.get(f"BM_Convert/{t}/{'numpy' if t == 'f16' else 'ml_dtypes'}")
            what = f"lowbit.convert -> {t} against ml_dtypes" if t != "f16" else None
            cells.append(self.faster_than(v, peer, what, 20.0, ".1f"))
            what = f"lowbit.convert -> {t} against torch, one thread"
            cells.append(self.faster_than(v, r.get(f"BM_Convert/{t}/torch"), what, 2.0, ".2f"))
            py2 = r.get(f"BM_Convert/{t}/python/threads:2")
            cells.append(f"{py2['items_per_second'] / v:.2f}x" if ok(py2) else "-")
            print("| " + " | ".join(cells) + " |")
        print()

    # ---- GEMM ----------------------------------------------------------------------------------------------
    def gemm(self):
        r = self.rows
        names = [n for n in r if n.startswith("BM_Gemm/")]
        if not names:
            return
        impls, sizes = [], []
        for n in names:
            parts = n.split("/")
            if parts[1] not in impls:
                impls.append(parts[1])
            size = int(parts[2].split(":")[1])
            if size not in sizes:
                sizes.append(size)
        peers = [i for i in F32_PEERS + ["openblas_dgemm"] if i in impls]
        lowbit = [i for i in impls if i not in peers]
        for n in sorted(sizes):
            print(f"## GEMM, M = N = K = {n}: wall time per GEMM, and its ratio to the fastest f32 peer "
                  "at the same thread count\n")
            cols = [i for i in peers + lowbit if any(f"BM_Gemm/{i}/n:{n}/threads:{t}" in r for t in (1, 2))]
            print("| threads | " + " | ".join(cols) + " |")
            print("|---" * (len(cols) + 1) + "|")
            for t in (1, 2):
                best = [ms(r[k]) for k in (f"BM_Gemm/{p}/n:{n}/threads:{t}" for p in F32_PEERS) if ok(r.get(k))]
                base = min(best) if best else None
                cells = []
                for i in cols:
                    b = r.get(f"BM_Gemm/{i}/n:{n}/threads:{t}")
                    if not ok(b):
                        cells.append("-")
                        continue
                    ratio = f" ({ms(b) / base:.1f}x)" if base and i not in F32_PEERS else ""
                    cells.append(f"{ms(b):.1f} ms{ratio}")
                    if base and i.startswith("exact_"):
                        limit = 2.5 if i == "exact_e4m3" else 5.0
                        self.target(f"{i}, n = {n}, {t} thread(s)", ms(b) / base, limit,
                                    f"{ms(b) / base:.2f}x the best f32 peer (target <= {limit}x)")
                    if base and i in MODELS:
                        self.target(f"{i}, n = {n}, {t} thread(s)", ms(b) / base, 12.0,
                                    f"{ms(b) / base:.1f}x the best f32 peer (target <= 12x)")
                print(f"| {t} | " + " | ".join(cells) + " |")
            print()
            two = [(i, r.get(f"BM_Gemm/{i}/n:{n}/threads:1"), r.get(f"BM_Gemm/{i}/n:{n}/threads:2")) for i in cols]
            two = [(i, a, b) for i, a, b in two if ok(a) and ok(b)]
            if two:
                print("Two threads against one (time on one / time on two):\n")
                print("| " + " | ".join(i for i, _, _ in two) + " |")
                print("|---" * len(two) + "|")
                print("| " + " | ".join(f"{ms(a) / ms(b):.2f}x" for _, a, b in two) + " |\n")
                for i, a, b in two:
                    if i in MODELS:
                        self.target(f"{i} two threads, n = {n}", ms(a) / ms(b), 1.8,
                                    f"{ms(a) / ms(b):.2f}x faster on two threads (target >= 1.8x)", below=False)

    # ---- schemes -------------------------------------------------------------------------------------------
    def schemes(self):
        r = self.rows
        if not any(n.startswith("BM_Scheme/") for n in r):
            return
        print("## Scaling schemes on a 4096 x 4096 f32 tensor (one thread): time and ratio to the plain conversion "
              "into the same element\n")
        print("| row | element | items/s | time / plain |")
        print("|---|---|---|---|")
        for key in ["Plain/e4m3", "Plain/e2m1", "PlainCodes/e4m3", "PlainCodes/e2m1", "Scaled/e4m3"]:
            b, p = r.get("BM_" + key), r.get("BM_Plain/" + key.split("/")[1])
            ratio = f"{ms(b) / ms(p):.2f}x" if ok(b) and ok(p) and not key.startswith("Plain/") else ""
            print(f"| {key.lower().replace('/', ' ')} | {key.split('/')[1]} | {rate(b)} | {ratio} |")
        one_pass = {"token", "block_1x128", "block_128x128", "mx_e4m3_floor", "mx_e4m3_rceil", "mx_e2m1"}
        elements = {"mx_e2m1": "e2m1", "nvfp4": "e2m1", "nvfp4_2d": "e2m1"}
        print()
        print("Each scheme into a reused result (`quantize_into`, against the plain conversion into a reused buffer: the "
              "targets) and into a fresh one (`quantize`, against the plain conversion into a fresh zeroed vector):\n")
        print("| scheme | element | quantize_into | / plain | quantize | / plaincodes | target |")
        print("|---|---|---|---|---|---|---|")
        for name in ["tensor", "channel", "token", "block_1x128", "block_128x128", "mx_e4m3_floor", "mx_e4m3_rceil",
                     "mx_e2m1", "nvfp4", "nvfp4_2d"]:
            into, fresh = r.get("BM_SchemeInto/" + name), r.get("BM_Scheme/" + name)
            if not ok(into) and not ok(fresh):
                continue
            el = elements.get(name, "e4m3")
            p, pc = r.get("BM_Plain/" + el), r.get("BM_PlainCodes/" + el)
            limit = 1.3 if name in one_pass else 1.8
            ratio = ms(into) / ms(p) if ok(into) and ok(p) else None
            fresh_ratio = f"{ms(fresh) / ms(pc):.2f}x" if ok(fresh) and ok(pc) else "-"
            cell = f"{ratio:.2f}x" if ratio else "-"
            met = verdict(ratio, limit) if ratio else "-"
            print(f"| {name} | {el} | {rate(into)} | {cell} | {rate(fresh)} | {fresh_ratio} | <= {limit}x: {met} |")
            if ratio:
                self.target(f"scheme {name}", ratio, limit,
                            f"{ratio:.2f}x the plain conversion, both into reused storage (target <= {limit}x)")
        print()

    def summary(self):
        if not self.targets:
            return
        print("## Targets (tools/bench/README.md), from the numbers above\n")
        print("| target | measured | verdict |")
        print("|---|---|---|")
        for what, text, v in self.targets:
            print(f"| {what} | {text} | {v} |")
        print()


def main():
    rows, contexts = load(sys.argv[1])
    print("Build flags and versions (each benchmark's JSON context):\n")
    shown = set()
    for name, ctx in contexts.items():
        for k, v in ctx.items():
            if k in ("date", "host_name", "executable", "num_cpus", "mhz_per_cpu", "cpu_scaling_enabled", "caches",
                     "load_avg", "library_build_type") or (k, v) in shown:
                continue
            shown.add((k, v))
            print(f"- {name}: `{k}` = {v}")
    print()
    report = Report(rows)
    report.convert()
    report.gemm()
    report.schemes()
    report.summary()


if __name__ == "__main__":
    main()
