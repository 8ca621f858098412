#!/usr/bin/env bash
# Every benchmark row of the project in one run, peers at their best, then the tables of tools/bench/RESULTS.md.
#
#   tools/bench/run.sh [build-dir]        (default: build-bench)
#
# Environment: LOWBIT_BENCH_REPS (repetitions, default 3: every table cell is a median), LOWBIT_BENCH_JOBS (build
# jobs, default 2), LOWBIT_BENCH_FILTER (a regular expression: only the C++ rows it matches), LOWBIT_BENCH_PYTHON
# (the interpreter of the rows scripts, default python3: the one with the peers and the lowbit package installed),
# LOWBIT_BENCH_OPENBLAS_CORETYPE (skip the probe below and use this kernel set), LOWBIT_GEMM_BENCH_LARGE=0 (no
# 4096^3 rows).  The JSON of every benchmark is kept in <build-dir>/bench-json/ (flags and versions in each
# file's context).
#
# Steps: build the three C++ benchmarks; probe OpenBLAS's kernel sets (OPENBLAS_CORETYPE: the one it detects and
# the candidates below) on sgemm at 1024^3 and run the GEMM benchmark with the fastest (it is one library in one
# process, so the exact GEMM's dgemm gets the same kernels); run every benchmark with its repetitions interleaved
# in random order (a slow phase of a shared machine then falls on every row alike); run every rows script
# (tools/bench/*_rows.py, see bench_rows.py); print the tables and the targets (tables.py).
#
# The sweep of all 2^32 f32 inputs (BM_Sweep, built with the CUDA toolkit's headers) is left out: run
# lowbit_convert_bench --benchmark_filter=BM_Sweep for it.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="${1:-$root/build-bench}"
reps="${LOWBIT_BENCH_REPS:-3}"
jobs="${LOWBIT_BENCH_JOBS:-2}"
filter="${LOWBIT_BENCH_FILTER:-}"
python="${LOWBIT_BENCH_PYTHON:-python3}"

if [[ ! -f "$build/CMakeCache.txt" ]]; then
  cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DLOWBIT_CUDA=OFF -DLOWBIT_BENCH=ON
fi
cmake --build "$build" -j"$jobs" --target lowbit_convert_bench lowbit_gemm_bench lowbit_scheme_bench

out="$build/bench-json"
rm -rf "$out"
mkdir -p "$out"
bench="$build/tools/bench"
common=(--benchmark_repetitions="$reps" --benchmark_report_aggregates_only=true --benchmark_format=json
        --benchmark_enable_random_interleaving=true)
[[ -n "$filter" ]] && common+=(--benchmark_filter="$filter")
# OpenMP threads (Eigen's) sleep between parallel regions instead of spinning into the next row's time.
export OMP_WAIT_POLICY=PASSIVE
export PYTHONDONTWRITEBYTECODE=1  # no __pycache__ beside the rows scripts

load() { cut -d' ' -f1-3 /proc/loadavg; }
start_load="$(load)"
start_date="$(date -u '+%Y-%m-%d %H:%M UTC')"

# OpenBLAS's kernels at their best: the fastest sgemm among the detected set and the candidates.
coretype="${LOWBIT_BENCH_OPENBLAS_CORETYPE:-}"
probe_note=""
if [[ -z "$coretype" ]]; then
  best=""
  best_ms=""
  for candidate in detected Haswell SkylakeX Zen Cooperlake SapphireRapids; do
    env_args=()
    [[ $candidate != detected ]] && env_args=(OPENBLAS_CORETYPE="$candidate")
    json="$(env "${env_args[@]}" "$bench/lowbit_gemm_bench" --benchmark_filter='openblas_sgemm/n:1024/threads:1/' \
      --benchmark_repetitions=3 --benchmark_report_aggregates_only=true --benchmark_format=json 2>/dev/null)" || continue
    read -r name t <<<"$(python3 -c 'import json,sys; d=json.loads(sys.argv[1]); c=d["context"].get("openblas","");
m=[b["real_time"] for b in d["benchmarks"] if b.get("aggregate_name")=="median"]
print(c.rsplit("core ",1)[-1] if c else "?", m[0] if m else "")' "$json")"
    [[ -z "$t" ]] && continue
    probe_note+="$candidate -> $name: $t ms; "
    if [[ -z "$best_ms" ]] || python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) < float(sys.argv[2]) else 1)" "$t" "$best_ms"; then
      best="$name"
      best_ms="$t"
    fi
  done
  coretype="$best"
fi

"$bench/lowbit_convert_bench" --benchmark_filter="${filter:-BM_Convert}" "${common[@]}" > "$out/convert.json"
OPENBLAS_CORETYPE="$coretype" "$bench/lowbit_gemm_bench" "${common[@]}" > "$out/gemm.json"
"$bench/lowbit_scheme_bench" "${common[@]}" > "$out/scheme.json"
for script in "$root"/tools/bench/*_rows.py; do
  [[ -e "$script" ]] || continue
  "$python" "$script" --repetitions "$reps" --out "$out/$(basename "$script" .py).json"
done

compiler="$(sed -n 's/^CMAKE_CXX_COMPILER:[A-Z]*=//p' "$build/CMakeCache.txt")"
echo "date: $start_date (to $(date -u '+%H:%M UTC'))"
echo "machine: $(lscpu | sed -n 's/^Model name:[[:space:]]*//p'), $(nproc) CPUs," \
  "load average $start_load at the start, $(load) at the end"
echo "compiler: $compiler ($("$compiler" -dumpfullversion)), build type $(sed -n 's/^CMAKE_BUILD_TYPE:[A-Z]*=//p' "$build/CMakeCache.txt")"
echo "OpenBLAS kernels: OPENBLAS_CORETYPE=$coretype${probe_note:+ (sgemm 1024^3, one thread: $probe_note)}"
echo "repetitions: $reps, interleaved; OMP_WAIT_POLICY=PASSIVE"
echo
python3 "$root/tools/bench/tables.py" "$out"
