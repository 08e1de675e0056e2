# The layering CTests of cmake/StreampoolLayers.cmake (streampool_layering_test).
#
#   cmake -DMODE=compile -DBUILD_DIR=<build> [-DCONFIG=<config>] -DALLOWED=<target>
#         -DUPWARD=<target> -DMISSING=<header> -P StreampoolLayeringCheck.cmake
#     Builds <ALLOWED>, which must succeed, then <UPWARD>, which must fail
#     because <MISSING> is not found.
#
#   cmake -DMODE=includes -DSRC_DIR=<repo>/src -P StreampoolLayeringCheck.cmake
#     Fails if a file under <SRC_DIR> includes a path starting with "../" or
#     "/": such an include is found next to the including file, whatever the
#     include path, and so would get around the layers' include roots.

cmake_minimum_required(VERSION 3.25)

if(MODE STREQUAL "compile")
  set(_config)
  if(CONFIG)
    set(_config --config "${CONFIG}")
  endif()
  execute_process(COMMAND "${CMAKE_COMMAND}" --build "${BUILD_DIR}" ${_config} --target "${ALLOWED}"
                  RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_VARIABLE _out)
  if(NOT _rc EQUAL 0)
    message(FATAL_ERROR "${ALLOWED} (only headers the layer may include) did not compile, "
                        "so the check below would prove nothing:\n${_out}")
  endif()
  execute_process(COMMAND "${CMAKE_COMMAND}" --build "${BUILD_DIR}" ${_config} --target "${UPWARD}"
                  RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_VARIABLE _out)
  if(_rc EQUAL 0)
    message(FATAL_ERROR "${UPWARD} compiled: the layer's include path reaches ${MISSING}")
  endif()
  string(REPLACE "." "\\." _missing_re "${MISSING}")
  # gcc: "src/x.h: No such file or directory"; clang: "'src/x.h' file not found".
  if(NOT _out MATCHES "${_missing_re}'?:? (No such file or directory|file not found)")
    message(FATAL_ERROR "${UPWARD} failed, but not because ${MISSING} was not found:\n${_out}")
  endif()
  message(STATUS "${UPWARD}: ${MISSING} not found, as it must not be")
elseif(MODE STREQUAL "includes")
  file(GLOB_RECURSE _files "${SRC_DIR}/*.h" "${SRC_DIR}/*.cc")
  set(_bad)
  foreach(_file IN LISTS _files)
    file(STRINGS "${_file}" _lines REGEX "^[ \t]*#[ \t]*include[ \t]*[\"<](\\.\\./|/)")
    foreach(_line IN LISTS _lines)
      file(RELATIVE_PATH _rel "${SRC_DIR}" "${_file}")
      string(APPEND _bad "\n  src/${_rel}: ${_line}")
    endforeach()
  endforeach()
  if(_bad)
    message(FATAL_ERROR "includes relative to the including file get around the layering "
                        "(write #include \"src/<layer>/<file>.h\"):${_bad}")
  endif()
  list(LENGTH _files _n)
  message(STATUS "${_n} files under ${SRC_DIR}, no parent or absolute includes")
else()
  message(FATAL_ERROR "StreampoolLayeringCheck.cmake: MODE must be 'compile' or 'includes'")
endif()
