# The scale check against two small ctest trees: one with a test of each kind of mistake (no
# label, only a label that is not a scale, two scales), which must fail naming exactly those, and
# one where every test has one scale (plus an extra label), which must pass.
#
# cmake -DCHECKER=<check_scales.cmake> -DCTEST=<ctest> -DWORK_DIR=<scratch dir> -P check_scales_selftest.cmake

set(root "${WORK_DIR}/scales_fixture")
file(REMOVE_RECURSE "${root}")

set(good [=[
add_test(pure_one /bin/true)
set_tests_properties(pure_one PROPERTIES LABELS "unit;extra")
add_test(peer_one /bin/true)
set_tests_properties(peer_one PROPERTIES LABELS peer)
add_test(process_one /bin/true)
set_tests_properties(process_one PROPERTIES LABELS process)
add_test(browser_one /bin/true)
set_tests_properties(browser_one PROPERTIES LABELS browser)
add_test(not_built_yet_NOT_BUILT /bin/false)
]=])
set(bad [=[
add_test(unlabelled /bin/true)
add_test(only_another_label /bin/true)
set_tests_properties(only_another_label PROPERTIES LABELS "ui;units")
add_test(two_scales /bin/true)
set_tests_properties(two_scales PROPERTIES LABELS "peer;process")
]=])
file(WRITE "${root}/good/CTestTestfile.cmake" "${good}")
file(WRITE "${root}/bad/CTestTestfile.cmake" "${good}${bad}")

function(run_checker dir)
  execute_process(COMMAND "${CMAKE_COMMAND}" -DCTEST=${CTEST} -DBUILD_DIR=${dir} -P "${CHECKER}"
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  set(rc ${rc} PARENT_SCOPE)
  set(all "${out}${err}" PARENT_SCOPE)
endfunction()

run_checker("${root}/good")
if(NOT rc EQUAL 0 OR NOT all MATCHES "4 tests, each with one scale \\(unit 1, peer 1, process 1, browser 1\\)")
  message(FATAL_ERROR "test scales self-test: a well-labelled tree failed (exit ${rc}):\n${all}")
endif()

run_checker("${root}/bad")
string(REGEX MATCHALL "\n *[a-z_]+: [a-z ]+label" reported "${all}")
string(REGEX REPLACE "\n *" "" reported "${reported}")
set(expected "only_another_label: no scale label" "two_scales: more than one scale label"
             "unlabelled: no scale label")
list(SORT reported)
if(rc EQUAL 0 OR NOT reported STREQUAL expected)
  message(FATAL_ERROR "test scales self-test: exit ${rc}; reported '${reported}', want '${expected}'; "
                      "checker output:\n${all}")
endif()
file(REMOVE_RECURSE "${root}")
message("test scales self-test: the checker passes a labelled tree and names exactly the 3 planted mistakes")
