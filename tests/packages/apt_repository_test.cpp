// A signed apt repository made by the test (dpkg-deb, dpkg-scanpackages, xz, gpg) served on 127.0.0.1 by the
// fault server, fetched with the real fetcher, cache and gpgv.
#include "packages/apt/repository.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "base/digest.hpp"
#include "fakes/loopback_server.hpp"
#include "fakes/scratch.hpp"
#include "packages/apt/pin.hpp"
#include "base/net/curl_fetcher.hpp"

namespace {

namespace fs = std::filesystem;
using namespace gpuenv;
using namespace gpuenv::packages;

std::string read(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::string sha(const std::string& s) { return gpuenv::sha256_hex(s); }

bool sh(const std::string& cmd) { return std::system(cmd.c_str()) == 0; }

class AptRepository : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!sh("command -v gpg >/dev/null && command -v gpgv >/dev/null && command -v dpkg-deb >/dev/null && command -v dpkg-scanpackages >/dev/null && command -v xz >/dev/null")) return;
    dir = fs::temp_directory_path() / ("gpuenv-aptrepo-" + std::to_string(::getpid()));
    fs::create_directories(dir / "gnupg");
    fs::permissions(dir / "gnupg", fs::perms::owner_all);
    gpg = "GNUPGHOME=" + (dir / "gnupg").string() + " gpg --batch --quiet --passphrase '' ";
    ready = sh(gpg + "--quick-gen-key 'repo <r@example.com>' ed25519 sign never 2>/dev/null") &&
            sh(gpg + "--export > " + (dir / "repo.gpg").string()) &&
            sh(gpg + "--quick-gen-key 'other <o@example.com>' ed25519 sign never 2>/dev/null") &&
            sh(gpg + "--export other > " + (dir / "other.gpg").string());
    // One package.
    const fs::path pkg = dir / "build/hello";
    fs::create_directories(pkg / "DEBIAN");
    fs::create_directories(pkg / "usr/bin");
    std::ofstream(pkg / "DEBIAN/control") << "Package: hello\nVersion: 1.0-1\nArchitecture: amd64\nMaintainer: t <t@example.com>\nDepends: libc6 (>= 2.34)\nDescription: test\n";
    std::ofstream(pkg / "usr/bin/hello") << "#!/bin/sh\necho hello\n";
    fs::create_directories(dir / "www/pool/main");
    ready = ready && sh("dpkg-deb --root-owner-group --build " + pkg.string() + " " + (dir / "www/pool/main/hello_1.0-1_amd64.deb").string() + " >/dev/null");
    const fs::path libc = dir / "build/libc6";
    fs::create_directories(libc / "DEBIAN");
    fs::create_directories(libc / "usr/lib");
    std::ofstream(libc / "DEBIAN/control") << "Package: libc6\nVersion: 2.36-9\nArchitecture: amd64\nMaintainer: t <t@example.com>\nPriority: optional\nDescription: test\n";
    std::ofstream(libc / "usr/lib/libc.so.6") << "not really";
    ready = ready && sh("dpkg-deb --root-owner-group --build " + libc.string() + " " + (dir / "www/pool/main/libc6_2.36-9_amd64.deb").string() + " >/dev/null");
    ready = ready && make_suite("test", "now + 1 day") && make_suite("old", "2001-01-01");
    // A flat repository (deb URI /) and an unsigned one.
    ready = ready && sh("cd " + (dir / "www").string() + " && mkdir -p flat unsigned && dpkg-scanpackages pool /dev/null 2>/dev/null > flat/Packages && xz -k flat/Packages && cp flat/Packages* unsigned/");
    ready = ready && write_release(dir / "www/flat", "flat", "", {"Packages", "Packages.xz"}, "now + 1 day") &&
            sh(gpg + "--clearsign -o " + (dir / "www/flat/InRelease").string() + " " + (dir / "www/flat/Release").string());
    ready = ready && write_release(dir / "www/unsigned", "unsigned", "", {"Packages", "Packages.xz"}, "now + 1 day");
  }

  static bool write_release(const fs::path& d, const std::string& suite, const std::string& prefix, const std::vector<std::string>& files,
                            const std::string& valid_until) {
    std::string r = "Origin: gpuenv-test\nSuite: " + suite + "\nCodename: " + suite + "\nDate: Mon, 30 Nov 2026 00:00:00 UTC\n";
    FILE* p = popen(("date -u -R -d '" + valid_until + "'").c_str(), "r");
    char buf[64] = {};
    if (!p || !fgets(buf, sizeof buf, p)) return false;
    pclose(p);
    std::string until(buf);
    until.pop_back();
    r += "Valid-Until: " + until + "\nArchitectures: amd64\nComponents: main\nSHA256:\n";
    for (const auto& f : files) {
      const std::string body = read(d / prefix / f);
      r += " " + sha(body) + " " + std::to_string(body.size()) + " " + prefix + f + "\n";
    }
    std::ofstream(d / "Release") << r;
    return true;
  }

  static bool make_suite(const std::string& suite, const std::string& valid_until) {
    const fs::path d = dir / "www/dists" / suite;
    fs::create_directories(d / "main/binary-amd64");
    return sh("cd " + (dir / "www").string() + " && dpkg-scanpackages pool /dev/null 2>/dev/null > " + (d / "main/binary-amd64/Packages").string()) &&
           sh("xz -k " + (d / "main/binary-amd64/Packages").string()) &&
           write_release(d, suite, "main/binary-amd64/", {"Packages", "Packages.xz"}, valid_until) &&
           sh(gpg + "--clearsign -o " + (d / "InRelease").string() + " " + (d / "Release").string());
  }

  static void TearDownTestSuite() {
    gpuenv::testing::remove_scratch(dir, dir / "gnupg");
  }

  void SetUp() override {
    if (!ready) GTEST_SKIP() << "gpg, gpgv, dpkg-deb, dpkg-scanpackages or xz missing";
    server = std::make_unique<gpuenv::testing::LoopbackServer>((dir / "www").string());
    ASSERT_GT(server->port(), 0);
    FetchOptions o;
    o.backoff_base = std::chrono::milliseconds(10);
    o.max_attempts = 2;
    fetcher = make_curl_fetcher(o);
    cache_dir = dir / ("cache-" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    cache = make_dir_blob_store(cache_dir.string());
    runner = make_process_runner();
    fs::create_directories(dir / "work");
    ctx.fetcher = fetcher.get();
    ctx.cache = cache.get();
    ctx.runner = runner.get();
    ctx.work_dir = (dir / "work").string();
    ctx.now_unix = std::time(nullptr);
  }

  AptSource source(const std::string& suite, const std::string& keyring, bool flat = false) {
    AptSource s;
    s.uri = server->url("");
    s.suite = flat ? suite + "/" : suite;
    if (!flat) s.components = {"main"};
    if (!keyring.empty()) s.signed_by = {(dir / keyring).string()};
    s.where = "test.sources:1";
    return s;
  }

  static inline fs::path dir;
  static inline std::string gpg;
  static inline bool ready = false;
  std::unique_ptr<gpuenv::testing::LoopbackServer> server;
  std::unique_ptr<Fetcher> fetcher;
  fs::path cache_dir;
  std::unique_ptr<BlobStore> cache;
  std::unique_ptr<CommandRunner> runner;
  AptFetchContext ctx;
};

TEST_F(AptRepository, FetchesVerifiedPackages) {
  auto r = fetch_repository(source("test", "repo.gpg"), ctx);
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  EXPECT_EQ(r->release.codename, "test");
  EXPECT_EQ(r->signed_by.size(), 40u);
  ASSERT_EQ(r->packages.size(), 1u);
  EXPECT_NE(r->packages[0].text.find("Package: hello"), std::string::npos);
  EXPECT_NE(r->packages[0].url.find("Packages.xz"), std::string::npos);  // the compressed form was preferred
  auto again = fetch_repository(source("test", "repo.gpg"), ctx);  // the second time from the cache
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(cache->list()->size(), 1u);
}

TEST_F(AptRepository, FlatRepositories) {
  auto r = fetch_repository(source("flat", "repo.gpg", true), ctx);
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  EXPECT_NE(r->packages[0].text.find("Package: hello"), std::string::npos);
}

TEST_F(AptRepository, RefusesAnotherKey) {
  auto r = fetch_repository(source("test", "other.gpg"), ctx);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().id, "apt.bad_signature");
}

TEST_F(AptRepository, RefusesUnsignedUnlessTrusted) {
  auto s = source("unsigned", "repo.gpg", true);
  auto r = fetch_repository(s, ctx);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().id, "apt.unsigned");
  s.trusted = true;
  auto t = fetch_repository(s, ctx);
  ASSERT_TRUE(t.ok()) << t.error().to_string();
  EXPECT_TRUE(t->signed_by.empty());
}

TEST_F(AptRepository, RefusesAnExpiredRelease) {
  auto r = fetch_repository(source("old", "repo.gpg"), ctx);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().id, "apt.expired");
}

TEST_F(AptRepository, PackagesNotMatchingTheReleaseNeverEnterTheCache) {
  const fs::path xz = dir / "www/dists/test/main/binary-amd64/Packages.xz";
  const std::string good = read(xz);
  std::ofstream(xz, std::ios::binary) << good.substr(0, good.size() - 1) << 'X';
  auto r = fetch_repository(source("test", "repo.gpg"), ctx);
  std::ofstream(xz, std::ios::binary) << good;
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().id, "fetch.hash_mismatch");
  EXPECT_TRUE(cache->list()->empty());
}

TEST_F(AptRepository, PinsTheClosureWithUrlsAndHashes) {
  AptUniverseRequest u;
  u.sources = {source("test", "repo.gpg")};
  u.codename = "test";
  auto universe = open_apt_universe(u, ctx);
  ASSERT_TRUE(universe.ok()) << universe.error().to_string();
  AptPinRequest req;
  req.packages = {"hello"};
  req.required_set = false;
  auto r = pin_apt(*universe, req);
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  ASSERT_EQ(r->packages.size(), 2u);
  EXPECT_EQ(r->packages[0].name, "hello");
  EXPECT_EQ(r->packages[1].name, "libc6");
  EXPECT_EQ(r->packages[1].version, "2.36-9");
  for (const auto& p : r->packages) {
    EXPECT_EQ(p.kind, gpuenv::resolver::PackageKind::deb);
    const std::string file = read(dir / "www" / p.url.substr(server->url("").size()));
    EXPECT_EQ(sha(file), p.sha256.hex()) << p.url;
    EXPECT_EQ(file.size(), p.size);
  }
}

TEST_F(AptRepository, PinningNamesMissingDependenciesAndForeignReleases) {
  AptUniverseRequest u;
  u.sources = {source("test", "repo.gpg")};
  u.codename = "test";
  auto universe = open_apt_universe(u, ctx);
  ASSERT_TRUE(universe.ok()) << universe.error().to_string();
  AptPinRequest req;
  req.packages = {"hello", "no-such-package"};
  req.required_set = false;
  auto r = pin_apt(*universe, req);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().kind, gpuenv::ErrorKind::unsatisfiable);
  u.codename = "bookworm";
  auto other = open_apt_universe(u, ctx);
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.error().id, "apt.no_sources");
}

TEST_F(AptRepository, MissingComponentIsNamed) {
  auto s = source("test", "repo.gpg");
  s.components = {"contrib"};
  auto r = fetch_repository(s, ctx);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().id, "apt.missing_index");
}

}  // namespace
