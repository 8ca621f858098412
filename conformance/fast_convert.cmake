# The 32-bit element conversion (reference/include/lowbit/fast_convert.hpp) against lowbit::convert.
# Quick: every bf16 and f16 input and every f32 boundary pattern (plus 2^24 samples spread over the pairs) for each element/policy
# pair the device quantizers and the profiles use, the kernels' constant rows and policies, random formats
# and policies.  Full: every f32 input for each of those pairs.
include(GoogleTest)

add_executable(lowbit_fast_convert_test ${CMAKE_CURRENT_LIST_DIR}/fast_convert/fast_convert_test.cpp)
target_link_libraries(lowbit_fast_convert_test PRIVATE lowbit::reference TBB::tbb GTest::gtest GTest::gtest_main)
gtest_discover_tests(lowbit_fast_convert_test TEST_PREFIX "fast_convert." PROPERTIES LABELS quick DISCOVERY_TIMEOUT 60)

add_executable(lowbit_fast_convert_full_test ${CMAKE_CURRENT_LIST_DIR}/fast_convert/fast_convert_full_test.cpp)
target_link_libraries(lowbit_fast_convert_full_test PRIVATE lowbit::reference TBB::tbb GTest::gtest GTest::gtest_main)
gtest_discover_tests(lowbit_fast_convert_full_test TEST_PREFIX "fast_convert." PROPERTIES LABELS full TIMEOUT 3600
                     DISCOVERY_TIMEOUT 60)
