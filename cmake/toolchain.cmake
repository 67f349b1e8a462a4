# Compiler launcher, warnings and sanitizers, in one place.
find_program(CCACHE_PROGRAM ccache)
if(CCACHE_PROGRAM)
  # Precompiled headers are only cache-safe with this sloppiness; BASEDIR/NOHASHDIR let a fresh
  # clone in another folder (CI) hit the cache that a previous build filled.
  set(CERTFLEET_CCACHE_ENV
      "CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime"
      "CCACHE_BASEDIR=${PROJECT_SOURCE_DIR}" "CCACHE_NOHASHDIR=1")
  set(CMAKE_CXX_COMPILER_LAUNCHER ${CMAKE_COMMAND} -E env ${CERTFLEET_CCACHE_ENV} ${CCACHE_PROGRAM})
  set(CMAKE_C_COMPILER_LAUNCHER ${CMAKE_COMMAND} -E env ${CERTFLEET_CCACHE_ENV} ${CCACHE_PROGRAM})
endif()

# Debug sections compressed (zlib) in objects and executables: the two test builds hold ~60 test,
# bench and fuzz executables with the libraries linked statically, and disk on a CI machine is not
# guaranteed. gdb, perf, addr2line and llvm-symbolizer read them.
add_compile_options(-gz)
add_link_options(-gz)

add_library(certfleet_warnings INTERFACE)
target_compile_options(certfleet_warnings INTERFACE -Wall -Wextra -Wno-unused-parameter)

if(CERTFLEET_SANITIZE)
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "CERTFLEET_SANITIZE needs clang (GCC has no libFuzzer)")
  endif()
  set(CERTFLEET_SAN_FLAGS -fsanitize=address,undefined,fuzzer-no-link -fno-omit-frame-pointer
      -fno-sanitize-recover=undefined)
  add_compile_options(${CERTFLEET_SAN_FLAGS})
  add_link_options(-fsanitize=address,undefined)
endif()

# One precompiled header with the heavy Boost.Asio parts, built once (certfleet_pch, declared in
# src/CMakeLists.txt once the dependencies are found) and reused by every target that awaits.
# A copy per target cost ~190 MiB of disk each (7.8 GiB over the GCC build) and a compile each.
function(certfleet_use_asio_pch target)
  target_precompile_headers(${target} REUSE_FROM certfleet_pch)
endfunction()
