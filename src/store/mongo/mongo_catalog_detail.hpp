#pragma once
// What the three files of the MongoDB catalog share, private to src/store/mongo: the collection
// names, the documents and command documents (mongo_catalog_documents.cpp) and the reads of one
// transaction (mongo_catalog_reads.cpp), which the read snapshot and the write transaction
// (mongo_catalog.cpp) both derive from. The reads are one template, instantiated once for each in
// mongo_catalog_reads.cpp, so the store and its writes build against these declarations alone.
#include "certfleet/store/catalog.hpp"
#include "client.hpp"
#include "job_tx.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace certfleet::store::mongo::detail {

inline constexpr const char* objects_coll = "objects";
inline constexpr const char* distributions_coll = "distributions";
inline constexpr const char* results_coll = "target_results";
inline constexpr const char* finalized_coll = "distribution_finalized";
inline constexpr const char* dns_coll = "dns_records";
inline constexpr const char* meta_coll = "store_meta";

// ---- small BSON helpers, command documents, documents (mongo_catalog_documents.cpp) ------------

doc one(std::string_view k, std::string_view v);
doc with(std::string_view op, const doc& v);
// {$regex: "^<prefix>"}, every character of the prefix literal.
doc starts_with(std::string_view prefix);

doc find_cmd(std::string_view coll, const doc& filter, const doc* sort, std::int64_t limit, std::int64_t skip,
             const doc* projection, std::int32_t max_time_ms);
doc aggregate_cmd(std::string_view coll, const std::vector<doc>& pipeline, std::int32_t max_time_ms);
doc insert_cmd(std::string_view coll, const doc& d, std::int32_t max_time_ms);
doc update_cmd(std::string_view coll, const doc& q, const doc& u, bool upsert, std::int32_t max_time_ms);
doc delete_cmd(std::string_view coll, const doc& q, std::int32_t max_time_ms);
bool limit_is_zero(int limit);
std::int64_t mongo_limit(int limit);

doc object_document(const catalog_object& o);
catalog_object read_object(const bson_t* b);
doc distribution_run_fields(const distribution_record& d);
doc new_distribution_document(const distribution_record& d);
distribution_record read_distribution(const bson_t* b);
doc result_id(const target_result& r);
doc result_document(const target_result& r);
target_result read_result(const bson_t* b);
doc finalized_id(std::string_view distribution_id, std::int64_t run_no, std::string_view job_id);
doc dns_document(const dns_record& r);
dns_record read_dns(const bson_t* b);
std::string meta_id(std::string_view key);
error object_not_found(std::string_view kind, std::string_view id);
std::uint32_t parse_version(std::string_view v);
std::vector<doc> sealed_versions_pipeline();
std::vector<doc> last_success_pipeline(int limit);
std::vector<doc> dns_left_pipeline(int limit);

// ---- reads: the commands of one transaction (mongo_catalog_reads.cpp) --------------------------

template <class Base>
class reads : public Base {
 public:
  reads(const connection& c, mongoc_client_t* client, mongoc_client_session_t* s, mongo_job_tx* jobs)
      : c_(c), client_(client), s_(s), jobs_(jobs) {}

  // The failure that ended this transaction's work, when there is no job side to record it.
  std::optional<failure> own_failed;

  result<catalog_object> get_object(std::string_view project_id, std::string_view kind, std::string_view id) override;
  result<object_page> list_objects(std::string_view project_id, std::string_view kind, int page,
                                   int page_size) override;
  result<std::vector<catalog_object>> objects_by_ids(std::string_view project_id, std::string_view kind,
                                                     const std::vector<std::string>& ids) override;
  result<std::vector<catalog_object>> objects_referencing(std::string_view project_id, std::string_view kind,
                                                          std::string_view ref) override;
  result<std::vector<catalog_object>> objects_named(std::string_view project_id, std::string_view kind,
                                                    std::string_view name_prefix, int limit) override;
  result<std::vector<catalog_object>> certificates_expiring(time_ms before, int limit) override;
  result<std::vector<catalog_object>> objects_by_not_after(std::string_view kind, time_ms before, int limit) override;
  result<std::int64_t> count_sealed() override;
  result<std::vector<sealed_count>> sealed_versions() override;
  result<std::vector<sealed_row>> sealed_page(std::string_view kind, std::string_view except_prefix,
                                              std::string_view after_id, int limit) override;
  result<std::optional<std::string>> meta(std::string_view key) override;
  result<distribution_record> get_distribution(std::string_view project_id, std::string_view id) override;
  result<distribution_page> list_distributions(std::string_view project_id, int page, int page_size) override;
  result<std::vector<std::string>> distributions_using(std::string_view project_id,
                                                       std::string_view object_id) override;
  result<std::vector<distribution_record>> distributions_in_status(std::string_view status, int limit) override;
  result<std::vector<distribution_record>> auto_execute_distributions(int limit) override;
  result<std::vector<target_result>> run_results(std::string_view distribution_id, std::int64_t run_no) override;
  result<std::vector<target_result>> job_results(std::string_view distribution_id, std::int64_t run_no,
                                                 std::string_view job_id) override;
  result<std::vector<target_result>> run_outcomes(std::string_view distribution_id, std::int64_t run_no) override;
  result<std::vector<finalized_child>> finalized_children(std::string_view distribution_id,
                                                          std::int64_t run_no) override;
  result<std::int64_t> last_files_run(std::string_view distribution_id, std::string_view target_id) override;
  result<std::vector<std::pair<std::string, time_ms>>> target_last_successes(int limit) override;
  result<std::vector<job_record>> children_of(std::string_view distribution_id,
                                              std::string_view run_key_prefix) override;
  result<std::vector<dns_record>> dns_records_of(std::string_view job_id, std::int64_t fence) override;
  result<std::vector<dns_record>> dns_records_left(int limit) override;

 protected:
  error keep(const failure& f, std::string_view doing);
  std::optional<error> send(const doc& cmd, doc& reply, std::string_view doing);
  result<std::vector<doc>> drain(std::string_view coll, const doc& cmd, std::string_view doing);
  result<std::vector<doc>> find(std::string_view coll, const doc& filter, const doc* sort, std::int64_t limit,
                                std::int64_t skip, const doc* projection, std::string_view doing);
  result<std::vector<doc>> aggregate(std::string_view coll, const std::vector<doc>& pipeline, std::string_view doing);
  result<std::int64_t> count(std::string_view coll, const doc& filter, std::string_view doing);
  result<std::vector<catalog_object>> objects(const doc& f, const doc* sort, std::int64_t limit, std::string_view doing);
  result<std::vector<distribution_record>> distributions(const doc& f, const doc* sort, std::int64_t limit,
                                                         std::string_view doing);
  result<std::vector<target_result>> results(const doc& f, std::string_view doing);

  const connection& c_;
  mongoc_client_t* client_;
  mongoc_client_session_t* s_;
  mongo_job_tx* jobs_;
};

extern template class reads<catalog_read>;
extern template class reads<catalog_tx>;

}  // namespace certfleet::store::mongo::detail
