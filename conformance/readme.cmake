# README.md's examples print what README shows (conformance/readme/README.md): the command-line examples
# with the built `lowbit`, and the Python transcript in the Python package's virtual environment where the
# build has the package (LOWBIT_PYTHON; without it that test is not registered).
find_package(Python3 COMPONENTS Interpreter)
if(NOT Python3_Interpreter_FOUND)
  message(WARNING "lowbit: no Python 3 interpreter; the README tests are not registered")
  return()
endif()

add_test(NAME readme_console
         COMMAND ${Python3_EXECUTABLE} -m pytest -q -p no:cacheprovider -rs ${CMAKE_CURRENT_SOURCE_DIR}/readme/test_readme.py)
set_tests_properties(readme_console PROPERTIES
  LABELS quick TIMEOUT 600
  ENVIRONMENT "LOWBIT=$<TARGET_FILE:lowbit>;LOWBIT_SOURCE_DIR=${PROJECT_SOURCE_DIR};LOWBIT_BUILD_DIR=${PROJECT_BINARY_DIR}")
if(LOWBIT_PYTHON)
  add_test(NAME readme_python
           COMMAND ${LOWBIT_PYTHON_VENV}/bin/python -m pytest -q -p no:cacheprovider
                   ${CMAKE_CURRENT_SOURCE_DIR}/readme/test_readme_python.py)
  set_tests_properties(readme_python PROPERTIES
    LABELS quick TIMEOUT 600 FIXTURES_REQUIRED lowbit_python_venv
    ENVIRONMENT "LOWBIT_SOURCE_DIR=${PROJECT_SOURCE_DIR}")
endif()
