#!/usr/bin/env bash
# Install what is missing, build, and run the main job: the conformance check.
#
#   scripts/run-main.sh                      quick tier, report in reports/out/
#   scripts/run-main.sh --tier full          any arguments replace the defaults (see `lowbit conform --help`)
#
# Exits with lowbit's status: 0 conformant, 1 mismatches found, 2 usage or input error.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
build_dir=${LOWBIT_BUILD_DIR:-build}

scripts/setup.sh

args=("$@")
if ((${#args[@]} == 0)); then
  args=(--tier quick --out reports/out)
fi
exec "$build_dir/tools/lowbit/lowbit" conform "${args[@]}"
