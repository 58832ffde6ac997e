// `gpuenv lock` in process, through the real adapters (curl fetcher, gpgv, cache) against a signed apt
// repository and a simple index served on 127.0.0.1: the lock, its determinism and --offline.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "cli/context.hpp"
#include "fakes/loopback_server.hpp"
#include "fakes/scratch.hpp"
#include "base/digest.hpp"
#include "base/net/curl_fetcher.hpp"

namespace {

namespace fs = std::filesystem;

bool sh(const std::string& cmd) { return std::system(cmd.c_str()) == 0; }

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

class CliLock : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!sh("command -v gpg >/dev/null && command -v gpgv >/dev/null && command -v dpkg-deb >/dev/null && command -v dpkg-scanpackages >/dev/null")) return;
    dir = fs::temp_directory_path() / ("gpuenv-clilock-" + std::to_string(::getpid()));
    const fs::path www = dir / "www";
    fs::create_directories(dir / "gnupg");
    fs::permissions(dir / "gnupg", fs::perms::owner_all);
    const std::string gpg = "GNUPGHOME=" + (dir / "gnupg").string() + " gpg --batch --quiet --passphrase '' ";
    bool ok = sh(gpg + "--quick-gen-key 'repo <r@example.com>' ed25519 sign never 2>/dev/null") && sh(gpg + "--export > " + (dir / "repo.gpg").string());
    // Debian packages: a required one, python3 and its library, and one the spec asks for.
    fs::create_directories(www / "debian/pool");
    auto deb = [&](const std::string& name, const std::string& version, const std::string& extra) {
      const fs::path pkg = dir / "build" / name;
      fs::create_directories(pkg / "DEBIAN");
      fs::create_directories(pkg / "usr/share" / name);
      std::ofstream(pkg / "DEBIAN/control") << "Package: " << name << "\nVersion: " << version << "\nArchitecture: amd64\n" << extra
                                            << "Maintainer: t <t@example.com>\nDescription: test\n";
      std::ofstream(pkg / "usr/share" / name / "file") << name;
      return sh("dpkg-deb --root-owner-group --build " + pkg.string() + " " + (www / "debian/pool" / (name + ".deb")).string() + " >/dev/null");
    };
    ok = ok && deb("base-files", "12.4", "Priority: required\nEssential: yes\n") && deb("libpython3.11", "3.11.2-6", "") &&
         deb("python3", "3.11.2-1", "Depends: libpython3.11\n") && deb("curl", "7.88.1-10", "");
    const fs::path dists = www / "debian/dists/bookworm";
    fs::create_directories(dists / "main/binary-amd64");
    ok = ok && sh("cd " + (www / "debian").string() + " && dpkg-scanpackages pool /dev/null 2>/dev/null > " + (dists / "main/binary-amd64/Packages").string());
    const std::string packages = slurp(dists / "main/binary-amd64/Packages");
    std::ofstream(dists / "Release") << "Origin: test\nSuite: bookworm\nCodename: bookworm\nDate: Mon, 30 Nov 2026 00:00:00 UTC\n"
                                        "Architectures: amd64\nComponents: main\nSHA256:\n "
                                     << gpuenv::sha256_hex(packages) << " " << packages.size() << " main/binary-amd64/Packages\n";
    ok = ok && sh(gpg + "--clearsign -o " + (dists / "InRelease").string() + " " + (dists / "Release").string());
    // Wheels: torch (the default variant of 2.5.1 on the main index) needing numpy.
    auto wheel = [&](const std::string& project, const std::string& version, const std::string& filename, const std::string& requires_dist) {
      const std::string body = "wheel " + filename;
      const std::string md = "Metadata-Version: 2.1\nName: " + project + "\nVersion: " + version + "\n" + requires_dist;
      fs::create_directories(www / "files");
      fs::create_directories(www / "simple" / project);
      std::ofstream(www / "files" / filename, std::ios::binary) << body;
      std::ofstream(www / "files" / (filename + ".metadata"), std::ios::binary) << md;
      std::ofstream(www / "simple" / project / "index.json")
          << R"({"meta": {"api-version": "1.1"}, "name": ")" << project << R"(", "files": [{"filename": ")" << filename
          << R"(", "url": "../../files/)" << filename << R"(", "hashes": {"sha256": ")" << gpuenv::sha256_hex(body)
          << R"("}, "core-metadata": {"sha256": ")" << gpuenv::sha256_hex(md) << R"("}, "size": )" << body.size() << "}]}";
    };
    wheel("torch", "2.5.1", "torch-2.5.1-cp311-cp311-manylinux1_x86_64.whl", "Requires-Dist: numpy\n");
    wheel("numpy", "2.1.3", "numpy-2.1.3-cp311-cp311-manylinux_2_17_x86_64.whl", "");
    ready = ok;
  }
  static void TearDownTestSuite() {
    gpuenv::testing::remove_scratch(dir, dir / "gnupg");
  }

  void SetUp() override {
    if (!ready) GTEST_SKIP() << "gpg, gpgv, dpkg-deb or dpkg-scanpackages missing";
    server = std::make_unique<gpuenv::testing::LoopbackServer>((dir / "www").string());
    ASSERT_GT(server->port(), 0);
    spec = (dir / ("spec-" + std::to_string(server->port()) + ".yaml")).string();
    std::ofstream(spec) << "name: locked\nbase: debian:12\nframeworks: {torch: '2.5.1'}\n"
                           "gpu: {models: [H100], driver: '550.54.15'}\npackages: {apt: [curl]}\n"
                           "sources:\n  apt:\n    - {uri: '" << server->url("debian") << "', suite: bookworm, components: [main], signed_by: '"
                        << (dir / "repo.gpg").string() << "'}\n  pip:\n    index_url: '" << server->url("simple") << "'\n";
  }

  int lock(std::vector<std::string> extra, const std::string& cache, std::string* out = nullptr) {
    std::ostringstream o, e;
    gpuenv::cli::Context ctx;
    ctx.out = &o;
    ctx.err = &e;
    ctx.env = {{"GPUENV_CACHE_DIR", cache}, {"HOME", dir.string()}, {"GPUENV_CONFIG", (dir / "no-config.yaml").string()}};
    ctx.make_runner = [] { return gpuenv::make_process_runner(); };
    ctx.make_fetcher = [](const gpuenv::NetLimits& limits) {  // the limits the command read from its environment
      gpuenv::FetchOptions options;
      options.limits = limits;
      options.max_attempts = 2;
      return gpuenv::make_curl_fetcher(options);
    };
    std::vector<std::string> args = {"lock", spec, "--host-root", dir.string()};
    args.insert(args.end(), extra.begin(), extra.end());
    const int code = gpuenv::cli::run(args, ctx);
    if (out) *out = o.str();
    if (code != 0) ADD_FAILURE() << e.str() << o.str();
    return code;
  }

  static inline fs::path dir;
  static inline bool ready = false;
  std::unique_ptr<gpuenv::testing::LoopbackServer> server;
  std::string spec;
};

TEST_F(CliLock, PinsDebsAndWheelsDeterministicallyAndOffline) {
  const std::string cache = (dir / "cache").string();
  std::string json;
  ASSERT_EQ(lock({"-o", (dir / "a.lock").string(), "--json"}, cache, &json), 0);
  const auto j = nlohmann::json::parse(json);
  std::vector<std::string> names;
  for (const auto& p : j["packages"]) names.push_back(p["kind"].get<std::string>() + ":" + p["name"].get<std::string>());
  EXPECT_EQ(names, (std::vector<std::string>{"deb:base-files", "deb:curl", "deb:libpython3.11", "deb:python3", "wheel:numpy", "wheel:torch"}));
  EXPECT_EQ(j["wheel_requirements"], nlohmann::json::array({"torch==2.5.1"}));
  ASSERT_EQ(lock({"-o", (dir / "b.lock").string()}, cache), 0);
  EXPECT_EQ(slurp(dir / "a.lock"), slurp(dir / "b.lock"));
  server.reset();  // nothing is served any more: --offline must answer from the cache alone
  ASSERT_EQ(lock({"-o", (dir / "c.lock").string(), "--offline"}, cache), 0);
  EXPECT_EQ(slurp(dir / "a.lock"), slurp(dir / "c.lock"));
  const std::string text = slurp(dir / "a.lock");
  EXPECT_NE(text.find("kind: \"deb\""), std::string::npos);
  EXPECT_NE(text.find("name: \"torch\", version: \"2.5.1\", kind: \"wheel\""), std::string::npos);
}

TEST_F(CliLock, OfflineWithAnEmptyCacheNamesWhatIsMissing) {
  std::ostringstream o, e;
  gpuenv::cli::Context ctx;
  ctx.out = &o;
  ctx.err = &e;
  ctx.env = {{"GPUENV_CACHE_DIR", (dir / "empty-cache").string()}, {"HOME", dir.string()}, {"GPUENV_CONFIG", (dir / "none.yaml").string()}};
  ctx.make_runner = [] { return gpuenv::make_process_runner(); };
  const int code = gpuenv::cli::run({"lock", spec, "--offline", "-o", (dir / "x.lock").string(), "--host-root", dir.string()}, ctx);
  EXPECT_EQ(code, 4);
  EXPECT_NE(e.str().find("cache.offline_miss"), std::string::npos) << e.str();
  EXPECT_FALSE(fs::exists(dir / "x.lock"));
}

}  // namespace
