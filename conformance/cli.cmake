# Command-line contract tests and the differential tests against the Python peers (ml_dtypes,
# gfloat), all through the `lowbit` executable.  pytest runs them; a peer module that is not installed
# makes its tests skip with the reason, never pass silently.
find_package(Python3 COMPONENTS Interpreter)
if(NOT Python3_Interpreter_FOUND)
  message(WARNING "lowbit: no Python 3 interpreter; the command-line and peer tests are not registered")
  return()
endif()

set(_lowbit_py_tests
  cli_contract  cli/test_cli.py
  cli_schemes_gemm  cli/test_schemes_cli.py
  cli_checkpoint  cli/test_checkpoint_cli.py
  cli_result_path  cli/test_result_path.py
  peer_ml_dtypes  peers/test_mldtypes.py
  peer_gfloat  peers/test_gfloat.py
)
while(_lowbit_py_tests)
  list(POP_FRONT _lowbit_py_tests _name _file)
  add_test(NAME ${_name}
           COMMAND ${Python3_EXECUTABLE} -m pytest -q -p no:cacheprovider ${CMAKE_CURRENT_SOURCE_DIR}/${_file})
  set_tests_properties(${_name} PROPERTIES
    LABELS quick
    ENVIRONMENT "LOWBIT=$<TARGET_FILE:lowbit>"
    TIMEOUT 600)
endwhile()

# Every input without a defined result compared by itself in both modes (the quick run samples bf16 and f16).
add_test(NAME cli_result_path_all
         COMMAND ${Python3_EXECUTABLE} -m pytest -q -p no:cacheprovider ${CMAKE_CURRENT_SOURCE_DIR}/cli/test_result_path.py)
set_tests_properties(cli_result_path_all PROPERTIES
  LABELS full
  ENVIRONMENT "LOWBIT=$<TARGET_FILE:lowbit>;LOWBIT_RESULT_PATH_ALL=1"
  TIMEOUT 7200)
