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
pkg_check_modules(KRB5 REQUIRED IMPORTED_TARGET krb5-gssapi krb5)
if(CERTFLEET_TESTS)
  find_package(GTest REQUIRED)
endif()
add_compile_definitions(BOOST_ASIO_NO_DEPRECATED BOOST_ASIO_DISABLE_CONCEPTS)
