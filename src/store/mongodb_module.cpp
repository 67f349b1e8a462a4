// Loads the MongoDB backend's module (certfleet_store_mongo.so) for a process whose `store` is a
// MongoDB URI; a process on SQLite never gets here, so it never loads the MongoDB C driver.
#include "certfleet/store/mongodb.hpp"

#include <dlfcn.h>
#include <fmt/format.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

namespace certfleet::store {

namespace {

#define CERTFLEET_STRINGIFY_(x) #x
#define CERTFLEET_STRINGIFY(x) CERTFLEET_STRINGIFY_(x)

error load_error(std::string message) { return make_error(errc::config_invalid, std::move(message), "store"); }

// Where the module may be: beside the executable (the build tree), then where
// scripts/install.sh puts it (bin/../lib/certfleet/).
std::vector<std::filesystem::path> module_paths() {
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return {};
  const auto dir = exe.parent_path();
  return {dir / CERTFLEET_MONGODB_MODULE, dir.parent_path() / "lib" / "certfleet" / CERTFLEET_MONGODB_MODULE};
}

// Debian's libmongoc initializes itself when it is loaded and creates /dev/shm/mongoc-<pid> for
// its counters, removing it at a normal exit. A SIGKILLed process leaves its file behind; a later
// process given the same pid then fails the exclusive create and the driver prints "Falling back
// to malloc for counters" on stderr, before our log handler exists, which breaks the JSON a CLI
// command prints. A file named after our own pid cannot belong to a live process (in this pid
// namespace), so it is removed just before the driver is loaded.
void remove_stale_driver_counters() { ::unlink(fmt::format("/dev/shm/mongoc-{}", ::getpid()).c_str()); }

result<const mongodb_backend*> load() {
  const auto paths = module_paths();
  if (paths.empty()) return load_error("store: cannot load the MongoDB backend: /proc/self/exe is not readable");
  remove_stale_driver_counters();
  std::string tried;
  for (const auto& path : paths) {
    // Never closed: the store and the driver live until the process exits.
    void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      const char* why = ::dlerror();
      tried += fmt::format("{}{}", tried.empty() ? "" : "; ", why ? why : path.string());
      continue;
    }
    using entry_fn = const mongodb_backend* (*)();
    auto entry = reinterpret_cast<entry_fn>(::dlsym(handle, CERTFLEET_STRINGIFY(CERTFLEET_MONGODB_BACKEND_ENTRY)));
    if (!entry)
      return load_error(fmt::format("store: {} is not certfleet's MongoDB backend (no {})", path.string(),
                                    CERTFLEET_STRINGIFY(CERTFLEET_MONGODB_BACKEND_ENTRY)));
    const auto* backend = entry();
    if (std::string_view(backend->version) != CERTFLEET_VERSION || backend->options_size != sizeof(mongodb_options))
      return load_error(fmt::format("store: {} was built for certfleet {}, this is {}: install both from one build",
                                    path.string(), backend->version, CERTFLEET_VERSION));
    return backend;
  }
  return load_error(fmt::format(
      "store: cannot load the MongoDB backend ({}): a build puts it beside the binary, scripts/install.sh in "
      "bin/../lib/certfleet/",
      tried));
}

}  // namespace

result<void> check_mongodb_scheme(std::string_view uri) {
  if (uri.rfind("mongodb://", 0) != 0 && uri.rfind("mongodb+srv://", 0) != 0)
    return make_error(errc::invalid_argument, "store must be sqlite or a mongodb:// or mongodb+srv:// URI", "store");
  return {};
}

result<const mongodb_backend*> mongodb_backend_for(std::string_view uri) {
  if (auto scheme = check_mongodb_scheme(uri); !scheme) return std::move(scheme).error();
  static const auto loaded = load();
  if (!loaded) return loaded.error();
  if (auto ok = (*loaded)->validate_uri(uri); !ok) return std::move(ok).error();
  return *loaded;
}

}  // namespace certfleet::store
