#pragma once
// KEK rotation (DESIGN §11): after `certfleet kek rotate` made version `to` the key file's
// primary, kek_rotation_orchestrate plans one kek_rotation_collection chain per kind that seals
// (its kind row's `sealed`, kinds.hpp) and holds envelopes of another version; each job of a chain
// examines at most kek_rotation_batch envelopes in id order after its cursor, re-seals those not
// at `to` (each UPDATE filtered on the envelope it read, the additional data unchanged), and in
// the same transaction enqueues the next batch (key kek:<to>:<collection>:<last id>), so a chain
// resumes after any crash and never re-seals an envelope twice. A chain's last batch also sweeps
// its collection once more for envelopes left at an older version behind the cursor.
#include "certfleet/catalog/kinds.hpp"
#include "certfleet/core/secrets.hpp"
#include "certfleet/queue/handler.hpp"
#include "certfleet/store/catalog.hpp"
#include "certfleet/store/store.hpp"

#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace certfleet::catalog {

struct kek_rotation_options {
  const kek* key = nullptr;  // reloaded from its file before each job
  // How long after the rotation's start the collection chains begin: every process re-reads a
  // changed key file at its next seal at most a second after the change (core/secrets), so by
  // then nothing new is sealed with the old primary behind a chain's cursor.
  std::chrono::milliseconds settle{2000};
  // The one table of kinds (service::catalog_kinds(), static): the collections are the kinds
  // whose rows seal something.
  std::span<const kind> kinds;
};

// Store meta: the rotation last started, {"from":1,"to":2,"started_at":ms,"job_id":"…"}.
inline constexpr std::string_view kek_rotation_meta_key = "kek_rotation";

std::string kek_orchestrate_key(std::uint32_t from, std::uint32_t to);
std::string kek_batch_key(std::uint32_t to, std::string_view collection, std::string_view cursor);
std::string kek_orchestrate_payload(std::uint32_t from, std::uint32_t to);

struct collection_progress {
  std::string collection;
  std::int64_t done = 0;   // envelopes at the primary version
  std::int64_t total = 0;  // every envelope
  std::vector<store::sealed_count> by_version;
};
// Per kind of `kinds` that seals (and any other kind holding envelopes), from sealed_versions().
std::vector<collection_progress> rotation_progress(const std::vector<store::sealed_count>& counts,
                                                   std::uint32_t primary, std::span<const kind> kinds);

// kek_rotation_orchestrate and kek_rotation_collection.
void register_kek_rotation_handlers(queue::handler_registry& r, std::shared_ptr<const kek_rotation_options> options);

}  // namespace certfleet::catalog
