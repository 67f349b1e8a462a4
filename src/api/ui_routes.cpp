// The web UI (DESIGN §8): every UI path answers the one page, which routes in the browser;
// assets answer from the files embedded at build time, cacheable forever under their version.
#include "handlers.hpp"
#include "server_state.hpp"
#include "ui_assets.hpp"

#include <fmt/format.h>

#include <array>

namespace certfleet::api {

namespace {

// The UI's paths (DESIGN §8): a first segment and whether an id may follow it.
struct ui_page {
  std::string_view first;
  bool with_id;
};
constexpr std::array<ui_page, 12> pages{{{"dashboard", false},
                                        {"jobs", true},
                                        {"distributions", true},
                                        {"certificates", true},
                                        {"domains", false},
                                        {"dns-providers", false},
                                        {"msca-cas", false},
                                        {"discovery", true},  // /discovery/certificates
                                        {"notifications", false},
                                        {"tokens", false},
                                        {"settings", false},
                                        {"login", false}}};

std::string_view content_type_of(std::string_view path) {
  struct row {
    std::string_view ext, type;
  };
  static constexpr std::array<row, 8> types{{{".html", "text/html; charset=utf-8"},
                                             {".js", "text/javascript; charset=utf-8"},
                                             {".css", "text/css; charset=utf-8"},
                                             {".svg", "image/svg+xml"},
                                             {".png", "image/png"},
                                             {".ico", "image/x-icon"},
                                             {".json", "application/json"},
                                             {".txt", "text/plain; charset=utf-8"}}};
  for (const auto& t : types)
    if (path.size() >= t.ext.size() && path.substr(path.size() - t.ext.size()) == t.ext) return t.type;
  return "application/octet-stream";
}

const ui_file* find_file(std::string_view path) {
  for (const auto& f : ui_files())
    if (f.path == path) return &f;
  return nullptr;
}

bool is_ui_page(std::string_view path) {
  if (path.empty() || path.front() != '/') return false;
  path.remove_prefix(1);
  auto slash = path.find('/');
  auto first = path.substr(0, slash);
  auto rest = slash == std::string_view::npos ? std::string_view() : path.substr(slash + 1);
  for (const auto& p : pages) {
    if (p.first != first) continue;
    if (slash == std::string_view::npos) return true;
    return p.with_id && !rest.empty() && rest.find('/') == std::string_view::npos;
  }
  return false;
}

reply page(unsigned status) {
  reply r;
  r.status = status;
  if (const auto* index = find_file("index.html")) {
    r.content_type = std::string(content_type_of("index.html"));
    r.body = std::string(index->body);
  } else {
    // A build without ui/ (it is embedded when present): say so instead of an empty page.
    r.content_type = "text/plain; charset=utf-8";
    r.body = "this certfleet build has no web UI (ui/ was empty at build time)\n";
  }
  return r;
}

// What GET of a path outside /api/ answers.
reply get_ui(std::string_view path) {
  if (path == "/") {
    reply r;
    r.status = 302;
    r.content_type = "text/plain; charset=utf-8";
    r.headers.emplace_back("Location", "/dashboard");  // the console's landing page (issue 31)
    return r;
  }
  constexpr std::string_view assets = "/assets/";
  if (path.substr(0, assets.size()) == assets) {
    auto rest = path.substr(assets.size());
    auto slash = rest.find('/');
    if (slash == std::string_view::npos || rest.substr(0, slash) != ui_version()) {
      // Another build's asset (a page loaded before an upgrade): a reload fetches the new page.
      return error_reply(errc::not_found, "no such asset in this build; reload the page", "path");
    }
    auto name = rest.substr(slash + 1);
    const auto* f = name == "index.html" ? nullptr : find_file(name);
    if (!f) return error_reply(errc::not_found, "no such asset in this build", "path");
    reply r;
    r.content_type = std::string(content_type_of(name));
    r.body = std::string(f->body);
    r.headers.emplace_back("Cache-Control", "public, max-age=31536000, immutable");
    return r;
  }
  // Any other path gets the page too, with 404: it shows its not-found view.
  return page(is_ui_page(path) ? 200 : 404);
}

}  // namespace

std::optional<reply> serve_ui(const server_state&, std::string_view method, std::string_view path) {
  if (path == "/api" || path.substr(0, 5) == "/api/") return std::nullopt;
  auto got = get_ui(path);
  if (method == "GET") return got;  // HEAD arrives here as GET
  // Another method (OPTIONS, PATCH, POST…) on a path the UI serves: the resource exists, only
  // not with that method. A path GET would answer 404 stays the API's JSON 404.
  if (got.status >= 400) return std::nullopt;
  auto r = error_reply(errc::conflict, "", "method");
  r.status = 405;
  r.body = error_body("method_not_allowed",
                      fmt::format("method {} is not allowed here; allowed: GET, HEAD", method.substr(0, 16)), "method");
  r.headers.emplace_back("Allow", "GET, HEAD");
  return r;
}

}  // namespace certfleet::api
