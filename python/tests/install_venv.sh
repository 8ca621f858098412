#!/usr/bin/env bash
# Install the package from an existing CMake build directory into a virtual environment (the fixture of
# the `python_package` tests, python/CMakeLists.txt):
#
#   install_venv.sh PYTHON BUILD_DIR VENV SOURCE_DIR
#
# pip builds the wheel with scikit-build-core in BUILD_DIR itself, whose targets are already built, so
# nothing is compiled a second time.  The environment sees the interpreter's site-packages (numpy, ml_dtypes,
# pytest, scikit-build-core and nanobind from requirements.txt), so this needs no network: no build
# isolation, no index, no dependencies fetched.
set -euo pipefail
python=$1 build=$2 venv=$3 src=$4

if [[ ! -x $venv/bin/python ]]; then
  "$python" -m venv --system-site-packages "$venv"
fi
# scikit-build-core reconfigures BUILD_DIR with its own settings; it must keep the directory's generator and
# leave its cached interpreter alone (cmake.python-hints), so that the rest of the build is unchanged.
# The same holds for its build type: another one would rebuild everything.
generator=$(sed -n 's/^CMAKE_GENERATOR:INTERNAL=//p' "$build/CMakeCache.txt")
build_type=$(sed -n 's/^CMAKE_BUILD_TYPE:[A-Z]*=//p' "$build/CMakeCache.txt")
export CMAKE_GENERATOR=$generator
"$venv/bin/python" -m pip install --disable-pip-version-check --no-input --no-build-isolation --no-deps --no-index \
  --force-reinstall -q -C build-dir="$build" -C cmake.python-hints=false -C cmake.build-type="${build_type:-Release}" \
  "$src"
"$venv/bin/python" -c 'import lowbit; print("lowbit", lowbit.__version__, "installed in", lowbit.__file__)'
"$venv/bin/lowbit" --version
