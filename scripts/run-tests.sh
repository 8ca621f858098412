#!/usr/bin/env bash
# Install what is missing, build, and run one tier of the test suite.
#
#   scripts/run-tests.sh          the quick tier (what CI runs, via .ci/run)
#   scripts/run-tests.sh full     the full tier: exhaustive sweeps, hours rather than minutes
#
# The tiers are ctest labels; every test carries one of them (conformance/README.md).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
build_dir=${LOWBIT_BUILD_DIR:-build}
jobs=${LOWBIT_JOBS:-$(nproc)}

tier=${1:-quick}
case $tier in
  quick | full) ;;
  *)
    echo "usage: scripts/run-tests.sh [quick|full]" >&2
    exit 2
    ;;
esac

scripts/setup.sh

# A tier that selects no test is a broken build, not a pass.  A quick-tier test that runs for ten
# minutes is hung or misfiled, and is stopped so that CI reports it instead of running out of time.
ctest_args=(--test-dir "$build_dir" -L "^$tier\$" --output-on-failure --no-tests=error -j "$jobs")
if [[ $tier == quick ]]; then
  ctest_args+=(--timeout 600)
fi

start=$SECONDS
status=0
ctest "${ctest_args[@]}" || status=$?
echo "[tests] tier $tier finished in $((SECONDS - start))s with status $status"

# The quick tier ends with the hardening checks (scripts/run-sanitize.sh): the sanitize subset under ASan +
# UBSan, a smoke run of every fuzz target on its committed corpus (30 s each), and determinism across
# compilers and optimisation levels.  CI runs them; LOWBIT_SANITIZE=0 leaves them out of a local rerun.
if [[ $tier == quick && ${LOWBIT_SANITIZE:-1} != 0 ]]; then
  start=$SECONDS
  sanitize_status=0
  scripts/run-sanitize.sh || sanitize_status=$?
  echo "[tests] sanitize, fuzz smoke and determinism finished in $((SECONDS - start))s with status $sanitize_status"
  if ((status == 0)); then status=$sanitize_status; fi
fi
exit "$status"
