# Golden vectors, `lowbit check` and `lowbit gate` (vectors/SPEC.md): the command-line tests (pytest)
# and the SHA-256 known answers of FIPS 180-4.
add_executable(lowbit_sha256_test ${CMAKE_CURRENT_SOURCE_DIR}/vectors/sha256_test.cpp)
target_link_libraries(lowbit_sha256_test PRIVATE lowbit::elements GTest::gtest_main)
add_test(NAME vectors_sha256 COMMAND lowbit_sha256_test)
set_tests_properties(vectors_sha256 PROPERTIES LABELS quick)

# A subject that crashes, hangs, exits, overruns, prints or hands over a broken table on request
# (misbehaving_plugin.cpp), for the gate's isolation tests; it forwards the rest to the planted plugin.
add_library(lowbit_plugin_misbehaving MODULE ${CMAKE_CURRENT_SOURCE_DIR}/vectors/misbehaving_plugin.cpp)
target_include_directories(lowbit_plugin_misbehaving PRIVATE ${PROJECT_SOURCE_DIR}/include)
target_link_libraries(lowbit_plugin_misbehaving PRIVATE ${CMAKE_DL_LIBS})
set_target_properties(lowbit_plugin_misbehaving PROPERTIES OUTPUT_NAME lowbit_misbehaving CXX_VISIBILITY_PRESET hidden)

find_package(Python3 COMPONENTS Interpreter)
if(Python3_Interpreter_FOUND)
  set(_lowbit_vectors_env
    "LOWBIT=$<TARGET_FILE:lowbit>"
    "LOWBIT_GOLDEN=${PROJECT_SOURCE_DIR}/vectors/golden"
    "LOWBIT_PLANTED_PLUGIN=$<TARGET_FILE:lowbit_plugin_planted_bug>"
    "LOWBIT_MISBEHAVING_PLUGIN=$<TARGET_FILE:lowbit_plugin_misbehaving>")
  if(TARGET lowbit_plugin_cuda_host)
    list(APPEND _lowbit_vectors_env "LOWBIT_CUDA_PLUGIN=$<TARGET_FILE:lowbit_plugin_cuda_host>")
  endif()
  add_test(NAME vectors_cli
           COMMAND ${Python3_EXECUTABLE} -m pytest -q -p no:cacheprovider ${CMAKE_CURRENT_SOURCE_DIR}/vectors/test_vectors.py)
  set_tests_properties(vectors_cli PROPERTIES LABELS quick ENVIRONMENT "${_lowbit_vectors_env}" TIMEOUT 600)
  add_test(NAME vectors_gate
           COMMAND ${Python3_EXECUTABLE} -m pytest -q -p no:cacheprovider ${CMAKE_CURRENT_SOURCE_DIR}/vectors/test_gate.py)
  set_tests_properties(vectors_gate PROPERTIES LABELS quick ENVIRONMENT "${_lowbit_vectors_env}" TIMEOUT 300)
  add_test(NAME vectors_shapes
           COMMAND ${Python3_EXECUTABLE} -m pytest -q -p no:cacheprovider ${CMAKE_CURRENT_SOURCE_DIR}/vectors/test_shapes.py)
  set_tests_properties(vectors_shapes PROPERTIES LABELS quick ENVIRONMENT "${_lowbit_vectors_env}" TIMEOUT 600)
endif()
