#!/usr/bin/env bash
# Determinism across compilers and optimisation levels (issue "Fuzzing and hardening", item 4): the same
# small suite run by several builds of `lowbit` must give byte-identical golden vectors, quantize /
# convert / gemm outputs, and report numbers (report.json without its "run" block of date and seconds).
#
#   scripts/check-determinism.sh [BUILD_DIR ...]
#
# Without arguments: the main build (gcc, Release: -O3), the sanitizer build of scripts/run-sanitize.sh
# (clang -O1, ASan + UBSan) when it exists, and build-det-gcc-O0 (gcc -O0, configured and built here:
# only the lowbit target).  LOWBIT_DETERMINISM_EXTRA="clang-O3 clang-O0 gcc-O2 ..." adds builds
# build-det-<compiler>-<level> of the same kind.  Exit 0 when every build agrees, 1 otherwise.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
jobs=${LOWBIT_JOBS:-$(nproc)}
log() { printf '[determinism %4ds] %s\n' "$SECONDS" "$*"; }

# Configure and build lowbit alone with one compiler and -O level.
det_build() {  # det_build gcc|clang O0|O1|O2|O3
  local cc=$1 level=$2 dir="build-det-$1-$2" cxx
  if [[ $cc == gcc ]]; then cxx=g++; else cxx=clang++; fi
  local args=(-S . -B "$dir" -DCMAKE_BUILD_TYPE=Det "-DCMAKE_CXX_FLAGS_DET=-$level" "-DCMAKE_C_FLAGS_DET=-$level"
    -DCMAKE_C_COMPILER="$cc" -DCMAKE_CXX_COMPILER="$cxx" -DLOWBIT_TESTS=OFF -DLOWBIT_BENCH=OFF -DLOWBIT_CUDA=OFF)
  if [[ ! -f $dir/CMakeCache.txt ]] && command -v ninja >/dev/null 2>&1; then args+=(-G Ninja); fi
  if command -v ccache >/dev/null 2>&1; then
    args+=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  fi
  cmake "${args[@]}" >/dev/null
  cmake --build "$dir" --parallel "$jobs" --target lowbit >/dev/null
  echo "$dir"
}

dirs=("$@")
if ((${#dirs[@]} == 0)); then
  dirs=("${LOWBIT_BUILD_DIR:-build}")
  [[ -x ${LOWBIT_ASAN_BUILD_DIR:-build-asan}/tools/lowbit/lowbit ]] && dirs+=("${LOWBIT_ASAN_BUILD_DIR:-build-asan}")
  log "building build-det-gcc-O0"
  dirs+=("$(det_build gcc O0)")
  for extra in ${LOWBIT_DETERMINISM_EXTRA:-}; do
    log "building build-det-$extra"
    dirs+=("$(det_build "${extra%-*}" "${extra#*-}")")
  done
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# Leaks are not the question here; the sanitizer build runs with its checks on anyway.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0}

# The small suite: what each build computes, one file per item, all hashed at the end.
run_suite() {  # run_suite LOWBIT OUT
  local lb=$1 out=$2
  mkdir -p "$out/vectors"  # vectors generate makes its folder, not the folders above it
  for s in convert-te scheme-mx scheme-nvfp4 scheme-delayed gemm-hopper-fp8 gemm-blackwell-mxf4nvf4 gemm-f32-pairwise; do
    "$lb" vectors generate --suite "$s" --out "$out/vectors/$s" >/dev/null
  done
  local x="0x3f800000 0xc0000000 0x3f000000 0x40400000 0x3eaaaaab 0x00000001 0x7f7fffff 0xc2f00000"
  echo "$x $x" | "$lb" quantize --scheme mx --element e2m1 --block 8 --in - --out - >"$out/q-mx.json"
  echo "$x $x" | "$lb" quantize --scheme nvfp4 --in - --out - >"$out/q-nvfp4.json"
  echo "$x" | "$lb" quantize --scheme tensor --element e5m2 --rounding sr-c --sr-bits 8 --sr-seed 3 --in - --out - >"$out/q-sr.json"
  "$lb" dequantize --exact --in "$out/q-nvfp4.json" --out - >"$out/dq-nvfp4.txt"
  printf '0.1\n1e-45\n3.4028235677973366e38\n-0x1.fffffep-127\nnan\n' |
    "$lb" convert --from text --to e4m3 --profile cuda --flags >"$out/convert.txt"
  printf '%s\n' 0x3f800000 0x3e99999a 0x00000003 | "$lb" convert --to binary8p3se --rounding rto --flags --trace >"$out/trace.txt"
  echo '{"m":1,"n":1,"k":3,"a_format":"e4m3","b_format":"e4m3","a":["0x7e","0xfe","0x08"],"b":["0x38","0x38","0x38"]}' \
    >"$out/cancel.json"
  for m in exact hopper-fp8 blackwell-f8f6f4 f32-pairwise; do
    "$lb" gemm --model "$m" --a - --out - <"$out/cancel.json" >"$out/gemm-$m.json"
  done
  "$lb" report --quick --json-only --sections synthetic,gemm,profiles --out "$out/report" >/dev/null 2>"$work/report.err" ||
    { echo "check-determinism: $lb report failed:" >&2; cat "$work/report.err" >&2; return 1; }
  python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); j.pop("run",None); print(json.dumps(j,sort_keys=True))' \
    "$out/report/report.json" >"$out/report-numbers.json"
  rm -rf "$out/report"
}

status=0
first=""
for d in "${dirs[@]}"; do
  lb="$d/tools/lowbit/lowbit"
  if [[ ! -x $lb ]]; then
    echo "check-determinism: no $lb" >&2
    exit 2
  fi
  name=$(basename "$d")
  start=$SECONDS
  run_suite "$lb" "$work/$name"
  (cd "$work/$name" && find . -type f | LC_ALL=C sort | xargs sha256sum) >"$work/$name.sums"
  log "$name: $(wc -l <"$work/$name.sums") files in $((SECONDS - start))s, digest $(sha256sum <"$work/$name.sums" | cut -c1-16)"
  if [[ -z $first ]]; then
    first=$name
  elif ! diff -u "$work/$first.sums" "$work/$name.sums" >"$work/diff.txt"; then
    echo "check-determinism: $name differs from $first:" >&2
    grep '^[-+][0-9a-f]' "$work/diff.txt" | head -20 >&2
    status=1
  fi
done
if ((status == 0)); then log "identical across ${dirs[*]}"; fi
exit "$status"
