# Scaling schemes: peer cases, properties and the scheme rows.
include(GoogleTest)
add_executable(test_scale ${CMAKE_CURRENT_SOURCE_DIR}/scale/test_schemes.cpp ${CMAKE_CURRENT_SOURCE_DIR}/scale/test_rows.cpp)
target_link_libraries(test_scale PRIVATE lowbit::reference GTest::gtest_main)
gtest_discover_tests(test_scale PROPERTIES LABELS quick DISCOVERY_TIMEOUT 60)
