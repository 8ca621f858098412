# Scaling schemes: peer cases, properties and the scheme rows (test_scale); the streaming quantizer against
# the plain reference quantizer, bit for bit, under every SIMD target (test_scale_oracle; the full tier's
# test_scale_oracle_full runs larger tensors and every option combination on the long rows).
include(GoogleTest)
add_executable(test_scale ${CMAKE_CURRENT_SOURCE_DIR}/scale/test_schemes.cpp ${CMAKE_CURRENT_SOURCE_DIR}/scale/test_rows.cpp
                          ${CMAKE_CURRENT_SOURCE_DIR}/scale/test_hadamard.cpp)
target_link_libraries(test_scale PRIVATE lowbit::reference GTest::gtest_main)
gtest_discover_tests(test_scale PROPERTIES LABELS quick DISCOVERY_TIMEOUT 60)

add_executable(test_scale_oracle ${CMAKE_CURRENT_SOURCE_DIR}/scale/test_oracle.cpp)
target_link_libraries(test_scale_oracle PRIVATE lowbit::reference PkgConfig::HWY GTest::gtest_main)
gtest_discover_tests(test_scale_oracle TEST_PREFIX "scale." PROPERTIES LABELS quick TIMEOUT 600 DISCOVERY_TIMEOUT 60)

add_executable(test_scale_oracle_full ${CMAKE_CURRENT_SOURCE_DIR}/scale/test_oracle.cpp)
target_compile_definitions(test_scale_oracle_full PRIVATE LOWBIT_ORACLE_FULL=1)
target_link_libraries(test_scale_oracle_full PRIVATE lowbit::reference PkgConfig::HWY GTest::gtest_main)
gtest_discover_tests(test_scale_oracle_full TEST_PREFIX "scale.full." PROPERTIES LABELS full TIMEOUT 3600
                     DISCOVERY_TIMEOUT 60)
