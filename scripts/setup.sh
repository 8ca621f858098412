#!/usr/bin/env bash
# Install whatever lowbit needs that is missing, then configure and build.
#
#   scripts/setup.sh [extra cmake -D options...]
#
# Idempotent: each step checks first and does nothing when its work is already done, so a rerun
# costs an incremental build.  Environment:
#   LOWBIT_BUILD_DIR   build directory (default: build)
#   LOWBIT_BUILD_TYPE  CMake build type (default: Release)
#   LOWBIT_CUDA        AUTO (default: build the device side when nvcc is found), ON or OFF
#   LOWBIT_JOBS        parallel build jobs (default: number of cores)
#   LOWBIT_PYTHON      ON (default: build the Python package's extension, which the tests install into a
#                      virtual environment) or OFF
#   CI                 when "true", warnings are errors (-DLOWBIT_WERROR=ON)
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

build_dir=${LOWBIT_BUILD_DIR:-build}
build_type=${LOWBIT_BUILD_TYPE:-Release}
jobs=${LOWBIT_JOBS:-$(nproc)}

log() { printf '[setup %4ds] %s\n' "$SECONDS" "$*"; }

# ---- Debian packages -----------------------------------------------------------------------------
# What the top-level CMakeLists.txt finds, one package per dependency (MPFR: the contracts' gelu and silu
# references and the tests' second oracle; Eigen:
# the benchmarks' peer).
packages=(
  build-essential cmake ninja-build pkg-config ccache
  libgmp-dev libmpfr-dev libeigen3-dev
  libgtest-dev libgmock-dev librapidcheck-dev libbenchmark-dev
  libcli11-dev nlohmann-json3-dev libhwy-dev libtbb-dev libopenblas-dev
  # The sanitizer build and the fuzz targets (scripts/run-sanitize.sh): clang with libFuzzer and the
  # sanitizer runtimes (libclang-rt-14-dev), llvm-symbolizer for readable reports (llvm-14).
  clang libclang-rt-14-dev llvm-14
  # The function-size rule of reference/ (conformance/lint.cmake, scripts/check-function-size.sh).
  clang-tidy
  # The accuracy report's page test (conformance/report/test_browser.py): a browser and its driver.
  chromium chromium-driver
  # The cluster test (conformance/cluster/test_slurm.py): a one-node Slurm started by tools/slurm/local-cluster.
  slurm-wlm munge
)
# Python: any python3 with pip will do (a clean Debian has neither until they are installed).  The Python
# package's extension needs the interpreter's headers, and its tests a virtual environment (Debian's
# python3-dev and python3-venv, for Debian's python3).
if ! command -v python3 >/dev/null 2>&1; then
  packages+=(python3 python3-pip python3-dev python3-venv)
else
  if ! python3 -m pip --version >/dev/null 2>&1; then packages+=(python3-pip); fi
  if [[ $(python3 -c 'import sys; print(sys.executable)') == /usr/bin/* ]]; then
    packages+=(python3-dev python3-venv)
  fi
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed'; then
    missing+=("$p")
  fi
done
if ((${#missing[@]} > 0)); then
  sudo=()
  if [[ $(id -u) -ne 0 ]]; then sudo=(sudo); fi
  log "installing Debian packages: ${missing[*]}"
  "${sudo[@]}" apt-get update -q
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
else
  log "Debian packages: all present"
fi

# ---- Python packages -----------------------------------------------------------------------------
python=$(python3 -c 'import sys; print(sys.executable)')
# Skip pip entirely when every pinned version is already installed (fast, and works offline).
requirements_met() {
  "$python" - requirements.txt <<'PY'
import re, sys
from importlib import metadata
for line in open(sys.argv[1]):
    line = line.split("#", 1)[0].strip()
    if not line:
        continue
    name, _, version = line.partition("==")
    try:
        if metadata.version(name.strip()) != version.strip():
            sys.exit(1)
    except metadata.PackageNotFoundError:
        sys.exit(1)
PY
}
if requirements_met; then
  log "Python packages: all pinned versions present ($python)"
else
  pip_args=(install --disable-pip-version-check --no-input -r requirements.txt)
  if [[ $(id -u) -eq 0 ]]; then pip_args+=(--root-user-action=ignore); fi
  # Debian's own python3 refuses installs outside a virtual environment (PEP 668); this project
  # wants its peers importable by the plain python3 that its tests run, so it says so explicitly.
  if "$python" -c 'import os, sys, sysconfig
sys.exit(0 if sys.prefix == sys.base_prefix and os.path.exists(os.path.join(sysconfig.get_path("stdlib"), "EXTERNALLY-MANAGED")) else 1)'; then
    pip_args+=(--break-system-packages)
  fi
  log "installing Python packages into $python"
  "$python" -m pip "${pip_args[@]}"
fi

# ---- configure -----------------------------------------------------------------------------------
# The CUDA toolkit's usual home, for machines where it is installed but not on PATH.
if ! command -v nvcc >/dev/null 2>&1 && [[ -x /usr/local/cuda/bin/nvcc ]]; then
  export PATH="$PATH:/usr/local/cuda/bin"
fi

cmake_args=(-S . -B "$build_dir"
  -DCMAKE_BUILD_TYPE="$build_type"
  -DLOWBIT_CUDA="${LOWBIT_CUDA:-AUTO}"
  -DLOWBIT_PYTHON="${LOWBIT_PYTHON:-ON}")
# The Python package is built for the interpreter that has the pinned packages (nanobind among them).
if [[ ${LOWBIT_PYTHON:-ON} == ON ]]; then
  cmake_args+=(-DPython_EXECUTABLE="$python")
fi
if [[ ${CI:-} == true ]]; then
  cmake_args+=(-DLOWBIT_WERROR=ON)
fi
# Keep the generator of an existing build directory; otherwise prefer Ninja.
if [[ ! -f $build_dir/CMakeCache.txt ]] && command -v ninja >/dev/null 2>&1; then
  cmake_args+=(-G Ninja)
fi
if command -v ccache >/dev/null 2>&1; then
  cmake_args+=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  if command -v nvcc >/dev/null 2>&1; then
    cmake_args+=(-DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
  fi
fi
log "configuring $build_dir ($build_type)"
cmake "${cmake_args[@]}" "$@"

# ---- build ---------------------------------------------------------------------------------------
log "building with $jobs jobs"
cmake --build "$build_dir" --parallel "$jobs"
log "done"
