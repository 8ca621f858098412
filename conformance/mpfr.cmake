# MPFR as a second, independent oracle for the rounding of finite values into every format of at most 16
# bits (docs/semantics.md §8).  Quick: every code of the 8-bit and narrower formats, a sample of bf16, f16,
# f32 and f64 sources.  Full: every bf16 and f16 code, every grid point and neighbour of f32 and f64.
include(GoogleTest)

add_executable(lowbit_mpfr_oracle_test ${CMAKE_CURRENT_LIST_DIR}/mpfr/mpfr_oracle_test.cpp)
target_link_libraries(lowbit_mpfr_oracle_test PRIVATE lowbit::reference PkgConfig::MPFR TBB::tbb GTest::gtest
                                                      GTest::gtest_main)
gtest_discover_tests(lowbit_mpfr_oracle_test TEST_PREFIX "mpfr." TEST_FILTER "MpfrQuick.*"
                     PROPERTIES LABELS quick DISCOVERY_TIMEOUT 60)
gtest_discover_tests(lowbit_mpfr_oracle_test TEST_PREFIX "mpfr." TEST_FILTER "MpfrFull.*"
                     PROPERTIES LABELS full TIMEOUT 3600 DISCOVERY_TIMEOUT 60)
