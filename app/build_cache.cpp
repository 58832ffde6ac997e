#include "app/build_cache.hpp"

#include <vector>

#include "app/base_image.hpp"
#include "app/resolve.hpp"
#include "base/cache/blob_store.hpp"
#include "base/digest.hpp"
#include "base/file_io.hpp"
#include "base/time.hpp"
#include "marks/dsse.hpp"
#include "marks/keys.hpp"

namespace gpuenv::app {
namespace build_cache {

/// The sha256 of the running program, read once: part of every cache key, so that only the same gpuenv takes an
/// entry. "" when it cannot be read (then nothing is shared: open refuses the cache).
const std::string& program_sha256() {
  static const std::string sum = [] {
    auto d = sha256_of_file("/proc/self/exe");
    return d ? d->hex() : std::string();
  }();
  return sum;
}

/// The cache key: a private key signs and verifies, a public key only verifies.
Result<marks::Key> read_cache_key(const std::string& path) {
  GPUENV_TRY(text, read_file_limited(path, 64u << 10));
  if (text.find("-----BEGIN PUBLIC KEY-----") != std::string::npos) return marks::parse_public_key(text, path);
  return marks::read_private_key(path);  // again: a private key's file is also checked for who may read it
}

}  // namespace build_cache

BuildCache::~BuildCache() = default;

Result<std::unique_ptr<BuildCache>> BuildCache::open(const BuildCacheRequest& rq, Services& services) {
  if (rq.key_path.empty())
    return make_error(ErrorKind::usage, "build.cache_key", "--cache needs --cache-key: a cache's entries are taken only when signed with its key", "--cache",
                      "make a key pair with `gpuenv key generate -o DIR` and give --cache-key DIR/gpuenv.key (a writer) or DIR/gpuenv.pub (a reader)");
  GPUENV_TRY(ref, images::parse_image_reference(rq.ref));
  if (!ref.digest.empty())
    return make_error(ErrorKind::usage, "registry.bad_reference", "a build cache is a tag, not a digest", rq.ref, "name it host/repository:tag");
  GPUENV_TRY(key, build_cache::read_cache_key(rq.key_path));
  std::unique_ptr<BuildCache> c(new BuildCache());
  c->m_report.ref = ref.to_string();
  c->m_key = std::make_unique<marks::Key>(std::move(key));
  c->m_report.read_only = !c->m_key->can_sign();
  c->m_generator = generator();
  c->m_lazy = !rq.push_registry.empty() && rq.push_registry == ref.registry;
  if (build_cache::program_sha256().empty()) {
    c->note("cannot read this program to key the cache by it; building without the cache");
    return c;
  }
  c->m_builder = c->m_generator + "\n" + build_cache::program_sha256();
  auto http = open_http_client(services, rq.ca_bundle);
  if (!http) {
    c->note("cannot reach the cache (" + http.error().message + "); building without it");
    return c;
  }
  c->m_http = std::move(*http);
  Status problem = ok_status();
  images::RegistryOptions ro = registry_options(services, ref.registry, rq.plain_http, &problem);
  if (!problem) return problem.error();
  c->m_client = std::make_unique<images::RegistryClient>(*c->m_http, ro);
  c->m_cache = std::make_unique<images::RegistryBuildCache>(*c->m_client, ref);
  services.step("reading the build cache " + ref.to_string());
  auto read = c->m_cache->read();
  if (!read) {
    c->note("cannot read the build cache " + ref.to_string() + " (" + read.error().message + "); building without it");
    c->m_cache.reset();  // nor written: what refused the read (unreachable, not a cache) refuses the write
    return c;
  }
  c->take_documents(*read);
  return c;
}

void BuildCache::take_documents(const images::CacheRead& read) {
  for (const auto& n : read.notes) note(n);
  const std::vector<const marks::Key*> keys = {m_key.get()};
  for (const auto& doc : read.documents) {
    const auto refuse = [&](const std::string& why) {
      ++m_report.refused;
      note("refused the cache document " + doc.where + ": " + why);
    };
    auto envelope = marks::parse_envelope(doc.envelope, doc.where);
    if (!envelope) {
      refuse(envelope.error().message);
      continue;
    }
    if (envelope->payload_type != images::k_build_cache_payload_type) {
      refuse("its payload is not a build cache document");
      continue;
    }
    if (envelope->signatures.empty()) {
      refuse("it is not signed");
      continue;
    }
    if (marks::verifying_key(*envelope, keys) < 0) {
      refuse("it is not signed by the cache key (" + m_key->fingerprint().substr(0, 16) + "...)");
      continue;
    }
    auto document = images::parse_cache_document(envelope->payload, doc.where);
    if (!document) {
      refuse(document.error().message);
      continue;
    }
    ++m_report.documents;
    for (auto& im : document->images) m_images.try_emplace(im.key, im);  // newest first: the first one stays
    for (auto& l : document->layers) m_layers.try_emplace(l.key, l);
  }
}

std::string BuildCache::cache_key(const std::string& identity) const { return sha256_hex("gpuenv-build-cache-key-v1\n" + m_builder + "\n" + identity); }

std::optional<BuildCache::Image> BuildCache::find_image(const std::string& identity, const resolver::Platform& platform) {
  if (!m_cache) return std::nullopt;
  const auto it = m_images.find(cache_key(identity));
  if (it == m_images.end() || it->second.platform != platform) return std::nullopt;
  Image out;
  out.entry = it->second;
  auto manifest = m_cache->get_blob(out.entry.manifest, 4u << 20);
  auto config = manifest ? m_cache->get_blob(out.entry.config, 16u << 20) : Result<std::string>(manifest.error());
  auto sbom = config ? m_cache->get_blob(out.entry.sbom, 256u << 20) : Result<std::string>(config.error());
  if (!sbom) {
    note("cannot read the cache's image " + out.entry.manifest.digest.str() + " (" + sbom.error().message + "); building it");
    return std::nullopt;
  }
  out.manifest = std::move(*manifest);
  out.config = std::move(*config);
  out.sbom = std::move(*sbom);
  return out;
}

std::optional<images::CachedLayer> BuildCache::find_layer(const std::string& identity, const resolver::Platform& platform) {
  if (!m_cache) return std::nullopt;
  const auto it = m_layers.find(cache_key(identity));
  if (it == m_layers.end() || it->second.platform != platform) return std::nullopt;
  return it->second;
}

Result<bool> BuildCache::take_blob(const images::Descriptor& blob, images::OciLayout& layout) {
  if (m_lazy) {
    // Left in the registry: the push finds it in its repository or mounts it from the cache's.
    GPUENV_TRY(present, m_client->blob_exists(m_cache->ref(), blob.digest));
    if (!present)
      return make_error(ErrorKind::environment, "cache.blob_missing", "the cache names blob " + blob.digest.str() + ", which its repository lacks", m_cache->ref().to_string(),
                        "nothing to do: the layer is built instead");
    return true;
  }
  GPUENV_CHECK(m_cache->fetch_blob(blob, layout));
  return false;
}

void BuildCache::made_layer(const std::string& identity, images::CachedLayer entry) {
  if (m_builder.empty()) return;
  entry.key = cache_key(identity);
  // Written unless the cache holds this very layer: an entry of the same key naming another one was refused, and
  // this build's, newer, takes its place for the next reader.
  if (const auto it = m_layers.find(entry.key); it != m_layers.end() && it->second.blob.digest == entry.blob.digest && it->second.files == entry.files) return;
  m_layers[entry.key] = entry;
  m_new.layers.push_back(std::move(entry));
}

void BuildCache::made_image(const std::string& identity, images::CachedImage entry, std::string sbom) {
  if (m_builder.empty()) return;
  entry.key = cache_key(identity);
  entry.sbom = images::Descriptor{std::string(images::k_spdx_type), Digest::of(sbom), sbom.size(), {}};
  if (const auto it = m_images.find(entry.key); it != m_images.end() && it->second.manifest.digest == entry.manifest.digest) return;
  m_images[entry.key] = entry;
  m_new.images.push_back(std::move(entry));
  m_sboms.push_back(std::move(sbom));
}

void BuildCache::note(const std::string& text) { m_report.notes.push_back(text); }

Status BuildCache::download(const std::string& layout_dir, const std::vector<images::Descriptor>& blobs) {
  if (!m_cache) return make_error(ErrorKind::internal, "cache.not_open", "the build cache was never read", layout_dir, "report this as a gpuenv bug");
  GPUENV_TRY(layout, images::OciLayout::open(layout_dir));
  for (const auto& d : blobs)
    if (!layout.has_blob(d.digest)) GPUENV_CHECK(m_cache->fetch_blob(d, layout));
  m_report.layers_remote = 0;
  return ok_status();
}

void BuildCache::tally(const std::vector<const images::BuildResult*>& built) {
  for (const auto* im : built) {
    m_report.images_taken += im->shared ? 1 : 0;
    for (const auto& l : im->layers) {
      m_report.layers_taken += l.shared ? 1 : 0;
      m_report.layers_remote += l.remote ? 1 : 0;
    }
  }
}

std::string BuildCache::mount_source() const { return m_lazy && m_cache ? m_cache->ref().repository : std::string(); }

void BuildCache::write(const std::string& layout_dir, const std::optional<images::ImageReference>& pushed_to, Services& services) {
  if (m_report.read_only || !m_cache || (m_new.images.empty() && m_new.layers.empty())) return;
  const std::string mount_from = pushed_to && pushed_to->registry == m_cache->ref().registry ? pushed_to->repository : std::string();
  m_new.generator = m_generator;
  const std::string payload = images::render_cache_document(m_new);
  auto envelope = marks::sign_envelope(payload, images::k_build_cache_payload_type, *m_key);
  if (!envelope) {
    note("cannot sign the cache document (" + envelope.error().message + "); nothing written");
    return;
  }
  // Every blob the document names, from the layout (or the SBOM's text); a layer the layout lacks was left in the
  // registry by this cache, so it is in the cache's repository already.
  auto layout = images::OciLayout::open(layout_dir);
  std::map<Digest, const std::string*> sboms;
  for (std::size_t i = 0; i < m_new.images.size(); ++i) sboms[m_new.images[i].sbom.digest] = &m_sboms[i];
  std::vector<images::CacheBlob> blobs;
  for (const auto& d : m_new.blobs()) {
    images::CacheBlob b{d, images::BlobSource::remote(d.digest, d.size)};
    if (const auto s = sboms.find(d.digest); s != sboms.end()) b.source = images::BlobSource::of(std::string_view(*s->second));
    else if (layout && layout->has_blob(d.digest)) b.source = images::BlobSource::file(layout->blob_path(d.digest), d.digest, d.size);
    blobs.push_back(std::move(b));
  }
  services.step("writing " + std::to_string(m_new.images.size()) + " images and " + std::to_string(m_new.layers.size()) + " layers to the build cache " +
                m_cache->ref().to_string());
  auto written = m_cache->write(*envelope, blobs, mount_from, format_rfc3339_utc(now_seconds(services)));
  if (!written) {
    note("cannot write the build cache " + m_cache->ref().to_string() + " (" + written.error().message + "); the next build is cold");
    return;
  }
  m_report.written = written->manifest.str();
  m_report.images_written = static_cast<int>(m_new.images.size());
  m_report.layers_written = static_cast<int>(m_new.layers.size());
}

}  // namespace gpuenv::app
