# The batch (SIMD) conversion against the scalar path.  Quick: every bf16/f16 input into every target of
# at most 16 bits under every deterministic policy, quirks, random f32 (stochastic included), parametric
# and P3109 targets, every Highway target the CPU runs.  Full: all 2^32 f32 inputs for e4m3, e5m2, e2m1
# and bf16 under rne with satfinite and nosat, less the cases the digest sweep (digests.cmake) already holds
# the batch conversion against on every f32 input.
include(GoogleTest)

add_executable(lowbit_batch_test ${CMAKE_CURRENT_LIST_DIR}/batch/batch_test.cpp)
target_link_libraries(lowbit_batch_test PRIVATE lowbit::reference PkgConfig::HWY GTest::gtest GTest::gtest_main)
gtest_discover_tests(lowbit_batch_test TEST_PREFIX "batch." PROPERTIES LABELS quick DISCOVERY_TIMEOUT 60)

add_executable(lowbit_batch_full_test ${CMAKE_CURRENT_LIST_DIR}/batch/batch_full_test.cpp)
target_link_libraries(lowbit_batch_full_test PRIVATE lowbit::reference TBB::tbb GTest::gtest GTest::gtest_main)
gtest_discover_tests(lowbit_batch_full_test TEST_PREFIX "batch." PROPERTIES LABELS full TIMEOUT 3600
                     DISCOVERY_TIMEOUT 60)
