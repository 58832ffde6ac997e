#include "packages/apt/repository.hpp"

#include <algorithm>

#include <fstream>

#include "packages/apt/release_signature.hpp"
#include "base/archive/decompress.hpp"
#include "base/cache/fetch_into_cache.hpp"

namespace gpuenv::packages {
namespace {

std::string read_file(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

/// The keyrings for a source: signed-by paths, an inline key written to work_dir, or the defaults.
Result<std::vector<std::string>> keyrings_for(const AptSource& s, const AptFetchContext& ctx) {
  std::vector<std::string> rings;
  for (const auto& k : s.signed_by) {
    if (k.find('/') == std::string::npos) {
      return make_error(ErrorKind::usage, "apt.fingerprint_keyring",
                        "signed-by names a key fingerprint (" + k + "); gpuenv needs the keyring file", s.where,
                        "give signed-by the path of the repository's keyring");
    }
    rings.push_back(k);
  }
  if (!s.signed_by_key.empty()) {
    const std::string path = ctx.work_dir + "/inline-key-" + std::to_string(std::hash<std::string>{}(s.where)) + ".asc";
    std::ofstream(path, std::ios::binary) << s.signed_by_key;
    rings.push_back(path);
  }
  if (rings.empty()) rings = ctx.default_keyrings;
  return rings;
}

// The best compressed form the Release lists for `base_path` ("main/binary-amd64/Packages").
const ReleaseEntry* pick_index(const ReleaseFile& r, const std::string& base_path) {
  for (const char* ext : {".xz", ".gz", ".bz2", ".zst", ""}) {
    if (const ReleaseEntry* e = r.find(base_path + ext)) return e;
  }
  return nullptr;
}

}  // namespace

Result<RepositoryIndexes> fetch_repository(const AptSource& s, AptFetchContext& ctx) {
  if (!ctx.fetcher || !ctx.cache || !ctx.runner) return make_error(ErrorKind::internal, "apt.context", "incomplete fetch context", s.where, "");
  const std::string base = s.uri + (s.is_flat() ? (s.suite == "/" || s.suite == "./" ? std::string() : s.suite) : "dists/" + s.suite + "/");
  const bool trusted = s.trusted.value_or(false);
  RepositoryIndexes out;
  std::string release_text;

  auto rings = keyrings_for(s, ctx);
  if (!rings) return std::move(rings).error();
  auto inrelease = ctx.fetcher->get(base + "InRelease");
  if (inrelease) {
    auto v = verify_inrelease(*ctx.runner, *inrelease, *rings, base + "InRelease", ctx.work_dir);
    if (v) {
      release_text = std::move(v->text);
      out.signed_by = v->fingerprint;
    } else if (trusted && v.error().id != "apt.bad_signature") {
      auto body = clearsigned_body(*inrelease, base + "InRelease");
      if (!body) return std::move(body).error();
      release_text = std::move(*body);
    } else {
      Error e = std::move(v).error();
      e.while_("checking the repository of " + s.where);
      return e;
    }
  } else if (inrelease.error().id == "fetch.not_found") {
    auto release = ctx.fetcher->get(base + "Release");
    if (!release) return std::move(release).error();
    auto signature = ctx.fetcher->get(base + "Release.gpg");
    if (signature) {
      auto v = verify_detached_release(*ctx.runner, *release, *signature, *rings, base + "Release", ctx.work_dir);
      if (!v && !(trusted && v.error().id != "apt.bad_signature")) return std::move(v).error();
      if (v) out.signed_by = v->fingerprint;
    } else if (!trusted) {
      return make_error(ErrorKind::environment, "apt.unsigned", "the repository has neither InRelease nor Release.gpg", base,
                        "add the repository's signing key, or mark the source trusted: true if you trust its transport");
    }
    release_text = std::move(*release);
  } else {
    return std::move(inrelease).error();
  }

  auto release = parse_release(release_text, base + "Release");
  if (!release) return std::move(release).error();
  out.release = std::move(*release);
  if (ctx.now_unix && out.release.valid_until_unix && *out.release.valid_until_unix < ctx.now_unix) {
    return make_error(ErrorKind::environment, "apt.expired", "the Release file expired on " + out.release.valid_until, base,
                      "the mirror is stale or replayed; use an up-to-date mirror");
  }

  std::vector<std::string> components = s.is_flat() ? std::vector<std::string>{""} : s.components;
  // A source's arch= / Architectures: narrows what is read (as apt does): only the wanted architectures it lists.
  std::vector<std::string> archs;
  for (const auto& a : ctx.architectures)
    if (s.architectures.empty() || std::find(s.architectures.begin(), s.architectures.end(), a) != s.architectures.end()) archs.push_back(a);
  std::vector<CacheRequest> requests;
  for (const auto& c : components) {
    for (const auto& a : archs) {
      const std::string path = c.empty() ? "Packages" : c + "/binary-" + a + "/Packages";
      const ReleaseEntry* e = pick_index(out.release, path);
      if (!e) {
        return make_error(ErrorKind::environment, "apt.missing_index", "the Release lists no " + path + "(.xz|.gz)", base,
                          "check the component and architecture of the source");
      }
      const std::string dir = e->path.substr(0, e->path.rfind('/') + 1);
      const std::string url = out.release.acquire_by_hash ? base + dir + "by-hash/SHA256/" + e->sha256.hex() : base + e->path;
      requests.push_back({url, e->sha256, e->size});
      out.packages.push_back({c, a, url, e->sha256, {}});
    }
  }
  auto blobs = fetch_into_cache(*ctx.fetcher, *ctx.cache, requests);
  for (std::size_t i = 0; i < blobs.size(); ++i) {
    if (!blobs[i]) {
      Error e = std::move(blobs[i]).error();
      e.while_("fetching " + requests[i].url);
      return e;
    }
    auto text = decompress(read_file(blobs[i]->path), requests[i].url);
    if (!text) return std::move(text).error();
    out.packages[i].text = std::move(*text);
  }
  return out;
}

}  // namespace gpuenv::packages
