# Packing and scale layouts (lowbit/pack.hpp): FP4 nibbles, FP6 groups, the cuBLASLt 128x4-tiled scale
# layout; hand-worked bytes and offsets, round trips, odd sizes.  Label: quick.
include(GoogleTest)

add_executable(test_pack ${CMAKE_CURRENT_LIST_DIR}/pack/test_pack.cpp)
target_link_libraries(test_pack PRIVATE lowbit::reference GTest::gtest_main)
gtest_discover_tests(test_pack TEST_PREFIX "pack." PROPERTIES LABELS quick DISCOVERY_TIMEOUT 60)
