# Record -> replay identity of one program, run by CTest as
#   cmake -DPROGRAM=<exe> -DREPLAY=<streampool-replay> -DOUT=<dir> -P RecordReplayCheck.cmake
#
# Runs the program unchanged with STREAMPOOL_RECORD=<dir>/run.trace, so that
# every runtime it makes writes its history (run.trace, run.trace.2, ...),
# then replays each file at its recorded settings with --verify: a recording
# made in virtual time must replay with every allocation decided as it was
# (rule, pool, chunk, offset); one made in real time (threads executor,
# adapter) must replay without error. A program that makes no runtime, or one
# whose recording cannot be read, fails the check.
foreach(_var PROGRAM REPLAY OUT)
  if(NOT ${_var})
    message(FATAL_ERROR "RecordReplayCheck: -D${_var}=... is required")
  endif()
endforeach()

file(REMOVE_RECURSE "${OUT}")
file(MAKE_DIRECTORY "${OUT}")
execute_process(
  COMMAND "${CMAKE_COMMAND}" -E env "STREAMPOOL_RECORD=${OUT}/run.trace"
          "STREAMPOOL_CHECK_STREAM_ORDER=0" "${PROGRAM}" ${ARGS}
  RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_VARIABLE _err)
if(NOT _rc EQUAL 0)
  message(FATAL_ERROR "${PROGRAM} exited with ${_rc}:\n${_out}\n${_err}")
endif()

file(GLOB _traces "${OUT}/run.trace*")
if(NOT _traces)
  message(FATAL_ERROR "${PROGRAM} made no runtime: nothing was recorded in ${OUT}")
endif()
list(LENGTH _traces _count)
set(_compared 0)
foreach(_trace IN LISTS _traces)
  execute_process(
    COMMAND "${REPLAY}" --verify "${_trace}"
    RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_VARIABLE _err)
  if(NOT _rc EQUAL 0)
    message(FATAL_ERROR "replaying ${_trace} (exit ${_rc}):\n${_out}\n${_err}")
  endif()
  if(_out MATCHES "recorded decisions: ([0-9]+) compared")
    math(EXPR _compared "${_compared} + ${CMAKE_MATCH_1}")
  endif()
endforeach()
message(STATUS "${_count} recording(s), ${_compared} decisions compared, none diverged")
