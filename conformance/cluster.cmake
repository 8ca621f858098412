# Cluster runs (tools/slurm, tools/k8s, tools/device-check --shard): the shard library's unit test, the
# command-line tests of --shard and `lowbit merge` (pytest), the Kubernetes manifests checked with PyYAML,
# and a real one-node Slurm (conformance/cluster/test_slurm.py).  Each carries the label `cluster` beside
# its tier; conformance/README.md gives the Slurm test's measured time.
add_executable(lowbit_shard_test ${CMAKE_CURRENT_LIST_DIR}/tests/shard_test.cpp)
target_link_libraries(lowbit_shard_test PRIVATE lowbit_checks GTest::gtest GTest::gtest_main)
# One ctest entry for the binary: gtest_discover_tests cannot give its tests two labels.
add_test(NAME cluster_shard_library COMMAND lowbit_shard_test)
set_tests_properties(cluster_shard_library PROPERTIES LABELS "quick;cluster" TIMEOUT 300)

find_package(Python3 COMPONENTS Interpreter)
if(NOT Python3_Interpreter_FOUND)
  message(WARNING "lowbit: no Python 3 interpreter; the cluster tests are not registered")
  return()
endif()

set(_lowbit_cluster_env
  "LOWBIT=$<TARGET_FILE:lowbit>"
  "LOWBIT_PLANTED_PLUGIN=$<TARGET_FILE:lowbit_plugin_planted_bug>")
foreach(_part shards k8s slurm)
  add_test(NAME cluster_${_part}
           COMMAND ${Python3_EXECUTABLE} -m pytest -q -p no:cacheprovider
                   ${CMAKE_CURRENT_SOURCE_DIR}/cluster/test_${_part}.py)
  set_tests_properties(cluster_${_part} PROPERTIES
    LABELS "quick;cluster" ENVIRONMENT "${_lowbit_cluster_env}" TIMEOUT 600)
endforeach()
