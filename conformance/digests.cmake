# The f32 conversion digests (reference/include/lowbit/conversion_digest.hpp) that the device test
# compares the GPU's conversions with: the generator (lowbit_conversion_digests --write / --check), a
# quick test that the committed file lists the right pairs and that a slice of it recomputes, and the
# full-tier check of every chunk (which also holds the 32-bit path against convert on every f32 input).
include(GoogleTest)
set(LOWBIT_DIGEST_FILE ${PROJECT_SOURCE_DIR}/device/digests/f32_conversions.txt)

add_executable(lowbit_conversion_digests ${CMAKE_CURRENT_LIST_DIR}/digests/digests_tool.cpp)
target_link_libraries(lowbit_conversion_digests PRIVATE lowbit::reference TBB::tbb)

add_executable(lowbit_digests_test ${CMAKE_CURRENT_LIST_DIR}/digests/digests_test.cpp)
target_link_libraries(lowbit_digests_test PRIVATE lowbit::reference TBB::tbb GTest::gtest GTest::gtest_main)
target_compile_definitions(lowbit_digests_test PRIVATE LOWBIT_DIGEST_FILE="${LOWBIT_DIGEST_FILE}")
gtest_discover_tests(lowbit_digests_test TEST_PREFIX "digests." PROPERTIES LABELS quick DISCOVERY_TIMEOUT 60)

add_test(NAME digests.EveryChunkOfEveryPair COMMAND lowbit_conversion_digests --check ${LOWBIT_DIGEST_FILE})
set_tests_properties(digests.EveryChunkOfEveryPair PROPERTIES LABELS full TIMEOUT 36000)
