// The registry build cache (images/registry/build_cache.hpp): the document read back strictly and within bounds,
// and the store against the real docker-registry on 127.0.0.1, which has no referrers API (so the fallback index
// runs there: concurrent writers, a replaced index, skipped referrers), and against MemoryRegistry with its
// referrers API. Also the push of a layout that lacks blobs on purpose (PushOptions::remote_blobs).
#include "images/registry/build_cache.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "base/digest.hpp"
#include "fakes/docker_registry.hpp"
#include "fakes/registry_client_setup.hpp"
#include "fakes/registry_suite.hpp"
#include "fakes/memory_registry.hpp"

namespace gpuenv::images {
// A named namespace: the test binary is a unity build, and registry_test.cpp has helpers of the same names.
namespace build_cache_test {

using testing::DockerRegistry;
using testing::MemoryRegistry;
using testing::read_file;
using testing::RegistryTempDir;
using testing::parse_ref;
using testing::plain_http_options;
using testing::quick_http;

std::string hex_of(const std::string& seed) { return sha256_hex(seed); }

Descriptor desc(const char* media_type, const std::string& bytes) { return Descriptor{media_type, Digest::of(bytes), bytes.size(), {}}; }

CacheDocument sample_document() {
  CacheDocument doc;
  doc.generator = "gpuenv 0.1.0";
  for (const auto& platform : {resolver::Platform::amd64(), resolver::Platform::arm64()}) {
    const std::string p = platform.str();
    CachedImage image;
    image.key = hex_of("image " + p);
    image.platform = platform;
    image.manifest = desc(media_type::k_manifest, "manifest " + p);
    image.config = desc(media_type::k_config, "config " + p);
    image.sbom = desc(std::string(k_spdx_type).c_str(), "sbom " + p);
    image.layers = {desc(media_type::k_layer_gzip, "base"), desc(media_type::k_layer_zstd, "user " + p)};
    doc.images.push_back(image);
    CachedLayer layer;
    layer.key = hex_of("layer " + p);
    layer.platform = platform;
    layer.name = "user";
    layer.blob = image.layers[1];
    layer.diff_id = Digest::of("tar " + p);
    layer.files = Digest::of("files " + p);
    doc.layers.push_back(layer);
  }
  return doc;
}

void expect_same(const Descriptor& a, const Descriptor& b) {
  EXPECT_EQ(a.media_type, b.media_type);
  EXPECT_EQ(a.digest, b.digest);
  EXPECT_EQ(a.size, b.size);
}

/// TEXT with the first FROM replaced by TO (which must be there).
std::string replaced(std::string text, const std::string& from, const std::string& to) {
  const auto at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

void expect_refused(const std::string& text, const std::string& id, const std::string& names, const BuildCacheLimits& limits = {}) {
  const auto started = std::chrono::steady_clock::now();
  const auto r = parse_cache_document(text, "cache@sha256:x", limits);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started).count();
  ASSERT_FALSE(r.ok()) << names;
  EXPECT_EQ(r.error().id, id) << r.error().to_string();
  EXPECT_NE(r.error().message.find(names), std::string::npos) << r.error().message;
  EXPECT_EQ(r.error().where, "cache@sha256:x");
  EXPECT_FALSE(r.error().hint.empty());
  EXPECT_LT(ms, 2000) << names;
}

// ---- the document ----

TEST(BuildCacheDocument, RendersCanonicalBytesAndReadsThemBack) {
  const CacheDocument doc = sample_document();
  const std::string text = render_cache_document(doc);
  EXPECT_EQ(text, render_cache_document(sample_document()));
  EXPECT_EQ(std::count(text.begin(), text.end(), ' '), 1);  // the generator's own space
  EXPECT_EQ(text.rfind("{\"generator\":", 0), 0u) << text.substr(0, 40);  // keys sorted
  EXPECT_LT(text.find("\"images\""), text.find("\"layers\":[{\"blob\""));
  const auto back = parse_cache_document(text, "doc");
  ASSERT_TRUE(back.ok()) << back.error().to_string();
  EXPECT_EQ(render_cache_document(*back), text);
  ASSERT_EQ(back->images.size(), 2u);
  ASSERT_EQ(back->layers.size(), 2u);
  EXPECT_EQ(back->generator, "gpuenv 0.1.0");
  for (std::size_t i = 0; i < 2; ++i) {
    const auto& a = doc.images[i];
    const auto& b = back->images[i];
    EXPECT_EQ(a.key, b.key);
    EXPECT_EQ(a.platform, b.platform);
    expect_same(a.manifest, b.manifest);
    expect_same(a.config, b.config);
    expect_same(a.sbom, b.sbom);
    ASSERT_EQ(a.layers.size(), b.layers.size());
    for (std::size_t l = 0; l < a.layers.size(); ++l) expect_same(a.layers[l], b.layers[l]);
    EXPECT_EQ(doc.layers[i].key, back->layers[i].key);
    EXPECT_EQ(doc.layers[i].platform, back->layers[i].platform);
    EXPECT_EQ(doc.layers[i].name, back->layers[i].name);
    expect_same(doc.layers[i].blob, back->layers[i].blob);
    EXPECT_EQ(doc.layers[i].diff_id, back->layers[i].diff_id);
    EXPECT_EQ(doc.layers[i].files, back->layers[i].files);
  }
  // Annotations never reach the document.
  CacheDocument annotated = doc;
  annotated.images[0].layers[0].annotations["x"] = "y";
  EXPECT_EQ(render_cache_document(annotated), text);
}

TEST(BuildCacheDocument, BlobsAreEachOnceInAFixedOrderWithTheManifestStoredAsABlob) {
  const CacheDocument doc = sample_document();
  const auto blobs = doc.blobs();
  // amd64: manifest, config, sbom, base, user; arm64: manifest, config, sbom, user (base is shared); the layer
  // entries' blobs are the images' user layers, already listed.
  ASSERT_EQ(blobs.size(), 9u);
  EXPECT_EQ(blobs[0].media_type, k_cached_manifest_type);
  EXPECT_EQ(blobs[0].digest, doc.images[0].manifest.digest);
  EXPECT_EQ(blobs[1].digest, doc.images[0].config.digest);
  EXPECT_EQ(blobs[2].media_type, k_spdx_type);
  EXPECT_EQ(blobs[3].digest, Digest::of("base"));
  EXPECT_EQ(blobs[5].media_type, k_cached_manifest_type);
  EXPECT_EQ(blobs[8].digest, doc.images[1].layers[1].digest);
  std::set<Digest> unique;
  for (const auto& b : blobs) unique.insert(b.digest);
  EXPECT_EQ(unique.size(), blobs.size());
}

TEST(BuildCacheDocument, AnotherSchemaIsASchemaError) {
  const std::string text = render_cache_document(sample_document());
  expect_refused(replaced(text, "gpuenv.build-cache/v1", "gpuenv.build-cache/v2"), "cache.schema", "gpuenv.build-cache/v2");
  expect_refused(replaced(text, ",\"schema\":\"gpuenv.build-cache/v1\"", ""), "cache.schema", "(none)");
  expect_refused("[1,2]", "cache.bad_document", "not a JSON object");
  expect_refused("{\"schema\":", "cache.bad_document", "not JSON");
}

TEST(BuildCacheDocument, MalformedDocumentsAreRefusedNamingTheField) {
  const std::string text = render_cache_document(sample_document());
  const std::string key = hex_of("image linux/amd64");
  expect_refused(replaced(text, "{\"generator\"", "{\"extra\":1,\"generator\""), "cache.bad_document", "unknown field 'extra'");
  expect_refused(replaced(text, "{\"config\"", "{\"color\":\"red\",\"config\""), "cache.bad_document", "images[0] has an unknown field 'color'");
  expect_refused(replaced(text, "\"size\":", "\"annotations\":{},\"size\":"), "cache.bad_document", "images[0].config has an unknown field 'annotations'");
  expect_refused(replaced(text, "\"name\":\"user\",", ""), "cache.bad_document", "layers[0] lacks the field 'name'");
  expect_refused(replaced(text, key, std::string(64, 'A')), "cache.bad_document", "images[0].key");
  expect_refused(replaced(text, key, key.substr(1)), "cache.bad_document", "not 64 lower-case hex digits");
  expect_refused(replaced(text, "\"digest\":\"sha256:", "\"digest\":\"sha512:"), "cache.bad_document", "unsupported digest 'sha512:");
  expect_refused(replaced(text, "\"diff_id\":\"sha256:", "\"diff_id\":\"md5:"), "cache.bad_document", "layers[0].diff_id");
  expect_refused(replaced(text, "linux/arm64", "linux/riscv64"), "cache.bad_document", "platform 'linux/riscv64'");
  expect_refused(replaced(text, "linux/arm64", "arm64"), "cache.bad_document", "platform 'arm64'");
  expect_refused(replaced(text, media_type::k_layer_zstd, "application/vnd.oci.image.layer.v1.tar"), "cache.bad_document",
                 "images[0].layers[1].mediaType");
  expect_refused(replaced(text, "\"mediaType\":\"application/vnd.oci.image.config.v1+json\"", "\"mediaType\":\"text/plain\""), "cache.bad_document",
                 "images[0].config.mediaType 'text/plain'");
  expect_refused(replaced(text, "\"name\":\"user\"", "\"name\":\"../user\""), "cache.bad_document", "layers[0].name");
  expect_refused(replaced(text, "\"size\":", "\"size\":-"), "cache.bad_document", "lacks a digest or size");
  expect_refused(replaced(text, "{\"generator\":\"gpuenv 0.1.0\"", "{\"generator\":\"a\",\"generator\":\"b\""), "cache.bad_document",
                 "'generator' appears twice");
  expect_refused(replaced(text, "gpuenv 0.1.0", "gpuenv\\u001b[2J"), "cache.bad_document", "generator");
}

TEST(BuildCacheDocument, CountsOverTheLimitsAreRefused) {
  const std::string text = render_cache_document(sample_document());
  BuildCacheLimits one;
  one.max_images = 1;
  expect_refused(text, "cache.bad_document", "images has 2 entries, more than the 1 allowed", one);
  std::string zeros = "0";
  for (int i = 0; i < 5000; ++i) zeros += ",0";
  const std::string head = "{\"generator\":\"g\",\"images\":[],\"schema\":\"gpuenv.build-cache/v1\",\"layers\":[";
  expect_refused(head + zeros + "]}", "cache.bad_document", "layers has 5001 entries, more than the 4096 allowed");
  std::string layers;
  for (int i = 0; i < 128; ++i) layers += std::string(i ? "," : "") + descriptor_json(desc(media_type::k_layer_gzip, "l" + std::to_string(i)));
  const std::string base = "\"layers\":[" + descriptor_json(desc(media_type::k_layer_gzip, "base")) + ",";
  expect_refused(replaced(text, base, "\"layers\":[" + layers + ","), "cache.bad_document", "images[0].layers has 129 entries, more than the 127");
}

TEST(BuildCacheDocument, HostileDocumentsAreRefusedQuicklyBeforeParsing) {
  expect_refused(std::string(200000, '[') + std::string(200000, ']'), "cache.bad_document", "nested deeper than 8 levels");
  expect_refused("{\"schema\":" + std::string(100, '[') + std::string(100, ']') + "}", "cache.bad_document", "nested deeper");
  // Brackets inside a string are text, not nesting.
  const std::string text = render_cache_document(sample_document());
  EXPECT_TRUE(parse_cache_document(replaced(text, "gpuenv 0.1.0", "gpuenv [[[[[[[[[[[[\\\"[[[["), "doc").ok());
  const std::string big = replaced(text, "gpuenv 0.1.0", std::string(5u << 20, 'x'));
  expect_refused(big, "cache.bad_document", "more than the 4194304 allowed");
}

// ---- the store ----

/// An HttpClient in front of another that records requests and may act after each answer.
class Interposer final : public HttpClient {
 public:
  explicit Interposer(HttpClient& inner) : m_inner(inner) {}
  Result<HttpResponse> send(const HttpRequest& request) override {
    {
      std::lock_guard lock(m_mu);
      m_seen.push_back(request.method + " " + redact_url(request.url));
    }
    if (before)
      if (auto instead = before(request)) return std::move(*instead);
    auto answer = m_inner.send(request);
    if (answer && after) after(request, *answer);
    return answer;
  }
  [[nodiscard]] std::size_t count(const std::string& method, const std::string& part) const {
    std::lock_guard lock(m_mu);
    std::size_t n = 0;
    for (const auto& s : m_seen)
      if (s.rfind(method + " ", 0) == 0 && s.find(part) != std::string::npos) ++n;
    return n;
  }
  HttpClient& inner() { return m_inner; }
  std::function<void(const HttpRequest&, const HttpResponse&)> after;
  std::function<std::optional<HttpResponse>(const HttpRequest&)> before;  ///< an answer instead of the inner client's

 private:
  HttpClient& m_inner;
  mutable std::mutex m_mu;
  std::vector<std::string> m_seen;
};


/// Blobs a document names, kept alive for the upload.
struct Blobs {
  std::vector<std::string> bytes;
  std::vector<CacheBlob> list;
  void add(std::string b, const char* media_type = media_type::k_layer_gzip) {
    bytes.reserve(16);  // BlobSource::of keeps a view: no reallocation after the first add
    bytes.push_back(std::move(b));
    list.push_back(CacheBlob{desc(media_type, bytes.back()), BlobSource::of(bytes.back())});
  }
};

std::string created_at(int second) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "2030-01-01T00:%02d:%02dZ", second / 60, second % 60);
  return buf;
}

/// The descriptor of the cache's root.
Descriptor root(const std::string& name = "main") {
  const std::string bytes = build_cache_root_manifest(name);
  return Descriptor{media_type::k_manifest, Digest::of(bytes), bytes.size(), {}};
}

bool has_note(const CacheRead& r, const std::string& part) {
  for (const auto& n : r.notes)
    if (n.find(part) != std::string::npos) return true;
  return false;
}

std::string notes_of(const CacheRead& r) {
  std::string out;
  for (const auto& n : r.notes) out += n + "\n";
  return out;
}

/// A one-layer image in an OCI layout, index.json naming it "v1": its manifest and its layer.
std::pair<Descriptor, Descriptor> one_layer_image(const std::string& dir, const std::string& layer_bytes) {
  auto layout = OciLayout::open(dir);
  EXPECT_TRUE(layout.ok());
  const Descriptor layer = *layout->put_bytes(layer_bytes, media_type::k_layer_gzip);
  const nlohmann::json config = {{"architecture", "amd64"}, {"os", "linux"}, {"rootfs", {{"type", "layers"}, {"diff_ids", {Digest::of("tar").str()}}}}};
  const Descriptor cfg = *layout->put_bytes(config.dump(), media_type::k_config);
  const std::string m = "{\"schemaVersion\":2,\"mediaType\":\"" + std::string(media_type::k_manifest) + "\",\"config\":" + descriptor_json(cfg) +
                        ",\"layers\":[" + descriptor_json(layer) + "]}";
  Descriptor manifest = *layout->put_bytes(m, media_type::k_manifest);
  manifest.annotations["org.opencontainers.image.ref.name"] = "v1";
  EXPECT_TRUE(layout->write_index({manifest}).ok());
  return {manifest, layer};
}

class BuildCacheRegistry : public testing::RegistrySuite<DockerRegistry::Setup::plain> {
 protected:
  [[nodiscard]] ImageReference ref(const std::string& repo_tag) const { return parse_ref(s_registry->host() + "/" + repo_tag); }

  std::unique_ptr<HttpClient> m_curl = make_curl_http_client(quick_http());
  Interposer m_http{*m_curl};
  RegistryClient m_client{m_http, plain_http_options()};
};

TEST_F(BuildCacheRegistry, WrittenDocumentsAreReadBackNewestFirstAndTheirBlobsFetched) {
  RegistryBuildCache cache(m_client, ref("gpuenv/cache-rw:main"));
  const auto empty = cache.read();
  ASSERT_TRUE(empty.ok()) << empty.error().to_string();
  EXPECT_FALSE(empty->root_found);
  EXPECT_TRUE(empty->documents.empty());

  Blobs blobs;
  blobs.add("layer one");
  blobs.add("{\"config\":1}", media_type::k_config);
  const std::string envelope = render_cache_document(sample_document());
  const auto w = cache.write(envelope, blobs.list, "", created_at(1));
  ASSERT_TRUE(w.ok()) << w.error().to_string();
  EXPECT_FALSE(w->referrers_api);  // docker-registry 2.8
  EXPECT_EQ(w->index_writes, 1);
  EXPECT_EQ(w->blobs.blobs_uploaded, 2);

  const auto r = cache.read();
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  EXPECT_TRUE(r->root_found);
  EXPECT_FALSE(r->referrers_api);
  ASSERT_EQ(r->documents.size(), 1u) << notes_of(*r);
  EXPECT_EQ(r->documents[0].manifest, w->manifest);
  EXPECT_EQ(r->documents[0].envelope, envelope);
  EXPECT_EQ(r->documents[0].created, created_at(1));
  EXPECT_NE(r->documents[0].where.find("gpuenv/cache-rw@" + w->manifest.str()), std::string::npos);
  EXPECT_TRUE(r->notes.empty()) << notes_of(*r);

  // The document's manifest: the envelope first, then the blobs, the root as subject.
  const auto m = m_client.get_manifest(cache.ref(), w->manifest.str());
  ASSERT_TRUE(m.ok() && m->has_value());
  const auto j = nlohmann::json::parse((*m)->bytes);
  EXPECT_EQ(j["artifactType"], std::string(k_build_cache_artifact_type));
  EXPECT_EQ(j["layers"][0]["mediaType"], std::string(k_build_cache_envelope_type));
  EXPECT_EQ(j["layers"][1]["digest"], Digest::of("layer one").str());
  EXPECT_EQ(j["subject"]["digest"], root().digest.str());
  EXPECT_EQ(j["annotations"]["org.opencontainers.image.created"], created_at(1));
  const auto tagged = m_client.get_manifest(cache.ref(), "main");
  ASSERT_TRUE(tagged.ok() && tagged->has_value());
  EXPECT_EQ((*tagged)->bytes, build_cache_root_manifest("main"));

  // A second document: newest first; the blobs already there are found by HEAD.
  const auto w2 = cache.write("second envelope", blobs.list, "", created_at(2));
  ASSERT_TRUE(w2.ok()) << w2.error().to_string();
  EXPECT_EQ(w2->blobs.blobs_present, 2);
  EXPECT_EQ(w2->blobs.blobs_uploaded, 0);
  const auto r2 = cache.read();
  ASSERT_TRUE(r2.ok());
  ASSERT_EQ(r2->documents.size(), 2u);
  EXPECT_EQ(r2->documents[0].envelope, "second envelope");
  EXPECT_EQ(r2->documents[1].envelope, envelope);
  BuildCacheLimits one;
  one.max_documents = 1;
  const auto newest = RegistryBuildCache(m_client, cache.ref(), one).read();
  ASSERT_TRUE(newest.ok());
  ASSERT_EQ(newest->documents.size(), 1u);
  EXPECT_EQ(newest->documents[0].envelope, "second envelope");
  EXPECT_TRUE(has_note(*newest, "1 oldest")) << notes_of(*newest);

  RegistryTempDir dir;
  auto layout = OciLayout::open(dir / "layout");
  ASSERT_TRUE(layout.ok());
  ASSERT_TRUE(cache.fetch_blob(blobs.list[0].descriptor, *layout).ok());
  EXPECT_EQ(read_file(layout->blob_path(blobs.list[0].descriptor.digest)), "layer one");
  const auto got = cache.get_blob(blobs.list[1].descriptor, 1024);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(*got, "{\"config\":1}");
  EXPECT_FALSE(cache.get_blob(blobs.list[1].descriptor, 4).ok());  // over the limit
}

TEST_F(BuildCacheRegistry, RemoteBlobsArePresentOrMountedAndNeverUploaded) {
  RegistryBuildCache cache(m_client, ref("gpuenv/cache-remote:main"));
  const std::string here = "a layer already in the cache's repository", there = "a layer of another repository", nowhere = "a layer nobody has";
  ASSERT_TRUE(m_client.put_blob(cache.ref(), BlobSource::of(here)).ok());
  ASSERT_TRUE(m_client.put_blob(ref("gpuenv/cache-remote-image:v1"), BlobSource::of(there)).ok());
  auto remote = [](const std::string& bytes) {
    return CacheBlob{desc(media_type::k_layer_gzip, bytes), BlobSource::remote(Digest::of(bytes), bytes.size())};
  };
  const auto present = cache.write("present", {remote(here)}, "", created_at(1));
  ASSERT_TRUE(present.ok()) << present.error().to_string();
  EXPECT_EQ(present->blobs.blobs_present, 1);
  const auto mounted = cache.write("mounted", {remote(there)}, "gpuenv/cache-remote-image", created_at(2));
  ASSERT_TRUE(mounted.ok()) << mounted.error().to_string();
  EXPECT_EQ(mounted->blobs.blobs_mounted, 1);
  EXPECT_EQ(mounted->blobs.blobs_uploaded, 0);
  const std::size_t uploads_before = m_http.count("PUT", "/blobs/uploads/");
  for (const std::string from : {"", "gpuenv/cache-remote-image"}) {
    const auto missing = cache.write("missing", {remote(nowhere)}, from, created_at(3));
    ASSERT_FALSE(missing.ok());
    EXPECT_EQ(missing.error().id, "cache.blob_missing");
    EXPECT_EQ(missing.error().kind, ErrorKind::environment);
    EXPECT_NE(missing.error().message.find(Digest::of(nowhere).str()), std::string::npos);
    EXPECT_NE(missing.error().message.find("gpuenv/cache-remote"), std::string::npos);
    EXPECT_FALSE(missing.error().hint.empty());
  }
  EXPECT_EQ(m_http.count("PUT", "/blobs/uploads/"), uploads_before);  // a remote blob is never uploaded
  EXPECT_FALSE(*m_client.blob_exists(cache.ref(), Digest::of(nowhere)));
  const auto r = cache.read();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->documents.size(), 2u);  // the failed writes listed nothing
}

TEST_F(BuildCacheRegistry, ConcurrentWritersOnTheFallbackIndexLoseNoDocument) {
  const ImageReference at = ref("gpuenv/cache-race:main");
  std::atomic<int> failures{0}, index_writes{0};
  std::vector<std::thread> writers;
  for (int w = 0; w < 2; ++w) {
    writers.emplace_back([&, w] {
      RegistryClient client(*m_curl, plain_http_options());  // each writer its own client, as two builds have
      RegistryBuildCache cache(client, at);
      for (int i = 0; i < 5; ++i) {
        const auto put = cache.write("writer " + std::to_string(w) + " document " + std::to_string(i), {}, "", created_at(10 * i + w));
        if (!put.ok()) {
          ++failures;
          ADD_FAILURE() << put.error().to_string();
        } else {
          index_writes += put->index_writes;
        }
      }
    });
  }
  for (auto& t : writers) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_GE(index_writes.load(), 10);
  const auto r = RegistryBuildCache(m_client, at).read();
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  std::set<std::string> envelopes;
  for (const auto& d : r->documents) envelopes.insert(d.envelope);
  EXPECT_EQ(envelopes.size(), 10u) << notes_of(*r);
  ASSERT_EQ(r->documents.size(), 10u);
  EXPECT_EQ(r->documents[0].envelope, "writer 1 document 4");  // the newest
}

TEST_F(BuildCacheRegistry, AnIndexReplacedBeforeTheReadBackIsWrittenAgain) {
  RegistryBuildCache cache(m_client, ref("gpuenv/cache-replaced:main"));
  ASSERT_TRUE(cache.write("first", {}, "", created_at(1)).ok());
  // Another writer's index, read before ours was written, lands right after it: it lacks our document.
  std::optional<std::string> stale;
  int replaced_count = 0;
  const std::string index_tag = "/manifests/" + referrers_fallback_tag(root().digest);
  m_http.after = [&](const HttpRequest& req, const HttpResponse& answer) {
    if (req.url.find(index_tag) == std::string::npos) return;
    if (req.method == "GET" && answer.status == 200 && !stale) stale = answer.body;
    if (req.method == "PUT" && answer.status == 201 && replaced_count == 0 && stale) {
      ++replaced_count;
      HttpRequest put = req;
      put.body = *stale;
      const auto overwritten = m_http.inner().send(put);
      ASSERT_TRUE(overwritten.ok() && overwritten->status == 201);
    }
  };
  const auto w = cache.write("second", {}, "", created_at(2));
  m_http.after = nullptr;
  ASSERT_TRUE(w.ok()) << w.error().to_string();
  EXPECT_EQ(replaced_count, 1);
  EXPECT_EQ(w->index_writes, 2);
  const auto r = cache.read();
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->documents.size(), 2u) << notes_of(*r);
  EXPECT_EQ(r->documents[0].envelope, "second");
  EXPECT_EQ(r->documents[1].envelope, "first");
}

TEST_F(BuildCacheRegistry, AnIndexThatNeverKeepsTheDocumentIsAWriteLost) {
  RegistryBuildCache cache(m_client, ref("gpuenv/cache-lost:main"));
  ASSERT_TRUE(cache.write("first", {}, "", created_at(1)).ok());
  const auto before = m_client.get_manifest(cache.ref(), referrers_fallback_tag(root().digest));
  ASSERT_TRUE(before.ok() && before->has_value());
  const std::string stale = (*before)->bytes;
  m_http.after = [&](const HttpRequest& req, const HttpResponse& answer) {
    if (req.method == "PUT" && answer.status == 201 && req.url.find("/manifests/sha256-") != std::string::npos) {
      HttpRequest put = req;
      put.body = stale;
      (void)m_http.inner().send(put);
    }
  };
  const auto w = cache.write("second", {}, "", created_at(2));
  m_http.after = nullptr;
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.error().id, "cache.write_lost");
  EXPECT_EQ(m_http.count("PUT", "/manifests/sha256-"), 9u);  // one for the first document, 8 tries for the second
}

TEST_F(BuildCacheRegistry, ReferrersOfAnotherTypeOrOverTheLimitOrGoneAreSkippedWithANote) {
  RegistryBuildCache cache(m_client, ref("gpuenv/cache-skip:main"));
  ASSERT_TRUE(cache.write("small", {}, "", created_at(1)).ok());
  const std::string large(3000, 'e');
  const auto big = cache.write(large, {}, "", created_at(2));
  ASSERT_TRUE(big.ok());
  // A referrer of another type in the index (docker-registry refuses an index naming a manifest it lacks: a
  // document that is gone is BuildCacheFallbackIndex's).
  const std::string layer = "another tool's attachment";
  ASSERT_TRUE(m_client.put_blob(cache.ref(), BlobSource::of(layer)).ok());
  const nlohmann::json other = {{"schemaVersion", 2},
                                {"mediaType", media_type::k_manifest},
                                {"artifactType", "application/vnd.example.other"},
                                {"config", {{"mediaType", "application/vnd.oci.empty.v1+json"}, {"digest", Digest::of("{}").str()}, {"size", 2}}},
                                {"layers", {{{"mediaType", "text/plain"}, {"digest", Digest::of(layer).str()}, {"size", layer.size()}}}},
                                {"subject", {{"mediaType", media_type::k_manifest}, {"digest", root().digest.str()}, {"size", root().size}}}};
  const std::string other_bytes = other.dump();
  ASSERT_TRUE(m_client.put_manifest(cache.ref(), Digest::of(other_bytes).str(), other_bytes, media_type::k_manifest).ok());
  const std::string tag = referrers_fallback_tag(root().digest);
  const auto index = m_client.get_manifest(cache.ref(), tag);
  ASSERT_TRUE(index.ok() && index->has_value());
  auto j = nlohmann::json::parse((*index)->bytes);
  j["manifests"].push_back({{"mediaType", media_type::k_manifest}, {"digest", Digest::of(other_bytes).str()}, {"size", other_bytes.size()},
                            {"artifactType", "application/vnd.example.other"}});
  const auto put_index = m_client.put_manifest(cache.ref(), tag, j.dump(), media_type::k_index);
  ASSERT_TRUE(put_index.ok()) << put_index.error().to_string();

  BuildCacheLimits limits;
  limits.max_document_bytes = 1000;
  const auto r = RegistryBuildCache(m_client, cache.ref(), limits).read();
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  ASSERT_EQ(r->documents.size(), 1u) << notes_of(*r);
  EXPECT_EQ(r->documents[0].envelope, "small");
  EXPECT_TRUE(has_note(*r, "1 referrer(s)")) << notes_of(*r);
  EXPECT_TRUE(has_note(*r, "application/vnd.example.other")) << notes_of(*r);
  EXPECT_TRUE(has_note(*r, big->manifest.str() + ": its signed document has 3000 bytes, more than the 1000 allowed")) << notes_of(*r);
  EXPECT_EQ(m_http.count("GET", "/blobs/" + Digest::of(large).str()), 0u);  // refused by its size, never downloaded
}

TEST_F(BuildCacheRegistry, ATagNamingAnotherManifestIsNotACacheAndAnUnreachableRegistryIsAnError) {
  const ImageReference at = ref("gpuenv/cache-taken:v1");
  RegistryTempDir src;
  one_layer_image(src.path(), "an image's layer");
  ASSERT_TRUE(m_client.push(src.path(), at).ok());
  const auto pushed = m_client.get_manifest(at, "v1");
  ASSERT_TRUE(pushed.ok() && pushed->has_value());
  const std::string image = (*pushed)->bytes;
  RegistryBuildCache cache(m_client, at);
  const auto r = cache.read();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().id, "cache.not_a_cache");
  const auto w = cache.write("doc", {}, "", created_at(1));
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.error().id, "cache.not_a_cache");
  const auto still = m_client.get_manifest(at, "v1");
  ASSERT_TRUE(still.ok() && still->has_value());
  EXPECT_EQ((*still)->bytes, image);  // never overwritten

  RegistryBuildCache nowhere(m_client, parse_ref("127.0.0.1:" + std::to_string(testing::free_port()) + "/gpuenv/cache:main"));
  const auto down = nowhere.read();
  ASSERT_FALSE(down.ok());
  EXPECT_EQ(down.error().id.rfind("http.", 0), 0u) << down.error().to_string();
}

// ---- the referrers API (MemoryRegistry) ----

TEST(BuildCacheReferrersApi, DocumentsAreListedByTheRegistryAndNoIndexIsWritten) {
  MemoryRegistry registry("registry.test:5000");
  registry.enable_referrers_api();
  MemoryRegistry::Client http(registry);
  RegistryClient client(http, plain_http_options());
  RegistryBuildCache cache(client, parse_ref("registry.test:5000/team/cache:main"));
  Blobs blobs;
  blobs.add("a layer");
  const auto w1 = cache.write("one", blobs.list, "", created_at(1));
  ASSERT_TRUE(w1.ok()) << w1.error().to_string();
  EXPECT_TRUE(w1->referrers_api);
  EXPECT_EQ(w1->index_writes, 0);
  ASSERT_TRUE(cache.write("two", blobs.list, "", created_at(2)).ok());
  // Another tool's referrer of the same root.
  const std::string other = nlohmann::json{{"schemaVersion", 2},
                                           {"mediaType", media_type::k_manifest},
                                           {"artifactType", "application/vnd.example.sbom"},
                                           {"config", {{"mediaType", "application/vnd.oci.empty.v1+json"}, {"digest", Digest::of("{}").str()}, {"size", 2}}},
                                           {"layers", nlohmann::json::array()},
                                           {"subject", {{"mediaType", media_type::k_manifest}, {"digest", root().digest.str()}, {"size", root().size}}}}
                                .dump();
  ASSERT_TRUE(client.put_manifest(cache.ref(), Digest::of(other).str(), other, media_type::k_manifest).ok());
  EXPECT_EQ(registry.count("PUT", "/manifests/sha256-"), 0u);  // no fallback index
  const auto r = cache.read();
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  EXPECT_TRUE(r->referrers_api);
  ASSERT_EQ(r->documents.size(), 2u) << notes_of(*r);
  EXPECT_EQ(r->documents[0].envelope, "two");
  EXPECT_EQ(r->documents[1].envelope, "one");
  EXPECT_TRUE(has_note(*r, "application/vnd.example.sbom")) << notes_of(*r);
  EXPECT_EQ(registry.count("GET", "/manifests/sha256-"), 0u);
}

TEST(BuildCacheReferrersApi, WithoutTheApiTheSameRegistryDoubleUsesTheFallbackIndex) {
  MemoryRegistry registry("registry.test:5000");
  MemoryRegistry::Client http(registry);
  RegistryClient client(http, plain_http_options());
  RegistryBuildCache cache(client, parse_ref("registry.test:5000/team/cache:main"));
  const auto w = cache.write("one", {}, "", created_at(1));
  ASSERT_TRUE(w.ok()) << w.error().to_string();
  EXPECT_FALSE(w->referrers_api);
  EXPECT_EQ(w->index_writes, 1);
  const auto r = cache.read();
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->referrers_api);
  ASSERT_EQ(r->documents.size(), 1u);
}

TEST(BuildCacheFallbackIndex, AGoneDocumentIsSkippedAndDroppedWhenTheRegistryRefusesAnIndexNamingIt) {
  MemoryRegistry registry("registry.test:5000");
  MemoryRegistry::Client memory(registry);
  Interposer http(memory);
  // As docker-registry 2.8: an index naming a manifest the repository lacks is refused.
  http.before = [&](const HttpRequest& req) -> std::optional<HttpResponse> {
    if (req.method != "PUT" || req.url.find("/manifests/sha256-") == std::string::npos) return std::nullopt;
    const auto index = nlohmann::json::parse(req.body);
    for (const auto& e : index["manifests"]) {
      if (!registry.manifest("team/cache", e["digest"].get<std::string>())) {
        HttpResponse refused;
        refused.status = 400;
        refused.attempts = 1;
        refused.body = R"({"errors":[{"code":"MANIFEST_BLOB_UNKNOWN","message":"blob unknown to registry"}]})";
        return refused;
      }
    }
    return std::nullopt;
  };
  RegistryClient client(http, plain_http_options());
  RegistryBuildCache cache(client, parse_ref("registry.test:5000/team/cache:main"));
  ASSERT_TRUE(cache.write("one", {}, "", created_at(1)).ok());
  // A document deleted from the registry while the index still names it.
  const std::string tag = referrers_fallback_tag(root().digest);
  auto index = nlohmann::json::parse(registry.manifest("team/cache", tag)->bytes);
  const std::string gone = Digest::of("a deleted document").str();
  index["manifests"].push_back({{"mediaType", media_type::k_manifest}, {"digest", gone}, {"size", 300},
                                {"artifactType", k_build_cache_artifact_type}, {"annotations", {{"org.opencontainers.image.created", created_at(2)}}}});
  RegistryClient direct(memory, plain_http_options());
  ASSERT_TRUE(direct.put_manifest(cache.ref(), tag, index.dump(), media_type::k_index).ok());

  const auto r = cache.read();
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  ASSERT_EQ(r->documents.size(), 1u);
  EXPECT_TRUE(has_note(*r, gone + ": its manifest is gone")) << notes_of(*r);

  const auto w = cache.write("two", {}, "", created_at(3));
  ASSERT_TRUE(w.ok()) << w.error().to_string();
  EXPECT_EQ(registry.manifest("team/cache", tag)->bytes.find(gone), std::string::npos);
  const auto r2 = cache.read();
  ASSERT_TRUE(r2.ok());
  ASSERT_EQ(r2->documents.size(), 2u);
  EXPECT_EQ(r2->documents[0].envelope, "two");
  EXPECT_TRUE(r2->notes.empty()) << notes_of(*r2);
}

// ---- push of a layout that lacks blobs on purpose ----

TEST_F(BuildCacheRegistry, PushOfALayoutMissingARemoteBlobUploadsNothingOrSaysTheBlobIsMissing) {
  RegistryTempDir src;
  const auto [manifest, layer] = one_layer_image(src.path(), "a layer the cache served");
  ASSERT_TRUE(m_client.push(src.path(), ref("gpuenv/remote-push:v1")).ok());
  ASSERT_EQ(std::remove((src.path() + "/blobs/sha256/" + layer.digest.hex()).c_str()), 0);

  PushOptions options;
  options.remote_blobs = {layer.digest};
  const auto again = m_client.push(src.path(), ref("gpuenv/remote-push:v2"), options);  // the repository has the layer
  ASSERT_TRUE(again.ok()) << again.error().to_string();
  EXPECT_EQ(again->blobs_uploaded, 0);
  EXPECT_EQ(again->blobs_present, 2);

  options.mount_from = "gpuenv/remote-push";
  const auto mounted = m_client.push(src.path(), ref("gpuenv/remote-push-elsewhere:v1"), options);
  ASSERT_TRUE(mounted.ok()) << mounted.error().to_string();
  EXPECT_EQ(mounted->blobs_uploaded, 0);
  EXPECT_EQ(mounted->blobs_mounted, 2);

  options.mount_from.clear();
  const auto missing = m_client.push(src.path(), ref("gpuenv/remote-push-fresh:v1"), options);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().id, "registry.blob_missing");
  EXPECT_EQ(missing.error().kind, ErrorKind::environment);
  EXPECT_NE(missing.error().message.find(layer.digest.str()), std::string::npos);
  EXPECT_NE(missing.error().where.find("gpuenv/remote-push-fresh"), std::string::npos);
  EXPECT_FALSE(missing.error().hint.empty());
  options.mount_from = "gpuenv/not-there";
  const auto declined = m_client.push(src.path(), ref("gpuenv/remote-push-fresh:v1"), options);
  ASSERT_FALSE(declined.ok());
  EXPECT_EQ(declined.error().id, "registry.blob_missing");
  EXPECT_NE(declined.error().message.find("could not mount it from gpuenv/not-there"), std::string::npos);

  const auto not_listed = m_client.push(src.path(), ref("gpuenv/remote-push-fresh:v1"));  // without remote_blobs: a damaged layout
  ASSERT_FALSE(not_listed.ok());
  EXPECT_EQ(not_listed.error().id, "registry.layout");
}

}  // namespace build_cache_test
}  // namespace gpuenv::images
