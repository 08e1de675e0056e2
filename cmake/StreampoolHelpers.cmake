# One-call declarations of streampool tests and benchmarks (in the spirit of
# abseil's absl_cc_test).
#
#   streampool_cc_test(NAME <name> SRCS <files...> [DEPS <targets...>] [NO_SHIPPED_PASS])
#     An executable <name> linked to streampool, GTest::gmock and
#     GTest::gtest_main (plus DEPS), with the repository root on the include
#     path so tests may include internal headers ("src/pool/size_index.h").
#     Each TEST() is registered with CTest by gtest_discover_tests, with
#     STREAMPOOL_CHECK_STREAM_ORDER=fatal in its environment, and the whole
#     executable once more as shipped.<name> with the checker off (label
#     "shipped"), unless NO_SHIPPED_PASS (a test that turns the checker off
#     itself).
#
#   streampool_cc_benchmark(NAME <name> SRCS <files...> [DEPS <targets...>])
#     An executable <name> linked to streampool and benchmark::benchmark_main
#     (plus DEPS; a file with its own BENCHMARK_MAIN() works too), with the
#     repository root on the include path. Not registered with CTest.
#
# Both link `streampool_internal`: the library plus the include path and the
# absl usage requirements of its internal headers.

include_guard(GLOBAL)
include(GoogleTest)

function(streampool_cc_test)
  cmake_parse_arguments(PARSE_ARGV 0 SP "NO_SHIPPED_PASS" "NAME" "SRCS;DEPS")
  if(NOT SP_NAME OR NOT SP_SRCS)
    message(FATAL_ERROR "streampool_cc_test: NAME and SRCS are required")
  endif()
  add_executable(${SP_NAME} ${SP_SRCS})
  target_link_libraries(${SP_NAME} PRIVATE
    streampool_internal GTest::gmock GTest::gtest_main ${SP_DEPS})
  # Every test runs with the stream-order checker on, aborting at its first
  # report; tests that plant bugs on purpose enable it explicitly, which makes
  # their runtime collect reports instead.
  gtest_discover_tests(${SP_NAME} DISCOVERY_TIMEOUT 60
    PROPERTIES ENVIRONMENT "STREAMPOOL_CHECK_STREAM_ORDER=fatal")
  # And once more as shipped: the checker off, so the fast path runs (the
  # checker switches it off). One process for the whole executable: the same
  # tests, without a process per test.
  if(NOT SP_NO_SHIPPED_PASS)
    add_test(NAME shipped.${SP_NAME} COMMAND ${SP_NAME})
    set_tests_properties(shipped.${SP_NAME} PROPERTIES
      ENVIRONMENT "STREAMPOOL_CHECK_STREAM_ORDER=0" LABELS shipped)
  endif()
endfunction()

function(streampool_cc_benchmark)
  cmake_parse_arguments(PARSE_ARGV 0 SP "" "NAME" "SRCS;DEPS")
  if(NOT SP_NAME OR NOT SP_SRCS)
    message(FATAL_ERROR "streampool_cc_benchmark: NAME and SRCS are required")
  endif()
  add_executable(${SP_NAME} ${SP_SRCS})
  target_link_libraries(${SP_NAME} PRIVATE
    streampool_internal benchmark::benchmark_main benchmark::benchmark ${SP_DEPS})
endfunction()
