# The malformed-input catalogue (malformed/CATALOGUE.md): the bad-input cases no other test covers, one
# pytest case each, through the `lowbit` executable.  Label: quick.
find_package(Python3 COMPONENTS Interpreter)
if(Python3_Interpreter_FOUND)
  add_test(NAME malformed_cli
           COMMAND ${Python3_EXECUTABLE} -m pytest -q -p no:cacheprovider ${CMAKE_CURRENT_SOURCE_DIR}/malformed/test_malformed.py)
  set_tests_properties(malformed_cli PROPERTIES LABELS quick ENVIRONMENT "LOWBIT=$<TARGET_FILE:lowbit>" TIMEOUT 600)
endif()
