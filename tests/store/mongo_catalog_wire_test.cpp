// SKELETON: the catalog wire tests (helper) replace this file.
#include <gtest/gtest.h>
