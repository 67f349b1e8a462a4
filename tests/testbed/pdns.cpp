#include "pdns.hpp"

#include <boost/json.hpp>
#include <openssl/rand.h>
#include <signal.h>

#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <tuple>

#include "http_client.hpp"
#include "sshd.hpp"  // free_port

namespace testbed {
namespace {

std::string random_hex(std::size_t n) {
  std::string raw(n, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(raw.data()), static_cast<int>(n)) != 1)
    throw std::runtime_error("RAND_bytes failed");
  static constexpr char digits[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : raw) {
    out += digits[c >> 4];
    out += digits[c & 0xf];
  }
  return out;
}

std::string absolute(std::string name) { return name.ends_with(".") ? name : name + "."; }

// The backend's schema: Debian ships it under /usr/share/pdns-backend-sqlite3 with a link in the
// package's doc directory; the doc copy may be missing (images that drop /usr/share/doc) or
// gzipped, so both places and both forms are accepted.
std::filesystem::path schema_file() {
  for (const char* p : {"/usr/share/pdns-backend-sqlite3/schema/schema.sqlite3.sql",
                        "/usr/share/doc/pdns-backend-sqlite3/schema.sqlite3.sql",
                        "/usr/share/doc/pdns-backend-sqlite3/schema.sqlite3.sql.gz"})
    if (std::filesystem::exists(p)) return p;
  throw std::runtime_error("pdns: no schema.sqlite3.sql (is pdns-backend-sqlite3 installed?)");
}

// Loads the schema with Python's own sqlite3 module (python3 is a test dependency already), so
// neither the sqlite3 CLI nor a link to libsqlite3 is needed here.
void create_database(const std::filesystem::path& db) {
  std::error_code ec;
  std::filesystem::remove(db, ec);
  static constexpr const char* script =
      "import gzip, sqlite3, sys\n"
      "src = sys.argv[2]\n"
      "with (gzip.open(src, 'rt') if src.endswith('.gz') else open(src)) as f: sql = f.read()\n"
      "c = sqlite3.connect(sys.argv[1])\n"
      "c.executescript(sql)\n"
      "c.close()\n";
  auto [rc, out] = run_command({"/usr/bin/python3", "-c", script, db.string(), schema_file().string()},
                               {{"PYTHONDONTWRITEBYTECODE", "1"}});
  if (rc != 0) throw std::runtime_error("pdns: creating " + db.string() + " failed: " + out);
}

}  // namespace

pdns::pdns(const std::filesystem::path& dir, pdns_options o)
    : dir_(std::filesystem::absolute(dir)), opts_(std::move(o)) {
  if (opts_.zones.empty()) throw std::invalid_argument("pdns: at least one zone");
  for (auto& z : opts_.zones)
    if (z.ends_with(".")) z.pop_back();
  if (opts_.api_key.empty()) opts_.api_key = random_hex(16);
  std::filesystem::create_directories(dir_);
  std::string err;
  // free_port() only proves the port was free a moment ago: another test may bind it before
  // pdns_server does, which then exits; try again on other ports.
  for (int attempt = 0; attempt < 5; ++attempt) {
    if (start()) {
      for (const auto& z : opts_.zones) create_zone(z);
      return;
    }
    err = log();
    if (proc_) {
      proc_->signal(SIGKILL);
      proc_->wait(std::chrono::seconds(5));
    }
    proc_.reset();
  }
  throw std::runtime_error("pdns_server did not start: " + err);
}

bool pdns::start() {
  port_ = free_port();
  do api_port_ = free_port();
  while (api_port_ == port_);
  const auto db = dir_ / "pdns.sqlite3";
  create_database(db);
  {
    std::ofstream c(dir_ / "pdns.conf", std::ios::trunc);
    c << "launch=gsqlite3\n"
      << "gsqlite3-database=" << db.string() << "\n"
      << "gsqlite3-pragma-synchronous=0\n"  // a test's database need not survive a power cut
      << "gsqlite3-pragma-foreign-keys=yes\n"
      << "local-address=127.0.0.1\n"
      << "local-port=" << port_ << "\n"
      << "api=yes\n"
      << "api-key=" << opts_.api_key << "\n"
      << "webserver=yes\n"
      << "webserver-address=127.0.0.1\n"
      << "webserver-port=" << api_port_ << "\n"
      << "webserver-allow-from=127.0.0.0/8\n"
      << "webserver-loglevel=normal\n"
      << "socket-dir=" << dir_.string() << "\n"
      << "guardian=no\n"
      << "daemon=no\n"
      << "disable-syslog=yes\n"
      << "log-timestamp=yes\n"
      << "loglevel=6\n"
      // Running as whoever runs the test (root included) keeps the test directory readable.
      << "setuid=\n"
      << "setgid=\n"
      // The default polls secpoll.powerdns.com through the system resolver: nothing outside
      // 127.0.0.0/8 is asked.
      << "security-poll-suffix=\n"
      // The API purges what it changes, but no cache at all means a test never races one.
      << "cache-ttl=0\n"
      << "negquery-cache-ttl=0\n"
      << "query-cache-ttl=0\n"
      << "default-soa-content=ns1.@ hostmaster.@ 0 10800 3600 604800 3600\n";
  }
  proc_ = std::make_unique<process>(
      std::vector<std::string>{"/usr/sbin/pdns_server", "--config-dir=" + dir_.string()},
      std::map<std::string, std::string>{}, (dir_ / "pdns_server").string());
  // Ready when the API answers 200 to our key. pdns_server exits when it cannot bind the DNS
  // port, but keeps running without its API when the web port is taken: then it logs so, or
  // the port's owner (another test's server, its own random key) answers 401.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < deadline) {
    if (!proc_->running() || log().find("Listening on HTTP socket failed") != std::string::npos) return false;
    auto [status, body] = api("GET", "/api/v1/servers/localhost");
    if (status == 200) return proc_->running();
    if (status != 0) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

void pdns::create_zone(const std::string& zone) {
  const std::string name = absolute(zone);
  boost::json::object z{{"name", name}, {"kind", "Native"}, {"nameservers", boost::json::array{"ns1." + name}}};
  auto [status, body] = api("POST", "/api/v1/servers/localhost/zones", boost::json::serialize(z));
  if (status != 201)
    throw std::runtime_error("pdns: creating zone " + name + ": " + std::to_string(status) + " " + body);
  boost::json::object record{{"content", "127.0.0.1"}, {"disabled", false}};
  boost::json::object a{{"name", "ns1." + name},
                        {"type", "A"},
                        {"ttl", 300},
                        {"changetype", "REPLACE"},
                        {"records", boost::json::array{record}}};
  boost::json::object patch{{"rrsets", boost::json::array{a}}};
  std::tie(status, body) = api("PATCH", "/api/v1/servers/localhost/zones/" + name, boost::json::serialize(patch));
  if (status != 204) throw std::runtime_error("pdns: adding ns1." + name + ": " + std::to_string(status) + " " + body);
  // The API writes the backend; the zone must also answer over DNS before a test relies on it.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  for (;;) {
    auto [rc, out] = dig({"ns1." + name, "A", "+short"});
    if (rc == 0 && out.find("127.0.0.1") != std::string::npos) return;
    if (std::chrono::steady_clock::now() >= deadline)
      throw std::runtime_error("pdns: zone " + name + " does not answer over DNS: " + out + "\n" + log());
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

pdns::~pdns() {
  if (!proc_) return;
  proc_->signal(SIGTERM);
  if (proc_->wait(std::chrono::seconds(10)) == -1) {
    proc_->signal(SIGKILL);
    proc_->wait(std::chrono::seconds(5));
  }
}

std::pair<int, std::string> pdns::api(const std::string& method, const std::string& path, const std::string& body) const {
  // A client per call: api() is const and calls are few.
  http_client c("127.0.0.1", api_port_, std::chrono::seconds(10));
  auto r = c.request(method, path, body, {}, {{"X-API-Key", opts_.api_key}});
  if (r.status == 0) return {0, r.error};
  return {r.status, r.body};
}

std::pair<int, std::string> pdns::dig(const std::vector<std::string>& args) const { return dig_at(port_, args); }

std::vector<std::string> pdns::dig_txt(const std::string& name) const { return dig_txt_at(port_, name); }

}  // namespace testbed
