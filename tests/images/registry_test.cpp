// The registry client against the real docker-registry (plain HTTP, htpasswd basic auth, TLS with a test CA),
// checked with skopeo, and against tests/images/registry_fake.py for the bearer-token flow and for faults a
// real registry does not produce (altered or short blobs, unknown media types).
#include "images/registry/registry_client.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "fakes/docker_registry.hpp"
#include "fakes/registry_client_setup.hpp"
#include "fakes/registry_suite.hpp"
#include "fakes/registry_fake.hpp"
#include "fakes/loopback_server.hpp"
#include "base/digest.hpp"

namespace gpuenv::images {
namespace {

namespace fs = std::filesystem;

using testing::Child;
using testing::DockerRegistry;
using testing::FakeRegistry;
using testing::free_port;
using testing::have;
using testing::read_file;
using testing::run;
using testing::RegistryTempDir;
using testing::write_file;
using testing::parse_ref;
using testing::plain_http_options;
using testing::quick_http;


int count(const std::string& haystack, const std::string& needle) {
  int n = 0;
  for (auto at = haystack.find(needle); at != std::string::npos; at = haystack.find(needle, at + 1)) ++n;
  return n;
}

std::string pattern_bytes(std::size_t n, unsigned seed) {
  std::string s(n, '\0');
  unsigned x = seed * 2654435761u + 1;
  for (auto& c : s) {
    x = x * 1103515245u + 12345u;
    c = static_cast<char>(x >> 24);
  }
  return s;
}

/// An image written with OciLayout: a config, two layers (arbitrary bytes with the gzip layer media type),
/// a manifest, and index.json naming it "v1".
struct TestImage {
  Descriptor manifest;
  std::vector<Descriptor> blobs;  // config, layers
};

TestImage make_image(const std::string& dir, std::vector<std::size_t> layer_sizes = {3000, 5000}, unsigned seed = 1,
                     const std::string& arch = "amd64", bool write_index = true) {
  auto layout = OciLayout::open(dir);
  EXPECT_TRUE(layout.ok());
  TestImage img;
  std::vector<Descriptor> layers;
  nlohmann::json diff_ids = nlohmann::json::array();
  for (std::size_t i = 0; i < layer_sizes.size(); ++i) {
    const std::string bytes = pattern_bytes(layer_sizes[i], seed * 10 + static_cast<unsigned>(i));
    layers.push_back(*layout->put_bytes(bytes, media_type::k_layer_gzip));
    diff_ids.push_back("sha256:" + sha256_hex(bytes));
  }
  const nlohmann::json config = {{"architecture", arch}, {"os", "linux"}, {"config", nlohmann::json::object()},
                                 {"rootfs", {{"type", "layers"}, {"diff_ids", diff_ids}}}};
  const Descriptor cfg = *layout->put_bytes(config.dump(), media_type::k_config);
  img.blobs.push_back(cfg);
  img.blobs.insert(img.blobs.end(), layers.begin(), layers.end());
  std::string m = R"({"schemaVersion":2,"mediaType":")" + std::string(media_type::k_manifest) + R"(","config":)" + descriptor_json(cfg) + R"(,"layers":[)";
  for (std::size_t i = 0; i < layers.size(); ++i) m += (i ? "," : "") + descriptor_json(layers[i]);
  m += "]}";
  img.manifest = *layout->put_bytes(m, media_type::k_manifest);
  img.manifest.annotations["org.opencontainers.image.ref.name"] = "v1";
  if (write_index) {
    EXPECT_TRUE(layout->write_index({img.manifest}).ok());
  }
  return img;
}


void expect_same_blobs(const std::string& dir_a, const std::string& dir_b, const TestImage& img) {
  EXPECT_EQ(read_file(dir_a + "/blobs/sha256/" + img.manifest.digest.hex()), read_file(dir_b + "/blobs/sha256/" + img.manifest.digest.hex()));
  for (const auto& b : img.blobs) {
    const std::string hex = b.digest.hex();
    EXPECT_EQ(read_file(dir_a + "/blobs/sha256/" + hex), read_file(dir_b + "/blobs/sha256/" + hex)) << b.digest.str();
  }
}

/// The digest skopeo reports for `image` (over plain HTTP unless `extra` sets up TLS).
std::string skopeo_digest(const std::string& image, const std::string& extra = "--tls-verify=false") {
  const auto out = run("skopeo inspect " + extra + " docker://" + image + " 2>/dev/null");
  if (!out) return "(skopeo failed)";
  const auto j = nlohmann::json::parse(*out, nullptr, false);
  return j.is_object() && j.contains("Digest") ? j["Digest"].get<std::string>() : "(no Digest)";
}

// ---- pure parsing ----

TEST(RegistryError, TheCodesARegistrySentAreReadBackWholeFromTheMessage) {
  const Error e = make_error(ErrorKind::environment, "registry.http",
                             "putting the manifest: HTTP 400 (MANIFEST_BLOB_UNKNOWN: blob unknown to registry; NAME_INVALID)", "PUT /v2/x/manifests/1", "");
  EXPECT_TRUE(registry_said(e, "MANIFEST_BLOB_UNKNOWN"));
  EXPECT_TRUE(registry_said(e, "NAME_INVALID"));
  EXPECT_FALSE(registry_said(e, "BLOB_UNKNOWN")) << "a code inside another is not that code";
  EXPECT_FALSE(registry_said(e, "MANIFEST_UNKNOWN"));
  EXPECT_FALSE(registry_said(make_error(ErrorKind::environment, "registry.http", "HTTP 500", "", ""), "MANIFEST_BLOB_UNKNOWN"));
}

TEST(ImageReference, ParsesHostPortRepositoryTagAndDigest) {
  const std::string digest = "sha256:" + std::string(64, 'a');
  auto r = parse_image_reference("registry.example.com:5000/team/sub/app:1.2-rc_3@" + digest);
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  EXPECT_EQ(r->registry, "registry.example.com:5000");
  EXPECT_EQ(r->repository, "team/sub/app");
  EXPECT_EQ(r->tag, "1.2-rc_3");
  EXPECT_EQ(r->digest, digest);
  EXPECT_EQ(r->manifest_reference(), digest);
  EXPECT_EQ(r->to_string(), "registry.example.com:5000/team/sub/app:1.2-rc_3@" + digest);
}

TEST(ImageReference, DefaultsTagToLatestOnlyWithoutDigest) {
  EXPECT_EQ(parse_image_reference("localhost/app")->tag, "latest");
  EXPECT_EQ(parse_image_reference("127.0.0.1:5000/a/b")->tag, "latest");
  const auto by_digest = parse_image_reference("localhost/app@sha256:" + std::string(64, '0'));
  ASSERT_TRUE(by_digest.ok());
  EXPECT_EQ(by_digest->tag, "");
}

TEST(ImageReference, RequiresAnExplicitRegistryHost) {
  for (const char* text : {"ubuntu", "ubuntu:22.04", "library/ubuntu:22.04", "team/app"}) {
    const auto r = parse_image_reference(text);
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_EQ(r.error().id, "registry.bad_reference");
    EXPECT_EQ(r.error().kind, ErrorKind::usage);
    EXPECT_NE(r.error().hint.find("registry.example.com/"), std::string::npos);
  }
  EXPECT_TRUE(parse_image_reference("docker.io/library/ubuntu:22.04").ok());
}

TEST(ImageReference, RejectsMalformedParts) {
  for (const char* text : {"", "registry.example.com/", "registry.example.com/Team/app", "registry.example.com/app:", "registry.example.com/app:-x",
                           "registry.example.com/a//b", "registry.example.com/a-/b", "registry.example.com/app@sha256:abc",
                           "registry.example.com/app@md5:" "0123456789abcdef0123456789abcdef", "host:port/app", "registry.example.com/a..b",
                           "reg istry.example.com/app"}) {
    const auto r = parse_image_reference(text);
    EXPECT_FALSE(r.ok()) << text;
    if (!r.ok()) {
      EXPECT_EQ(r.error().id, "registry.bad_reference") << text;
    }
  }
  EXPECT_TRUE(parse_image_reference("registry.example.com/a__b/c-d--e/f.g:T_1.x").ok());
}

TEST(DockerConfig, DecodesBase64Auth) {
  const std::string text = R"({"auths":{"registry.example.com":{"auth":")" + base64_encode("alice:pa:ss") + R"("}}})";
  const auto c = parse_docker_config_credentials(text, "registry.example.com");
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE(c->has_value());
  EXPECT_EQ((*c)->username, "alice");
  EXPECT_EQ((*c)->password, "pa:ss");
}

TEST(DockerConfig, ReadsUsernameAndPasswordFields) {
  const auto c = parse_docker_config_credentials(R"({"auths":{"127.0.0.1:5000":{"username":"bob","password":"pw"}}})", "127.0.0.1:5000");
  ASSERT_TRUE(c.ok() && c->has_value());
  EXPECT_EQ((*c)->username, "bob");
  EXPECT_EQ((*c)->password, "pw");
}

TEST(DockerConfig, MatchesKeysWithSchemeAndPath) {
  const std::string text = R"({"auths":{"https://registry.example.com/v1/":{"auth":")" + base64_encode("carol:x") + R"("},
                                       "http://other.example.com:8443":{"username":"dave","password":"y"}}})";
  const auto a = parse_docker_config_credentials(text, "registry.example.com");
  ASSERT_TRUE(a.ok() && a->has_value());
  EXPECT_EQ((*a)->username, "carol");
  const auto b = parse_docker_config_credentials(text, "other.example.com:8443");
  ASSERT_TRUE(b.ok() && b->has_value());
  EXPECT_EQ((*b)->username, "dave");
  const auto none = parse_docker_config_credentials(text, "other.example.com");
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
}

TEST(DockerConfig, ExactKeyWinsOverSchemeKey) {
  const std::string text = R"({"auths":{"https://r.example.com":{"username":"scheme","password":"1"},"r.example.com":{"username":"exact","password":"2"}}})";
  const auto c = parse_docker_config_credentials(text, "r.example.com");
  ASSERT_TRUE(c.ok() && c->has_value());
  EXPECT_EQ((*c)->username, "exact");
}

TEST(DockerConfig, CredentialHelperEntriesAndMissingFilesGiveNothing) {
  const auto helper = parse_docker_config_credentials(R"({"auths":{"r.example.com":{}},"credsStore":"desktop"})", "r.example.com");
  ASSERT_TRUE(helper.ok());
  EXPECT_FALSE(helper->has_value());
  const auto missing = load_docker_config_credentials("/nonexistent/gpuenv/config.json", "r.example.com");
  ASSERT_TRUE(missing.ok());
  EXPECT_FALSE(missing->has_value());
}

TEST(DockerConfig, MalformedAuthIsAnErrorThatDoesNotQuoteTheSecret) {
  const auto c = parse_docker_config_credentials(R"({"auths":{"r.example.com":{"auth":"bm9jb2xvbg=="}}})", "r.example.com");  // "nocolon"
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error().id, "registry.config");
  EXPECT_EQ(c.error().to_string().find("bm9jb2xvbg"), std::string::npos);
  EXPECT_EQ(parse_docker_config_credentials("not json", "r.example.com").error().id, "registry.config");
}

TEST(AuthChallenge, ParsesBearerParametersWithQuotedCommas) {
  const auto c = parse_auth_challenge(R"(Bearer realm="https://auth.example.com/token",service="registry.example.com",scope="repository:a/b:pull,push")");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->scheme, "bearer");
  EXPECT_EQ(c->params.at("realm"), "https://auth.example.com/token");
  EXPECT_EQ(c->params.at("service"), "registry.example.com");
  EXPECT_EQ(c->params.at("scope"), "repository:a/b:pull,push");
}

TEST(AuthChallenge, ParsesBasicAndStopsAtTheNextChallenge) {
  const auto c = parse_auth_challenge(R"(Basic realm="x \"quoted\"", charset=UTF-8, Bearer realm="y")");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->scheme, "basic");
  EXPECT_EQ(c->params.at("realm"), "x \"quoted\"");
  EXPECT_EQ(c->params.at("charset"), "UTF-8");
  EXPECT_EQ(c->params.size(), 2u);
  EXPECT_FALSE(parse_auth_challenge(R"(Bearer realm="unterminated)").ok());
  EXPECT_FALSE(parse_auth_challenge("").ok());
}

TEST(Base64, RoundTripsAllLengths) {
  for (std::size_t n = 0; n < 20; ++n) {
    const std::string s = pattern_bytes(n, 7);
    EXPECT_EQ(base64_decode(base64_encode(s)), s) << n;
  }
  EXPECT_EQ(base64_encode("user:pass"), "dXNlcjpwYXNz");
  EXPECT_FALSE(base64_decode("a$b=").has_value());
}

TEST(RedactUrl, DropsUserInfoAndQuery) {
  EXPECT_EQ(redact_url("https://u:p@r.example.com:5000/v2/a/blobs/uploads/x?_state=abc&digest=d"), "https://r.example.com:5000/v2/a/blobs/uploads/x");
}

// ---- HttpClient against tests/fakes/fault_server.py ----

TEST(CurlHttpClient, RetriesServerErrorsForIdempotentRequests) {
  RegistryTempDir dir;
  write_file(dir / "doc", "hello");
  testing::LoopbackServer server(dir.path());
  ASSERT_NE(server.port(), 0);
  auto http = make_curl_http_client(quick_http());
  HttpRequest req;
  req.url = server.url("doc?fault=status=503&times=2");
  const auto r = http->send(req);
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, "hello");
  EXPECT_EQ(r->attempts, 3);
  EXPECT_EQ(r->body_sha256, sha256_hex("hello"));

  req.url = server.url("doc?fault=status=503&times=9");
  const auto gave_up = http->send(req);
  ASSERT_TRUE(gave_up.ok());
  EXPECT_EQ(gave_up->status, 503);
  EXPECT_EQ(gave_up->attempts, 3);

  req.url = server.url("doc?fault=status=503&times=1&n=2");
  req.retry = HttpRetry::never;
  const auto once = http->send(req);
  ASSERT_TRUE(once.ok());
  EXPECT_EQ(once->status, 503);
  EXPECT_EQ(once->attempts, 1);
}

TEST(CurlHttpClient, HonoursRetryAfterOn429) {
  RegistryTempDir dir;
  write_file(dir / "doc", "x");
  testing::LoopbackServer server(dir.path());
  auto http = make_curl_http_client(quick_http());
  HttpRequest req;
  req.url = server.url("doc?fault=status=429&times=1");
  const auto t0 = std::chrono::steady_clock::now();
  const auto r = http->send(req);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 200);
  EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(950));
}

TEST(CurlHttpClient, BoundsTheBodyAndStreamsDownloadsToAFile) {
  RegistryTempDir dir;
  const std::string data = pattern_bytes(100000, 3);
  write_file(dir / "blob", data);
  testing::LoopbackServer server(dir.path());
  auto http = make_curl_http_client(quick_http());
  HttpRequest req;
  req.url = server.url("blob");
  req.max_body = 1000;
  const auto big = http->send(req);
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.error().id, "http.too_large");
  req.max_body = data.size();
  req.download_to = dir / "out";
  const auto r = http->send(req);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->body.empty());
  EXPECT_EQ(r->body_bytes, data.size());
  EXPECT_EQ(r->body_sha256, sha256_hex(data));
  EXPECT_EQ(read_file(dir / "out"), data);
}

TEST(CurlHttpClient, ConnectionFailureIsAnErrorWithoutCredentials) {
  auto http = make_curl_http_client(quick_http());
  HttpRequest req;
  req.url = "http://user:hunter2@127.0.0.1:" + std::to_string(free_port()) + "/v2/?token=hunter2";
  req.headers.emplace_back("Authorization", "Basic aHVudGVyMg==");
  const auto r = http->send(req);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().id, "http.failed");
  EXPECT_EQ(r.error().to_string().find("hunter2"), std::string::npos);
  EXPECT_EQ(r.error().to_string().find("aHVudGVyMg"), std::string::npos);
}

// ---- the real docker-registry ----

class PlainRegistry : public testing::RegistrySuite<DockerRegistry::Setup::plain> {
 protected:
  void SetUp() override {
    RegistrySuite::SetUp();
    m_options.plain_http = true;
  }
  std::unique_ptr<HttpClient> m_http = make_curl_http_client(quick_http());
  RegistryOptions m_options;
};

TEST_F(PlainRegistry, PushedImageIsWhatSkopeoSeesAndPullsBackIdentically) {
  RegistryTempDir src, dst;
  const TestImage img = make_image(src.path());
  RegistryClient client(*m_http, m_options);
  const auto target = parse_ref(s_registry->host() + "/gpuenv/push-pull:v1");
  const auto pushed = client.push(src.path(), target);
  ASSERT_TRUE(pushed.ok()) << pushed.error().to_string();
  EXPECT_EQ(pushed->digest, img.manifest.digest);
  EXPECT_EQ(pushed->blobs_uploaded, 3);
  EXPECT_EQ(pushed->blobs_present, 0);
  EXPECT_EQ(pushed->manifests, 1);
  if (have("skopeo")) {
    EXPECT_EQ(skopeo_digest(target.registry + "/gpuenv/push-pull:v1"), img.manifest.digest.str());
  }

  const auto pulled = client.pull(target, dst / "layout");
  ASSERT_TRUE(pulled.ok()) << pulled.error().to_string();
  EXPECT_EQ(pulled->manifest.digest, img.manifest.digest);
  EXPECT_EQ(pulled->blobs_downloaded, 3);
  expect_same_blobs(src.path(), dst / "layout", img);
  const auto index = nlohmann::json::parse(read_file(dst / "layout/index.json"));
  ASSERT_EQ(index["manifests"].size(), 1u);
  EXPECT_EQ(index["manifests"][0]["digest"], img.manifest.digest.str());
  EXPECT_EQ(index["manifests"][0]["annotations"]["org.opencontainers.image.ref.name"], "v1");

  const auto again = client.pull(target, dst / "layout");  // into the same layout: nothing to download
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->blobs_present, 3);
  EXPECT_EQ(again->blobs_downloaded, 0);
}

TEST_F(PlainRegistry, PushingAgainSkipsEveryBlob) {
  RegistryTempDir src;
  make_image(src.path(), {1000, 2000}, 2);
  RegistryClient client(*m_http, m_options);
  const auto target = parse_ref(s_registry->host() + "/gpuenv/repush:v1");
  ASSERT_TRUE(client.push(src.path(), target).ok());
  const auto again = client.push(src.path(), target);
  ASSERT_TRUE(again.ok()) << again.error().to_string();
  EXPECT_EQ(again->blobs_present, 3);
  EXPECT_EQ(again->blobs_uploaded, 0);
  EXPECT_EQ(again->bytes_uploaded, 0u);
  EXPECT_EQ(again->manifests, 1);
}

TEST_F(PlainRegistry, LargeBlobsGoUpInChunks) {
  RegistryTempDir src, dst;
  const TestImage img = make_image(src.path(), {10000, 500}, 3);
  m_options.chunk_threshold = 1000;
  m_options.chunk_size = 4096;
  RegistryClient client(*m_http, m_options);
  const auto target = parse_ref(s_registry->host() + "/gpuenv/chunked:v1");
  const auto pushed = client.push(src.path(), target);
  ASSERT_TRUE(pushed.ok()) << pushed.error().to_string();
  EXPECT_EQ(pushed->blobs_uploaded, 3);
  EXPECT_EQ(pushed->chunks, 3);  // 10000 bytes in 4096-byte chunks; the config and the small layer go whole
  const auto pulled = client.pull(target, dst.path() + "/l");
  ASSERT_TRUE(pulled.ok()) << pulled.error().to_string();
  expect_same_blobs(src.path(), dst.path() + "/l", img);
}

TEST_F(PlainRegistry, BlobsAreMountedFromAnotherRepository) {
  RegistryTempDir src;
  make_image(src.path(), {1500, 2500}, 4);
  RegistryClient client(*m_http, m_options);
  ASSERT_TRUE(client.push(src.path(), parse_ref(s_registry->host() + "/gpuenv/mount-source:v1")).ok());
  const auto mounted = client.push(src.path(), parse_ref(s_registry->host() + "/gpuenv/mount-target:v1"), {"v1", "gpuenv/mount-source"});
  ASSERT_TRUE(mounted.ok()) << mounted.error().to_string();
  EXPECT_EQ(mounted->blobs_mounted, 3);
  EXPECT_EQ(mounted->blobs_uploaded, 0);
  if (have("skopeo")) {
    EXPECT_NE(skopeo_digest(s_registry->host() + "/gpuenv/mount-target:v1"), "(skopeo failed)");
  }
}

TEST_F(PlainRegistry, PullsByDigestAndChoosesThePlatformFromAnIndex) {
  RegistryTempDir src, dst;
  // Two single-platform images in one layout, and an index naming both, pushed under one tag.
  const TestImage amd = make_image(src.path(), {800}, 5, "amd64", false);
  const TestImage arm = make_image(src.path(), {900}, 6, "arm64", false);
  auto layout = OciLayout::open(src.path());
  ASSERT_TRUE(layout.ok());
  auto platform = [](const Descriptor& d, const std::string& arch) {
    auto j = nlohmann::json::parse(descriptor_json(Descriptor{d.media_type, d.digest, d.size, {}}));
    j["platform"] = {{"os", "linux"}, {"architecture", arch}};
    return j;
  };
  const nlohmann::json index = {{"schemaVersion", 2}, {"mediaType", media_type::k_index}, {"manifests", {platform(amd.manifest, "amd64"), platform(arm.manifest, "arm64")}}};
  Descriptor top = *layout->put_bytes(index.dump(), media_type::k_index);
  top.annotations["org.opencontainers.image.ref.name"] = "multi";
  ASSERT_TRUE(layout->write_index({top}).ok());

  RegistryClient client(*m_http, m_options);
  const auto target = parse_ref(s_registry->host() + "/gpuenv/multi:multi");
  const auto pushed = client.push(src.path(), target);
  ASSERT_TRUE(pushed.ok()) << pushed.error().to_string();
  EXPECT_EQ(pushed->manifests, 3);
  EXPECT_EQ(pushed->digest, top.digest);

  const auto pulled = client.pull(target, dst / "arm", PullOptions{resolver::Platform::arm64()});
  ASSERT_TRUE(pulled.ok()) << pulled.error().to_string();
  EXPECT_EQ(pulled->manifest.digest, arm.manifest.digest);
  EXPECT_EQ(pulled->index_digest, top.digest);  // what a reference pinned by the index's digest is checked against
  expect_same_blobs(src.path(), dst / "arm", arm);

  const auto by_digest = client.pull(parse_ref(s_registry->host() + "/gpuenv/multi@" + amd.manifest.digest.str()), dst / "amd");
  ASSERT_TRUE(by_digest.ok()) << by_digest.error().to_string();
  EXPECT_EQ(by_digest->manifest.digest.str(), amd.manifest.digest.str());
  EXPECT_TRUE(by_digest->index_digest.empty());
  const auto by_index = client.pull(parse_ref(s_registry->host() + "/gpuenv/multi@" + top.digest.str()), dst / "by-index");
  ASSERT_TRUE(by_index.ok()) << by_index.error().to_string();
  EXPECT_EQ(by_index->manifest.digest, amd.manifest.digest);
  EXPECT_EQ(by_index->index_digest, top.digest);

  // An index without the platform asked for (linux/amd64 here) names what it has.
  const nlohmann::json arm_only = {{"schemaVersion", 2}, {"mediaType", media_type::k_index}, {"manifests", {platform(arm.manifest, "arm64")}}};
  Descriptor arm_top = *layout->put_bytes(arm_only.dump(), media_type::k_index);
  arm_top.annotations["org.opencontainers.image.ref.name"] = "arm-only";
  ASSERT_TRUE(layout->write_index({top, arm_top}).ok());
  const auto arm_target = parse_ref(s_registry->host() + "/gpuenv/multi:arm-only");
  PushOptions arm_push;
  arm_push.ref_name = "arm-only";
  ASSERT_TRUE(client.push(src.path(), arm_target, arm_push).ok());
  const auto no_platform = client.pull(arm_target, dst / "none", PullOptions{resolver::Platform::amd64()});
  ASSERT_FALSE(no_platform.ok());
  EXPECT_EQ(no_platform.error().id, "registry.not_found");
  EXPECT_NE(no_platform.error().message.find("linux/arm64"), std::string::npos);
}

TEST_F(PlainRegistry, FetchesTheManifestAndConfigAndChoosesThePlatformFromAnIndex) {
  RegistryTempDir src;
  const TestImage img = make_image(src.path(), {1200, 1300}, 21);
  RegistryClient client(*m_http, m_options);
  const auto target = parse_ref(s_registry->host() + "/gpuenv/fetch-mc:v1");
  ASSERT_TRUE(client.push(src.path(), target).ok());
  const auto got = client.fetch_manifest_and_config(target);
  ASSERT_TRUE(got.ok()) << got.error().to_string();
  EXPECT_EQ(got->manifest_digest, img.manifest.digest);
  EXPECT_EQ(got->manifest, read_file(src / ("blobs/sha256/" + img.manifest.digest.hex())));
  EXPECT_EQ(got->media_type, media_type::k_manifest);
  EXPECT_TRUE(got->index_digest.empty());
  EXPECT_EQ(got->config_descriptor.digest, img.blobs[0].digest);
  EXPECT_EQ(got->config, read_file(src / ("blobs/sha256/" + img.blobs[0].digest.hex())));

  // An index pushed under a tag: the linux/amd64 image's manifest and config come back, with the index digest.
  RegistryTempDir multi;
  const TestImage amd = make_image(multi.path(), {300}, 22, "amd64", false);
  const TestImage arm = make_image(multi.path(), {400}, 23, "arm64", false);
  auto layout = OciLayout::open(multi.path());
  ASSERT_TRUE(layout.ok());
  auto platform = [](const Descriptor& d, const std::string& arch) {
    auto j = nlohmann::json::parse(descriptor_json(Descriptor{d.media_type, d.digest, d.size, {}}));
    j["platform"] = {{"os", "linux"}, {"architecture", arch}};
    return j;
  };
  const nlohmann::json index = {{"schemaVersion", 2}, {"mediaType", media_type::k_index}, {"manifests", {platform(arm.manifest, "arm64"), platform(amd.manifest, "amd64")}}};
  Descriptor top = *layout->put_bytes(index.dump(), media_type::k_index);
  top.annotations["org.opencontainers.image.ref.name"] = "multi";
  ASSERT_TRUE(layout->write_index({top}).ok());
  const auto multi_ref = parse_ref(s_registry->host() + "/gpuenv/fetch-mc:multi");
  ASSERT_TRUE(client.push(multi.path(), multi_ref).ok());
  const auto chosen = client.fetch_manifest_and_config(multi_ref);
  ASSERT_TRUE(chosen.ok()) << chosen.error().to_string();
  EXPECT_EQ(chosen->index_digest, top.digest);
  EXPECT_EQ(chosen->manifest_digest, amd.manifest.digest);
  EXPECT_EQ(nlohmann::json::parse(chosen->config)["architecture"], "amd64");
  const auto missing = client.fetch_manifest_and_config(parse_ref(s_registry->host() + "/gpuenv/fetch-mc:v9"));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().id, "registry.not_found");
}

TEST_F(PlainRegistry, MissingTagIsNotFoundWithTheRegistrysErrorCode) {
  RegistryTempDir dst;
  RegistryClient client(*m_http, m_options);
  const auto r = client.pull(parse_ref(s_registry->host() + "/gpuenv/nothing-here:v9"), dst / "l");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().id, "registry.not_found");
  EXPECT_NE(r.error().message.find("UNKNOWN"), std::string::npos) << r.error().message;
  EXPECT_FALSE(fs::exists(dst / "l/index.json"));
}

TEST_F(PlainRegistry, PushNeedsAChoiceWhenTheLayoutHoldsSeveralImages) {
  RegistryTempDir src;
  const TestImage a = make_image(src.path(), {100}, 8, "amd64", false);
  Descriptor b = make_image(src.path(), {200}, 9, "amd64", false).manifest;
  b.annotations["org.opencontainers.image.ref.name"] = "v2";
  ASSERT_TRUE(OciLayout::open(src.path())->write_index({a.manifest, b}).ok());
  RegistryClient client(*m_http, m_options);
  const auto ambiguous = client.push(src.path(), parse_ref(s_registry->host() + "/gpuenv/two:x"));
  ASSERT_FALSE(ambiguous.ok());
  EXPECT_EQ(ambiguous.error().id, "registry.layout");
  const auto chosen = client.push(src.path(), parse_ref(s_registry->host() + "/gpuenv/two:x"), {"v2", ""});
  ASSERT_TRUE(chosen.ok()) << chosen.error().to_string();
  EXPECT_EQ(chosen->digest, b.digest);
}

// ---- the one upload path: put_blob and put_manifest, which push goes through too ----

TEST_F(PlainRegistry, PutBlobUploadsABlobOnceAndThenFindsItPresent) {
  RegistryClient client(*m_http, m_options);
  const auto target = parse_ref(s_registry->host() + "/gpuenv/put-once:v1");
  const std::string bytes = pattern_bytes(2500, 20);
  const BlobSource source = BlobSource::of(bytes);
  EXPECT_EQ(source.digest, Digest::of(bytes));
  EXPECT_FALSE(*client.blob_exists(target, source.digest));
  const auto first = client.put_blob(target, source);
  ASSERT_TRUE(first.ok()) << first.error().to_string();
  EXPECT_EQ(first->outcome, BlobOutcome::uploaded);
  EXPECT_EQ(first->bytes_uploaded, bytes.size());
  EXPECT_EQ(first->chunks, 0);
  EXPECT_TRUE(*client.blob_exists(target, source.digest));
  const auto again = client.put_blob(target, source);
  ASSERT_TRUE(again.ok()) << again.error().to_string();
  EXPECT_EQ(again->outcome, BlobOutcome::present);
  EXPECT_EQ(again->bytes_uploaded, 0u);
  const Descriptor d{media_type::k_layer_gzip, source.digest, bytes.size(), {}};
  EXPECT_EQ(*client.get_blob(target, d, 1 << 20), bytes);
}

TEST_F(PlainRegistry, PutBlobStreamsAFileInChunksAboveTheThreshold) {
  RegistryTempDir dir;
  const std::string bytes = pattern_bytes(9000, 21);
  write_file(dir / "blob", bytes);
  m_options.chunk_threshold = 1000;
  m_options.chunk_size = 4096;
  RegistryClient client(*m_http, m_options);
  const auto target = parse_ref(s_registry->host() + "/gpuenv/put-chunked:v1");
  const auto put = client.put_blob(target, BlobSource::file(dir / "blob", Digest::of(bytes), bytes.size()));
  ASSERT_TRUE(put.ok()) << put.error().to_string();
  EXPECT_EQ(put->outcome, BlobOutcome::uploaded);
  EXPECT_EQ(put->chunks, 3);  // 9000 bytes in 4096-byte chunks
  EXPECT_EQ(put->bytes_uploaded, bytes.size());
  const std::string memory = pattern_bytes(3000, 22);  // bytes in memory go up in chunks the same way
  const auto put_memory = client.put_blob(target, BlobSource::of(memory));
  ASSERT_TRUE(put_memory.ok()) << put_memory.error().to_string();
  EXPECT_EQ(put_memory->chunks, 1);
  EXPECT_EQ(*client.get_blob(target, Descriptor{media_type::k_layer_gzip, Digest::of(bytes), bytes.size(), {}}, 1 << 20), bytes);
  EXPECT_EQ(*client.get_blob(target, Descriptor{media_type::k_layer_gzip, Digest::of(memory), memory.size(), {}}, 1 << 20), memory);
}

TEST_F(PlainRegistry, PutBlobMountsFromAnotherRepositoryWhenAsked) {
  RegistryClient client(*m_http, m_options);
  const auto source_repo = parse_ref(s_registry->host() + "/gpuenv/put-mount-source:v1");
  const auto target = parse_ref(s_registry->host() + "/gpuenv/put-mount-target:v1");
  const std::string bytes = pattern_bytes(1200, 23);
  ASSERT_TRUE(client.put_blob(source_repo, BlobSource::of(bytes)).ok());
  const auto mounted = client.put_blob(target, BlobSource::of(bytes), "gpuenv/put-mount-source");
  ASSERT_TRUE(mounted.ok()) << mounted.error().to_string();
  EXPECT_EQ(mounted->outcome, BlobOutcome::mounted);
  EXPECT_EQ(mounted->bytes_uploaded, 0u);
  EXPECT_TRUE(*client.blob_exists(target, Digest::of(bytes)));
  // A repository that lacks the blob: the registry declines the mount and the blob is uploaded.
  const std::string other = pattern_bytes(1300, 24);
  const auto declined = client.put_blob(target, BlobSource::of(other), "gpuenv/put-mount-source");
  ASSERT_TRUE(declined.ok()) << declined.error().to_string();
  EXPECT_EQ(declined->outcome, BlobOutcome::uploaded);
}

TEST_F(PlainRegistry, PutManifestAnswersTheDigestTheRegistryConfirmed) {
  RegistryTempDir src;
  const TestImage img = make_image(src.path(), {600}, 25);
  RegistryClient client(*m_http, m_options);
  const auto target = parse_ref(s_registry->host() + "/gpuenv/put-manifest:v1");
  for (const auto& b : img.blobs) {
    const auto put = client.put_blob(target, BlobSource::file(src / ("blobs/sha256/" + b.digest.hex()), b.digest, b.size));
    ASSERT_TRUE(put.ok()) << put.error().to_string();
  }
  const std::string manifest = read_file(src / ("blobs/sha256/" + img.manifest.digest.hex()));
  const auto put = client.put_manifest(target, "v1", manifest, media_type::k_manifest);
  ASSERT_TRUE(put.ok()) << put.error().to_string();
  EXPECT_EQ(put->digest, img.manifest.digest);
  const auto got = client.get_manifest(target, "v1");
  ASSERT_TRUE(got.ok() && got->has_value());
  EXPECT_EQ((*got)->bytes, manifest);
}

TEST(BasicAuthRegistry, PushesWithCredentialsAndRefusesWithoutOrWithWrongOnes) {
  DockerRegistry registry(DockerRegistry::Setup::basic);
  if (!registry.skip_reason().empty()) GTEST_SKIP() << registry.skip_reason();
  RegistryTempDir src, dst;
  const TestImage img = make_image(src.path(), {1200, 3400}, 10);
  auto http = make_curl_http_client(quick_http());
  const auto target = parse_ref(registry.host() + "/gpuenv/auth:v1");

  RegistryOptions anonymous;
  anonymous.plain_http = true;
  const auto refused = RegistryClient(*http, anonymous).push(src.path(), target);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().id, "registry.auth");
  EXPECT_NE(refused.error().hint.find("config.json"), std::string::npos);

  RegistryOptions wrong = anonymous;
  wrong.credentials = RegistryCredentials{DockerRegistry::k_user, "not-the-password"};
  const auto bad = RegistryClient(*http, wrong).pull(target, dst / "bad");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().id, "registry.auth");
  EXPECT_EQ(bad.error().to_string().find("not-the-password"), std::string::npos);

  RegistryOptions good = anonymous;
  good.credentials = RegistryCredentials{DockerRegistry::k_user, DockerRegistry::k_password};
  RegistryClient client(*http, good);
  const auto pushed = client.push(src.path(), target);
  ASSERT_TRUE(pushed.ok()) << pushed.error().to_string();
  if (have("skopeo")) {
    EXPECT_EQ(skopeo_digest(target.registry + "/gpuenv/auth:v1", std::string("--tls-verify=false --creds ") + DockerRegistry::k_user + ":" + DockerRegistry::k_password),
              img.manifest.digest.str());
  }
  const auto pulled = client.pull(target, dst / "good");
  ASSERT_TRUE(pulled.ok()) << pulled.error().to_string();
  expect_same_blobs(src.path(), dst / "good", img);
}

TEST(TlsRegistry, VerifiesTheServerAgainstTheGivenCa) {
  DockerRegistry registry(DockerRegistry::Setup::tls);
  if (!registry.skip_reason().empty()) GTEST_SKIP() << registry.skip_reason();
  RegistryTempDir src, dst;
  const TestImage img = make_image(src.path(), {2222, 4444}, 11);
  const auto target = parse_ref(registry.host() + "/gpuenv/tls:v1");

  auto untrusted = make_curl_http_client(quick_http());
  const auto refused = RegistryClient(*untrusted, RegistryOptions{}).push(src.path(), target);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().id, "http.tls") << refused.error().to_string();

  auto http = make_curl_http_client(quick_http(registry.ca()));
  RegistryClient client(*http, RegistryOptions{});
  const auto pushed = client.push(src.path(), target);
  ASSERT_TRUE(pushed.ok()) << pushed.error().to_string();
  if (have("skopeo")) {
    EXPECT_EQ(skopeo_digest(target.registry + "/gpuenv/tls:v1", "--tls-verify=true --cert-dir " + registry.cert_dir()), img.manifest.digest.str());
  }
  const auto pulled = client.pull(target, dst / "l");
  ASSERT_TRUE(pulled.ok()) << pulled.error().to_string();
  expect_same_blobs(src.path(), dst / "l", img);
}

// ---- the python fake: bearer tokens and faults ----

TEST(FakeRegistry, BearerTokensAreFetchedOnceAndReused) {
  FakeRegistry fake("bearer");
  ASSERT_NE(fake.port(), 0);
  RegistryTempDir src, dst;
  const TestImage img = make_image(src.path(), {700, 900}, 12);
  auto http = make_curl_http_client(quick_http());
  RegistryOptions o;
  o.plain_http = true;
  o.chunk_threshold = 800;  // one chunked layer
  o.chunk_size = 300;
  RegistryClient client(*http, o);
  const auto target = parse_ref(fake.host() + "/team/app:v1");
  const auto pushed = client.push(src.path(), target);
  ASSERT_TRUE(pushed.ok()) << pushed.error().to_string();
  EXPECT_EQ(pushed->blobs_uploaded, 3);
  EXPECT_EQ(pushed->chunks, 3);
  const auto pulled = client.pull(target, dst / "l");  // another scope: one more token ("access_token" this time)
  ASSERT_TRUE(pulled.ok()) << pulled.error().to_string();
  expect_same_blobs(src.path(), dst / "l", img);
  const std::string log = fake.log();
  // The parallel first requests may each meet the challenge; after that the cached tokens serve everything.
  EXPECT_GE(count(log, "GET /token"), 2) << log;
  EXPECT_LE(count(log, "GET /token"), 2 + o.parallel_blobs) << log;
  EXPECT_EQ(count(log, "PATCH "), 3);
}

TEST(FakeRegistry, TokenServiceCredentialsAreRequiredAndNeverShown) {
  FakeRegistry fake("bearer", "robot:t0ken-pw");
  ASSERT_NE(fake.port(), 0);
  RegistryTempDir src;
  make_image(src.path(), {100}, 13);
  auto http = make_curl_http_client(quick_http());
  RegistryOptions o;
  o.plain_http = true;
  const auto target = parse_ref(fake.host() + "/team/app:v1");
  const auto anonymous = RegistryClient(*http, o).push(src.path(), target);
  ASSERT_FALSE(anonymous.ok());
  EXPECT_EQ(anonymous.error().id, "registry.auth");
  o.credentials = RegistryCredentials{"robot", "wrong-pw"};
  const auto wrong = RegistryClient(*http, o).push(src.path(), target);
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.error().id, "registry.auth");
  EXPECT_EQ(wrong.error().to_string().find("wrong-pw"), std::string::npos);
  o.credentials = RegistryCredentials{"robot", "t0ken-pw"};
  const auto pushed = RegistryClient(*http, o).push(src.path(), target);
  EXPECT_TRUE(pushed.ok()) << pushed.error().to_string();
}

TEST(FakeRegistry, AnExistingBlobIsNotUploadedAgainAndAMountIsTriedAndCounted) {
  FakeRegistry fake("plain");
  ASSERT_NE(fake.port(), 0);
  auto http = make_curl_http_client(quick_http());
  RegistryClient client(*http, plain_http_options());
  RegistryTempDir src;
  const TestImage img = make_image(src.path(), {700, 900}, 26);
  const auto app = parse_ref(fake.host() + "/team/app:v1");
  ASSERT_TRUE(client.push(src.path(), app).ok());
  // A layer push uploaded is present for put_blob: one HEAD, nothing sent.
  const std::string layer = read_file(src / ("blobs/sha256/" + img.blobs[1].digest.hex()));
  const auto present = client.put_blob(app, BlobSource::of(layer));
  ASSERT_TRUE(present.ok()) << present.error().to_string();
  EXPECT_EQ(present->outcome, BlobOutcome::present);
  std::string log = fake.log();
  EXPECT_EQ(count(log, "PUT /v2/team/app/blobs/uploads/"), 3) << log;
  EXPECT_EQ(count(log, "HEAD /v2/team/app/blobs/" + img.blobs[1].digest.str()), 2) << log;
  // The same image into another repository, mounting from the first: every blob is mounted, none uploaded.
  const auto mounted = client.push(src.path(), parse_ref(fake.host() + "/team/other:v1"), {"v1", "team/app"});
  ASSERT_TRUE(mounted.ok()) << mounted.error().to_string();
  EXPECT_EQ(mounted->blobs_mounted, 3);
  EXPECT_EQ(mounted->blobs_uploaded, 0);
  EXPECT_EQ(mounted->bytes_uploaded, 0u);
  log = fake.log();
  EXPECT_EQ(count(log, "POST /v2/team/other/blobs/uploads/"), 3) << log;
  EXPECT_EQ(count(log, "PUT /v2/team/other/blobs/uploads/"), 0) << log;
  // Pushed again: every blob is found by its HEAD, no upload starts.
  const auto again = client.push(src.path(), parse_ref(fake.host() + "/team/other:v1"), {"v1", "team/app"});
  ASSERT_TRUE(again.ok()) << again.error().to_string();
  EXPECT_EQ(again->blobs_present, 3);
  EXPECT_EQ(again->blobs_mounted, 0);
  EXPECT_EQ(count(fake.log(), "POST /v2/team/other/blobs/uploads/"), 3);
}

TEST(FakeRegistry, PushSendsPerBlobAHeadAPostAndItsPutOrChunksThenTheManifest) {
  FakeRegistry fake("plain");
  ASSERT_NE(fake.port(), 0);
  auto http = make_curl_http_client(quick_http());
  RegistryOptions o = plain_http_options();
  o.parallel_blobs = 1;  // one blob at a time: the requests in a fixed order
  o.chunk_threshold = 1000;
  o.chunk_size = 1500;
  RegistryClient client(*http, o);
  RegistryTempDir src;
  const TestImage img = make_image(src.path(), {2000}, 28);
  ASSERT_TRUE(client.push(src.path(), parse_ref(fake.host() + "/team/app:v1")).ok());
  std::string expected;
  const std::string repo = "/v2/team/app";
  const std::string config = img.blobs[0].digest.str(), layer = img.blobs[1].digest.str();
  for (const std::string& line : {"HEAD " + repo + "/blobs/" + config, "POST " + repo + "/blobs/uploads/", "PUT " + repo + "/blobs/uploads/1",
                                  "HEAD " + repo + "/blobs/" + layer, "POST " + repo + "/blobs/uploads/", "PATCH " + repo + "/blobs/uploads/2",
                                  "PATCH " + repo + "/blobs/uploads/2", "PUT " + repo + "/blobs/uploads/2", "PUT " + repo + "/manifests/v1"}) {
    expected += line + "\n";
  }
  expected += "GET /log";  // the fake logs the request for its log too
  std::string log = fake.log();
  for (const char* id : {"u1", "u2"}) {  // the fake's upload ids, counted from 1
    for (auto at = log.find(id); at != std::string::npos; at = log.find(id)) log.replace(at, 2, std::string(1, id[1]));
  }
  EXPECT_EQ(log, expected);
}

TEST(FakeRegistry, ABlobOrManifestTheRegistryReportsUnderAnotherDigestIsRefused) {
  FakeRegistry fake("misreport");
  ASSERT_NE(fake.port(), 0);
  auto http = make_curl_http_client(quick_http());
  RegistryClient client(*http, plain_http_options());
  const auto app = parse_ref(fake.host() + "/team/app:v1");
  const std::string bytes = "a blob";
  const auto put = client.put_blob(app, BlobSource::of(bytes));
  ASSERT_FALSE(put.ok());
  EXPECT_EQ(put.error().id, "registry.digest_mismatch") << put.error().to_string();
  EXPECT_NE(put.error().message.find(Digest::of(bytes).str()), std::string::npos) << put.error().to_string();
  // The blob is in team/app now; a mount of it that names another digest is refused too.
  const auto mount = client.put_blob(parse_ref(fake.host() + "/team/other:v1"), BlobSource::of(bytes), "team/app");
  ASSERT_FALSE(mount.ok());
  EXPECT_EQ(mount.error().id, "registry.digest_mismatch") << mount.error().to_string();
  EXPECT_NE(mount.error().where.find("POST "), std::string::npos) << mount.error().to_string();
  RegistryTempDir src;
  const TestImage img = make_image(src.path(), {400}, 27);
  const auto manifest = client.put_manifest(app, "v1", read_file(src / ("blobs/sha256/" + img.manifest.digest.hex())), media_type::k_manifest);
  ASSERT_FALSE(manifest.ok());
  EXPECT_EQ(manifest.error().id, "registry.digest_mismatch") << manifest.error().to_string();
  const auto pushed = client.push(src.path(), parse_ref(fake.host() + "/team/pushed:v1"));
  ASSERT_FALSE(pushed.ok());
  EXPECT_EQ(pushed.error().id, "registry.digest_mismatch") << pushed.error().to_string();
}

/// Pushes a test image to a fake in `mode` (the fake stores what it gets faithfully) and pulls it back.
Result<PullStats> push_then_pull(const std::string& mode, const std::string& dst) {
  FakeRegistry fake(mode);
  RegistryTempDir src;
  make_image(src.path(), {4000, 6000}, 14);
  auto http = make_curl_http_client(quick_http());
  RegistryOptions o;
  o.plain_http = true;
  RegistryClient client(*http, o);
  const auto target = parse_ref(fake.host() + "/team/app:v1");
  const auto pushed = client.push(src.path(), target);
  if (!pushed) return pushed.error();
  return client.pull(target, dst);
}

TEST(FakeRegistry, FetchingManifestAndConfigDownloadsNoLayerAndVerifiesTheConfig) {
  for (const std::string mode : {"plain", "alter", "short"}) {
    FakeRegistry fake(mode);
    ASSERT_NE(fake.port(), 0);
    RegistryTempDir src;
    const TestImage img = make_image(src.path(), {4000, 6000}, 15);
    auto http = make_curl_http_client(quick_http());
    RegistryOptions o;
    o.plain_http = true;
    RegistryClient client(*http, o);
    const auto target = parse_ref(fake.host() + "/team/app:v1");
    ASSERT_TRUE(client.push(src.path(), target).ok()) << mode;
    const auto got = client.fetch_manifest_and_config(target);
    const std::string log = fake.log();
    EXPECT_EQ(count(log, "GET /v2/team/app/blobs/"), 1) << mode << "\n" << log;  // the config only
    EXPECT_NE(log.find("GET /v2/team/app/blobs/" + img.blobs[0].digest.str()), std::string::npos) << mode << "\n" << log;
    if (mode == "plain") {
      ASSERT_TRUE(got.ok()) << got.error().to_string();
      EXPECT_EQ(got->manifest_digest, img.manifest.digest);
      EXPECT_EQ(got->config, read_file(src / ("blobs/sha256/" + img.blobs[0].digest.hex())));
    } else {
      ASSERT_FALSE(got.ok()) << mode;
      EXPECT_EQ(got.error().id, mode == "alter" ? "registry.digest_mismatch" : "registry.truncated") << got.error().to_string();
      EXPECT_NE(got.error().to_string().find(img.blobs[0].digest.str()), std::string::npos) << got.error().to_string();
    }
  }
}

TEST(FakeRegistry, AlteredBlobIsADigestMismatchAndLeavesNothing) {
  RegistryTempDir dst;
  const auto r = push_then_pull("alter", dst / "l");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().id, "registry.digest_mismatch") << r.error().to_string();
  EXPECT_FALSE(fs::exists(dst / "l/index.json"));
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dst / "l/blobs", ec)) EXPECT_NE(e.path().filename().string().rfind(".tmp-", 0), 0u) << e.path();
}

TEST(FakeRegistry, ShortBlobIsTruncated) {
  RegistryTempDir dst;
  const auto r = push_then_pull("short", dst / "l");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().id, "registry.truncated") << r.error().to_string();
  EXPECT_FALSE(fs::exists(dst / "l/index.json"));
}

TEST(FakeRegistry, UnknownManifestMediaTypeIsAClearError) {
  FakeRegistry fake("plain");
  auto http = make_curl_http_client(quick_http());
  HttpRequest put;
  put.method = "PUT";
  put.url = "http://" + fake.host() + "/v2/team/odd/manifests/v1";
  put.headers.emplace_back("Content-Type", "application/vnd.example.unknown+json");
  put.body = R"({"schemaVersion":2,"mediaType":"application/vnd.example.unknown+json"})";
  ASSERT_EQ(http->send(put)->status, 201);
  RegistryOptions o;
  o.plain_http = true;
  RegistryTempDir dst;
  const auto r = RegistryClient(*http, o).pull(parse_ref(fake.host() + "/team/odd:v1"), dst / "l");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().id, "registry.media_type");
  EXPECT_NE(r.error().message.find("application/vnd.example.unknown+json"), std::string::npos);
}

TEST(FakeRegistry, ManifestNotMatchingThePulledDigestIsRefused) {
  FakeRegistry fake("plain");
  auto http = make_curl_http_client(quick_http());
  HttpRequest put;
  put.method = "PUT";
  put.url = "http://" + fake.host() + "/v2/team/app/manifests/v1";
  put.headers.emplace_back("Content-Type", media_type::k_manifest);
  put.body = R"({"schemaVersion":2,"config":{"mediaType":"x","digest":"sha256:)" + std::string(64, 'a') + R"(","size":1},"layers":[]})";
  ASSERT_EQ(http->send(put)->status, 201);
  RegistryOptions o;
  o.plain_http = true;
  RegistryTempDir dst;
  // Ask for another digest under a tag name the fake resolves: the fake serves the v1 bytes for any
  // reference it stored, so ask by a digest that it stored under a different content.
  const std::string wrong = "sha256:" + std::string(64, 'b');
  put.url = "http://" + fake.host() + "/v2/team/app/manifests/" + wrong;
  ASSERT_EQ(http->send(put)->status, 201);
  const auto r = RegistryClient(*http, o).pull(parse_ref(fake.host() + "/team/app@" + wrong), dst / "l");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().id, "registry.digest_mismatch");
}

TEST(FakeRegistry, MissingBlobIsNotFoundEvenWhenTheErrorBodyIsLargerThanTheBlob) {
  FakeRegistry fake("plain");
  auto http = make_curl_http_client(quick_http());
  HttpRequest put;
  put.method = "PUT";
  put.url = "http://" + fake.host() + "/v2/team/app/manifests/v1";
  put.headers.emplace_back("Content-Type", media_type::k_manifest);
  put.body = R"({"schemaVersion":2,"config":{"mediaType":"x","digest":"sha256:)" + std::string(64, 'a') + R"(","size":1},"layers":[]})";
  ASSERT_EQ(http->send(put)->status, 201);
  RegistryOptions o;
  o.plain_http = true;
  RegistryTempDir dst;
  const auto r = RegistryClient(*http, o).pull(parse_ref(fake.host() + "/team/app:v1"), dst / "l");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().id, "registry.not_found") << r.error().to_string();
  EXPECT_NE(r.error().message.find("BLOB_UNKNOWN"), std::string::npos);
}

}  // namespace
}  // namespace gpuenv::images
