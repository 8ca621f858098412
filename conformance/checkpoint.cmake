# Checkpoint writers (lowbit/checkpoint.hpp): checkpoint::write_gguf round-tripped through the GGUF reader and
# against the file gguf-py wrote (checkpoint/fixtures/gguf).  The readers' tests are the command line's
# (cli.cmake: checkpoint/test_*_checkpoints.py).  Label: quick.
include(GoogleTest)

add_executable(test_checkpoint_write ${CMAKE_CURRENT_LIST_DIR}/checkpoint/test_gguf_write.cpp)
target_link_libraries(test_checkpoint_write PRIVATE lowbit::library GTest::gtest_main)
target_compile_definitions(test_checkpoint_write PRIVATE
                           LOWBIT_CHECKPOINT_FIXTURES="${CMAKE_CURRENT_LIST_DIR}/checkpoint/fixtures")
gtest_discover_tests(test_checkpoint_write TEST_PREFIX "checkpoint." PROPERTIES LABELS quick DISCOVERY_TIMEOUT 60)
