# A committed policy-lab trace is what its program records today, run by
# CTest as
#   cmake -DPROGRAM=<exe> -DTRACE=<traces/lab/x.trace> -DOUT=<file> -P LabTraceCheck.cmake
#
# The workloads are deterministic, so a difference means the program or the
# pool's decisions changed: regenerate the traces (traces/lab/README.md) and
# docs/policy_lab.md's tables with them.
foreach(_var PROGRAM TRACE OUT)
  if(NOT ${_var})
    message(FATAL_ERROR "LabTraceCheck: -D${_var}=... is required")
  endif()
endforeach()
file(REMOVE "${OUT}")
execute_process(
  COMMAND "${CMAKE_COMMAND}" -E env "STREAMPOOL_RECORD=${OUT}" "STREAMPOOL_CHECK_STREAM_ORDER=0"
          "${PROGRAM}"
  RESULT_VARIABLE _rc OUTPUT_QUIET ERROR_VARIABLE _err)
if(NOT _rc EQUAL 0)
  message(FATAL_ERROR "${PROGRAM} exited with ${_rc}: ${_err}")
endif()
execute_process(COMMAND "${CMAKE_COMMAND}" -E compare_files "${OUT}" "${TRACE}"
                RESULT_VARIABLE _same)
if(NOT _same EQUAL 0)
  message(FATAL_ERROR "${TRACE} is not what ${PROGRAM} records now (${OUT}): regenerate the "
                      "policy-lab traces as traces/lab/README.md says")
endif()
