# The cuBLASLt gate plugin (plugins/cublaslt_gate): cuBLASLt's FP8 GEMM as a `lowbit gate` subject, one pinned
# algorithm without split-K, built as a loadable module (liblowbit_cublaslt_gate.so).  Its test loads it as the
# gate does: without a GPU each GEMM fails with "no GPU: ..." (quick tier); on a Hopper GPU it must equal the
# hopper-fp8 model (fast accumulation) and promotion every 128 (without) at kernel shapes (device tier).
add_library(lowbit_plugin_cublaslt_gate MODULE ${PROJECT_SOURCE_DIR}/plugins/cublaslt_gate/cublaslt_gate_plugin.cpp)
target_include_directories(lowbit_plugin_cublaslt_gate PRIVATE ${PROJECT_SOURCE_DIR}/include)
target_link_libraries(lowbit_plugin_cublaslt_gate PRIVATE lowbit_device_cublaslt)
set_target_properties(lowbit_plugin_cublaslt_gate PROPERTIES OUTPUT_NAME lowbit_cublaslt_gate CXX_VISIBILITY_PRESET hidden
                                                             VISIBILITY_INLINES_HIDDEN ON
                                                             LIBRARY_OUTPUT_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})

if(LOWBIT_TESTS)
  lowbit_device_test(lowbit_device_gate_test device tests/gate_test.cpp)
  target_include_directories(lowbit_device_gate_test PRIVATE ${PROJECT_SOURCE_DIR}/include)
  target_link_libraries(lowbit_device_gate_test PRIVATE ${CMAKE_DL_LIBS})
  add_dependencies(lowbit_device_gate_test lowbit_plugin_cublaslt_gate)
  # The module beside the test binary (a packed run carries both in bin/); LOWBIT_CUBLASLT_GATE overrides.
  target_compile_definitions(lowbit_device_gate_test PRIVATE LOWBIT_CUBLASLT_GATE_NAME="liblowbit_cublaslt_gate.so")
  # Quick tier: the same binary's tests that need no GPU (loading, declining, "no GPU" without one).
  add_test(NAME quick.lowbit_device_gate_test COMMAND lowbit_device_gate_test --gtest_filter=CublasLtGate.NoGpu*:CublasLtGate.Loads*)
  set_tests_properties(quick.lowbit_device_gate_test PROPERTIES LABELS quick)
endif()
