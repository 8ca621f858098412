#!/usr/bin/env bash
# Build (when needed) and run the three benchmarks with one set of settings, then print their tables.
#
#   tools/bench/run.sh [build-dir]        (default: build-bench; LOWBIT_BENCH_REPS=3 repetitions)
#
# Every benchmark reports the median of the repetitions.  The sweep of all 2^32 f32 inputs
# (BM_Sweep, only built with the CUDA toolkit's headers) is left out: run lowbit_convert_bench
# --benchmark_filter=BM_Sweep for it.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="${1:-$root/build-bench}"
reps="${LOWBIT_BENCH_REPS:-3}"
jobs="${LOWBIT_BENCH_JOBS:-2}"

if [[ ! -f "$build/CMakeCache.txt" ]]; then
  cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DLOWBIT_CUDA=OFF
fi
cmake --build "$build" -j"$jobs" --target lowbit_convert_bench lowbit_gemm_bench lowbit_scheme_bench

out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
common=(--benchmark_repetitions="$reps" --benchmark_report_aggregates_only=true --benchmark_format=json)
bench="$build/tools/bench"
"$bench/lowbit_convert_bench" --benchmark_filter=BM_Convert "${common[@]}" > "$out/convert.json"
"$bench/lowbit_gemm_bench" "${common[@]}" > "$out/gemm.json"
"$bench/lowbit_scheme_bench" "${common[@]}" > "$out/scheme.json"

echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
echo "machine: $(lscpu | sed -n 's/^Model name:[[:space:]]*//p'), $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "compiler: $(sed -n 's/^CMAKE_CXX_COMPILER:[A-Z]*=//p' "$build/CMakeCache.txt") ($("$(sed -n 's/^CMAKE_CXX_COMPILER:[A-Z]*=//p' "$build/CMakeCache.txt")" -dumpfullversion)), build type $(sed -n 's/^CMAKE_BUILD_TYPE:[A-Z]*=//p' "$build/CMakeCache.txt")"
echo

python3 - "$out" <<'PY'
import json, sys, os

def medians(name):
    with open(os.path.join(sys.argv[1], name + ".json")) as f:
        data = json.load(f)
    rows = {}
    for b in data["benchmarks"]:
        if b.get("aggregate_name", "median") != "median":
            continue
        rows[b.get("run_name", b["name"])] = b
    return rows

def rate(b):
    v = b.get("items_per_second", 0.0)
    for unit, scale in (("G/s", 1e9), ("M/s", 1e6), ("k/s", 1e3)):
        if v >= scale:
            return f"{v / scale:.3g} {unit}"
    return f"{v:.3g} /s"

conv = medians("convert")
print("## f32 -> target conversion, items per second (one thread)\n")
impls = ["simd", "simd_flags", "scalar", "exact", "cuda_host", "eigen"]
print("| target | " + " | ".join(impls) + " |")
print("|---" * (len(impls) + 1) + "|")
for target in ["e4m3", "e5m2", "e2m1", "bf16", "f16"]:
    cells = []
    for impl in impls:
        b = conv.get(f"BM_Convert/{target}/{impl}")
        cells.append(rate(b) if b else "-")
    print(f"| {target} | " + " | ".join(cells) + " |")

gemm = medians("gemm")
print("\n## GEMM, M = N = K = 1024: wall time per GEMM and ratio to Eigen f32 at the same thread count\n")
gemm_impls = ["eigen_f32", "exact_e4m3", "hopper-fp8", "hopper-fp8-mma-sync", "hopper-fp8-promote128"]
print("| threads | " + " | ".join(gemm_impls) + " |")
print("|---" * (len(gemm_impls) + 1) + "|")
for t in (1, 2):
    base = gemm.get(f"BM_Gemm/eigen_f32/threads:{t}/real_time")
    cells = []
    for impl in gemm_impls:
        b = gemm.get(f"BM_Gemm/{impl}/threads:{t}/real_time")
        if not b or b.get("error_occurred"):
            cells.append("-")
            continue
        ms = b["real_time"]
        ratio = f" ({ms / base['real_time']:.1f}x)" if base and not base.get("error_occurred") and impl != "eigen_f32" else ""
        cells.append(f"{ms:.0f} ms{ratio}")
    print(f"| {t} | " + " | ".join(cells) + " |")

sch = medians("scheme")
print("\n## Scaling schemes on a 4096 x 4096 f32 tensor, elements per second (one thread)\n")
print("| scheme | element | items/s | time / plain | time / plain_codes |")
print("|---|---|---|---|---|")
elements = {"mx_e2m1": "e2m1", "nvfp4": "e2m1", "nvfp4_2d": "e2m1"}
for key in ["Plain/e4m3", "Plain/e2m1", "PlainCodes/e4m3", "PlainCodes/e2m1", "Scaled/e4m3"]:
    b = sch.get("BM_" + key)
    if b:
        p = sch.get("BM_Plain/" + key.split('/')[1])
        r1 = f"{b['real_time'] / p['real_time']:.2f}x" if p and not key.startswith("Plain/") else ""
        print(f"| {key.lower().replace('/', ' ')} | {key.split('/')[1]} | {rate(b)} | {r1} | |")
for name in ["tensor", "channel", "token", "block_1x128", "block_128x128", "mx_e4m3_floor", "mx_e4m3_rceil",
             "mx_e2m1", "nvfp4", "nvfp4_2d"]:
    b = sch.get("BM_Scheme/" + name)
    if not b:
        continue
    el = elements.get(name, "e4m3")
    p, pc = sch.get("BM_Plain/" + el), sch.get("BM_PlainCodes/" + el)
    r1 = f"{b['real_time'] / p['real_time']:.1f}x" if p else "-"
    r2 = f"{b['real_time'] / pc['real_time']:.2f}x" if pc else "-"
    print(f"| {name} | {el} | {rate(b)} | {r1} | {r2} |")
PY
