// SKELETON: the auth/maintenance wire tests (helper) replace this file.
#include <gtest/gtest.h>
