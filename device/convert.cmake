# The device-versus-host conversion test (tests/convert_test.cpp): lowbit::convert and lowbit::fast::convert
# compiled for the GPU on every f32 input, against the digests the host computed and committed
# (digests/f32_conversions.txt, written by conformance's lowbit_conversion_digests in the full tier).  The
# file is compiled into the binaries as a string, so a packed run needs nothing beside them.
set(LOWBIT_DEVICE_DIGESTS ${CMAKE_CURRENT_SOURCE_DIR}/digests/f32_conversions.txt)
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${LOWBIT_DEVICE_DIGESTS})
set(LOWBIT_DIGESTS_LINES "")
if(EXISTS ${LOWBIT_DEVICE_DIGESTS})
  # The file holds no quotes or backslashes (lowbit/conversion_digest.hpp writes it): each line becomes one
  # C string literal.
  file(READ ${LOWBIT_DEVICE_DIGESTS} _lowbit_digests)
  string(REGEX REPLACE "\n$" "" _lowbit_digests "${_lowbit_digests}")
  string(REPLACE "\n" "\",\n\"" LOWBIT_DIGESTS_LINES "${_lowbit_digests}")
endif()
configure_file(${CMAKE_CURRENT_SOURCE_DIR}/tests/digests_embed.cpp.in ${CMAKE_CURRENT_BINARY_DIR}/digests_embed.cpp @ONLY)

if(LOWBIT_TESTS)
  lowbit_device_test(lowbit_device_convert_test device tests/convert_test.cpp ${CMAKE_CURRENT_BINARY_DIR}/digests_embed.cpp)
  target_sources(lowbit_device_host_test PRIVATE ${CMAKE_CURRENT_BINARY_DIR}/digests_embed.cpp)
endif()
