# The source layers of src/README.md as CMake targets (in the spirit of
# abseil's absl_cc_library), so that an upward #include fails the build.
#
#   streampool_cc_library(NAME <layer> [DEPS <layer>...] [HDRS <layer>/<header>...]
#                         [LIBRARY <name>])
#     The code in src/<layer>/: an OBJECT library streampool_<layer> of its
#     src/<layer>/*.cc (globbed with CONFIGURE_DEPENDS), or an INTERFACE
#     library while the layer has headers only. DEPS are the layers whose
#     headers it may include, all of them; HDRS single headers of a layer it
#     may include only in part ("ordering/oracle.h"). What a dependency may
#     include comes along (a header of it includes those), so a layer lists
#     only what its own files include. Layers are declared bottom-up: a layer
#     named in DEPS or HDRS must already be declared, which rules out cycles.
#     Every layer is compiled with streampool_layer_common (an INTERFACE target
#     the caller defines: public headers, absl, definitions) and hidden
#     visibility. LIBRARY puts the layer in a library of its own (the API
#     faces above the C API, e.g. cudart) instead of libstreampool:
#     streampool_library_objects(<name> <var>) lists its layers.
#
#     Enforcement: a layer is compiled with an include root of its own,
#     <build>/layers/<layer>/include/, whose src/ holds symlinks to
#     src/<layer>/, to the layers it may include and to its single headers;
#     the repository root is not on its include path. So
#     #include "src/runtime/runtime_impl.h" in src/pool/ fails: "No such file
#     or directory". Every header of the layer is compiled in that context
#     too (streampool_<layer>_header_check, part of the default build), so a
#     header that no .cc of its own layer includes is checked as well.
#
#   streampool_layer_objects(<var>)
#     Sets <var> to the OBJECT libraries of the declared layers of
#     libstreampool (those without LIBRARY), bottom-up.
#     Fails if a directory src/<dir>/ is not a declared layer: its sources
#     would silently be left out of the library.
#
#   streampool_layer_context(<target> <layer>)
#     Compiles <target> as if it were code of <layer>.
#
#   streampool_layering_test(NAME <test> LAYER <layer> SRC <file> MISSING <header>)
#     A CTest that builds <file> in <layer>'s context twice: as is (it must
#     compile, which shows the context works) and with
#     STREAMPOOL_LAYERING_UPWARD defined, which must fail because <header>
#     ("src/runtime/runtime_impl.h") is not found. Plus, once, the CTest
#     layering_no_parent_includes: no file under src/ includes a path with
#     "../" or an absolute one, which would bypass the include roots.

include_guard(GLOBAL)

set(_SP_LAYERS_SCRIPT "${CMAKE_CURRENT_LIST_DIR}/StreampoolLayeringCheck.cmake")

function(streampool_cc_library)
  cmake_parse_arguments(PARSE_ARGV 0 SP "" "NAME;LIBRARY" "DEPS;HDRS")
  if(NOT SP_NAME OR SP_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "streampool_cc_library(NAME <layer> [DEPS <layer>...] [HDRS <layer>/<h>...]): "
                        "bad arguments '${ARGV}'")
  endif()
  set(_src "${streampool_SOURCE_DIR}/src")
  if(NOT IS_DIRECTORY "${_src}/${SP_NAME}")
    message(FATAL_ERROR "streampool_cc_library: no directory src/${SP_NAME}/")
  endif()
  get_property(_declared GLOBAL PROPERTY STREAMPOOL_LAYERS)
  if(SP_NAME IN_LIST _declared)
    message(FATAL_ERROR "streampool_cc_library: layer ${SP_NAME} declared twice")
  endif()

  # What the layer may include besides its own directory: whole layers
  # ("ordering") and single headers ("ordering/oracle.h"), closed over what
  # those may include in turn.
  set(_visible)
  foreach(_entry IN LISTS SP_DEPS SP_HDRS)
    if(_entry MATCHES "^([A-Za-z0-9_]+)(/[^/]+)?$")
      set(_dep "${CMAKE_MATCH_1}")
    else()
      message(FATAL_ERROR "streampool_cc_library(${SP_NAME}): bad dependency '${_entry}'")
    endif()
    if(NOT _dep IN_LIST _declared)
      message(FATAL_ERROR "streampool_cc_library(${SP_NAME}): '${_entry}' is not of a layer "
                          "declared before it (layers are declared bottom-up)")
    endif()
    if(NOT EXISTS "${_src}/${_entry}")
      message(FATAL_ERROR "streampool_cc_library(${SP_NAME}): no src/${_entry}")
    endif()
    get_property(_dep_visible GLOBAL PROPERTY STREAMPOOL_LAYER_${_dep}_VISIBLE)
    list(APPEND _visible "${_entry}" ${_dep_visible})
  endforeach()
  list(REMOVE_DUPLICATES _visible)
  # A whole layer covers its single headers.
  set(_whole)
  foreach(_entry IN LISTS _visible)
    if(NOT _entry MATCHES "/")
      list(APPEND _whole "${_entry}")
    endif()
  endforeach()
  set(_single)
  foreach(_entry IN LISTS _visible)
    if(_entry MATCHES "^([^/]+)/" AND NOT CMAKE_MATCH_1 IN_LIST _whole)
      list(APPEND _single "${_entry}")
    endif()
  endforeach()
  list(SORT _whole)
  list(SORT _single)
  set_property(GLOBAL PROPERTY STREAMPOOL_LAYER_${SP_NAME}_VISIBLE ${_whole} ${_single})
  set_property(GLOBAL APPEND PROPERTY STREAMPOOL_LAYERS ${SP_NAME})

  # The include root, made anew at every configure so that a dependency taken
  # out disappears. (file(REMOVE_RECURSE) deletes symlinks, not their targets.)
  set(_root "${streampool_BINARY_DIR}/layers/${SP_NAME}")
  file(REMOVE_RECURSE "${_root}/include")
  file(MAKE_DIRECTORY "${_root}/include/src")
  foreach(_layer IN LISTS SP_NAME _whole)
    file(CREATE_LINK "${_src}/${_layer}" "${_root}/include/src/${_layer}" SYMBOLIC)
  endforeach()
  foreach(_hdr IN LISTS _single)
    get_filename_component(_dir "${_hdr}" DIRECTORY)
    file(MAKE_DIRECTORY "${_root}/include/src/${_dir}")
    file(CREATE_LINK "${_src}/${_hdr}" "${_root}/include/src/${_hdr}" SYMBOLIC)
  endforeach()

  set(_target streampool_${SP_NAME})
  file(GLOB _srcs CONFIGURE_DEPENDS "${_src}/${SP_NAME}/*.cc")
  if(_srcs)
    add_library(${_target} OBJECT ${_srcs})
    streampool_layer_context(${_target} ${SP_NAME})
    set(_scope PRIVATE)
    if(SP_LIBRARY)
      set_property(GLOBAL APPEND PROPERTY STREAMPOOL_LIBRARY_${SP_LIBRARY}_OBJECTS ${_target})
    else()
      set_property(GLOBAL APPEND PROPERTY STREAMPOOL_LAYER_OBJECT_LIBRARIES ${_target})
    endif()
  else()
    add_library(${_target} INTERFACE)
    set(_scope INTERFACE)
  endif()
  # The dependency graph, for the record (cmake --graphviz); the include
  # roots above are what enforces it.
  set(_dep_targets)
  foreach(_entry IN LISTS SP_DEPS SP_HDRS)
    string(REGEX REPLACE "/.*" "" _dep "${_entry}")
    list(APPEND _dep_targets streampool_${_dep})
  endforeach()
  list(REMOVE_DUPLICATES _dep_targets)
  if(_dep_targets)
    target_link_libraries(${_target} ${_scope} ${_dep_targets})
  endif()

  # Every header of the layer, compiled in the layer's context. The file is
  # rewritten only when the list of headers changes.
  file(GLOB _hdrs CONFIGURE_DEPENDS "${_src}/${SP_NAME}/*.h")
  if(_hdrs)
    set(_content "// Generated by cmake/StreampoolLayers.cmake: every header of src/${SP_NAME}/.\n")
    foreach(_h IN LISTS _hdrs)
      get_filename_component(_h "${_h}" NAME)
      string(APPEND _content "#include \"src/${SP_NAME}/${_h}\"\n")
    endforeach()
    file(CONFIGURE OUTPUT "${_root}/header_check.cc" CONTENT "${_content}" @ONLY)
    add_library(${_target}_header_check OBJECT "${_root}/header_check.cc")
    streampool_layer_context(${_target}_header_check ${SP_NAME})
  endif()
endfunction()

function(streampool_layer_context target layer)
  get_property(_declared GLOBAL PROPERTY STREAMPOOL_LAYERS)
  if(NOT layer IN_LIST _declared)
    message(FATAL_ERROR "streampool_layer_context: '${layer}' is not a declared layer")
  endif()
  target_include_directories(${target} PRIVATE "${streampool_BINARY_DIR}/layers/${layer}/include")
  target_link_libraries(${target} PRIVATE streampool_layer_common)
  set_target_properties(${target} PROPERTIES
    C_VISIBILITY_PRESET hidden
    CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON)
endfunction()

function(streampool_layer_objects var)
  get_property(_declared GLOBAL PROPERTY STREAMPOOL_LAYERS)
  file(GLOB _dirs LIST_DIRECTORIES true CONFIGURE_DEPENDS "${streampool_SOURCE_DIR}/src/*")
  foreach(_dir IN LISTS _dirs)
    get_filename_component(_name "${_dir}" NAME)
    if(IS_DIRECTORY "${_dir}" AND NOT _name IN_LIST _declared)
      message(FATAL_ERROR "src/${_name}/ is not a declared layer: add "
                          "streampool_cc_library(NAME ${_name} DEPS ...) to CMakeLists.txt "
                          "and its row to src/README.md")
    endif()
  endforeach()
  get_property(_objects GLOBAL PROPERTY STREAMPOOL_LAYER_OBJECT_LIBRARIES)
  set(${var} ${_objects} PARENT_SCOPE)
endfunction()

function(streampool_library_objects library var)
  get_property(_objects GLOBAL PROPERTY STREAMPOOL_LIBRARY_${library}_OBJECTS)
  set(${var} ${_objects} PARENT_SCOPE)
endfunction()

function(streampool_layering_test)
  cmake_parse_arguments(PARSE_ARGV 0 SP "" "NAME;LAYER;SRC;MISSING" "")
  if(NOT SP_NAME OR NOT SP_LAYER OR NOT SP_SRC OR NOT SP_MISSING)
    message(FATAL_ERROR "streampool_layering_test: NAME, LAYER, SRC and MISSING are required")
  endif()
  foreach(_case IN ITEMS allowed upward)
    add_library(${SP_NAME}_${_case} OBJECT EXCLUDE_FROM_ALL "${SP_SRC}")
    streampool_layer_context(${SP_NAME}_${_case} ${SP_LAYER})
  endforeach()
  target_compile_definitions(${SP_NAME}_upward PRIVATE STREAMPOOL_LAYERING_UPWARD=1)
  add_test(NAME ${SP_NAME}
           COMMAND ${CMAKE_COMMAND} -DMODE=compile -DBUILD_DIR=${CMAKE_BINARY_DIR}
                   -DCONFIG=$<CONFIG> -DALLOWED=${SP_NAME}_allowed -DUPWARD=${SP_NAME}_upward
                   -DMISSING=${SP_MISSING} -P "${_SP_LAYERS_SCRIPT}")
  if(NOT TEST layering_no_parent_includes)
    add_test(NAME layering_no_parent_includes
             COMMAND ${CMAKE_COMMAND} -DMODE=includes -DSRC_DIR=${streampool_SOURCE_DIR}/src
                     -P "${_SP_LAYERS_SCRIPT}")
  endif()
endfunction()
