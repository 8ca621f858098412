# The installation tests (conformance/install/): `cmake --install` into a scratch prefix and a consumer
# project built against it with find_package(lowbit); the Debian package that cpack writes, unpacked with
# dpkg-deb -x and run from there; and the shell commands of docs/ci.md's CI jobs.  Each installs what the
# build directory holds, so they run after a full build (as ctest does).  pytest runs them.
find_package(Python3 COMPONENTS Interpreter)
if(NOT Python3_Interpreter_FOUND)
  message(WARNING "lowbit: no Python 3 interpreter; the installation tests are not registered")
  return()
endif()

set(_lowbit_install_env
  "LOWBIT_SOURCE_DIR=${PROJECT_SOURCE_DIR}"
  "LOWBIT_BUILD_DIR=${PROJECT_BINARY_DIR}"
  "LOWBIT_CMAKE=${CMAKE_COMMAND}"
  "LOWBIT_CPACK=${CMAKE_CPACK_COMMAND}"
  "LOWBIT_CMAKE_GENERATOR=${CMAKE_GENERATOR}"
  "LOWBIT_CC=${CMAKE_C_COMPILER}"
  "LOWBIT_CXX=${CMAKE_CXX_COMPILER}")

# name, file, tier, timeout (s)
set(_lowbit_install_tests
  install_consumer         test_install_prefix.py    quick  600
  install_package          test_package.py           quick  600
  install_ci_gate_job      test_ci_jobs.py           quick  600
  install_package_conform  test_package_conform.py   full   3600
  install_ci_package_job   test_ci_package_job.py    full   3600
)
while(_lowbit_install_tests)
  list(POP_FRONT _lowbit_install_tests _name _file _tier _timeout)
  add_test(NAME ${_name}
           COMMAND ${Python3_EXECUTABLE} -m pytest -q -p no:cacheprovider ${CMAKE_CURRENT_SOURCE_DIR}/install/${_file})
  set_tests_properties(${_name} PROPERTIES LABELS ${_tier} ENVIRONMENT "${_lowbit_install_env}" TIMEOUT ${_timeout})
  # The Python package's fixture (python/CMakeLists.txt) reconfigures this build directory with
  # scikit-build-core, rewriting the install scripts and CPackConfig.cmake that these tests read: they run
  # after it, never beside it.
  if(LOWBIT_PYTHON)
    set_tests_properties(${_name} PROPERTIES FIXTURES_REQUIRED lowbit_python_venv)
  endif()
endwhile()
