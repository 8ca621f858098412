# The conformance checks as a library (lowbit_checks), used by the tests below and by `lowbit conform`,
# and the core test executables: the checks under ctest, unit tests of formats, profiles and parsing,
# and RapidCheck properties.  Labels: quick (every CI run) and full (exhaustive).

# lowbit_checks itself is defined in checks/CMakeLists.txt (always built: `lowbit conform` needs it).

include(GoogleTest)

# One ctest entry per check, labelled with the check's tier.
add_executable(lowbit_checks_test ${CMAKE_CURRENT_LIST_DIR}/tests/checks_test.cpp)
target_link_libraries(lowbit_checks_test PRIVATE lowbit_checks GTest::gtest GTest::gtest_main)
gtest_discover_tests(lowbit_checks_test TEST_PREFIX "checks." TEST_FILTER "Quick.*"
                     PROPERTIES LABELS quick DISCOVERY_TIMEOUT 60)
gtest_discover_tests(lowbit_checks_test TEST_PREFIX "checks." TEST_FILTER "Full.*"
                     PROPERTIES LABELS full DISCOVERY_TIMEOUT 60)

add_executable(lowbit_unit_test
  ${CMAKE_CURRENT_LIST_DIR}/tests/formats_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/tests/profile_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/tests/parse_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/tests/names_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/tests/echo_test.cpp
)
target_link_libraries(lowbit_unit_test PRIVATE lowbit::reference GTest::gtest GTest::gtest_main)
gtest_discover_tests(lowbit_unit_test TEST_PREFIX "unit." PROPERTIES LABELS quick)

add_executable(lowbit_properties_test ${CMAKE_CURRENT_LIST_DIR}/tests/properties_test.cpp)
target_link_libraries(lowbit_properties_test PRIVATE lowbit::reference rapidcheck rapidcheck_gtest GTest::gtest
                                                     GTest::gtest_main)
gtest_discover_tests(lowbit_properties_test TEST_PREFIX "properties."
                     PROPERTIES LABELS quick ENVIRONMENT "RC_PARAMS=max_success=2000")
