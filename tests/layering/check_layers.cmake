# DESIGN §2's layers, checked: every include in src/ and include/ that reaches another module -
# a public header (`certfleet/<module>/…`), a private one (`<module>/…` from src/, or a relative
# path that lands in another module's folder) - must follow an allowed arrow.
#
# cmake -DSOURCE_DIR=<repo> -P check_layers.cmake
#   exit 0 when clean; otherwise one line per forbidden include (file:line: from -> to: include)
#   and a fatal error. CMake only, so a machine that can build certfleet can run it.

if(NOT SOURCE_DIR)
  get_filename_component(SOURCE_DIR "${CMAKE_CURRENT_LIST_DIR}/../.." ABSOLUTE)
endif()
# Symlinks are not resolved: a path is judged by where it is spelled, as the compiler sees it.
get_filename_component(SOURCE_DIR "${SOURCE_DIR}" ABSOLUTE)

# The modules, in DESIGN §2's order, and the modules each may use besides core (every module may
# use core; core uses nothing of ours).
set(modules core store queue delivery distribution scheduler api app)
set(uses_core "")
set(uses_store "")
set(uses_queue store)
set(uses_delivery "")
set(uses_distribution queue store delivery)
set(uses_scheduler queue store distribution)
set(uses_api queue store distribution)
set(uses_app store queue delivery distribution scheduler api)

# The module a path (relative to SOURCE_DIR) belongs to, or "" when it belongs to none.
function(module_of rel out)
  set(m "")
  if(rel MATCHES "^src/([^/]+)/")
    set(m "${CMAKE_MATCH_1}")
  elseif(rel MATCHES "^include/certfleet/([^/]+)/")
    set(m "${CMAKE_MATCH_1}")
  endif()
  set(${out} "${m}" PARENT_SCOPE)
endfunction()

# The module an include names, seen from the file `rel` (relative to SOURCE_DIR), or "".
function(included_module rel delim spelled out)
  set(m "")
  if(spelled MATCHES "^certfleet/([^/]+)/")
    # Public headers: include/ is on every module's include path.
    set(m "${CMAKE_MATCH_1}")
  elseif(delim STREQUAL "\"")
    # The compiler looks next to the including file first: a relative path that climbs into
    # another module's folder is that module's private header.
    get_filename_component(dir "${SOURCE_DIR}/${rel}" DIRECTORY)
    get_filename_component(target "${dir}/${spelled}" ABSOLUTE)
    file(RELATIVE_PATH target_rel "${SOURCE_DIR}" "${target}")
    if((EXISTS "${target}" AND NOT IS_DIRECTORY "${target}") OR spelled MATCHES "\\.\\./")
      module_of("${target_rel}" m)
    endif()
  endif()
  # Otherwise it is found through an include path: src/ (a private header spelled `<module>/…`).
  if(m STREQUAL "" AND spelled MATCHES "^([^/]+)/")
    list(FIND modules "${CMAKE_MATCH_1}" known)
    if(known GREATER -1)
      set(m "${CMAKE_MATCH_1}")
    endif()
  endif()
  set(${out} "${m}" PARENT_SCOPE)
endfunction()

file(GLOB_RECURSE files LIST_DIRECTORIES false RELATIVE "${SOURCE_DIR}"
     "${SOURCE_DIR}/src/*.hpp" "${SOURCE_DIR}/src/*.cpp" "${SOURCE_DIR}/src/*.h" "${SOURCE_DIR}/src/*.ipp"
     "${SOURCE_DIR}/include/*.hpp" "${SOURCE_DIR}/include/*.h" "${SOURCE_DIR}/include/*.ipp")
list(SORT files)
if(NOT files)
  message(FATAL_ERROR "layering: no sources under ${SOURCE_DIR}/src or ${SOURCE_DIR}/include")
endif()

set(bad 0)
set(checked 0)
foreach(rel IN LISTS files)
  module_of("${rel}" from)
  if(from STREQUAL "")
    continue()  # src/CMakeLists.txt's neighbours, not a module's code
  endif()
  list(FIND modules "${from}" known)
  if(known EQUAL -1)
    string(REPLACE ";" ", " known_modules "${modules}")
    message("${rel}: module '${from}' is not one of DESIGN §2's modules (${known_modules})")
    math(EXPR bad "${bad} + 1")
    continue()
  endif()
  # One list element per line. What CMake's list syntax would read as structure (';' splits,
  # '\\' escapes, an unbalanced '[' joins elements) is masked first; no include path has them.
  file(READ "${SOURCE_DIR}/${rel}" text)
  string(REPLACE "\\" "/" text "${text}")
  string(REPLACE ";" "," text "${text}")
  string(REPLACE "[" "(" text "${text}")
  string(REPLACE "]" ")" text "${text}")
  string(REPLACE "\n" ";" lines "${text}")
  set(no 0)
  foreach(line IN LISTS lines)
    math(EXPR no "${no} + 1")
    if(NOT line MATCHES "^[ \t]*#[ \t]*include[ \t]*([\"<])([^\">]+)[\">]")
      continue()
    endif()
    set(delim "${CMAKE_MATCH_1}")
    set(spelled "${CMAKE_MATCH_2}")
    if(delim STREQUAL "<")
      set(shown "#include <${spelled}>")
    else()
      set(shown "#include \"${spelled}\"")
    endif()
    included_module("${rel}" "${delim}" "${spelled}" to)
    if(to STREQUAL "" OR to STREQUAL from)
      continue()
    endif()
    math(EXPR checked "${checked} + 1")
    list(FIND modules "${to}" to_known)
    if(to_known EQUAL -1)
      message("${rel}:${no}: ${from} -> ${to}: '${to}' is not one of DESIGN §2's modules: ${shown}")
      math(EXPR bad "${bad} + 1")
      continue()
    endif()
    if(to STREQUAL "core")
      continue()
    endif()
    list(FIND uses_${from} "${to}" allowed)
    if(allowed EQUAL -1)
      set(may "${uses_${from}}")
      list(PREPEND may core)
      if(from STREQUAL "core")
        set(may "nothing of ours")
      endif()
      string(REPLACE ";" ", " may "${may}")
      message("${rel}:${no}: ${from} -> ${to} is not allowed (${from} may use: ${may}): ${shown}")
      math(EXPR bad "${bad} + 1")
    endif()
  endforeach()
endforeach()

list(LENGTH files nfiles)
if(bad GREATER 0)
  message(FATAL_ERROR "layering: ${bad} forbidden include(s) in ${nfiles} files (DESIGN §2)")
endif()
message("layering: ${nfiles} files, ${checked} cross-module includes, all allowed by DESIGN §2")
