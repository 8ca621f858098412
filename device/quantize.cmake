# Device quantizers (lowbit/device/quantize.hpp): every scheme of lowbit/scale.hpp on the GPU, bit for bit the
# host reference.  The scale rules are the reference's header lowbit/scale_rules.hpp; the element code is
# lowbit/convert.hpp, both compiled for the device.
add_library(lowbit_device_quantize STATIC src/quantize.cu src/quantize_plan.cpp)
target_link_libraries(lowbit_device_quantize PUBLIC lowbit::device)
# scale.hpp's enums and normalize() (the plan validates Options as the host does) come from the reference.
target_link_libraries(lowbit_device_quantize PUBLIC lowbit::reference)
set_target_properties(lowbit_device_quantize PROPERTIES CUDA_SEPARABLE_COMPILATION OFF POSITION_INDEPENDENT_CODE ON)
# The quantizer kernels are many template instantiations (every scheme route x element x constant policy):
# about 7 minutes of nvcc for sm_90a and 13 for sm_100a on a 2-core machine.  They use no
# architecture-specific instruction beyond sm_89's FP8 cvt, so by default they are compiled for the
# first architecture of the build only (sm_90a in CI); LOWBIT_DEVICE_QUANTIZE_ARCHITECTURES names others.
list(GET CMAKE_CUDA_ARCHITECTURES 0 lowbit_quantize_default_arch)
set(LOWBIT_DEVICE_QUANTIZE_ARCHITECTURES "${lowbit_quantize_default_arch}" CACHE STRING
    "CUDA architectures of the quantizer kernels (default: the first of CMAKE_CUDA_ARCHITECTURES)")
set_target_properties(lowbit_device_quantize PROPERTIES CUDA_ARCHITECTURES "${LOWBIT_DEVICE_QUANTIZE_ARCHITECTURES}")

if(LOWBIT_TESTS)
  lowbit_device_test(lowbit_device_quantize_host_test quick tests/quantize_host_test.cpp)
  target_link_libraries(lowbit_device_quantize_host_test PRIVATE lowbit_device_quantize)
  lowbit_device_test(lowbit_device_quantize_test device tests/quantize_test.cpp)
  target_link_libraries(lowbit_device_quantize_test PRIVATE lowbit_device_quantize)
endif()

if(LOWBIT_BENCH)
  add_executable(lowbit_device_quantize_bench bench/quantize_bench.cu)
  target_link_libraries(lowbit_device_quantize_bench PRIVATE lowbit_device_quantize)
endif()
