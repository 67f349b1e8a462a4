# The layering check against a small tree with known forbidden includes, so a checker that
# stopped seeing them (a regex or path change) fails here instead of passing on the real tree.
#
# cmake -DCHECKER=<check_layers.cmake> -DWORK_DIR=<scratch dir> -P check_layers_selftest.cmake

set(root "${WORK_DIR}/layering_fixture")
file(REMOVE_RECURSE "${root}")

# Allowed: must not be reported.
file(WRITE "${root}/include/certfleet/core/clock.hpp" "#pragma once\n#include <chrono>\n")
file(WRITE "${root}/include/certfleet/store/job.hpp" "#pragma once\n#include \"certfleet/core/clock.hpp\"\n")
file(WRITE "${root}/src/store/sqlite/db.hpp" "#pragma once\n")
file(WRITE "${root}/src/store/sqlite/db.cpp" "#include \"db.hpp\"\n#include \"../../../include/certfleet/store/job.hpp\"\n")
file(WRITE "${root}/src/delivery/codec.hpp" "#pragma once\n")
file(WRITE "${root}/src/delivery/ssh/deliver.cpp"
     "#include \"delivery/codec.hpp\"\n#include \"../codec.hpp\"\n#include <queue>\n#include <boost/asio.hpp>\n")
file(WRITE "${root}/src/api/log_hub.hpp" "#pragma once\n")
file(WRITE "${root}/src/api/server.cpp"
     "#include \"log_hub.hpp\"\n#include \"certfleet/service/service.hpp\"\n#include \"certfleet/store/job.hpp\"\n")
file(WRITE "${root}/src/app/main.cpp"
     "#include \"certfleet/api/server.hpp\"\n#include \"certfleet/delivery/ssh.hpp\"\n#include \"certfleet/scheduler/scheduler.hpp\"\n")

# Forbidden, each in one of the ways a module reaches another.
file(WRITE "${root}/src/api/routes.cpp"  # public header of a module api may not use
     "// a comment\n#include \"log_hub.hpp\"\n  #  include \"certfleet/net/egress.hpp\"\n")
file(WRITE "${root}/src/store/sqlite/store.cpp"  # upwards, with angle brackets
     "#include \"db.hpp\"\n#define X(a) \\\n  a[0] = ';' \\\n\n#include <certfleet/api/router.hpp>\n")
file(WRITE "${root}/src/queue/worker.cpp"  # another module's private header, relative
     "#include \"../api/log_hub.hpp\"\n")
file(WRITE "${root}/src/scheduler/scheduler.cpp"  # another module's private header, through src/
     "#include \"delivery/codec.hpp\"\n")
file(WRITE "${root}/include/certfleet/core/error.hpp"  # core uses nothing of ours
     "#pragma once\n#include \"certfleet/store/job.hpp\"\n")
file(WRITE "${root}/src/catalog/kinds.cpp"  # a lower module naming a higher one's rows (the cycle
     "#include \"certfleet/checks/checks.hpp\"\n")  # a kind table once had: owners list their own kinds)
file(WRITE "${root}/src/widgets/w.cpp" "\n")  # not a module of DESIGN §2

set(expected
    "include/certfleet/core/error.hpp:2: core -> store is not allowed (core may use: nothing of ours): #include \"certfleet/store/job.hpp\""
    "src/api/routes.cpp:3: api -> net is not allowed (api may use: core, queue, store, catalog, distribution, checks, service): #include \"certfleet/net/egress.hpp\""
    "src/catalog/kinds.cpp:1: catalog -> checks is not allowed (catalog may use: core, queue, store, net, delivery, acme): #include \"certfleet/checks/checks.hpp\""
    "src/queue/worker.cpp:1: queue -> api is not allowed (queue may use: core, store): #include \"../api/log_hub.hpp\""
    "src/scheduler/scheduler.cpp:1: scheduler -> delivery is not allowed (scheduler may use: core, queue, store, distribution, lifecycle, checks): #include \"delivery/codec.hpp\""
    "src/store/sqlite/store.cpp:5: store -> api is not allowed (store may use: core): #include <certfleet/api/router.hpp>"
    "src/widgets/w.cpp: module 'widgets' is not one of DESIGN §2's modules (core, store, queue, net, delivery, acme, msca, catalog, notify, distribution, lifecycle, checks, service, scheduler, api, app)"
    "layering: 7 forbidden include(s) in 16 files (DESIGN §2)")

execute_process(COMMAND "${CMAKE_COMMAND}" -DSOURCE_DIR=${root} -P "${CHECKER}"
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
set(all "${out}${err}")
set(missing "")
foreach(line IN LISTS expected)
  string(FIND "${all}" "${line}" at)
  if(at EQUAL -1)
    string(APPEND missing "  ${line}\n")
  endif()
endforeach()
# Exactly the expected ones: any other "file:line:" report is a false alarm on an allowed include.
string(REGEX MATCHALL "[^\n]*:[0-9]+: [a-z]+ -> [a-z]+[^\n]*" reported "${all}")
list(LENGTH reported n_reported)
if(rc EQUAL 0 OR missing OR NOT n_reported EQUAL 6)
  message(FATAL_ERROR "layering self-test: exit ${rc}, ${n_reported} include reports (want 6); missing:\n"
                      "${missing}checker output:\n${all}")
endif()
file(REMOVE_RECURSE "${root}")
message("layering self-test: the checker reports exactly the 6 planted violations")
