# GEMM references: hand-derived tensor-core model cases, properties, the DeepSeek-V3 experiment.
add_executable(test_gemm ${CMAKE_CURRENT_SOURCE_DIR}/gemm/test_models.cpp ${CMAKE_CURRENT_SOURCE_DIR}/gemm/test_exact.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/gemm/test_properties.cpp ${CMAKE_CURRENT_SOURCE_DIR}/gemm/test_fast_driver.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/gemm/test_mma_sync_model.cpp ${CMAKE_CURRENT_SOURCE_DIR}/gemm/test_procedures.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/gemm/test_integer_gemm.cpp)
# oneTBB: a test runs exact products from parallel tasks.
target_link_libraries(test_gemm PRIVATE lowbit::reference TBB::tbb GTest::gtest_main)
# src/integer_gemm.hpp: the exact GEMM's integer kernels, internal to the library, tested on their own.
target_include_directories(test_gemm PRIVATE ${PROJECT_SOURCE_DIR}/reference)
include(GoogleTest)
gtest_discover_tests(test_gemm PROPERTIES LABELS quick DISCOVERY_TIMEOUT 60)
