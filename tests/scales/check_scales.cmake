# Every ctest test carries exactly one scale label: unit, peer, process or browser
# (tests/CMakeLists.txt's first comment, docs/architecture.md "Tests"). Lists each test without
# one, or with more than one, and fails; otherwise prints the count per scale.
#
# cmake -DCTEST=<ctest> -DBUILD_DIR=<build dir> -P check_scales.cmake
#
# A gtest binary that is not built yet shows as `<binary>_NOT_BUILT` (no labels of its own): it is
# left out here, and its tests are checked once it is built.

set(scales unit peer process browser)

# The test names `ctest -N` prints, optionally only those with a label matching `label_regex`.
function(test_names out)
  execute_process(COMMAND "${CTEST}" --test-dir "${BUILD_DIR}" -N ${ARGN}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE text ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "test scales: `ctest -N ${ARGN}` failed (${rc}): ${err}")
  endif()
  # One name per line; a `;` in a name would split it, so it is escaped first.
  string(REPLACE ";" "\\;" text "${text}")
  string(REGEX MATCHALL "Test +#[0-9]+: [^\n]*" lines "${text}")
  set(names "")
  foreach(line IN LISTS lines)
    string(REGEX REPLACE "^Test +#[0-9]+: " "" name "${line}")
    if(NOT name MATCHES "_NOT_BUILT$")
      list(APPEND names "${name}")
    endif()
  endforeach()
  set(${out} "${names}" PARENT_SCOPE)
endfunction()

test_names(all)
set(labelled "")
set(counts "")
foreach(scale IN LISTS scales)
  test_names(of_scale -L "^${scale}$")
  list(LENGTH of_scale n)
  list(APPEND counts "${scale} ${n}")
  list(APPEND labelled ${of_scale})
endforeach()

# Each test once in the scale lists: none is missing and none is listed twice.
set(problems "")
set(missing ${all})
if(labelled)
  list(REMOVE_ITEM missing ${labelled})
endif()
foreach(name IN LISTS missing)
  string(APPEND problems "  ${name}: no scale label\n")
endforeach()
list(SORT labelled)
set(previous "")
set(twice "")
foreach(name IN LISTS labelled)
  if(name STREQUAL previous)
    list(APPEND twice "${name}")
  endif()
  set(previous "${name}")
endforeach()
list(REMOVE_DUPLICATES twice)
foreach(name IN LISTS twice)
  string(APPEND problems "  ${name}: more than one scale label\n")
endforeach()

list(LENGTH all n_all)
list(JOIN counts ", " summary)
if(problems)
  message(FATAL_ERROR "test scales: each test needs exactly one of the labels ${scales} "
                      "(tests/CMakeLists.txt's first comment):\n${problems}")
endif()
message("test scales: ${n_all} tests, each with one scale (${summary})")
