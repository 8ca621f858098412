# Precision contracts (`lowbit contract`): a hand-derived contract, every named contract's fprop against an
# independent composition of `lowbit quantize`, `lowbit gemm` and the epilogue in numpy, and the refusals of
# bad contracts and inputs.  pytest through the `lowbit` executable; ml_dtypes (requirements.txt) for the
# composition's bf16 cast, its tests skipped with the reason where it is missing.
find_package(Python3 COMPONENTS Interpreter)
if(NOT Python3_Interpreter_FOUND)
  message(WARNING "lowbit: no Python 3 interpreter; the contract tests are not registered")
  return()
endif()
add_test(NAME contract_cli
         COMMAND ${Python3_EXECUTABLE} -m pytest -q -p no:cacheprovider -rs ${CMAKE_CURRENT_SOURCE_DIR}/contract/test_contract_cli.py)
set_tests_properties(contract_cli PROPERTIES LABELS quick TIMEOUT 600 ENVIRONMENT "LOWBIT=$<TARGET_FILE:lowbit>")
# `contract check --plugin` through the planted-bug plugin's contract entry, and a table of ABI version 1's
# first size (the misbehaving plugin's "v1", conformance/vectors.cmake) that still loads.
add_test(NAME contract_plugin
         COMMAND ${Python3_EXECUTABLE} -m pytest -q -p no:cacheprovider -rs
                 ${CMAKE_CURRENT_SOURCE_DIR}/contract/test_contract_plugin.py)
set_tests_properties(contract_plugin PROPERTIES LABELS quick TIMEOUT 600 ENVIRONMENT
  "LOWBIT=$<TARGET_FILE:lowbit>;LOWBIT_PLANTED_PLUGIN=$<TARGET_FILE:lowbit_plugin_planted_bug>;LOWBIT_MISBEHAVING_PLUGIN=$<TARGET_FILE:lowbit_plugin_misbehaving>")
# The golden contract suites: each committed `contract-<name>` against `contract run`, `lowbit check`'s
# required output and optional stages, and `lowbit gate` through the planted plugin's contract entry.
add_test(NAME contract_suites
         COMMAND ${Python3_EXECUTABLE} -m pytest -q -p no:cacheprovider -rs
                 ${CMAKE_CURRENT_SOURCE_DIR}/contract/test_contract_suites.py)
set_tests_properties(contract_suites PROPERTIES LABELS quick TIMEOUT 600 ENVIRONMENT
  "LOWBIT=$<TARGET_FILE:lowbit>;LOWBIT_PLANTED_PLUGIN=$<TARGET_FILE:lowbit_plugin_planted_bug>;LOWBIT_MISBEHAVING_PLUGIN=$<TARGET_FILE:lowbit_plugin_misbehaving>")
# A contract's gelu and silu steps: the correctly rounded f32 reference (MPFR) against values computed
# independently with mpmath (in the test's comments), and `contract check` within the stated ulp tolerance.
add_test(NAME contract_activation
         COMMAND ${Python3_EXECUTABLE} -m pytest -q -p no:cacheprovider -rs
                 ${CMAKE_CURRENT_SOURCE_DIR}/contract/test_contract_activation.py)
set_tests_properties(contract_activation PROPERTIES LABELS quick TIMEOUT 600 ENVIRONMENT "LOWBIT=$<TARGET_FILE:lowbit>")
