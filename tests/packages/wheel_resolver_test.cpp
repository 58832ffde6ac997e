#include "packages/wheels/wheel_resolver.hpp"
#include "packages/wheels/remote_metadata.hpp"

#include <archive.h>
#include <archive_entry.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <openssl/evp.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <functional>
#include <limits>
#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "tests/fakes/fake_fetcher.hpp"

// Small simple-index pages (PEP 691 JSON and PEP 503 HTML), PEP 658 metadata files and wheels built in memory,
// served by FakeFetcher from example.com URLs.

namespace {

using gpuenv::ErrorKind;
using gpuenv::packages::PinnedWheel;
using gpuenv::packages::resolve_wheels;
using gpuenv::packages::WheelResolution;
using gpuenv::packages::WheelResolveRequest;
using gpuenv::testing::FakeFetcher;

constexpr const char* k_index = "https://example.com/simple";
constexpr const char* k_extra_index = "https://example.com/extra/simple";

std::string sha256_hex(const std::string& bytes) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  EVP_Digest(bytes.data(), bytes.size(), md, &n, EVP_sha256(), nullptr);
  static constexpr char k_hex[] = "0123456789abcdef";
  std::string out;
  for (unsigned int i = 0; i < n; ++i) {
    out += k_hex[md[i] >> 4];
    out += k_hex[md[i] & 0xf];
  }
  return out;
}

/// One file on a project page.
struct Dist {
  std::string filename;
  std::vector<std::string> requires_dist = {};
  std::vector<std::string> extras = {};  ///< Provides-Extra
  std::string requires_python = {};      ///< on the index page
  std::string metadata_requires_python = {};
  bool yanked = false;
  bool pep658 = true;
  bool hashed = true;
};

std::string dist_name(const Dist& d) { return d.filename.substr(0, d.filename.find('-')); }
std::string dist_version(const Dist& d) {
  const auto a = d.filename.find('-') + 1;
  const auto b = d.filename.find('-', a);
  std::string v = d.filename.substr(a, b == std::string::npos ? std::string::npos : b - a);
  if (b == std::string::npos) v = v.substr(0, v.find(".tar.gz"));
  return v;
}

std::string metadata_text(const Dist& d) {
  std::string out = "Metadata-Version: 2.1\nName: " + dist_name(d) + "\nVersion: " + dist_version(d) + "\n";
  if (!d.metadata_requires_python.empty()) out += "Requires-Python: " + d.metadata_requires_python + "\n";
  for (const auto& e : d.extras) out += "Provides-Extra: " + e + "\n";
  for (const auto& r : d.requires_dist) out += "Requires-Dist: " + r + "\n";
  return out + "\nA test project.\n";
}

std::string file_url(const std::string& filename) { return "https://example.com/files/" + filename; }
std::string fake_sha(const Dist& d) { return sha256_hex("wheel bytes of " + d.filename); }

/// Serves `dists` as the PEP 691 JSON page of `project` on `index`, with their metadata files.
void publish_json(FakeFetcher& f, const std::string& index, const std::string& project, const std::vector<Dist>& dists) {
  std::string files;
  for (const auto& d : dists) {
    const std::string md = metadata_text(d);
    if (!files.empty()) files += ",\n";
    files += R"({"filename": ")" + d.filename + R"(", "url": ")" + file_url(d.filename) + R"(", "hashes": {)" +
             (d.hashed ? R"("sha256": ")" + fake_sha(d) + R"(")" : std::string()) + "}, " +
             R"("size": )" + std::to_string(1000 + d.filename.size()) + ", " +
             R"("requires-python": )" + (d.requires_python.empty() ? "null" : "\"" + d.requires_python + "\"") +
             R"(, "yanked": )" + (d.yanked ? "\"broken\"" : "false") + R"(, "core-metadata": )" +
             (d.pep658 ? R"({"sha256": ")" + sha256_hex(md) + R"("})" : std::string("false")) + "}";
    if (d.pep658) f.files[file_url(d.filename) + ".metadata"] = md;
  }
  f.files[std::string(index) + "/" + project + "/"] =
      R"({"meta": {"api-version": "1.1"}, "name": ")" + project + R"(", "files": [)" + files + "]}";
}

/// Serves `dists` as the PEP 503 HTML page of `project` on `index` (hashes in #sha256= fragments).
void publish_html(FakeFetcher& f, const std::string& index, const std::string& project, const std::vector<Dist>& dists) {
  std::string page = "<!DOCTYPE html>\n<html><body><h1>Links for " + project + "</h1>\n";
  for (const auto& d : dists) {
    const std::string md = metadata_text(d);
    page += "<a href=\"" + file_url(d.filename) + (d.hashed ? "#sha256=" + fake_sha(d) : std::string()) + "\"";
    if (!d.requires_python.empty()) page += " data-requires-python=\"" + d.requires_python + "\"";
    if (d.yanked) page += " data-yanked=\"\"";
    if (d.pep658) {
      page += " data-core-metadata=\"sha256=" + sha256_hex(md) + "\"";
      f.files[file_url(d.filename) + ".metadata"] = md;
    }
    page += ">" + d.filename + "</a><br/>\n";
  }
  f.files[std::string(index) + "/" + project + "/"] = page + "</body></html>\n";
}

/// A wheel archive holding `name`-`version`.dist-info/METADATA with `metadata`.
std::string wheel_zip(const std::string& dist_info, const std::string& metadata) {
  archive* a = archive_write_new();
  archive_write_set_format_zip(a);
  std::vector<char> buf(1u << 20);
  std::size_t used = 0;
  archive_write_open_memory(a, buf.data(), buf.size(), &used);
  const std::vector<std::pair<std::string, std::string>> members = {
      {"demo/__init__.py", "print('hi')\n"}, {dist_info + "/METADATA", metadata}, {dist_info + "/WHEEL", "Wheel-Version: 1.0\n"}};
  for (const auto& [path, data] : members) {
    archive_entry* e = archive_entry_new();
    archive_entry_set_pathname(e, path.c_str());
    archive_entry_set_perm(e, 0644);
    archive_entry_set_filetype(e, AE_IFREG);
    archive_entry_set_size(e, static_cast<la_int64_t>(data.size()));
    archive_write_header(a, e);
    archive_write_data(a, data.data(), data.size());
    archive_entry_free(e);
  }
  archive_write_close(a);
  archive_write_free(a);
  return std::string(buf.data(), used);
}

WheelResolveRequest request(std::vector<std::string> requirements) {
  WheelResolveRequest r;
  r.requirements = std::move(requirements);
  r.indexes = {k_index};
  r.environment.python_version = "3.11";
  r.environment.python_full_version = "3.11.4";
  r.environment.os_name = "posix";
  r.environment.sys_platform = "linux";
  r.environment.platform_machine = "x86_64";
  r.environment.platform_system = "Linux";
  r.environment.implementation_name = "cpython";
  r.environment.implementation_version = "3.11.4";
  r.environment.platform_python_implementation = "CPython";
  return r;
}

WheelResolution resolve_ok(FakeFetcher& f, const WheelResolveRequest& r) {
  auto res = resolve_wheels(f, r);
  EXPECT_TRUE(res.ok()) << (res.ok() ? "" : res.error().to_string());
  return res.ok() ? *res : WheelResolution{};
}

/// "name==version" for every pin, in order.
std::vector<std::string> pins(const WheelResolution& res) {
  std::vector<std::string> out;
  for (const auto& w : res.wheels) out.push_back(w.name + "==" + w.version);
  return out;
}

const PinnedWheel* find(const WheelResolution& res, const std::string& name) {
  for (const auto& w : res.wheels) {
    if (w.name == name) return &w;
  }
  return nullptr;
}

using Strings = std::vector<std::string>;

TEST(WheelResolver, PinsTheRequestedVersionWithUrlHashSizeAndIndex) {
  FakeFetcher f;
  publish_json(f, k_index, "demo", {{"demo-1.0-py3-none-any.whl"}, {"demo-1.1-py3-none-any.whl"}});
  const auto res = resolve_ok(f, request({"demo==1.0"}));
  ASSERT_EQ(res.wheels.size(), 1U);
  const PinnedWheel& w = res.wheels[0];
  EXPECT_EQ(w.name, "demo");
  EXPECT_EQ(w.version, "1.0");
  EXPECT_EQ(w.filename, "demo-1.0-py3-none-any.whl");
  EXPECT_EQ(w.url, file_url("demo-1.0-py3-none-any.whl"));
  EXPECT_EQ(w.sha256.hex(), fake_sha({"demo-1.0-py3-none-any.whl"}));
  EXPECT_EQ(w.size, 1000U + w.filename.size());
  EXPECT_EQ(w.index, k_index);
  EXPECT_TRUE(w.requires_dist.empty());
}

TEST(WheelResolver, ChoosesTheNewestVersionTheSpecifierAllows) {
  FakeFetcher f;
  publish_json(f, k_index, "demo",
               {{"demo-1.0-py3-none-any.whl"}, {"demo-1.10-py3-none-any.whl"}, {"demo-1.9-py3-none-any.whl"}});
  EXPECT_EQ(pins(resolve_ok(f, request({"demo"}))), Strings{"demo==1.10"});
  EXPECT_EQ(pins(resolve_ok(f, request({"demo<1.10"}))), Strings{"demo==1.9"});
  EXPECT_EQ(pins(resolve_ok(f, request({"Demo~=1.0,!=1.10"}))), Strings{"demo==1.9"});
}

TEST(WheelResolver, PrefersTheBestTagAndSkipsVersionsWithoutACompatibleWheel) {
  FakeFetcher f;
  publish_json(f, k_index, "fast",
               {{"fast-2.0-py3-none-any.whl"},
                {"fast-2.0-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl"},
                {"fast-2.0-cp311-cp311-win_amd64.whl"},
                {"fast-2.0-cp312-cp312-manylinux_2_17_x86_64.whl"},
                {"fast-3.0-cp311-cp311-macosx_11_0_arm64.whl"},
                {"fast-3.0-cp311-cp311-manylinux_2_39_x86_64.whl"}});  // newer glibc than the target's 2.36
  const auto res = resolve_ok(f, request({"fast"}));
  ASSERT_EQ(res.wheels.size(), 1U);
  EXPECT_EQ(res.wheels[0].version, "2.0");
  EXPECT_EQ(res.wheels[0].filename, "fast-2.0-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl");
}

TEST(WheelResolver, FallsBackToAPureWheelWhenNoPlatformWheelFits) {
  FakeFetcher f;
  publish_json(f, k_index, "fast",
               {{"fast-2.0-cp311-cp311-win_amd64.whl"}, {"fast-2.0-py3-none-any.whl"}});
  auto r = request({"fast"});
  r.platform.arch = "aarch64";
  r.environment.platform_machine = "aarch64";
  const auto res = resolve_ok(f, r);
  ASSERT_EQ(res.wheels.size(), 1U);
  EXPECT_EQ(res.wheels[0].filename, "fast-2.0-py3-none-any.whl");
}

TEST(WheelResolver, SkipsVersionsWhoseRequiresPythonExcludesTheTarget) {
  FakeFetcher f;
  Dist index_says{"modern-3.0-py3-none-any.whl"};
  index_says.requires_python = ">=3.12";
  Dist metadata_says{"modern-2.0-py3-none-any.whl"};
  metadata_says.metadata_requires_python = ">=3.12";
  Dist fits{"modern-1.0-py3-none-any.whl"};
  fits.requires_python = ">=3.8";
  publish_json(f, k_index, "modern", {index_says, metadata_says, fits});
  EXPECT_EQ(pins(resolve_ok(f, request({"modern"}))), Strings{"modern==1.0"});

  auto err = resolve_wheels(f, request({"modern>=3"}));
  ASSERT_FALSE(err.ok());
  EXPECT_EQ(err.error().id, "wheel.no_match");
  EXPECT_NE(err.error().message.find("requires Python >=3.12"), std::string::npos) << err.error().message;
}

TEST(WheelResolver, IgnoresYankedFilesUnlessPinnedExactly) {
  FakeFetcher f;
  Dist yanked{"demo-2.0-py3-none-any.whl"};
  yanked.yanked = true;
  publish_json(f, k_index, "demo", {{"demo-1.0-py3-none-any.whl"}, yanked});
  EXPECT_EQ(pins(resolve_ok(f, request({"demo"}))), Strings{"demo==1.0"});
  EXPECT_EQ(pins(resolve_ok(f, request({"demo==2.0"}))), Strings{"demo==2.0"});
  EXPECT_EQ(pins(resolve_ok(f, request({"demo===2.0"}))), Strings{"demo==2.0"});

  auto err = resolve_wheels(f, request({"demo>=2"}));
  ASSERT_FALSE(err.ok());
  EXPECT_EQ(err.error().id, "wheel.no_match");
  EXPECT_NE(err.error().message.find("yanked"), std::string::npos) << err.error().message;
}

TEST(WheelResolver, ExcludesPreReleasesUnlessAllowedNamedOrTheOnlyOnes) {
  FakeFetcher f;
  publish_json(f, k_index, "demo", {{"demo-1.0-py3-none-any.whl"}, {"demo-2.0rc1-py3-none-any.whl"}});
  publish_json(f, k_index, "early", {{"early-0.1b1-py3-none-any.whl"}, {"early-0.1a1-py3-none-any.whl"}});
  EXPECT_EQ(pins(resolve_ok(f, request({"demo"}))), Strings{"demo==1.0"});
  EXPECT_EQ(pins(resolve_ok(f, request({"demo>=2.0rc1"}))), Strings{"demo==2.0rc1"});
  auto pre = request({"demo"});
  pre.allow_prereleases = true;
  EXPECT_EQ(pins(resolve_ok(f, pre)), Strings{"demo==2.0rc1"});
  EXPECT_EQ(pins(resolve_ok(f, request({"early"}))), Strings{"early==0.1b1"});
}

TEST(WheelResolver, ExtrasAddTheirDependencies) {
  FakeFetcher f;
  Dist app{"app-1.0-py3-none-any.whl"};
  app.extras = {"gpu"};
  app.requires_dist = {"core>=1", "cuda-lib>=12; extra == 'gpu'", "tool[fast]; extra == \"gpu\""};
  Dist tool{"tool-1.0-py3-none-any.whl"};
  tool.extras = {"fast"};
  tool.requires_dist = {"speedups; extra == 'fast'"};
  publish_json(f, k_index, "app", {app});
  publish_json(f, k_index, "core", {{"core-1.0-py3-none-any.whl"}});
  publish_json(f, k_index, "cuda-lib", {{"cuda_lib-12.1-py3-none-any.whl"}});
  publish_json(f, k_index, "tool", {tool});
  publish_json(f, k_index, "speedups", {{"speedups-0.5-py3-none-any.whl"}});

  EXPECT_EQ(pins(resolve_ok(f, request({"app"}))), (Strings{"app==1.0", "core==1.0"}));
  const auto res = resolve_ok(f, request({"App[GPU]"}));
  EXPECT_EQ(pins(res), (Strings{"app==1.0", "core==1.0", "cuda-lib==12.1", "speedups==0.5", "tool==1.0"}));
  const PinnedWheel* pinned_app = find(res, "app");
  ASSERT_NE(pinned_app, nullptr);
  EXPECT_EQ(pinned_app->requires_dist,
            (Strings{"core>=1", "cuda-lib>=12; extra == \"gpu\"", "tool[fast]; extra == \"gpu\""}));
}

TEST(WheelResolver, EvaluatesMarkersAgainstTheTargetEnvironment) {
  FakeFetcher f;
  Dist app{"app-1.0-py3-none-any.whl"};
  app.requires_dist = {"winlib; sys_platform == 'win32'", "linuxlib; sys_platform == 'linux'",
                       "backport; python_version < '3.9'"};
  publish_json(f, k_index, "app", {app});
  publish_json(f, k_index, "linuxlib", {{"linuxlib-1.0-py3-none-any.whl"}});
  // winlib and backport have no page at all: reaching for them would fail the resolution.
  const auto res = resolve_ok(f, request({"app", "winlib; sys_platform == 'win32'"}));
  EXPECT_EQ(pins(res), (Strings{"app==1.0", "linuxlib==1.0"}));
  EXPECT_EQ(find(res, "app")->requires_dist, Strings{"linuxlib; sys_platform == \"linux\""});
}

TEST(WheelResolver, TakesEachProjectFromTheFirstIndexThatHasIt) {
  FakeFetcher f;
  publish_json(f, k_index, "internal", {{"internal-1.0-py3-none-any.whl"}});
  // A same-named project with a higher version on the second index must not win (dependency confusion).
  publish_html(f, k_extra_index, "internal", {{"internal-99.0-py3-none-any.whl"}});
  publish_html(f, k_extra_index, "public", {{"public-2.0-py3-none-any.whl"}});
  auto r = request({"internal", "public"});
  r.indexes = {k_index, k_extra_index};
  const auto res = resolve_ok(f, r);
  EXPECT_EQ(pins(res), (Strings{"internal==1.0", "public==2.0"}));
  EXPECT_EQ(find(res, "internal")->index, k_index);
  EXPECT_EQ(find(res, "public")->index, k_extra_index);
  EXPECT_EQ(find(res, "public")->sha256.hex(), fake_sha({"public-2.0-py3-none-any.whl"}));
  EXPECT_EQ(std::count(f.requested.begin(), f.requested.end(), std::string(k_extra_index) + "/internal/"), 0);
}

TEST(WheelResolver, StopsWhenAnIndexFailsInsteadOfFallingThrough) {
  FakeFetcher f;
  publish_json(f, k_extra_index, "internal", {{"internal-99.0-py3-none-any.whl"}});
  f.failing.insert(std::string(k_index) + "/internal/");
  auto r = request({"internal"});
  r.indexes = {k_index, k_extra_index};
  auto res = resolve_wheels(f, r);
  ASSERT_FALSE(res.ok());
  EXPECT_EQ(res.error().id, "fetch.failed");
  EXPECT_EQ(res.error().kind, ErrorKind::environment);
}

TEST(WheelResolver, RefusesProjectsThatOfferOnlySourceDistributions) {
  FakeFetcher f;
  publish_json(f, k_index, "legacy", {{"legacy-1.0.tar.gz"}, {"legacy-1.1.tar.gz"}, {"legacy-0.9-py3-none-any.whl"}});
  auto res = resolve_wheels(f, request({"legacy>=1"}));
  ASSERT_FALSE(res.ok());
  EXPECT_EQ(res.error().id, "wheel.sdist_only");
  EXPECT_EQ(res.error().kind, ErrorKind::unsatisfiable);
  EXPECT_NE(res.error().message.find("only source distributions for legacy>=1"), std::string::npos) << res.error().message;
  EXPECT_NE(res.error().message.find("1.1, 1.0"), std::string::npos) << res.error().message;
  EXPECT_NE(res.error().hint.find("does not build"), std::string::npos);
  // Below the range there is a wheel, and it is taken.
  EXPECT_EQ(pins(resolve_ok(f, request({"legacy"}))), Strings{"legacy==0.9"});
}

TEST(WheelResolver, BacktracksWhenTheNewestVersionsDependencyConflicts) {
  FakeFetcher f;
  Dist top2{"top-2.0-py3-none-any.whl"};
  top2.requires_dist = {"mid>=2"};
  Dist top1{"top-1.0-py3-none-any.whl"};
  top1.requires_dist = {"mid<2"};
  Dist mid2{"mid-2.0-py3-none-any.whl"};
  mid2.requires_dist = {"base>=2"};
  Dist mid1{"mid-1.0-py3-none-any.whl"};
  mid1.requires_dist = {"base<2"};
  publish_json(f, k_index, "top", {top1, top2});
  publish_html(f, k_index, "mid", {mid1, mid2});
  publish_json(f, k_index, "base", {{"base-1.0-py3-none-any.whl"}, {"base-2.0-py3-none-any.whl"}});
  const auto res = resolve_ok(f, request({"top", "base<2"}));
  EXPECT_EQ(pins(res), (Strings{"base==1.0", "mid==1.0", "top==1.0"}));
  // Each page was fetched once although versions were tried and abandoned.
  for (const char* project : {"top", "mid", "base"}) {
    EXPECT_EQ(std::count(f.requested.begin(), f.requested.end(), std::string(k_index) + "/" + project + "/"), 1) << project;
  }
  // The same inputs give the same pins and the same log.
  FakeFetcher again = f;
  again.requested.clear();
  const auto res2 = resolve_ok(again, request({"top", "base<2"}));
  EXPECT_EQ(pins(res2), pins(res));
  EXPECT_EQ(res2.decisions, res.decisions);
}

TEST(WheelResolver, GivesUpAfterTheStepLimit) {
  FakeFetcher f;
  Dist app2{"app-2.0-py3-none-any.whl"};
  app2.requires_dist = {"lib<1"};
  publish_json(f, k_index, "app", {{"app-1.0-py3-none-any.whl"}, app2});
  publish_json(f, k_index, "lib", {{"lib-0.5-py3-none-any.whl"}, {"lib-2.0-py3-none-any.whl"}});
  EXPECT_EQ(pins(resolve_ok(f, request({"app", "lib>=2"}))), (Strings{"app==1.0", "lib==2.0"}));
  auto r = request({"app", "lib>=2"});
  r.max_steps = 2;
  auto res = resolve_wheels(f, r);
  ASSERT_FALSE(res.ok());
  EXPECT_EQ(res.error().id, "wheel.too_complex");
}

TEST(WheelResolver, NamesTheConflictingRequirementsAndWhoAskedForThem) {
  FakeFetcher f;
  Dist torch{"torch-2.5.1-cp311-cp311-manylinux1_x86_64.whl"};
  torch.requires_dist = {"numpy>=2", "filelock"};
  publish_json(f, k_index, "torch", {torch});
  publish_json(f, k_index, "numpy", {{"numpy-1.26.4-cp311-cp311-manylinux_2_17_x86_64.whl"},
                                     {"numpy-2.1.0-cp311-cp311-manylinux_2_17_x86_64.whl"}});
  publish_json(f, k_index, "filelock", {{"filelock-3.0-py3-none-any.whl"}});
  auto res = resolve_wheels(f, request({"torch==2.5.1", "numpy<2"}));
  ASSERT_FALSE(res.ok());
  EXPECT_EQ(res.error().kind, ErrorKind::unsatisfiable);
  EXPECT_EQ(res.error().id, "wheel.conflict");
  EXPECT_NE(res.error().message.find("torch 2.5.1 requires numpy>=2, but the spec asks numpy<2"), std::string::npos)
      << res.error().message;
  EXPECT_NE(res.error().message.find("2.1.0, 1.26.4"), std::string::npos) << res.error().message;
  EXPECT_FALSE(res.error().hint.empty());
}

TEST(WheelResolver, ReportsUnknownProjectsWithTheIndexesSearched) {
  FakeFetcher f;
  Dist app{"app-1.0-py3-none-any.whl"};
  app.requires_dist = {"ghost>=1"};
  publish_json(f, k_index, "app", {app});
  auto r = request({"app"});
  r.indexes = {k_index, k_extra_index};
  auto res = resolve_wheels(f, r);
  ASSERT_FALSE(res.ok());
  EXPECT_EQ(res.error().id, "wheel.not_found");
  EXPECT_NE(res.error().message.find("ghost (required by app 1.0)"), std::string::npos) << res.error().message;
  EXPECT_NE(res.error().message.find(k_index), std::string::npos);
  EXPECT_NE(res.error().message.find(k_extra_index), std::string::npos);
}

TEST(WheelResolver, ReadsMetadataFromTheWheelWhenTheIndexHasNoMetadataFile) {
  FakeFetcher f;
  const std::string filename = "demo_pkg-1.0-py3-none-any.whl";
  const std::string metadata = "Metadata-Version: 2.1\nName: demo-pkg\nVersion: 1.0\nRequires-Dist: core (>=1.0)\n\n";
  const std::string wheel = wheel_zip("demo_pkg-1.0.dist-info", metadata);
  f.files[file_url(filename)] = wheel;
  f.files[std::string(k_index) + "/demo-pkg/"] =
      "<a href=\"" + file_url(filename) + "#sha256=" + sha256_hex(wheel) + "\">" + filename + "</a>\n";
  publish_json(f, k_index, "core", {{"core-1.0-py3-none-any.whl"}});
  const auto res = resolve_ok(f, request({"demo-pkg"}));
  EXPECT_EQ(pins(res), (Strings{"core==1.0", "demo-pkg==1.0"}));
  EXPECT_EQ(find(res, "demo-pkg")->size, wheel.size());  // HTML pages give no size; the download does
  EXPECT_EQ(find(res, "demo-pkg")->requires_dist, Strings{"core>=1.0"});

  // Bytes that do not match the index's hash are refused.
  f.files[file_url(filename)] = wheel_zip("demo_pkg-1.0.dist-info", metadata + "tampered\n");
  auto bad = resolve_wheels(f, request({"demo-pkg"}));
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().id, "wheel.hash_mismatch");
}

TEST(WheelResolver, ReadsMetadataFromTheCachedWheelWhenGivenACache) {
  FakeFetcher f;
  const std::string filename = "demo_pkg-1.0-py3-none-any.whl";
  const std::string metadata = "Metadata-Version: 2.1\nName: demo-pkg\nVersion: 1.0\n\n";
  const std::string wheel = wheel_zip("demo_pkg-1.0.dist-info", metadata);
  f.files[file_url(filename)] = wheel;
  f.files[std::string(k_index) + "/demo-pkg/"] =
      "<a href=\"" + file_url(filename) + "#sha256=" + sha256_hex(wheel) + "\">" + filename + "</a>\n";
  const auto dir = std::filesystem::temp_directory_path() / ("gpuenv-wr-cache-" + std::to_string(::getpid()));
  auto cache = gpuenv::make_dir_blob_store(dir.string());
  auto req = request({"demo-pkg"});
  req.cache = cache.get();
  const auto res = resolve_ok(f, req);
  EXPECT_EQ(find(res, "demo-pkg")->size, wheel.size());
  auto cached = cache->find(gpuenv::Digest::of(wheel));
  ASSERT_TRUE(cached.ok());
  EXPECT_TRUE(cached->has_value());  // the wheel the build needs is already in the cache
  std::filesystem::remove_all(dir);
}

TEST(WheelResolver, ReadsMetadataWithRangeRequestsWhenTheIndexGivesTheSize) {
  FakeFetcher f;
  const std::string filename = "big_pkg-2.0-py3-none-any.whl";
  const std::string metadata = "Metadata-Version: 2.1\nName: big-pkg\nVersion: 2.0\nRequires-Dist: core (>=1.0)\n\n";
  const std::string wheel = wheel_zip("big_pkg-2.0.dist-info", metadata);
  f.files[file_url(filename)] = wheel;
  f.files[std::string(k_index) + "/big-pkg/"] = R"({"meta": {"api-version": "1.1"}, "name": "big-pkg", "files": [{"filename": ")" + filename +
                                                R"(", "url": ")" + file_url(filename) + R"(", "hashes": {"sha256": ")" + sha256_hex(wheel) +
                                                R"("}, "size": )" + std::to_string(wheel.size()) + "}]}";
  publish_json(f, k_index, "core", {{"core-1.0-py3-none-any.whl"}});
  const auto res = resolve_ok(f, request({"big-pkg"}));
  EXPECT_EQ(pins(res), (Strings{"big-pkg==2.0", "core==1.0"}));
  EXPECT_FALSE(f.ranges.empty());
  EXPECT_EQ(std::count(f.requested.begin(), f.requested.end(), file_url(filename)), 0);  // the wheel itself was never fetched

  // A server without ranges: the whole wheel is fetched instead.
  FakeFetcher g = f;
  g.ranges_supported = false;
  g.requested.clear();
  const auto again = resolve_ok(g, request({"big-pkg"}));
  EXPECT_EQ(pins(again), (Strings{"big-pkg==2.0", "core==1.0"}));
  EXPECT_EQ(std::count(g.requested.begin(), g.requested.end(), file_url(filename)), 1);
}

TEST(RemoteWheelMetadata, ReadsStoredAndDeflatedMembersAndRefusesGarbage) {
  FakeFetcher f;
  const std::string md = "Metadata-Version: 2.1\nName: demo\nVersion: 1.0\n\n" + std::string(5000, 'x') + "\n";
  f.files["https://example.com/w.whl"] = wheel_zip("demo-1.0.dist-info", md);
  auto r = gpuenv::packages::remote_wheel_metadata(f, "https://example.com/w.whl", f.files["https://example.com/w.whl"].size(), "demo");
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  EXPECT_EQ(*r, md);
  EXPECT_EQ(gpuenv::packages::remote_wheel_metadata(f, "https://example.com/w.whl", f.files["https://example.com/w.whl"].size(), "other").error().id,
            "wheel.remote_zip");
  f.files["https://example.com/junk.whl"] = std::string(5000, 'j');
  EXPECT_EQ(gpuenv::packages::remote_wheel_metadata(f, "https://example.com/junk.whl", 5000, "demo").error().id, "wheel.remote_zip");
}

// ---- ZIP64 wheels read with range requests ------------------------------------------------------------------

using gpuenv::packages::remote_wheel_metadata;

/// tests/data/zip64_demo-1.0-py3-none-any.whl, written by Python's zipfile in ZIP64 form (tests/data/gen_zip64_wheel.py).
std::string zip64_fixture() {
  std::ifstream in(std::string(GPUENV_SOURCE_DIR) + "/tests/data/zip64_demo-1.0-py3-none-any.whl", std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

/// The bytes of member `name` of the zip in `bytes`, read by libarchive's seekable zip reader (the oracle).
std::string zip_member(const std::string& bytes, const std::string& name) {
  std::unique_ptr<archive, decltype(&archive_read_free)> a(archive_read_new(), &archive_read_free);
  archive_read_support_format_zip_seekable(a.get());
  if (archive_read_open_memory(a.get(), bytes.data(), bytes.size()) != ARCHIVE_OK) return "<unreadable>";
  archive_entry* e = nullptr;
  while (archive_read_next_header(a.get(), &e) == ARCHIVE_OK) {
    if (archive_entry_pathname(e) != name) continue;
    std::string out(static_cast<std::size_t>(archive_entry_size(e)), '\0');
    if (archive_read_data(a.get(), out.data(), out.size()) != static_cast<la_ssize_t>(out.size())) return "<short>";
    return out;
  }
  return "<missing>";
}

std::uint64_t get_le(const std::string& s, std::size_t at, int bytes) {
  std::uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = v << 8 | static_cast<unsigned char>(s[at + static_cast<std::size_t>(i)]);
  return v;
}
void put_le(std::string& s, std::size_t at, std::uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) s[at + static_cast<std::size_t>(i)] = static_cast<char>(v >> (8 * i) & 0xFF);
}
void append_le(std::string& s, std::uint64_t v, int bytes) {
  s.append(static_cast<std::size_t>(bytes), '\0');
  put_le(s, s.size() - static_cast<std::size_t>(bytes), v, bytes);
}

std::uint32_t crc32(const std::string& data) {
  std::uint32_t crc = 0xFFFFFFFFu;
  for (char c : data) {
    crc ^= static_cast<unsigned char>(c);
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
  }
  return ~crc;
}

/// A ZIP64 wheel of stored members as a writer of huge archives lays it out: sizes and offsets only in ZIP64
/// extra fields, 0xFFFF/0xFFFFFFFF in the end record; where its records start, for tests that damage them.
struct Zip64Archive {
  std::string bytes;
  std::uint64_t base = 0;  ///< offset of bytes[0] in the file: everything before is zeros
  std::vector<std::size_t> entries;  ///< central directory entries, in bytes
  std::size_t cd = 0, record = 0, locator = 0, eocd = 0;
  /// Where the ZIP64 extra field (its 4-byte header) of directory entry i starts, in bytes.
  [[nodiscard]] std::size_t extra(std::size_t i) const { return entries[i] + 46 + get_le(bytes, entries[i] + 28, 2); }
};

/// Builds a Zip64Archive whose offsets start at `base` (a file that big is served sparsely), with
/// `record_padding` bytes of extensible data in the ZIP64 end record.
Zip64Archive zip64_archive(const std::vector<std::pair<std::string, std::string>>& members, std::uint64_t base,
                           std::size_t record_padding = 0) {
  Zip64Archive z;
  z.base = base;
  std::vector<std::uint64_t> offsets;
  for (const auto& [name, data] : members) {
    offsets.push_back(base + z.bytes.size());
    append_le(z.bytes, 0x04034b50u, 4);
    append_le(z.bytes, 45, 2);  // version needed: ZIP64
    append_le(z.bytes, 0, 2);   // flags
    append_le(z.bytes, 0, 2);   // stored
    append_le(z.bytes, 0, 4);   // time, date
    append_le(z.bytes, crc32(data), 4);
    append_le(z.bytes, 0xFFFFFFFFu, 4);
    append_le(z.bytes, 0xFFFFFFFFu, 4);
    append_le(z.bytes, name.size(), 2);
    append_le(z.bytes, 20, 2);
    z.bytes += name;
    append_le(z.bytes, 1, 2);
    append_le(z.bytes, 16, 2);
    append_le(z.bytes, data.size(), 8);
    append_le(z.bytes, data.size(), 8);
    z.bytes += data;
  }
  z.cd = z.bytes.size();
  for (std::size_t i = 0; i < members.size(); ++i) {
    const auto& [name, data] = members[i];
    z.entries.push_back(z.bytes.size());
    append_le(z.bytes, 0x02014b50u, 4);
    append_le(z.bytes, 0x031E, 2);  // made by: Unix, 3.0
    append_le(z.bytes, 45, 2);
    append_le(z.bytes, 0, 2);
    append_le(z.bytes, 0, 2);
    append_le(z.bytes, 0, 4);
    append_le(z.bytes, crc32(data), 4);
    append_le(z.bytes, 0xFFFFFFFFu, 4);  // compressed size
    append_le(z.bytes, 0xFFFFFFFFu, 4);  // size
    append_le(z.bytes, name.size(), 2);
    append_le(z.bytes, 28, 2);           // extra field length
    append_le(z.bytes, 0, 2);            // comment length
    append_le(z.bytes, 0, 2);            // disk
    append_le(z.bytes, 0, 2);            // internal attributes
    append_le(z.bytes, 0100644u << 16, 4);
    append_le(z.bytes, 0xFFFFFFFFu, 4);  // local header offset
    z.bytes += name;
    append_le(z.bytes, 1, 2);
    append_le(z.bytes, 24, 2);
    append_le(z.bytes, data.size(), 8);  // size, compressed size, offset: APPNOTE's order
    append_le(z.bytes, data.size(), 8);
    append_le(z.bytes, offsets[i], 8);
  }
  const std::size_t cd_size = z.bytes.size() - z.cd;
  z.record = z.bytes.size();
  append_le(z.bytes, 0x06064b50u, 4);
  append_le(z.bytes, 44 + record_padding, 8);
  append_le(z.bytes, 45, 2);
  append_le(z.bytes, 45, 2);
  append_le(z.bytes, 0, 4);
  append_le(z.bytes, 0, 4);
  append_le(z.bytes, members.size(), 8);
  append_le(z.bytes, members.size(), 8);
  append_le(z.bytes, cd_size, 8);
  append_le(z.bytes, base + z.cd, 8);
  z.bytes.append(record_padding, 'p');
  z.locator = z.bytes.size();
  append_le(z.bytes, 0x07064b50u, 4);
  append_le(z.bytes, 0, 4);
  append_le(z.bytes, base + z.record, 8);
  append_le(z.bytes, 1, 4);
  z.eocd = z.bytes.size();
  append_le(z.bytes, 0x06054b50u, 4);
  append_le(z.bytes, 0, 4);
  append_le(z.bytes, 0xFFFF, 2);
  append_le(z.bytes, 0xFFFF, 2);
  append_le(z.bytes, 0xFFFFFFFFu, 4);
  append_le(z.bytes, 0xFFFFFFFFu, 4);
  append_le(z.bytes, 0, 2);
  return z;
}

/// Serves one file of base + bytes.size() bytes, zeros up to `base`, by ranges only; remembers the requests and
/// refuses (and counts) any range longer than 65 MiB, which the reader must never ask for.
class SparseFetcher final : public gpuenv::Fetcher {
 public:
  std::uint64_t base = 0;
  std::string bytes;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> ranges;  ///< offset, length
  int huge_requests = 0;

  gpuenv::Result<std::string> get(const std::string& url, const std::string& = {}) override {
    return gpuenv::make_error(ErrorKind::environment, "fetch.failed", "only ranges are served here", url);
  }
  gpuenv::Result<std::string> get_range(const std::string& url, std::uint64_t offset, std::uint64_t length) override {
    ranges.emplace_back(offset, length);
    const std::uint64_t size = base + bytes.size();
    if (length > (65u << 20)) {
      ++huge_requests;
      return gpuenv::make_error(ErrorKind::environment, "fetch.failed", "range too long for this test", url);
    }
    if (offset >= size) return gpuenv::make_error(ErrorKind::environment, "fetch.http", "HTTP 416", url);
    length = std::min(length, size - offset);
    std::string out;
    if (offset < base) out.assign(static_cast<std::size_t>(std::min(length, base - offset)), '\0');
    const std::uint64_t from = std::max(offset, base) - base;
    out += bytes.substr(static_cast<std::size_t>(from), static_cast<std::size_t>(length - out.size()));
    return out;
  }
  std::vector<gpuenv::Result<gpuenv::FetchedFile>> fetch_all(const std::vector<gpuenv::FetchRequest>&) override {
    return {};
  }
};

constexpr const char* k_zip64_url = "https://example.com/files/zip64_demo-1.0-py3-none-any.whl";
constexpr const char* k_zip64_metadata = "zip64_demo-1.0.dist-info/METADATA";
constexpr std::uint64_t k_five_gib = 5ull << 30;

TEST(RemoteWheelMetadata, ReadsAZip64WheelWrittenByPythonsZipfile) {
  const std::string wheel = zip64_fixture();
  ASSERT_GT(wheel.size(), 200U) << "tests/data/zip64_demo-1.0-py3-none-any.whl is missing";
  ASSERT_NE(wheel.find(std::string("PK\x06\x07", 4)), std::string::npos);  // it has a ZIP64 locator
  const std::string expected = zip_member(wheel, k_zip64_metadata);
  ASSERT_NE(expected.find("Name: zip64-demo"), std::string::npos) << expected;
  FakeFetcher f;
  f.files[k_zip64_url] = wheel;
  auto md = remote_wheel_metadata(f, k_zip64_url, wheel.size(), "zip64-demo");
  ASSERT_TRUE(md.ok()) << md.error().to_string();
  EXPECT_EQ(*md, expected);  // deflated, its sizes and offset in the ZIP64 extra field
  EXPECT_TRUE(f.requested.empty());

  // zipfile writes the true small values in the classic end record; a writer of a >4 GiB archive writes
  // 0xFFFF/0xFFFFFFFF there and leaves them to the ZIP64 end record. Both read the same.
  std::string marked = wheel;
  const std::size_t eocd = marked.rfind(std::string("PK\x05\x06", 4));
  ASSERT_NE(eocd, std::string::npos);
  put_le(marked, eocd + 8, 0xFFFF, 2);
  put_le(marked, eocd + 10, 0xFFFF, 2);
  put_le(marked, eocd + 12, 0xFFFFFFFFu, 4);
  put_le(marked, eocd + 16, 0xFFFFFFFFu, 4);
  f.files[k_zip64_url] = marked;
  auto again = remote_wheel_metadata(f, k_zip64_url, marked.size(), "zip64-demo");
  ASSERT_TRUE(again.ok()) << again.error().to_string();
  EXPECT_EQ(*again, expected);
  EXPECT_EQ(zip_member(marked, k_zip64_metadata), expected);  // libarchive agrees that it is still a valid zip

  // Without the locator those marks lead nowhere.
  std::string orphan = marked;
  orphan[eocd - 20] = 'X';
  f.files[k_zip64_url] = orphan;
  auto bad = remote_wheel_metadata(f, k_zip64_url, orphan.size(), "zip64-demo");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().id, "wheel.remote_zip");
  EXPECT_NE(bad.error().message.find("no ZIP64 locator"), std::string::npos) << bad.error().message;
}

TEST(RemoteWheelMetadata, ReadsMembersPastFourGibibytes) {
  const std::string md = "Metadata-Version: 2.1\nName: huge\nVersion: 3.0\n\n";
  const auto z = zip64_archive({{"huge/__init__.py", "x = 1\n"}, {"huge-3.0.dist-info/METADATA", md}, {"huge-3.0.dist-info/WHEEL", "Wheel-Version: 1.0\n"}},
                               k_five_gib);
  SparseFetcher f;
  f.base = z.base;
  f.bytes = z.bytes;
  auto got = remote_wheel_metadata(f, k_zip64_url, z.base + z.bytes.size(), "huge");
  ASSERT_TRUE(got.ok()) << got.error().to_string();
  EXPECT_EQ(*got, md);
  ASSERT_EQ(f.ranges.size(), 2U);  // the tail (with every end record and the directory), then the member
  EXPECT_GT(f.ranges[1].first, 0xFFFFFFFFu);
  EXPECT_EQ(f.ranges[1].first, get_le(z.bytes, z.extra(1) + 20, 8));  // the offset from the ZIP64 extra field
}

TEST(RemoteWheelMetadata, FetchesAZip64EndRecordThatIsNotInTheTail) {
  const std::string md = "Metadata-Version: 2.1\nName: huge\nVersion: 3.0\n\n";
  // 70,000 bytes of extensible data push the ZIP64 end record (and the directory) out of the tail.
  const auto z = zip64_archive({{"huge-3.0.dist-info/METADATA", md}}, k_five_gib, 70000);
  SparseFetcher f;
  f.base = z.base;
  f.bytes = z.bytes;
  auto got = remote_wheel_metadata(f, k_zip64_url, z.base + z.bytes.size(), "huge");
  ASSERT_TRUE(got.ok()) << got.error().to_string();
  EXPECT_EQ(*got, md);
  ASSERT_EQ(f.ranges.size(), 4U);  // tail, ZIP64 end record, central directory, member
  EXPECT_EQ(f.ranges[1], (std::pair<std::uint64_t, std::uint64_t>{z.base + z.record, 56}));
  EXPECT_EQ(f.ranges[2].first, z.base + z.cd);
}

TEST(RemoteWheelMetadata, RefusesDamagedZip64RecordsWithoutHugeRequests) {
  const std::string md = "Metadata-Version: 2.1\nName: huge\nVersion: 3.0\n\n";
  const auto z = zip64_archive({{"huge/__init__.py", "x = 1\n"}, {"huge-3.0.dist-info/METADATA", md}}, k_five_gib);
  constexpr std::uint64_t k_max = std::numeric_limits<std::uint64_t>::max();
  const std::size_t meta = z.extra(1);  // the METADATA entry's ZIP64 extra field
  struct Damage {
    const char* what;
    std::function<void(std::string&)> apply;
    const char* says;
  };
  const std::vector<Damage> damages = {
      {"locator pointing at itself", [&](std::string& b) { put_le(b, z.locator + 8, z.base + z.locator, 8); }, "leaves no room"},
      {"locator pointing past the end", [&](std::string& b) { put_le(b, z.locator + 8, k_max - 3, 8); }, "leaves no room"},
      {"locator on another disk", [&](std::string& b) { put_le(b, z.locator + 16, 2, 4); }, "several disks"},
      {"no record where the locator points", [&](std::string& b) { b[z.record] = 'X'; }, "no ZIP64 end-of-central-directory record"},
      {"locator pointing into the directory", [&](std::string& b) { put_le(b, z.locator + 8, z.base + z.cd, 8); },
       "no ZIP64 end-of-central-directory record"},
      {"record longer than the space before the locator", [&](std::string& b) { put_le(b, z.record + 4, 1ull << 40, 8); }, "do not fit"},
      {"record on another disk", [&](std::string& b) { put_le(b, z.record + 20, 1, 4); }, "several disks"},
      {"directory larger than the file", [&](std::string& b) { put_le(b, z.record + 40, 1ull << 62, 8); }, "outside the file data"},
      {"directory offset that overflows", [&](std::string& b) { put_le(b, z.record + 48, k_max - 10, 8); }, "outside the file data"},
      {"directory over the limit", [&](std::string& b) {
         put_le(b, z.record + 40, 100u << 20, 8);
         put_le(b, z.record + 48, z.base + z.record - (100u << 20), 8);
       }, "more than the"},
      {"more entries than the directory holds", [&](std::string& b) {
         put_le(b, z.record + 24, 1ull << 40, 8);
         put_le(b, z.record + 32, 1ull << 40, 8);
       }, "entries, more than"},
      {"entry counts that disagree", [&](std::string& b) { put_le(b, z.record + 24, 7, 8); }, "entries on this disk"},
      {"no ZIP64 extra field", [&](std::string& b) { put_le(b, meta, 0x7075, 2); }, "has no ZIP64 extra field"},
      {"ZIP64 extra field too short", [&](std::string& b) { put_le(b, meta + 2, 16, 2); }, "too short"},
      {"extra field running past the entry", [&](std::string& b) { put_le(b, meta + 2, 200, 2); }, "truncated"},
      {"local header offset past the directory", [&](std::string& b) { put_le(b, meta + 20, 1ull << 63, 8); }, "does not fit before"},
      {"local header offset just before the directory", [&](std::string& b) { put_le(b, meta + 20, z.base + z.cd - 10, 8); },
       "does not fit before"},
      {"huge METADATA", [&](std::string& b) { put_le(b, meta + 4, 1ull << 40, 8); }, "implausibly large"},
      {"stored sizes that disagree", [&](std::string& b) { put_le(b, meta + 12, 5, 8); }, "stored METADATA"},
      {"entry name running past the directory", [&](std::string& b) { put_le(b, z.entries[1] + 28, 0xFFFF, 2); }, "truncated central directory"},
      {"bad entry signature", [&](std::string& b) { b[z.entries[0]] = 'X'; }, "bad central directory entry"},
  };
  for (const auto& d : damages) {
    SparseFetcher f;
    f.base = z.base;
    f.bytes = z.bytes;
    d.apply(f.bytes);
    auto got = remote_wheel_metadata(f, k_zip64_url, z.base + z.bytes.size(), "huge");
    ASSERT_FALSE(got.ok()) << d.what;
    EXPECT_EQ(got.error().id, "wheel.remote_zip") << d.what << ": " << got.error().to_string();
    EXPECT_NE(got.error().message.find(d.says), std::string::npos) << d.what << ": " << got.error().message;
    EXPECT_EQ(f.huge_requests, 0) << d.what;
  }
}

TEST(RemoteWheelMetadata, NeverCrashesOnDamagedOrTruncatedZip64Bytes) {
  const std::string wheel = zip64_fixture();
  ASSERT_GT(wheel.size(), 200U);
  const std::string expected = zip_member(wheel, k_zip64_metadata);
  FakeFetcher f;
  int read = 0;
  const auto check = [&](const std::string& bytes, std::uint64_t size, const std::string& what) {
    f.files[k_zip64_url] = bytes;
    auto got = remote_wheel_metadata(f, k_zip64_url, size, "zip64-demo");
    if (got.ok()) {
      ++read;  // a byte of a timestamp, an attribute or another member's data changes nothing
      EXPECT_EQ(*got, expected) << what;  // damaged METADATA is refused (libarchive checks the CRC), never misread
      return;
    }
    EXPECT_TRUE(got.error().id == "wheel.remote_zip" || got.error().id.rfind("fetch.", 0) == 0) << what << ": " << got.error().to_string();
  };
  for (std::size_t i = 0; i < wheel.size(); ++i) {
    for (unsigned char v : {0x00, 0xFF, 0x7F}) {
      std::string bytes = wheel;
      bytes[i] = static_cast<char>(v);
      check(bytes, bytes.size(), "byte " + std::to_string(i) + " set to " + std::to_string(v));
    }
  }
  for (std::size_t n = 0; n < wheel.size(); ++n) check(wheel.substr(0, n), n, "truncated to " + std::to_string(n));
  // A size from the index that does not match the file: refused, not misread.
  check(wheel, wheel.size() + 100, "size too large");
  EXPECT_GT(read, 0);
  f.files[k_zip64_url] = wheel;
  auto fine = remote_wheel_metadata(f, k_zip64_url, wheel.size(), "zip64-demo");
  ASSERT_TRUE(fine.ok());
  EXPECT_EQ(*fine, expected);
}

TEST(WheelResolver, ReadsMetadataOfAZip64WheelWithRangeRequests) {
  FakeFetcher f;
  const std::string wheel = zip64_fixture();
  const std::string filename = "zip64_demo-1.0-py3-none-any.whl";
  f.files[file_url(filename)] = wheel;
  f.files[std::string(k_index) + "/zip64-demo/"] = R"({"meta": {"api-version": "1.1"}, "name": "zip64-demo", "files": [{"filename": ")" +
                                                   filename + R"(", "url": ")" + file_url(filename) + R"(", "hashes": {"sha256": ")" +
                                                   sha256_hex(wheel) + R"("}, "size": )" + std::to_string(wheel.size()) + "}]}";
  publish_json(f, k_index, "core", {{"core-1.0-py3-none-any.whl"}});
  const auto res = resolve_ok(f, request({"zip64-demo"}));
  EXPECT_EQ(pins(res), (Strings{"core==1.0", "zip64-demo==1.0"}));
  EXPECT_EQ(std::count(f.requested.begin(), f.requested.end(), file_url(filename)), 0);  // never downloaded whole
}

TEST(WheelResolver, NeverFollowsLinksOtherThanHttpFromAWebIndex) {
  FakeFetcher f;
  const std::string good = "demo-1.0-py3-none-any.whl";
  const std::string md = metadata_text(Dist{good});
  f.files[file_url(good) + ".metadata"] = md;
  // Newer versions behind file: and ftp: links would win if they were followed.
  const std::string newer_md = metadata_text(Dist{"demo-3.0-py3-none-any.whl"});
  f.files["file:///etc/demo-3.0-py3-none-any.whl.metadata"] = newer_md;
  f.files["ftp://example.com/demo-2.0-py3-none-any.whl.metadata"] = metadata_text(Dist{"demo-2.0-py3-none-any.whl"});
  f.files[std::string(k_index) + "/demo/"] =
      "<a href=\"file:///etc/demo-3.0-py3-none-any.whl#sha256=" + sha256_hex("3") + "\" data-core-metadata=\"sha256=" +
      sha256_hex(newer_md) + "\">demo-3.0</a>\n"
      "<a href=\"ftp://example.com/demo-2.0-py3-none-any.whl#sha256=" + sha256_hex("2") + "\" data-core-metadata=\"true\">demo-2.0</a>\n"
      "<a href=\"" + file_url(good) + "#sha256=" + sha256_hex("1") + "\" data-core-metadata=\"sha256=" + sha256_hex(md) + "\">" + good + "</a>\n";
  const auto res = resolve_ok(f, request({"demo"}));
  EXPECT_EQ(pins(res), Strings{"demo==1.0"});
  for (const auto& url : f.requested) EXPECT_EQ(url.rfind("https://", 0), 0U) << url;
  EXPECT_TRUE(f.ranges.empty());
  EXPECT_EQ(std::count_if(res.decisions.begin(), res.decisions.end(),
                          [](const std::string& d) { return d.rfind("index: skipped", 0) == 0; }),
            2);
}

TEST(WheelResolver, FollowsFileLinksFromAFileIndex) {
  FakeFetcher f;
  const std::string name = "demo-1.0-py3-none-any.whl";
  const std::string md = metadata_text(Dist{name});
  f.files["file:///srv/files/" + name + ".metadata"] = md;
  f.files["file:///srv/simple/demo/"] = "<a href=\"../../files/" + name + "#sha256=" + sha256_hex("1") +
                                        "\" data-core-metadata=\"sha256=" + sha256_hex(md) + "\">" + name + "</a>\n";
  auto req = request({"demo"});
  req.indexes = {"file:///srv/simple"};
  const auto res = resolve_ok(f, req);
  ASSERT_EQ(pins(res), Strings{"demo==1.0"});
  EXPECT_EQ(res.wheels[0].url, "file:///srv/files/" + name);
}

TEST(WheelResolver, VerifiesTheMetadataFileAgainstItsHash) {
  FakeFetcher f;
  publish_json(f, k_index, "demo", {{"demo-1.0-py3-none-any.whl"}});
  f.files[file_url("demo-1.0-py3-none-any.whl") + ".metadata"] += "Requires-Dist: evil\n";
  auto res = resolve_wheels(f, request({"demo"}));
  ASSERT_FALSE(res.ok());
  EXPECT_EQ(res.error().id, "wheel.hash_mismatch");
}

TEST(WheelResolver, RefusesWheelsWithoutSha256) {
  FakeFetcher f;
  Dist unhashed{"demo-1.0-py3-none-any.whl"};
  unhashed.hashed = false;
  publish_json(f, k_index, "demo", {unhashed});
  auto res = resolve_wheels(f, request({"demo"}));
  ASSERT_FALSE(res.ok());
  EXPECT_EQ(res.error().id, "wheel.no_hash");
}

TEST(WheelResolver, RefusesMalformedAndUrlRequirements) {
  FakeFetcher f;
  auto bad = resolve_wheels(f, request({"demo >="}));
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().kind, ErrorKind::spec);
  auto url = resolve_wheels(f, request({"demo @ https://example.com/demo-1.0-py3-none-any.whl"}));
  ASSERT_FALSE(url.ok());
  EXPECT_EQ(url.error().id, "wheel.requirement");
  auto none = request({"demo"});
  none.indexes.clear();
  auto no_index = resolve_wheels(f, none);
  ASSERT_FALSE(no_index.ok());
  EXPECT_EQ(no_index.error().id, "wheel.no_index");
}

}  // namespace

// A project file's hashes, constraints and indexes (packages/wheels/project_file.hpp, through pin_image).
namespace project_inputs {

gpuenv::Digest digest_of(const Dist& d) { return *gpuenv::Digest::from_hex(fake_sha(d)); }

TEST(WheelResolverProject, HashesChooseAmongTheFilesTheProjectListsAndRefuseOthers) {
  FakeFetcher f;
  const Dist best{"fast-2.0-cp311-cp311-manylinux_2_17_x86_64.whl"}, pure{"fast-2.0-py3-none-any.whl"};
  publish_json(f, k_index, "fast", {best, pure});
  auto r = request({"fast==2.0"});
  r.allowed_hashes["fast"] = {digest_of(pure)};  // the file was made against the pure wheel only
  r.hashes_origin = "requirements.txt";
  const auto res = resolve_ok(f, r);
  ASSERT_EQ(res.wheels.size(), 1U);
  EXPECT_EQ(res.wheels[0].filename, pure.filename);
  r.allowed_hashes["fast"] = {*gpuenv::Digest::from_hex(sha256_hex("other bytes"))};
  auto bad = resolve_wheels(f, r);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().id, "wheel.hash_not_listed");
  EXPECT_NE(bad.error().hint.find("make the file again"), std::string::npos);
  EXPECT_NE(bad.error().message.find("fast"), std::string::npos);
  EXPECT_NE(bad.error().message.find("whose sha256 is one requirements.txt lists"), std::string::npos) << bad.error().message;
}

TEST(WheelResolverProject, HashModeRefusesADependencyTheFileDoesNotList) {
  FakeFetcher f;
  const Dist app{"app-1.0-py3-none-any.whl", {"dep>=1"}};
  publish_json(f, k_index, "app", {app});
  publish_json(f, k_index, "dep", {{"dep-1.0-py3-none-any.whl"}});
  auto r = request({"app==1.0"});
  r.requirement_origins = {"requirements.txt:1"};
  r.allowed_hashes["app"] = {digest_of(app)};
  r.require_hashes = true;
  r.hashes_origin = "requirements.txt";
  auto res = resolve_wheels(f, r);
  ASSERT_FALSE(res.ok());
  EXPECT_EQ(res.error().id, "wheel.hash_required");
  EXPECT_NE(res.error().message.find("dep (required by app 1.0)"), std::string::npos) << res.error().message;
  r.allowed_hashes["dep"] = {digest_of({"dep-1.0-py3-none-any.whl"})};
  EXPECT_EQ(pins(resolve_ok(f, r)), (Strings{"app==1.0", "dep==1.0"}));
}

TEST(WheelResolverProject, ConstraintsLimitVersionsAndAddNothing) {
  FakeFetcher f;
  publish_json(f, k_index, "app", {{"app-1.0-py3-none-any.whl", {"dep"}}});
  publish_json(f, k_index, "dep", {{"dep-1.0-py3-none-any.whl"}, {"dep-2.0-py3-none-any.whl"}});
  publish_json(f, k_index, "unused", {{"unused-1.0-py3-none-any.whl"}});
  auto r = request({"app"});
  r.version_constraints = {{"dep", "<2"}, {"unused", "==1.0"}};
  EXPECT_EQ(pins(resolve_ok(f, r)), (Strings{"app==1.0", "dep==1.0"}));
  r.version_constraints = {{"dep", ">3"}};
  auto res = resolve_wheels(f, r);
  ASSERT_FALSE(res.ok());
  EXPECT_NE(res.error().message.find("outside the constraint >3"), std::string::npos) << res.error().message;
}

TEST(WheelResolverProject, APackagesOwnIndexIsTheOnlyOneAsked) {
  FakeFetcher f;
  publish_json(f, k_index, "torch", {{"torch-9.0-py3-none-any.whl"}});
  publish_json(f, k_extra_index, "torch", {{"torch-2.0-py3-none-any.whl"}});
  auto r = request({"torch"});
  r.project_indexes["torch"] = k_extra_index;
  const auto res = resolve_ok(f, r);
  EXPECT_EQ(pins(res), Strings{"torch==2.0"});
  EXPECT_EQ(std::count(f.requested.begin(), f.requested.end(), std::string(k_index) + "/torch/"), 0);
}

}  // namespace project_inputs
