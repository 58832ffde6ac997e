// `gpuenv inspect` in process on every kind of image it reads: OCI layouts written here with OciLayout (a
// config with labels, layers carrying gpuenv's dev.gpuenv.layer / dev.gpuenv.packages annotations), the
// oci-archive and docker-archive files write_image_archive makes of them, an old-style `docker save` tar,
// and the same image pushed to the real docker-registry on 127.0.0.1. Every form must give the same answer.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "cli/context.hpp"
#include "fakes/docker_registry.hpp"
#include "fakes/loopback_server.hpp"
#include "base/digest.hpp"
#include "images/oci/archive.hpp"
#include "images/oci/layout.hpp"
#include "base/net/http_client.hpp"
#include "images/registry/registry_client.hpp"
#include "fakes/files.hpp"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using gpuenv::images::Descriptor;
namespace media_type = gpuenv::images::media_type;

bool run_sh(const std::string& cmd) { return std::system(cmd.c_str()) == 0; }

using gpuenv::testing::read_all;

/// A package as gpuenv's annotation lists it: [name, version, kind, bytes].
struct Pkg {
  std::string name, version, kind;
  std::uint64_t bytes;
};
struct LayerSpec {
  std::string name;
  std::size_t size;  // bytes of the (arbitrary) layer blob
  std::vector<Pkg> packages;
};

std::string filler(std::size_t n, unsigned seed) {
  std::string s(n, '\0');
  unsigned x = seed * 2654435761u + 7;
  for (auto& c : s) {
    x = x * 1103515245u + 12345u;
    c = static_cast<char>(x >> 24);
  }
  return s;
}

/// Writes an image into the OCI layout at `dir`, named `ref` in index.json; returns the manifest descriptor.
Descriptor write_layout(const fs::path& dir, const std::string& title, const std::vector<LayerSpec>& layers, const std::string& ref = "1.0") {
  auto layout = gpuenv::images::OciLayout::open(dir.string());
  EXPECT_TRUE(layout.ok());
  json manifest_layers = json::array(), diff_ids = json::array();
  unsigned seed = 1;
  for (const auto& l : layers) {
    const std::string bytes = filler(l.size, seed++ + static_cast<unsigned>(l.packages.size()) * 100);
    const Descriptor d = *layout->put_bytes(bytes, media_type::k_layer_gzip);
    json held = json::array();
    for (const auto& p : l.packages) held.push_back(json::array({p.name, p.version, p.kind, p.bytes}));
    manifest_layers.push_back({{"mediaType", d.media_type}, {"digest", d.digest.str()}, {"size", d.size},
                               {"annotations", {{"dev.gpuenv.layer", l.name}, {"dev.gpuenv.packages", held.dump()}}}});
    diff_ids.push_back("sha256:" + gpuenv::sha256_hex(bytes));
  }
  const json config = {{"created", "2023-11-14T22:13:20Z"},
                       {"architecture", "amd64"},
                       {"os", "linux"},
                       {"config",
                        {{"Env", {"PATH=/usr/bin", "NVIDIA_VISIBLE_DEVICES=all"}},
                         {"Labels", {{"org.opencontainers.image.title", title}, {"dev.gpuenv.lock.sha256", std::string(64, 'c')}}}}},
                       {"rootfs", {{"type", "layers"}, {"diff_ids", diff_ids}}}};
  const Descriptor cfg = *layout->put_bytes(config.dump(), media_type::k_config);
  const json manifest = {{"schemaVersion", 2},
                         {"mediaType", media_type::k_manifest},
                         {"config", {{"mediaType", cfg.media_type}, {"digest", cfg.digest.str()}, {"size", cfg.size}}},
                         {"layers", manifest_layers}};
  Descriptor m = *layout->put_bytes(manifest.dump(), media_type::k_manifest);
  m.annotations["org.opencontainers.image.ref.name"] = ref;
  EXPECT_TRUE(layout->write_index({m}).ok());
  return m;
}

/// The real docker-registry on 127.0.0.1 (plain HTTP), storage in a temporary directory.
using Registry = gpuenv::testing::DockerRegistry;

class CliInspect : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir = fs::temp_directory_path() / ("gpuenv-cliinspect-" + std::to_string(::getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir);
    a_digest = write_layout(dir / "a", "demo",
                            {{"base", 3000, {{"libc6", "2.36-9", "deb", 12000000}, {"libfoo1", "1.0-1", "deb", 40000}, {"base-files", "12.4", "deb", 300000}}},
                             {"framework", 5000, {{"torch", "2.5.1", "wheel", 900000000}}},
                             {"user", 1500, {{"foo-tools", "1.0-1", "deb", 25000}, {"safetensors", "0.4.5", "wheel", 1200000}}}})
                   .digest.str();
    b_digest = write_layout(dir / "b", "demo",
                            {{"base", 3000, {{"libc6", "2.36-9", "deb", 12000000}, {"libfoo1", "1.0-1", "deb", 40000}, {"base-files", "12.4", "deb", 300000}}},
                             {"framework", 5000, {{"torch", "2.5.1", "wheel", 900000000}}},
                             {"user", 1700, {{"foo-tools", "2.0-1", "deb", 26000}, {"bar", "0.1", "deb", 100}}}})
                   .digest.str();
  }
  static void TearDownTestSuite() {
    if (!dir.empty()) fs::remove_all(dir);
  }

  /// Runs `gpuenv ARGS...` in process; the exit code, with stdout and stderr in *out and *err.
  static int inspect(std::vector<std::string> args, std::string* out = nullptr, std::string* err = nullptr,
                     const std::map<std::string, std::string>& env = {}) {
    std::ostringstream o, e;
    gpuenv::cli::Context ctx;
    ctx.out = &o;
    ctx.err = &e;
    ctx.env = {{"HOME", dir.string()}, {"GPUENV_CACHE_DIR", (dir / "cache").string()}};
    for (const auto& [k, v] : env) ctx.env[k] = v;
    args.insert(args.begin(), "inspect");
    const int code = gpuenv::cli::run(args, ctx);
    if (out) *out = o.str();
    if (err) *err = e.str();
    return code;
  }

  /// The gpuenv-inspect-v1 document for `image`, without its "image" field (which repeats the argument).
  static json model(const std::string& image, const std::map<std::string, std::string>& env = {}) {
    std::string out, err;
    EXPECT_EQ(inspect({image, "--json"}, &out, &err, env), 0) << image << "\n" << err << out;
    json j = json::parse(out, nullptr, false);
    if (!j.is_object()) return json();
    EXPECT_EQ(j["image"], image);
    j.erase("image");
    return j;
  }

  /// Writes the layout `name` as an archive file and returns its path.
  static std::string archive(const std::string& name, gpuenv::images::ArchiveFormat format, const std::string& digest) {
    auto layout = gpuenv::images::OciLayout::open((dir / name).string());
    EXPECT_TRUE(layout.ok());
    Descriptor m;
    m.media_type = media_type::k_manifest;
    m.digest = *gpuenv::Digest::parse(digest);
    m.size = fs::file_size(dir / name / "blobs/sha256" / digest.substr(7));
    m.annotations["org.opencontainers.image.ref.name"] = "1.0";
    const std::string path = (dir / (name + (format == gpuenv::images::ArchiveFormat::oci ? "-oci.tar" : "-docker.tar"))).string();
    const auto st = gpuenv::images::write_image_archive(*layout, m, format, "demo:1.0", path);
    EXPECT_TRUE(st.ok()) << (st.ok() ? "" : st.error().to_string());
    return path;
  }

  static inline fs::path dir;
  static inline std::string a_digest, b_digest;
};

TEST_F(CliInspect, ALayoutShowsLayersPackagesLabelsAndSizes) {
  const json j = model((dir / "a").string());
  EXPECT_EQ(j["schema"], "gpuenv-inspect-v1");
  EXPECT_EQ(j["digest"], a_digest);
  EXPECT_EQ(j["architecture"], "amd64");
  EXPECT_EQ(j["created"], "2023-11-14T22:13:20Z");
  EXPECT_EQ(j["labels"]["org.opencontainers.image.title"], "demo");
  ASSERT_EQ(j["layers"].size(), 3u);
  EXPECT_EQ(j["layers"][0]["name"], "base");
  EXPECT_EQ(j["layers"][0]["size"], 3000);
  EXPECT_EQ(j["layers"][2]["packages"][0], json({{"name", "foo-tools"}, {"version", "1.0-1"}, {"kind", "deb"}, {"bytes", 25000}}));
  // DIR:REF and oci:DIR[:REF] name the same image.
  EXPECT_EQ(model((dir / "a").string() + ":1.0"), j);
  EXPECT_EQ(model("oci:" + (dir / "a").string()), j);
  EXPECT_EQ(model("oci:" + (dir / "a").string() + ":1.0"), j);
  std::string out, err;
  ASSERT_EQ(inspect({(dir / "a").string()}, &out, &err), 0) << err;
  EXPECT_NE(out.find("layer base"), std::string::npos) << out;
  EXPECT_NE(out.find("label org.opencontainers.image.title=demo"), std::string::npos) << out;
  EXPECT_NE(out.find("torch 2.5.1 (wheel)"), std::string::npos) << out;
  EXPECT_EQ(inspect({(dir / "a").string() + ":2.0"}, &out, &err), 2);
  EXPECT_NE(err.find("no image named '2.0'"), std::string::npos) << err;
}

TEST_F(CliInspect, ArchivesOfEitherFormatGiveTheSameAnswerAsTheLayout) {
  const json want = model((dir / "a").string());
  const std::string oci = archive("a", gpuenv::images::ArchiveFormat::oci, a_digest);
  const std::string docker = archive("a", gpuenv::images::ArchiveFormat::docker, a_digest);
  EXPECT_EQ(model(oci), want);
  EXPECT_EQ(model("oci-archive:" + oci), want);
  EXPECT_EQ(model("oci-archive:" + oci + ":1.0"), want);
  EXPECT_EQ(model(docker), want);  // it holds index.json too: read as OCI
  // Through Docker's manifest.json: sizes from the tar members, names and packages from the OCI manifest beside it.
  EXPECT_EQ(model("docker-archive:" + docker), want);
  EXPECT_EQ(model("docker-archive:" + docker + ":demo:1.0"), want);
  std::string out, err;
  EXPECT_EQ(inspect({"docker-archive:" + docker + ":other:2"}, &out, &err), 2);
  EXPECT_NE(err.find("no image tagged 'other:2'"), std::string::npos) << err;
  EXPECT_EQ(inspect({"docker-archive:" + oci}, &out, &err), 2);
  EXPECT_NE(err.find("not a docker archive"), std::string::npos) << err;
  EXPECT_NE(err.find("oci-archive:"), std::string::npos) << err;
  EXPECT_EQ(inspect({"oci-archive:" + (dir / "a").string()}, &out, &err), 2);
  EXPECT_NE(err.find("is a directory, not an archive file"), std::string::npos) << err;
}

TEST_F(CliInspect, AnOldStyleDockerSaveArchiveMapsToTheSameModel) {
  // What `docker save` wrote before Docker 25: manifest.json, a config named by its id, uncompressed layer.tar members.
  const fs::path d = dir / "docker-old";
  fs::create_directories(d / "l1");
  fs::create_directories(d / "l2");
  const std::string l1 = filler(2048, 40), l2 = filler(4096, 41);
  std::ofstream(d / "l1/layer.tar", std::ios::binary) << l1;
  std::ofstream(d / "l2/layer.tar", std::ios::binary) << l2;
  const json config = {{"created", "2024-01-02T03:04:05Z"},
                       {"architecture", "amd64"},
                       {"os", "linux"},
                       {"config", {{"Labels", {{"maintainer", "someone@example.com"}}}}},
                       {"rootfs", {{"type", "layers"}, {"diff_ids", {"sha256:" + gpuenv::sha256_hex(l1), "sha256:" + gpuenv::sha256_hex(l2)}}}}};
  const std::string config_text = config.dump();
  const std::string id = gpuenv::sha256_hex(config_text);
  std::ofstream(d / (id + ".json"), std::ios::binary) << config_text;
  std::ofstream(d / "manifest.json") << json::array({{{"Config", id + ".json"}, {"RepoTags", {"old:1"}}, {"Layers", {"l1/layer.tar", "l2/layer.tar"}}}}).dump();
  const std::string tar = (dir / "docker-old.tar").string();
  ASSERT_TRUE(run_sh("cd " + d.string() + " && tar -cf " + tar + " manifest.json " + id + ".json l1/layer.tar l2/layer.tar"));
  const json j = model(tar);
  EXPECT_EQ(j["digest"], "sha256:" + id);  // Docker's image id
  EXPECT_EQ(j["created"], "2024-01-02T03:04:05Z");
  EXPECT_EQ(j["labels"]["maintainer"], "someone@example.com");
  ASSERT_EQ(j["layers"].size(), 2u);
  EXPECT_EQ(j["layers"][0]["name"], "layer 1");
  EXPECT_EQ(j["layers"][0]["size"], 2048);
  EXPECT_EQ(j["layers"][1]["size"], 4096);
  EXPECT_EQ(j["layers"][1]["digest"], "sha256:" + gpuenv::sha256_hex(l2));
  EXPECT_EQ(model("docker-archive:" + tar + ":old:1"), j);
  std::string out, err;
  EXPECT_EQ(inspect({"oci-archive:" + tar}, &out, &err), 2);
  EXPECT_NE(err.find("docker-archive:"), std::string::npos) << err;
}

TEST_F(CliInspect, DiffBetweenALayoutAndAnArchiveShowsWhatChanged) {
  const std::string b_archive = archive("b", gpuenv::images::ArchiveFormat::docker, b_digest);
  std::string out, err;
  ASSERT_EQ(inspect({(dir / "a").string(), "--diff", "docker-archive:" + b_archive, "--json"}, &out, &err), 0) << err;
  const json d = json::parse(out);
  EXPECT_EQ(d["schema"], "gpuenv-inspect-diff-v1");
  EXPECT_EQ(d["before"]["digest"], a_digest);
  EXPECT_EQ(d["after"]["digest"], b_digest);
  std::map<std::string, std::string> status;
  std::map<std::string, std::pair<json, json>> changes;
  for (const auto& l : d["layers"]) {
    status[l["layer"]] = l["status"];
    for (const auto& p : l["packages"]) changes[p["name"]] = {p["before"], p["after"]};
  }
  EXPECT_EQ(status, (std::map<std::string, std::string>{{"base", "unchanged"}, {"framework", "unchanged"}, {"user", "changed"}}));
  EXPECT_EQ(changes["foo-tools"], std::make_pair(json("1.0-1"), json("2.0-1")));
  EXPECT_EQ(changes["bar"], std::make_pair(json(nullptr), json("0.1")));
  EXPECT_EQ(changes["safetensors"], std::make_pair(json("0.4.5"), json(nullptr)));
  EXPECT_EQ(changes.size(), 3u);
  ASSERT_EQ(inspect({(dir / "a").string(), "--diff", b_archive}, &out, &err), 0) << err;
  EXPECT_NE(out.find("foo-tools (deb): 1.0-1 -> 2.0-1"), std::string::npos) << out;
  EXPECT_NE(out.find(a_digest + " -> " + b_digest), std::string::npos) << out;
}

TEST_F(CliInspect, ARegistryImageIsReadFromItsManifestAndConfigOnly) {
  Registry registry(Registry::Setup::plain);
  if (!registry.skip_reason().empty()) GTEST_SKIP() << registry.skip_reason();
  auto http = gpuenv::make_curl_http_client({});
  gpuenv::images::RegistryOptions ro;
  ro.plain_http = true;
  gpuenv::images::RegistryClient client(*http, ro);
  const auto ref = gpuenv::images::parse_image_reference(registry.host() + "/ml/demo:1.0");
  ASSERT_TRUE(ref.ok());
  const auto pushed = client.push((dir / "a").string(), *ref);
  ASSERT_TRUE(pushed.ok()) << pushed.error().to_string();
  const std::map<std::string, std::string> insecure = {{"GPUENV_INSECURE_REGISTRIES", "registry.example.com," + registry.host()}};
  const std::string image = "docker://" + registry.host() + "/ml/demo:1.0";
  EXPECT_EQ(model(image, insecure), model((dir / "a").string()));
  EXPECT_EQ(model("docker://" + registry.host() + "/ml/demo@" + a_digest, insecure)["digest"], a_digest);
  std::string out, err;
  ASSERT_EQ(inspect({image, "--plain-http", "--json"}, &out, &err), 0) << err;  // the flag instead of the variable
  // --diff from the registry image to a layout.
  ASSERT_EQ(inspect({image, "--diff", (dir / "b").string(), "--json"}, &out, &err, insecure), 0) << err;
  EXPECT_EQ(json::parse(out)["before"]["digest"], a_digest);
  // A tag that is not there, and the registry's HTTP spoken to as HTTPS: exit 4, saying what and where.
  EXPECT_EQ(inspect({"docker://" + registry.host() + "/ml/demo:9.9"}, &out, &err, insecure), 4);
  EXPECT_NE(err.find("registry.not_found"), std::string::npos) << err;
  EXPECT_NE(err.find("inspecting docker://"), std::string::npos) << err;
  EXPECT_EQ(inspect({image}, &out, &err), 4);
  EXPECT_NE(err.find("--plain-http"), std::string::npos) << err;
}

TEST_F(CliInspect, ARegistryThatIsDownIsAnEnvironmentError) {
  std::string out, err;
  EXPECT_EQ(inspect({"docker://127.0.0.1:1/ml/demo:1.0", "--plain-http"}, &out, &err), 4);
  EXPECT_NE(err.find("127.0.0.1:1"), std::string::npos) << err;
  EXPECT_NE(err.find("inspecting docker://127.0.0.1:1/ml/demo:1.0"), std::string::npos) << err;
  ASSERT_EQ(inspect({"docker://127.0.0.1:1/ml/demo:1.0", "--plain-http", "--json"}, &out, &err), 4);
  EXPECT_EQ(json::parse(out)["schema"], "gpuenv-error-v1") << out;
  // A reference without a registry host is a usage error.
  EXPECT_EQ(inspect({"docker://demo:1.0"}, &out, &err), 2);
  EXPECT_NE(err.find("registry.bad_reference"), std::string::npos) << err;
}

// Before: a Retry-After of 100000 s was cut to 60 s and waited out in silence, four times; then (issue 33, case 17)
// it was waited out three times, announced. A wait the request's deadline can hold is cut to the cap and announced;
// one it cannot hold is not waited for at all, and said once.
TEST_F(CliInspect, ARegistryThatAsksToWaitIsCappedAndOneThatAsksForeverIsNotWaitedFor) {
  fs::create_directories(dir / "slow-registry");
  gpuenv::testing::LoopbackServer server((dir / "slow-registry").string(), "fault=status=503&retry_after=30&times=1");
  ASSERT_GT(server.port(), 0);
  const std::string image = "docker://127.0.0.1:" + std::to_string(server.port()) + "/ml/demo:1.0";
  std::string out, err;
  EXPECT_EQ(inspect({image, "--plain-http"}, &out, &err, {{"GPUENV_RETRY_AFTER_CAP", "1s"}}), 4);  // then 404: no image there
  EXPECT_NE(err.find("gpuenv: GET http://127.0.0.1:" + std::to_string(server.port()) + "/v2/"), std::string::npos) << err;
  EXPECT_NE(err.find("HTTP 503, Retry-After 30 s cut to 1 s (GPUENV_RETRY_AFTER_CAP); retrying in 1 s (attempt 2 of 4)"), std::string::npos) << err;

  fs::create_directories(dir / "closed-registry");
  gpuenv::testing::LoopbackServer closed((dir / "closed-registry").string(), "fault=status=503&retry_after=100000&times=99");
  ASSERT_GT(closed.port(), 0);
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(inspect({"docker://127.0.0.1:" + std::to_string(closed.port()) + "/ml/demo:1.0", "--plain-http"}, &out, &err), 4);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(30)) << "the 60 s cap is not waited out";
  EXPECT_EQ(err.find("retrying in"), std::string::npos) << err;
  const auto said = err.find("Retry-After 100000 s, more than the");
  ASSERT_NE(said, std::string::npos) << err;
  EXPECT_NE(err.find("not waited for"), std::string::npos) << err;
  EXPECT_EQ(err.find("Retry-After 100000 s, more than the", said + 1), std::string::npos) << "said once: " << err;
}

TEST_F(CliInspect, ABadNetworkLimitIsAUsageErrorNamingItsVariable) {
  std::string out, err;
  EXPECT_EQ(inspect({"docker://127.0.0.1:1/ml/demo:1.0", "--plain-http"}, &out, &err, {{"GPUENV_NETWORK_BUDGET", "soon"}}), 2);
  EXPECT_NE(err.find("GPUENV_NETWORK_BUDGET"), std::string::npos) << err;
  EXPECT_NE(err.find("90s, 10m, 2h"), std::string::npos) << err;
}

TEST_F(CliInspect, FilesThatAreNotImagesAreUsageErrorsAndDamagedArchivesEnvironmentErrors) {
  std::string out, err;
  // A tar of something else.
  fs::create_directories(dir / "other");
  std::ofstream(dir / "other/notes.txt") << "not an image";
  ASSERT_TRUE(run_sh("cd " + (dir / "other").string() + " && tar -cf " + (dir / "other.tar").string() + " notes.txt"));
  EXPECT_EQ(inspect({(dir / "other.tar").string()}, &out, &err), 2);
  EXPECT_NE(err.find("neither oci-layout and index.json"), std::string::npos) << err;
  EXPECT_NE(err.find("inspect.bad_image"), std::string::npos) << err;
  // Not a tar at all.
  std::ofstream(dir / "plain.txt") << "hello, this is text and not a tar archive\n";
  EXPECT_EQ(inspect({(dir / "plain.txt").string()}, &out, &err), 2);
  EXPECT_NE(err.find("not a tar archive"), std::string::npos) << err;
  // Nothing there.
  EXPECT_EQ(inspect({(dir / "nothing-here").string()}, &out, &err), 2);
  EXPECT_NE(err.find("no such file or directory"), std::string::npos) << err;
  EXPECT_EQ(inspect({(dir / "other").string()}, &out, &err), 2);
  EXPECT_NE(err.find("not an OCI layout"), std::string::npos) << err;
  // Archives cut short, in a layer, in the middle and before index.json: damaged, exit 4.
  const std::string whole = read_all(archive("a", gpuenv::images::ArchiveFormat::oci, a_digest));
  const std::size_t index_header = whole.find("index.json");
  ASSERT_NE(index_header, std::string::npos);
  for (const std::size_t at : {whole.size() / 10, whole.size() / 2, whole.size() * 9 / 10, index_header}) {
    const std::string cut = (dir / "cut.tar").string();
    std::ofstream(cut, std::ios::binary | std::ios::trunc) << whole.substr(0, at);
    EXPECT_EQ(inspect({cut}, &out, &err), 4) << at << "\n" << err << out;
    EXPECT_NE(err.find("inspect.damaged_image"), std::string::npos) << at << "\n" << err;
    EXPECT_EQ(inspect({"oci-archive:" + cut, "--json"}, &out, &err), 4) << at;
    EXPECT_EQ(json::parse(out, nullptr, false).value("schema", ""), "gpuenv-error-v1") << out;
  }
  // A damaged archive on either side of --diff is the same error.
  EXPECT_EQ(inspect({(dir / "a").string(), "--diff", (dir / "cut.tar").string()}, &out, &err), 4);
}

}  // namespace
