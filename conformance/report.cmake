# The accuracy report (`lowbit report`): its deterministic generators (test_report_random), report.json's
# contents and determinism, the rendered files and bad arguments (report_contract), and the page in
# headless Chromium (report_browser).  The last two generate a quick report, as CI's quick tier does.
add_executable(test_report_random ${CMAKE_CURRENT_SOURCE_DIR}/report/test_random.cpp)
target_link_libraries(test_report_random PRIVATE lowbit::elements GTest::gtest_main)
include(GoogleTest)
gtest_discover_tests(test_report_random PROPERTIES LABELS quick DISCOVERY_TIMEOUT 60)

find_package(Python3 COMPONENTS Interpreter)
if(NOT Python3_Interpreter_FOUND)
  message(WARNING "lowbit: no Python 3 interpreter; the report tests are not registered")
  return()
endif()

foreach(_pair "report_contract;report/test_report.py" "report_browser;report/test_browser.py")
  list(GET _pair 0 _name)
  list(GET _pair 1 _file)
  add_test(NAME ${_name}
           COMMAND ${Python3_EXECUTABLE} -m pytest -q -p no:cacheprovider ${CMAKE_CURRENT_SOURCE_DIR}/${_file})
  set_tests_properties(${_name} PROPERTIES
    LABELS quick
    ENVIRONMENT "LOWBIT=$<TARGET_FILE:lowbit>"
    TIMEOUT 600)
endforeach()
