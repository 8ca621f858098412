# Source rules that CI holds (quick tier): no function in reference/ over 200 lines (clang-tidy's
# readability-function-size, scripts/check-function-size.sh; .clang-tidy carries the same threshold).
find_program(LOWBIT_CLANG_TIDY NAMES clang-tidy clang-tidy-14)
if(LOWBIT_CLANG_TIDY)
  add_test(NAME lint_function_size COMMAND ${PROJECT_SOURCE_DIR}/scripts/check-function-size.sh ${PROJECT_BINARY_DIR})
  set_tests_properties(lint_function_size PROPERTIES LABELS quick TIMEOUT 600)
else()
  message(STATUS "clang-tidy not found: lint_function_size is not registered (scripts/setup.sh installs clang-tidy)")
endif()
