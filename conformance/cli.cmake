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
  cli_convert_streaming  cli/test_convert_streaming.py
  cli_schemes_gemm  cli/test_schemes_cli.py
  cli_checkpoint  cli/test_checkpoint_cli.py
  cli_npy_sources  cli/test_npy_sources.py
  checkpoint_compressed_tensors  checkpoint/test_ct_checkpoints.py
  checkpoint_modelopt  checkpoint/test_modelopt_checkpoints.py
  checkpoint_gguf  checkpoint/test_gguf_checkpoints.py
  checkpoint_fp8_block  checkpoint/test_fp8_block_checkpoints.py
  checkpoint_export  checkpoint/test_export.py
  state_training  state/test_state.py
  cli_result_path  cli/test_result_path.py
  peer_ml_dtypes  peers/test_mldtypes.py
  peer_gfloat  peers/test_gfloat.py
)
while(_lowbit_py_tests)
  list(POP_FRONT _lowbit_py_tests _name _file)
  set(_python ${Python3_EXECUTABLE})
  set(_env "LOWBIT=$<TARGET_FILE:lowbit>")
  # The ml_dtypes peer test has two subjects, the command line and the Python package: where the build has
  # the package (LOWBIT_PYTHON), it runs in the package's virtual environment (python/CMakeLists.txt).
  if(LOWBIT_PYTHON AND _name STREQUAL "peer_ml_dtypes")
    set(_python ${LOWBIT_PYTHON_VENV}/bin/python)
    set(_env "${_env};LOWBIT_REQUIRE_MODULE=1")
  endif()
  add_test(NAME ${_name}
           COMMAND ${_python} -m pytest -q -p no:cacheprovider ${CMAKE_CURRENT_SOURCE_DIR}/${_file})
  set_tests_properties(${_name} PROPERTIES
    LABELS quick
    ENVIRONMENT "${_env}"
    TIMEOUT 600)
  if(LOWBIT_PYTHON AND _name STREQUAL "peer_ml_dtypes")
    set_tests_properties(${_name} PROPERTIES FIXTURES_REQUIRED lowbit_python_venv)
  endif()
endwhile()

# Every input without a defined result compared by itself in both modes (the quick run samples bf16 and f16).
add_test(NAME cli_result_path_all
         COMMAND ${Python3_EXECUTABLE} -m pytest -q -p no:cacheprovider ${CMAKE_CURRENT_SOURCE_DIR}/cli/test_result_path.py)
set_tests_properties(cli_result_path_all PROPERTIES
  LABELS full
  ENVIRONMENT "LOWBIT=$<TARGET_FILE:lowbit>;LOWBIT_RESULT_PATH_ALL=1"
  TIMEOUT 7200)
