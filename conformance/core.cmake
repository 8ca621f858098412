# The conformance checks as a library (lowbit_checks), used by the tests below and by `lowbit conform`,
# and the core test executables: the checks under ctest, unit tests of formats, profiles and parsing,
# and RapidCheck properties.  Labels: quick (every CI run) and full (exhaustive).

add_library(lowbit_checks STATIC
  ${CMAKE_CURRENT_LIST_DIR}/checks/checks.cpp
  ${CMAKE_CURRENT_LIST_DIR}/checks/support.cpp
  ${CMAKE_CURRENT_LIST_DIR}/checks/semantics.cpp
  ${CMAKE_CURRENT_LIST_DIR}/checks/sweeps.cpp
)
target_include_directories(lowbit_checks PUBLIC ${CMAKE_CURRENT_LIST_DIR}/checks)
target_link_libraries(lowbit_checks PUBLIC lowbit::reference TBB::tbb)
if(LOWBIT_HAVE_CUDA_HEADERS)
  # The toolkit's host conversions are a peer under test, compiled by the host compiler.
  target_sources(lowbit_checks PRIVATE ${CMAKE_CURRENT_LIST_DIR}/checks/cuda_host.cpp)
  target_include_directories(lowbit_checks SYSTEM PRIVATE ${CUDAToolkit_INCLUDE_DIRS})
  target_compile_definitions(lowbit_checks PRIVATE LOWBIT_CHECKS_CUDA_HOST=1)
  message(STATUS "lowbit: the CUDA host differential is built (${CUDAToolkit_INCLUDE_DIRS})")
endif()

# `lowbit conform` runs these checks through the library.
if(TARGET lowbit)
  target_link_libraries(lowbit PRIVATE lowbit_checks)
endif()

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
)
target_link_libraries(lowbit_unit_test PRIVATE lowbit::reference GTest::gtest GTest::gtest_main)
gtest_discover_tests(lowbit_unit_test TEST_PREFIX "unit." PROPERTIES LABELS quick)

add_executable(lowbit_properties_test ${CMAKE_CURRENT_LIST_DIR}/tests/properties_test.cpp)
target_link_libraries(lowbit_properties_test PRIVATE lowbit::reference rapidcheck rapidcheck_gtest GTest::gtest
                                                     GTest::gtest_main)
gtest_discover_tests(lowbit_properties_test TEST_PREFIX "properties."
                     PROPERTIES LABELS quick ENVIRONMENT "RC_PARAMS=max_success=2000")
