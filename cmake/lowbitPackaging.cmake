# The Debian package (CPack): `cpack --config build/CPackConfig.cmake -G DEB -B DIR` after a build writes
# DIR/lowbit_<version>_<arch>.deb with the runtime and development components of cmake/lowbitInstall.cmake:
# the `lowbit` command line, the golden sets, the report renderer, the headers with the plugin ABI, the
# static library and the CMake package, installed under /usr.
#
# Depends: what the command line links at run time, computed by dpkg-shlibdeps from the binary when cpack
# runs (cmake/lowbitCPackProject.cmake.in; on Debian 12: libc6, libgcc-s1, libgmp10, libhwy1, libmpfr6 (the
# contracts' activations), libstdc++6, libtbb12, libopenblas0, with their minimum versions).
# Recommends: what find_package(lowbit) needs besides (lowbitConfig.cmake.in): a user of the command line
# alone can leave them out.  Suggests: python3 with matplotlib, which `lowbit report` runs for its figures
# (`--json-only` needs neither).
set(CPACK_PACKAGE_NAME lowbit)
set(CPACK_PACKAGE_VENDOR "the lowbit developers")
set(CPACK_PACKAGE_CONTACT "the lowbit developers")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "bit-exact emulator and conformance suite for the low-precision number formats of ML hardware")
set(CPACK_PACKAGE_DESCRIPTION
    "An exact reference for FP8, FP6, FP4, MX, NVFP4 and the other low-precision formats and scaling schemes, \
profiles that reproduce real implementations, GEMM references and tensor-core models, golden vectors and \
`lowbit gate`, which runs them through a kernel's plugin.")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_COMPONENTS_ALL runtime development)
# One package holding both components (the Python package's files, component `python`, stay out).
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_GROUPING ALL_COMPONENTS_IN_ONE)
set(CPACK_DEBIAN_PACKAGE_NAME lowbit)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION science)
file(GENERATE OUTPUT ${PROJECT_BINARY_DIR}/lowbitCPackProject.cmake
     INPUT ${CMAKE_CURRENT_LIST_DIR}/lowbitCPackProject.cmake.in)
set(CPACK_PROJECT_CONFIG_FILE ${PROJECT_BINARY_DIR}/lowbitCPackProject.cmake)
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "libgmp-dev, libhwy-dev, libtbb-dev, nlohmann-json3-dev, libopenblas-dev")
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "python3, python3-matplotlib")
set(CPACK_GENERATOR DEB)
include(CPack)
