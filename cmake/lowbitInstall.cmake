# What `cmake --install` puts where, and the CMake package that `find_package(lowbit)` finds.
#
#   bin/lowbit                                the command line
#   include/lowbit/*.hpp, include/lowbit/plugin.h   the library headers and the plugin ABI (a C header)
#   lib/liblowbit_reference.a                 the reference library (static)
#   lib/cmake/lowbit/                         lowbitConfig.cmake, its version file, the exported targets
#   share/lowbit/vectors/golden/, SPEC.md     the committed golden sets and their specification
#   share/lowbit/report/render.py             the renderer `lowbit report` runs
#   share/doc/lowbit/                         README.md, CHANGELOG.md, the accuracy-report snapshot
#
# Two install components: `runtime` (the command line and its data) and `development` (headers, the
# library, the CMake package); `cmake --install build --prefix P` installs both.  The Python package's
# files are component `python`, installed only by the wheel's build (python/CMakeLists.txt).  Included by
# the top-level CMakeLists.txt after every target is defined.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(LOWBIT_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/lowbit)
set(LOWBIT_INSTALL_DATADIR ${CMAKE_INSTALL_DATADIR}/lowbit)

# lowbit::plugin: the plugin ABI alone (include/lowbit/plugin.h, plain C, no dependencies), for a
# subject library of `lowbit gate`.
add_library(lowbit_plugin INTERFACE)
add_library(lowbit::plugin ALIAS lowbit_plugin)
target_include_directories(lowbit_plugin INTERFACE $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>)

# The exported libraries: target lowbit_NAME is exported as lowbit::NAME.  Adding a library to the
# package is adding its NAME here; it needs its include directories as $<BUILD_INTERFACE:...> (INCLUDES
# DESTINATION below adds the installed include/), an install(DIRECTORY) line for a header folder other than
# reference/include/lowbit, and a line in lowbitConfig.cmake.in's list of targets.
set(LOWBIT_EXPORTED_LIBRARIES elements reference plugin)

foreach(_name IN LISTS LOWBIT_EXPORTED_LIBRARIES)
  set_target_properties(lowbit_${_name} PROPERTIES EXPORT_NAME ${_name})
  install(TARGETS lowbit_${_name} EXPORT lowbitTargets
          ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT development
          LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT development
          INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
endforeach()
install(DIRECTORY ${PROJECT_SOURCE_DIR}/reference/include/lowbit DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        COMPONENT development FILES_MATCHING PATTERN "*.hpp")
# The plugin ABI is part of the runtime: a subject needs it to be gated, and nothing else of lowbit.
install(FILES ${PROJECT_SOURCE_DIR}/include/lowbit/plugin.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/lowbit
        COMPONENT runtime)

install(EXPORT lowbitTargets NAMESPACE lowbit:: DESTINATION ${LOWBIT_INSTALL_CMAKEDIR} COMPONENT development)
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/lowbitConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/lowbitConfig.cmake
                              INSTALL_DESTINATION ${LOWBIT_INSTALL_CMAKEDIR} PATH_VARS CMAKE_INSTALL_BINDIR)
# README.md ("Exit codes and stability"): a change that breaks a user bumps the major version.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/lowbitConfigVersion.cmake
                                 COMPATIBILITY SameMajorVersion)
install(FILES ${PROJECT_BINARY_DIR}/lowbitConfig.cmake ${PROJECT_BINARY_DIR}/lowbitConfigVersion.cmake
        DESTINATION ${LOWBIT_INSTALL_CMAKEDIR} COMPONENT development)

# The command line and what it reads at run time.  An installed lowbit finds its data relative to its
# own location (tools/lowbit/install_paths.hpp), never in the source tree it was built from.
install(TARGETS lowbit RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT runtime)
file(RELATIVE_PATH _lowbit_data_from_bin ${CMAKE_INSTALL_FULL_BINDIR} ${CMAKE_INSTALL_FULL_DATADIR}/lowbit)
file(RELATIVE_PATH _lowbit_doc_from_bin ${CMAKE_INSTALL_FULL_BINDIR} ${CMAKE_INSTALL_FULL_DOCDIR})
target_compile_definitions(lowbit PRIVATE LOWBIT_DATA_FROM_BINDIR="${_lowbit_data_from_bin}"
                                          LOWBIT_DOC_FROM_BINDIR="${_lowbit_doc_from_bin}")
install(DIRECTORY ${PROJECT_SOURCE_DIR}/vectors/golden DESTINATION ${LOWBIT_INSTALL_DATADIR}/vectors
        COMPONENT runtime)
install(FILES ${PROJECT_SOURCE_DIR}/vectors/SPEC.md DESTINATION ${LOWBIT_INSTALL_DATADIR}/vectors COMPONENT runtime)
install(FILES ${PROJECT_SOURCE_DIR}/tools/report/render.py ${PROJECT_SOURCE_DIR}/tools/report/README.md
        DESTINATION ${LOWBIT_INSTALL_DATADIR}/report COMPONENT runtime)
install(FILES ${PROJECT_SOURCE_DIR}/README.md ${PROJECT_SOURCE_DIR}/CHANGELOG.md
        DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT runtime)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/reports/accuracy DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT runtime)
