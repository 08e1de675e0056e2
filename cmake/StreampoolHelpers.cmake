# One-call declarations of streampool tests and benchmarks (in the spirit of
# abseil's absl_cc_test).
#
#   streampool_cc_test(NAME <name> SRCS <files...> [DEPS <targets...>] [NO_SHIPPED_PASS])
#     An executable <name> linked to streampool, GTest::gmock and
#     GTest::gtest_main (plus DEPS), with the repository root on the include
#     path so tests may include internal headers ("src/pool/size_index.h").
#     Each TEST() is registered with CTest by gtest_discover_tests (with
#     STREAMPOOL_TEST_PER_PROCESS, the default but under sanitizers; else the
#     executable is, in shards), with
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

# A process per TEST() (gtest_discover_tests) isolates each test; under a
# sanitizer, starting a process costs more than most tests take, so those
# builds run each executable as one process (a few shards for the long ones).
if(STREAMPOOL_SANITIZE)
  set(_sp_per_process_default OFF)
else()
  set(_sp_per_process_default ON)
endif()
option(STREAMPOOL_TEST_PER_PROCESS "Register each TEST() as a CTest test of its own"
  ${_sp_per_process_default})
# The executables that take longest, split so that ctest -j runs them in parallel.
set(STREAMPOOL_TEST_SHARDS_property_test 4)
set(STREAMPOOL_TEST_SHARDS_mem_pool_random_test 3)
set(STREAMPOOL_TEST_SHARDS_torture_test 2)

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
  if(STREAMPOOL_TEST_PER_PROCESS)
    gtest_discover_tests(${SP_NAME} DISCOVERY_TIMEOUT 60
      PROPERTIES ENVIRONMENT "STREAMPOOL_CHECK_STREAM_ORDER=fatal")
  else()
    _streampool_add_sharded_test(${SP_NAME} "" "STREAMPOOL_CHECK_STREAM_ORDER=fatal" "")
  endif()
  # And once more as shipped: the checker off, so the fast path runs (the
  # checker switches it off). One process for the whole executable (or a few
  # shards of it): the same tests, without a process per test.
  if(NOT SP_NO_SHIPPED_PASS)
    _streampool_add_sharded_test(${SP_NAME} "shipped." "STREAMPOOL_CHECK_STREAM_ORDER=0" shipped)
  endif()
endfunction()

# The executable `name` as CTest tests `<prefix><name>[.shard<i>]` with `env`,
# split into STREAMPOOL_TEST_SHARDS_<name> shards (default 1) by gtest's
# sharding variables, so the long executables run side by side under -j.
function(_streampool_add_sharded_test name prefix env label)
  set(_shards 1)
  if(DEFINED STREAMPOOL_TEST_SHARDS_${name})
    set(_shards ${STREAMPOOL_TEST_SHARDS_${name}})
  endif()
  foreach(_i RANGE 1 ${_shards})
    math(EXPR _index "${_i} - 1")
    if(_shards EQUAL 1)
      set(_test ${prefix}${name})
      set(_env "${env}")
    else()
      set(_test ${prefix}${name}.shard${_i})
      set(_env "${env};GTEST_TOTAL_SHARDS=${_shards};GTEST_SHARD_INDEX=${_index}")
    endif()
    add_test(NAME ${_test} COMMAND ${name})
    set_tests_properties(${_test} PROPERTIES ENVIRONMENT "${_env}")
    if(label)
      set_tests_properties(${_test} PROPERTIES LABELS ${label})
    endif()
  endforeach()
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

# streampool_record_replay_test(<target>): the CTest record_replay.<target>,
# which runs the program with STREAMPOOL_RECORD and replays every recording
# at its settings, each decision compared (cmake/RecordReplayCheck.cmake).
# Needs the replay tool (STREAMPOOL_BUILD_TOOLS).
function(streampool_record_replay_test target)
  if(NOT STREAMPOOL_BUILD_TOOLS)
    return()
  endif()
  add_test(NAME record_replay.${target}
           COMMAND ${CMAKE_COMMAND} -DPROGRAM=$<TARGET_FILE:${target}>
                   -DREPLAY=$<TARGET_FILE:streampool-replay>
                   -DOUT=${CMAKE_CURRENT_BINARY_DIR}/recordings/${target}
                   -P ${PROJECT_SOURCE_DIR}/cmake/RecordReplayCheck.cmake)
  set_tests_properties(record_replay.${target} PROPERTIES LABELS record_replay)
endfunction()
