#!/usr/bin/env bash
# Run one fuzz target for a chosen time and print what fuzz/README.md records for it.
#
#   fuzz/run.sh TARGET SECONDS [libFuzzer options...]      TARGET: convert scheme gemm files cli gguf
#
# The target comes from the sanitizer build (LOWBIT_ASAN_BUILD_DIR, default build-asan; scripts/run-sanitize.sh
# fuzz builds it).  New inputs go to BUILD/fuzz/runs/TARGET/corpus (the committed corpus is only read);
# a crash, leak, timeout or failed check leaves its input in BUILD/fuzz/runs/TARGET/ (crash-*, leak-*,
# timeout-*) and the log in BUILD/fuzz/runs/TARGET/log.  Reproduce one with: BUILD/fuzz/fuzz_TARGET FILE.
# Runs under nice -n 19, one process (the machines this runs on are shared).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
target=${1:?usage: fuzz/run.sh TARGET SECONDS [libFuzzer options...]}
seconds=${2:?usage: fuzz/run.sh TARGET SECONDS [libFuzzer options...]}
shift 2
build=${LOWBIT_ASAN_BUILD_DIR:-$root/build-asan}
bin=$build/fuzz/fuzz_$target
if [[ ! -x $bin ]]; then
  echo "fuzz/run.sh: $bin not built (scripts/run-sanitize.sh fuzz)" >&2
  exit 2
fi
work=$build/fuzz/runs/$target
mkdir -p "$work/corpus"
dict=()
if [[ -f $root/fuzz/dict/$target.dict ]]; then dict=(-dict="$root/fuzz/dict/$target.dict"); fi
start=$(date +%s)
rc=0
/usr/bin/time -f '%U %S' -o "$work/time" nice -n 19 "$bin" -max_total_time="$seconds" -timeout=20 -rss_limit_mb=2048 \
  -max_len=4096 -print_final_stats=1 -artifact_prefix="$work/" "${dict[@]}" "$@" "$work/corpus" \
  "$root/fuzz/corpus/$target" >"$work/log" 2>&1 || rc=$?
cpu=$(awk '{printf "%.0f", $1 + $2}' "$work/time")
execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$work/log" | grep -o '[0-9]*$' | tail -1 || true)
cov=$(grep -o 'cov: [0-9]* ft: [0-9]*' "$work/log" | tail -1 || true)
artifacts=$(find "$work" -maxdepth 1 \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' -o -name 'oom-*' \) | wc -l)
echo "fuzz_$target: wall $(( $(date +%s) - start ))s, cpu ${cpu}s, executions ${execs:-?}, ${cov:-cov ?}," \
     "corpus $(ls "$work/corpus" | wc -l) new, artifacts $artifacts, exit $rc"
if ((rc != 0)); then
  grep -m1 -A12 -E 'FUZZ FINDING|ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error|terminate called' "$work/log" || tail -20 "$work/log"
fi
exit "$rc"
