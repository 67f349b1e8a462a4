#pragma once
#include "db.hpp"

// The job list's rank structure (migration 10) counts jobs per block of 2^bits rids: a deep page
// walks the blocks' counts and then skips fewer than 2^bits index entries. Migration 10 spells
// the shift with this macro; changing it needs a new migration that refills job_blocks.
#define CERTFLEET_JOB_BLOCK_BITS 10

namespace certfleet::store::sqlite {
int schema_version();
// For a read-only open: the file's applied migrations must be exactly this build's (store_failure
// otherwise); nothing is written.
void check_schema_current(db& d);
// Applies the migrations the file lacks, in one write transaction.
void migrate(db& d);
}  // namespace certfleet::store::sqlite
