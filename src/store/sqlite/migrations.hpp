#pragma once
#include "db.hpp"

namespace certfleet::store::sqlite {
int schema_version();
// Applies the migrations the file lacks, in one write transaction.
void migrate(db& d);
}  // namespace certfleet::store::sqlite
