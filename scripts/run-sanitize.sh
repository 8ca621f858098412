#!/usr/bin/env bash
# The hardening tier of CI (called by scripts/run-tests.sh quick after the quick tier):
#   1. a clang build with ASan + UBSan and the libFuzzer targets (-DLOWBIT_FUZZ=ON), in its own build
#      directory, building only what the steps below need;
#   2. the `sanitize` subset of the quick tier under the sanitizers (ctest -L sanitize);
#   3. a smoke run of every fuzz target on its committed corpus (ctest -L fuzz; LOWBIT_FUZZ_SMOKE_SECONDS
#      each, default 30);
#   4. determinism: golden vectors, quantize / convert / gemm outputs and the numbers of a quick report are
#      byte-identical across gcc -O3 (the main build), clang (the sanitizer build) and gcc -O0
#      (scripts/check-determinism.sh).
#
#   scripts/run-sanitize.sh [sanitize|fuzz|determinism ...]   (default: all three steps)
# Environment: LOWBIT_ASAN_BUILD_DIR (default build-asan), LOWBIT_BUILD_DIR (the main build, default build),
# LOWBIT_JOBS, LOWBIT_FUZZ_SMOKE_SECONDS.  Needs clang and libclang-rt (scripts/setup.sh installs them).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
asan_dir=${LOWBIT_ASAN_BUILD_DIR:-build-asan}
jobs=${LOWBIT_JOBS:-$(nproc)}
smoke=${LOWBIT_FUZZ_SMOKE_SECONDS:-30}
steps=("$@")
if ((${#steps[@]} == 0)); then steps=(sanitize fuzz determinism); fi
want() { local s; for s in "${steps[@]}"; do [[ $s == "$1" ]] && return 0; done; return 1; }
log() { printf '[sanitize %4ds] %s\n' "$SECONDS" "$*"; }

if ! command -v clang++ >/dev/null 2>&1; then
  echo "scripts/run-sanitize.sh: clang++ not found (scripts/setup.sh installs clang)" >&2
  exit 2
fi

cmake_args=(-S . -B "$asan_dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo
  "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1" "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O1 -g1"
  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++
  -DLOWBIT_FUZZ=ON -DLOWBIT_SANITIZE=ON -DLOWBIT_CUDA=OFF -DLOWBIT_BENCH=OFF
  -DLOWBIT_FUZZ_SMOKE_SECONDS="$smoke")
if [[ ! -f $asan_dir/CMakeCache.txt ]] && command -v ninja >/dev/null 2>&1; then cmake_args+=(-G Ninja); fi
if command -v ccache >/dev/null 2>&1; then
  cmake_args+=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
log "configuring $asan_dir (clang, ASan + UBSan, libFuzzer)"
cmake "${cmake_args[@]}" >/dev/null

# Only the targets the chosen steps run (conformance/sanitize.cmake lists the subset).
targets=()
if want sanitize || want determinism; then targets+=(lowbit); fi
if want sanitize; then targets+=(test_io test_pack lowbit_unit_test test_scale test_gemm test_checkpoint_write); fi
if want fuzz; then targets+=(fuzz_convert fuzz_scheme fuzz_gemm fuzz_files fuzz_cli fuzz_gguf); fi
start=$SECONDS
log "building ${targets[*]}"
cmake --build "$asan_dir" --parallel "$jobs" --target "${targets[@]}"
log "built in $((SECONDS - start))s"

status=0
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
if want sanitize; then
  start=$SECONDS
  ctest --test-dir "$asan_dir" -L '^sanitize$' --output-on-failure --no-tests=error -j "$jobs" --timeout 600 || status=1
  log "sanitize subset finished in $((SECONDS - start))s"
fi
if want fuzz; then
  start=$SECONDS
  # One target at a time: each smoke run uses one core for $smoke seconds.
  ctest --test-dir "$asan_dir" -L '^fuzz$' --output-on-failure --no-tests=error -j 1 || status=1
  log "fuzz smoke runs finished in $((SECONDS - start))s"
fi
if want determinism; then
  start=$SECONDS
  scripts/check-determinism.sh || status=1
  log "determinism finished in $((SECONDS - start))s"
fi
exit "$status"
