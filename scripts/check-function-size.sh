#!/usr/bin/env bash
# No function in reference/ longer than 200 lines: clang-tidy's readability-function-size over every
# source of reference/src (and the reference headers they include), from the build's compile commands.
#   scripts/check-function-size.sh BUILD_DIR
# Exit 1 naming each function over the limit, 2 when clang-tidy or the compile commands are missing.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${1:?usage: scripts/check-function-size.sh BUILD_DIR}
limit=200
tidy=$(command -v clang-tidy || command -v clang-tidy-14 || true)
if [[ -z $tidy ]]; then
  echo "check-function-size: clang-tidy not found (scripts/setup.sh installs it)" >&2
  exit 2
fi
if [[ ! -f $build/compile_commands.json ]]; then
  echo "check-function-size: $build/compile_commands.json not found (configure the build first)" >&2
  exit 2
fi
config="{Checks: '-*,readability-function-size', CheckOptions: [{key: readability-function-size.LineThreshold, value: $limit}]}"
mapfile -t sources < <(find "$root/reference/src" -name '*.cpp' | sort)
# One clang-tidy per source, two at a time; every warning is a function over the limit.
out=$(printf '%s\n' "${sources[@]}" |
  xargs -P 2 -I{} "$tidy" -p "$build" --quiet --config="$config" --header-filter="$root/reference/include/.*" {} 2>/dev/null |
  grep -E 'warning: function .* exceeds' | sort -u || true)
if [[ -n $out ]]; then
  echo "$out"
  echo "check-function-size: functions in reference/ over $limit lines (split them)" >&2
  exit 1
fi
echo "check-function-size: ${#sources[@]} sources of reference/src, no function over $limit lines"
