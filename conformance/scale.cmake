# Scaling schemes: peer cases and properties.
add_executable(test_scale ${CMAKE_CURRENT_SOURCE_DIR}/scale/test_schemes.cpp)
target_link_libraries(test_scale PRIVATE lowbit::reference GTest::gtest_main)
include(GoogleTest)
gtest_discover_tests(test_scale PROPERTIES LABELS quick DISCOVERY_TIMEOUT 60)
