# The 32-bit element conversion (reference/include/lowbit/fast_convert.hpp) against lowbit::convert.
# Quick: every bf16 and f16 input and every f32 boundary pattern (plus 2^24 samples spread over the pairs) for each element/policy
# pair the device quantizers and the profiles use, the kernels' constant rows and policies, random formats
# and policies.  The full tier's proof on every f32 input of each of those pairs is part of the digest
# sweep (digests.cmake, digests.EveryChunkOfEveryPair): one pass of lowbit::convert over the 2^32 inputs
# of a pair both writes its device digests and holds fast::convert against it, so the reference's
# conversion runs once per pair and input instead of twice.
include(GoogleTest)

add_executable(lowbit_fast_convert_test ${CMAKE_CURRENT_LIST_DIR}/fast_convert/fast_convert_test.cpp)
target_link_libraries(lowbit_fast_convert_test PRIVATE lowbit::reference TBB::tbb GTest::gtest GTest::gtest_main)
gtest_discover_tests(lowbit_fast_convert_test TEST_PREFIX "fast_convert." PROPERTIES LABELS quick DISCOVERY_TIMEOUT 60)
