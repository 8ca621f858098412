# FP8 GEMMs: CUTLASS wgmma kernels (sm_90a) and the cuBLASLt peer, their tests and benchmark.
#
# CUTLASS / CuTe are header-only; the headers come with the nvidia-cutlass Python package (requirements.txt,
# scripts/setup.sh) under cutlass_library/source/{include,tools/util/include}.  Without them nothing here is
# built.
set(LOWBIT_CUTLASS_DIR "" CACHE PATH "CUTLASS source root (include/, tools/util/include/); found through python3 when empty")
if(NOT LOWBIT_CUTLASS_DIR)
  find_package(Python3 COMPONENTS Interpreter QUIET)
  set(_lowbit_python python3)
  if(Python3_Interpreter_FOUND)
    set(_lowbit_python ${Python3_EXECUTABLE})
  endif()
  execute_process(
    COMMAND ${_lowbit_python} -c "import cutlass_library, os; print(os.path.join(os.path.dirname(cutlass_library.__file__), 'source'))"
    OUTPUT_VARIABLE _lowbit_cutlass OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE _lowbit_cutlass_rc ERROR_QUIET)
  if(_lowbit_cutlass_rc EQUAL 0)
    set(LOWBIT_CUTLASS_DIR ${_lowbit_cutlass})
  endif()
endif()

if(NOT LOWBIT_CUTLASS_DIR OR NOT EXISTS "${LOWBIT_CUTLASS_DIR}/include/cutlass/cutlass.h"
   OR NOT EXISTS "${LOWBIT_CUTLASS_DIR}/tools/util/include/cutlass/util/packed_stride.hpp")
  message(STATUS "lowbit device: CUTLASS headers not found (pip install nvidia-cutlass, see requirements.txt); "
                 "the FP8 GEMMs, their tests and benchmark are not built")
  return()
endif()
message(STATUS "lowbit device: CUTLASS headers in ${LOWBIT_CUTLASS_DIR}")

# lowbit_device_gemm: the CUTLASS kernels (sm_90a only) and the host-side argument checks, with the cuBLASLt
# wrapper (lowbit_device_cublaslt, CMakeLists.txt).  The whole target is compiled for sm_90a: wgmma exists nowhere else, and a 90a;100a build keeps
# its other targets' architectures.
add_library(lowbit_device_gemm STATIC src/gemm_cutlass.cu src/gemm_args.cpp)
add_library(lowbit::device_gemm ALIAS lowbit_device_gemm)
target_include_directories(lowbit_device_gemm PUBLIC ${CMAKE_CURRENT_SOURCE_DIR}/include)
target_include_directories(lowbit_device_gemm SYSTEM PRIVATE ${LOWBIT_CUTLASS_DIR}/include
                                                             ${LOWBIT_CUTLASS_DIR}/tools/util/include)
target_link_libraries(lowbit_device_gemm PUBLIC lowbit::device lowbit_device_cublaslt CUDA::cudart_static)
set_target_properties(lowbit_device_gemm PROPERTIES CUDA_ARCHITECTURES 90a CUDA_SEPARABLE_COMPILATION OFF
                                                    POSITION_INDEPENDENT_CODE ON)
# Option relaxations for the CUTLASS translation unit (only this target):
#  - --fmad=true instead of the directory's --fmad=false: the blockwise mainloop's promotion
#    `acc += partial * scale` must be one FFMA, as DeepGEMM computes it (src/gemm_cutlass.cu);
#  - --expt-relaxed-constexpr: CuTe calls constexpr host functions from device code;
#  - CUTLASS's own headers are SYSTEM includes, so their warnings do not stop a -Werror build.
get_target_property(_lowbit_gemm_opts lowbit_device_gemm COMPILE_OPTIONS)
if(_lowbit_gemm_opts)
  list(TRANSFORM _lowbit_gemm_opts REPLACE "--fmad=false" "--fmad=true")
  set_property(TARGET lowbit_device_gemm PROPERTY COMPILE_OPTIONS ${_lowbit_gemm_opts})
endif()
target_compile_options(lowbit_device_gemm PRIVATE "$<$<COMPILE_LANGUAGE:CUDA>:--expt-relaxed-constexpr>")

if(LOWBIT_TESTS)
  lowbit_device_test(lowbit_device_gemm_test device tests/gemm_test.cpp)
  target_link_libraries(lowbit_device_gemm_test PRIVATE lowbit::device_gemm)
  lowbit_device_test(lowbit_device_gemm_host_test quick tests/gemm_host_test.cpp)
  target_link_libraries(lowbit_device_gemm_host_test PRIVATE lowbit::device_gemm)
endif()

if(LOWBIT_BENCH)
  add_executable(lowbit_device_gemm_bench bench/gemm_bench.cpp)
  target_link_libraries(lowbit_device_gemm_bench PRIVATE lowbit::device_gemm lowbit::device)
endif()
