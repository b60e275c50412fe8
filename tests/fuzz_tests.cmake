# Fuzzing runs, label "long" (LOCOST_LONG_TESTS=1): each parser for a bounded time.
find_program(LOCOST_CLANGXX NAMES clang++-14 clang++)
if(LOCOST_CLANGXX)
  add_test(NAME fuzz_parsers
    COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/run.sh ${CMAKE_CURRENT_BINARY_DIR}/fuzz -max_total_time=120)
  set_tests_properties(fuzz_parsers PROPERTIES LABELS long TIMEOUT 1800
    FAIL_REGULAR_EXPRESSION "ERROR: AddressSanitizer|ERROR: libFuzzer|runtime error|SUMMARY: ")
endif()
