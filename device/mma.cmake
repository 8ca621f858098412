# Tensor-core probes (lowbit/device/mma.hpp): mma.sync FP8 / f16 / bf16, wgmma (sm_90a), the NVFP4
# emulation on f16 tensor cores, and optionally the native sm_120a NVFP4 mma.sync.
#
# The wgmma kernel exists for sm_90a only: its source is an object library compiled for 90a alone,
# whatever CMAKE_CUDA_ARCHITECTURES says.  The sm_120a kernel is built only with LOWBIT_DEVICE_SM120=ON
# (default OFF: CI does not pay for a third architecture); without it run_nvfp4_native_sm120 throws.
option(LOWBIT_DEVICE_SM120 "Build the native NVFP4 mma.sync kernel for sm_120a (compile only)" OFF)

add_library(lowbit_device_mma_sm90a OBJECT src/mma_wgmma.cu)
target_link_libraries(lowbit_device_mma_sm90a PUBLIC lowbit::device)
set_target_properties(lowbit_device_mma_sm90a PROPERTIES CUDA_ARCHITECTURES 90a POSITION_INDEPENDENT_CODE ON)

add_library(lowbit_device_mma STATIC src/mma.cu $<TARGET_OBJECTS:lowbit_device_mma_sm90a>)
target_link_libraries(lowbit_device_mma PUBLIC lowbit::device)
set_target_properties(lowbit_device_mma PROPERTIES POSITION_INDEPENDENT_CODE ON)

if(LOWBIT_DEVICE_SM120)
  add_library(lowbit_device_mma_sm120a OBJECT src/mma_sm120.cu)
  target_link_libraries(lowbit_device_mma_sm120a PUBLIC lowbit::device)
  set_target_properties(lowbit_device_mma_sm120a PROPERTIES CUDA_ARCHITECTURES 120a POSITION_INDEPENDENT_CODE ON)
  target_sources(lowbit_device_mma PRIVATE $<TARGET_OBJECTS:lowbit_device_mma_sm120a>)
  target_compile_definitions(lowbit_device_mma PRIVATE LOWBIT_DEVICE_HAS_SM120=1)
endif()

if(LOWBIT_TESTS)
  find_package(Threads REQUIRED)
  lowbit_device_test(lowbit_device_mma_host_test quick tests/mma_host_test.cpp)
  target_link_libraries(lowbit_device_mma_host_test PRIVATE lowbit_device_mma)
  lowbit_device_test(lowbit_device_mma_test device tests/mma_test.cpp)
  target_link_libraries(lowbit_device_mma_test PRIVATE lowbit_device_mma Threads::Threads)
endif()
