# A module sees the public headers of the modules it links, and no others (DESIGN §2).
# include/ holds every module's headers under one root, so each module gets a root of its own in
# the build tree, <build>/module_include/<module>/certfleet/<module> -> include/certfleet/<module>;
# linking a module brings its root (and, for a PUBLIC link, the roots that module's own headers
# need). Including a module that is not linked then does not compile:
#   fatal error: certfleet/api/router.hpp: No such file or directory
# tests/layering checks the arrows themselves, including the ones a PUBLIC link lets through.
function(certfleet_module_headers target module)
  if(NOT IS_DIRECTORY ${PROJECT_SOURCE_DIR}/include/certfleet/${module})
    message(FATAL_ERROR "certfleet_module_headers: no include/certfleet/${module}")
  endif()
  set(root ${PROJECT_BINARY_DIR}/module_include/${module})
  file(MAKE_DIRECTORY ${root}/certfleet)
  file(CREATE_LINK ${PROJECT_SOURCE_DIR}/include/certfleet/${module} ${root}/certfleet/${module} SYMBOLIC)
  target_include_directories(${target} PUBLIC ${root})
endfunction()
