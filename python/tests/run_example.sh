#!/usr/bin/env bash
# The example's pytest file both ways (python/CMakeLists.txt): it passes, and with its planted bug
# (LOWBIT_EXAMPLE_BUG=1) it fails with the mismatching element named, as README shows.
#
#   run_example.sh PYTHON EXAMPLE_FILE
set -uo pipefail
python=$1 example=$2
out=$("$python" -m pytest -q -p no:cacheprovider "$example" 2>&1)
rc=$?
if ((rc != 0)); then
  printf '%s\n' "$out"
  echo "run_example: the example failed (exit $rc) without the planted bug" >&2
  exit 1
fi
out=$(LOWBIT_EXAMPLE_BUG=1 "$python" -m pytest -q -p no:cacheprovider "$example" 2>&1)
rc=$?
printf '%s\n' "$out"
if ((rc != 1)); then
  echo "run_example: with LOWBIT_EXAMPLE_BUG=1 pytest exited $rc, not 1" >&2
  exit 1
fi
expected='scheme-nvfp4 case-000 standard/random-1x16 case-000/codes.npy[0, 9]: input 0x42b59bbb (90.80416107177734375) expected 0x7 (6), actual 0x6 (4)'
if ! grep -qF -- "$expected" <<<"$out"; then
  echo "run_example: the planted bug's failure does not name the element: $expected" >&2
  exit 1
fi
if ! grep -q 'test_fp8_gemm\[gemm-exact\] PASSED\|1 failed, 1 passed' <<<"$out"; then
  echo "run_example: the FP8 GEMM test did not pass beside the failing quantizer" >&2
  exit 1
fi
echo "run_example: passes, and fails with the planted bug naming the element"
