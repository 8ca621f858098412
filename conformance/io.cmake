# Tensor files (lowbit/io.hpp): .npy and safetensors round trips, files written by numpy and by the
# safetensors reference implementation (committed fixtures, see io/fixtures/make_fixtures.py), and
# one test per kind of bad file.  Label: quick.
include(GoogleTest)

add_executable(test_io ${CMAKE_CURRENT_LIST_DIR}/io/test_io.cpp)
target_link_libraries(test_io PRIVATE lowbit::reference GTest::gtest_main)
target_compile_definitions(test_io PRIVATE LOWBIT_IO_FIXTURES="${CMAKE_CURRENT_LIST_DIR}/io/fixtures")
gtest_discover_tests(test_io TEST_PREFIX "io." PROPERTIES LABELS quick DISCOVERY_TIMEOUT 60)
