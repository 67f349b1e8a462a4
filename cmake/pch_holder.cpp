// The precompiled header's owner (src/CMakeLists.txt: certfleet_pch) compiles this empty file.
