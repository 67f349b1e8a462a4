# Every dependency comes from a Debian 12 package (scripts/install-deps.sh).
find_package(Boost 1.81.0 EXACT REQUIRED CONFIG COMPONENTS json url)
find_package(SQLite3 REQUIRED)
find_package(bson-1.0 REQUIRED CONFIG)
# The MongoDB store (src/store/mongo/, linked PRIVATE: no other module sees mongoc).
find_package(mongoc-1.0 REQUIRED CONFIG)
find_package(simdjson REQUIRED CONFIG)
find_package(spdlog REQUIRED CONFIG)
find_package(fmt REQUIRED CONFIG)
find_package(tomlplusplus REQUIRED CONFIG)
find_package(CLI11 REQUIRED CONFIG)
find_package(Threads REQUIRED)
# core seals secrets at rest (AES-256-GCM); api hashes tokens; delivery's webhooks speak TLS;
# the test bed makes certificates and serves HTTPS.
find_package(OpenSSL REQUIRED)
# delivery's SSH transport (Debian ships no CMake config for libssh2).
find_package(PkgConfig REQUIRED)
pkg_check_modules(LIBSSH2 REQUIRED IMPORTED_TARGET libssh2)
# msca's XML reader (MS-XCEP / MS-WSTEP answers; linked PRIVATE: no other module sees libxml2).
find_package(LibXml2 REQUIRED)
# net's HTTP Negotiate (Kerberos to AD CS): MIT krb5 and its GSSAPI (libkrb5-dev), linked PRIVATE.
# Found by name in the system's library directory, not through pkg-config, whose -L of Debian's
# mit-krb5/ folder of development links would put that folder in the binary's RUNPATH (lintian's
# custom-library-search-path).
find_library(KRB5_LIBRARY krb5 REQUIRED)
find_library(GSSAPI_KRB5_LIBRARY gssapi_krb5 REQUIRED)
find_path(KRB5_INCLUDE_DIR krb5.h REQUIRED)
add_library(certfleet_krb5 INTERFACE IMPORTED)
set_target_properties(certfleet_krb5 PROPERTIES
  INTERFACE_LINK_LIBRARIES "${GSSAPI_KRB5_LIBRARY};${KRB5_LIBRARY}"
  INTERFACE_INCLUDE_DIRECTORIES "${KRB5_INCLUDE_DIR}")
if(CERTFLEET_TESTS)
  find_package(GTest REQUIRED)
endif()
add_compile_definitions(BOOST_ASIO_NO_DEPRECATED BOOST_ASIO_DISABLE_CONCEPTS)
