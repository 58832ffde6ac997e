// `gpuenv lock` in process, through the real adapters (curl fetcher, gpgv, cache) against a signed apt
// repository and a simple index served on 127.0.0.1: the lock, its determinism and --offline.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "cli/context.hpp"
#include "fakes/loopback_server.hpp"
#include "fakes/scratch.hpp"
#include "base/digest.hpp"
#include "base/net/curl_fetcher.hpp"
#include "base/process/command_runner.hpp"
#include "fakes/files.hpp"

namespace {

namespace fs = std::filesystem;

bool run_lock_sh(const std::string& cmd) { return std::system(cmd.c_str()) == 0; }

using gpuenv::testing::read_all;

/// What one lock asked of the network and of gpgv: a double of each port that hands every call to the real adapter.
struct Asked {
  std::vector<std::string> urls;  ///< every get() and every file fetched
  int gpgv = 0;                   ///< signature checks run
};

class CountingFetcher : public gpuenv::Fetcher {
 public:
  CountingFetcher(std::unique_ptr<gpuenv::Fetcher> real, Asked& asked) : m_real(std::move(real)), m_asked(asked) {}
  gpuenv::Result<std::string> get(const std::string& url, const std::string& accept) override {
    m_asked.urls.push_back(url);
    return m_real->get(url, accept);
  }
  gpuenv::Result<std::string> get_range(const std::string& url, std::uint64_t offset, std::uint64_t length) override {
    m_asked.urls.push_back(url);
    return m_real->get_range(url, offset, length);
  }
  std::vector<gpuenv::Result<gpuenv::FetchedFile>> fetch_all(const std::vector<gpuenv::FetchRequest>& requests) override {
    for (const auto& r : requests) m_asked.urls.push_back(r.url);
    return m_real->fetch_all(requests);
  }

 private:
  std::unique_ptr<gpuenv::Fetcher> m_real;
  Asked& m_asked;
};

class CountingRunner : public gpuenv::CommandRunner {
 public:
  explicit CountingRunner(Asked& asked) : m_real(gpuenv::make_process_runner()), m_asked(asked) {}
  gpuenv::Result<gpuenv::CommandResult> run(const std::vector<std::string>& argv, std::string_view input, std::chrono::milliseconds timeout) override {
    if (!argv.empty() && fs::path(argv.front()).filename() == "gpgv") ++m_asked.gpgv;
    return m_real->run(argv, input, timeout);
  }

 private:
  std::unique_ptr<gpuenv::CommandRunner> m_real;
  Asked& m_asked;
};

class CliLock : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!run_lock_sh("command -v gpg >/dev/null && command -v gpgv >/dev/null && command -v dpkg-deb >/dev/null && command -v dpkg-scanpackages >/dev/null")) return;
    dir = fs::temp_directory_path() / ("gpuenv-clilock-" + std::to_string(::getpid()));
    const fs::path www = dir / "www";
    fs::create_directories(dir / "gnupg");
    fs::permissions(dir / "gnupg", fs::perms::owner_all);
    const std::string gpg = "GNUPGHOME=" + (dir / "gnupg").string() + " gpg --batch --quiet --passphrase '' ";
    bool ok = run_lock_sh(gpg + "--quick-gen-key 'repo <r@example.com>' ed25519 sign never 2>/dev/null") && run_lock_sh(gpg + "--export > " + (dir / "repo.gpg").string());
    // Debian packages: a required one, python3 and its library, and one the spec asks for.
    fs::create_directories(www / "debian/pool");
    auto deb = [&](const std::string& name, const std::string& version, const std::string& extra) {
      const fs::path pkg = dir / "build" / name;
      fs::create_directories(pkg / "DEBIAN");
      fs::create_directories(pkg / "usr/share" / name);
      std::ofstream(pkg / "DEBIAN/control") << "Package: " << name << "\nVersion: " << version << "\nArchitecture: amd64\n" << extra
                                            << "Maintainer: t <t@example.com>\nDescription: test\n";
      std::ofstream(pkg / "usr/share" / name / "file") << name;
      return run_lock_sh("dpkg-deb --root-owner-group --build " + pkg.string() + " " + (www / "debian/pool" / (name + ".deb")).string() + " >/dev/null");
    };
    ok = ok && deb("base-files", "12.4", "Priority: required\nEssential: yes\n") && deb("libpython3.11", "3.11.2-6", "") &&
         deb("python3", "3.11.2-1", "Depends: libpython3.11\n") && deb("curl", "7.88.1-10", "");
    // A VM's packages (packages/pin_image.hpp), a kernel with its headers, and a driver in the shape of Debian's
    // (vm.driver): the module source depends on dkms, which the repository lacks: it must be pinned alone.
    for (const char* name : {"systemd-sysv", "udev", "kmod", "systemd-boot-efi", "libxml2", "libcurl4", "libarchive13", "zlib1g", "libzstd1",
                             "libyaml-cpp0.7", "libssl3", "libstdc++6", "libgcc-s1", "make", "libc6-dev", "firmware-nvidia-gsp",
                             "nvidia-kernel-support", "libnvidia-ml1", "libcuda1", "nvidia-smi", "gcc-12"})
      ok = ok && deb(name, "1.0-1", "");
    ok = ok && deb("linux-image-6.1.0-9-cloud-amd64", "6.1.1-1", "") && deb("linux-image-cloud-amd64", "6.1.1-1", "Depends: linux-image-6.1.0-9-cloud-amd64\n") &&
         deb("linux-headers-6.1.0-9-cloud-amd64", "6.1.1-1", "Depends: gcc-12\n") &&
         deb("nvidia-kernel-dkms", "535.309.01-0+deb12u1", "Depends: dkms (>= 3.0.3-4~), firmware-nvidia-gsp\n");
    const fs::path dists = www / "debian/dists/bookworm";
    fs::create_directories(dists / "main/binary-amd64");
    ok = ok && run_lock_sh("cd " + (www / "debian").string() + " && dpkg-scanpackages pool /dev/null 2>/dev/null > " + (dists / "main/binary-amd64/Packages").string());
    const std::string packages = read_all(dists / "main/binary-amd64/Packages");
    std::ofstream(dists / "Release") << "Origin: test\nSuite: bookworm\nCodename: bookworm\nDate: Mon, 30 Nov 2026 00:00:00 UTC\n"
                                        "Architectures: amd64\nComponents: main\nSHA256:\n "
                                     << gpuenv::sha256_hex(packages) << " " << packages.size() << " main/binary-amd64/Packages\n";
    ok = ok && run_lock_sh(gpg + "--clearsign -o " + (dists / "InRelease").string() + " " + (dists / "Release").string());
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

  /// `gpuenv lock SPEC EXTRA...` with CACHE; ASKED, when given, counts what it fetched and verified.
  int lock(std::vector<std::string> extra, const std::string& cache, std::string* out = nullptr, Asked* asked = nullptr) {
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
    if (asked) {
      ctx.make_runner = [asked] { return std::make_unique<CountingRunner>(*asked); };
      ctx.make_fetcher = [asked](const gpuenv::NetLimits& limits) -> std::unique_ptr<gpuenv::Fetcher> {
        gpuenv::FetchOptions options;
        options.limits = limits;
        options.max_attempts = 2;
        return std::make_unique<CountingFetcher>(gpuenv::make_curl_fetcher(options), *asked);
      };
    }
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
  for (const auto& p : j["packages"]) {
    names.push_back(p["kind"].get<std::string>() + ":" + p["name"].get<std::string>());
    EXPECT_EQ(p["platform"], "linux/amd64") << p["name"];  // the one platform of a lock that names none
  }
  EXPECT_EQ(names, (std::vector<std::string>{"deb:base-files", "deb:curl", "deb:libpython3.11", "deb:python3", "wheel:numpy", "wheel:torch"}));
  EXPECT_EQ(j["wheel_requirements"], nlohmann::json::array({"torch==2.5.1"}));
  ASSERT_EQ(lock({"-o", (dir / "b.lock").string()}, cache), 0);
  EXPECT_EQ(read_all(dir / "a.lock"), read_all(dir / "b.lock"));
  server.reset();  // nothing is served any more: --offline must answer from the cache alone
  ASSERT_EQ(lock({"-o", (dir / "c.lock").string(), "--offline"}, cache), 0);
  EXPECT_EQ(read_all(dir / "a.lock"), read_all(dir / "c.lock"));
  const std::string text = read_all(dir / "a.lock");
  EXPECT_NE(text.find("kind: \"deb\""), std::string::npos);
  EXPECT_NE(text.find("name: \"torch\", version: \"2.5.1\", kind: \"wheel\""), std::string::npos);
}

/// A VM spec with vm.driver, for the GPU models MODELS.
std::string vm_spec(const gpuenv::testing::LoopbackServer& server, const fs::path& dir, const std::string& name, const std::string& models,
                    const std::string& driver) {
  const std::string path = (dir / (name + "-" + std::to_string(server.port()) + ".yaml")).string();
  std::ofstream(path) << "name: " << name << "\nbase: debian:12\ngpu: {models: [" << models << "]}\nvm:\n  driver: " << driver << "\n"
                      << "sources:\n  apt:\n    - {uri: '" << server.url("debian") << "', suite: bookworm, components: [main], signed_by: '"
                      << (dir / "repo.gpg").string() << "'}\n";
  return path;
}

// vm.driver: the module package's version is the fleet's driver; the lock records it, pins the driver's packages into
// the image and the kernel's headers (at the kernel's version), make, libc6-dev and the module source alone into
// build_packages, which the image never gets.
TEST_F(CliLock, AVmDriverIsTheFleetsDriverAndItsBuildIsPinnedApart) {
  spec = vm_spec(*server, dir, "node", "H100", "distro");
  std::string json;
  Asked asked;
  ASSERT_EQ(lock({"-o", (dir / "vm.lock").string(), "--json"}, (dir / ("cache-vm-" + std::to_string(server->port()))).string(), &json, &asked), 0);
  const std::string text = read_all(dir / "vm.lock");
  // Three closure queries (the module source, the image, the driver build), one apt universe: the repository's
  // InRelease and Packages are fetched once and gpgv runs once, with an empty cache.
  EXPECT_EQ(std::count_if(asked.urls.begin(), asked.urls.end(), [](const std::string& u) { return u.find("/InRelease") != std::string::npos; }), 1)
      << testing::PrintToString(asked.urls);
  EXPECT_EQ(std::count_if(asked.urls.begin(), asked.urls.end(), [](const std::string& u) { return u.find("/Packages") != std::string::npos; }), 1)
      << testing::PrintToString(asked.urls);
  EXPECT_EQ(asked.gpgv, 1);
  EXPECT_NE(text.find("  driver:\n    request: \"distro\"\n    module: \"nvidia-kernel-dkms\"\n"), std::string::npos) << text;
  EXPECT_NE(text.find("    version: \"535.309.01\"\n"), std::string::npos) << text;
  const auto image = text.substr(0, text.find("\nbuild_packages:"));
  const auto build = text.substr(text.find("\nbuild_packages:"));
  for (const char* p : {"firmware-nvidia-gsp", "libnvidia-ml1", "libcuda1", "nvidia-smi", "linux-image-6.1.0-9-cloud-amd64"})
    EXPECT_NE(image.find(std::string("name: \"") + p + "\""), std::string::npos) << p;
  for (const char* p : {"linux-headers-6.1.0-9-cloud-amd64", "gcc-12", "make", "libc6-dev", "nvidia-kernel-dkms"}) {
    EXPECT_NE(build.find(std::string("name: \"") + p + "\""), std::string::npos) << p;
    EXPECT_EQ(image.find(std::string("name: \"") + p + "\""), std::string::npos) << p << " is in the image";
  }
  EXPECT_EQ(text.find("name: \"dkms\""), std::string::npos);  // the module source alone, not its dependencies
  EXPECT_NE(build.find("version: \"6.1.1-1\""), std::string::npos);  // the headers at the kernel's version
  // The driver version stands in for the fleet's, and the resolution says where it came from.
  const auto j = nlohmann::json::parse(json);
  EXPECT_NE(j.dump().find("vm.driver (nvidia-kernel-dkms 535.309.01-0+deb12u1)"), std::string::npos) << j.dump().substr(0, 2000);
  std::vector<std::string> built;
  for (const auto& p : j["build_packages"]) built.push_back(p["name"].get<std::string>());
  EXPECT_NE(std::find(built.begin(), built.end(), "nvidia-kernel-dkms"), built.end());
  // A second lock of the same inputs is the same bytes.
  ASSERT_EQ(lock({"-o", (dir / "vm2.lock").string()}, (dir / "cache").string()), 0);
  EXPECT_EQ(text, read_all(dir / "vm2.lock"));
}

// The packaged driver is held to every rule: an H200 needs a newer driver than 535 (its minimum, from the catalog):
// unsatisfiable, exit 3, no lock. --driver cannot override the image's own driver (exit 2), and a module the
// repositories lack is named with the components to check.
TEST_F(CliLock, APackagedDriverThatCannotRunTheGpusIsUnsatisfiable) {
  auto run = [&](const std::vector<std::string>& args, std::string& out, const std::string& cache = "cache") {
    std::ostringstream o, e;
    gpuenv::cli::Context ctx;
    ctx.out = &o;
    ctx.err = &e;
    ctx.env = {{"GPUENV_CACHE_DIR", (dir / cache).string()}, {"HOME", dir.string()}, {"GPUENV_CONFIG", (dir / "no-config.yaml").string()}};
    ctx.make_runner = [] { return gpuenv::make_process_runner(); };
    ctx.make_fetcher = [](const gpuenv::NetLimits& limits) {
      gpuenv::FetchOptions options;
      options.limits = limits;
      return gpuenv::make_curl_fetcher(options);
    };
    const int code = gpuenv::cli::run(args, ctx);
    out = o.str() + e.str();
    return code;
  };
  std::string out;
  const std::string h200 = vm_spec(*server, dir, "h200", "H200", "distro");
  EXPECT_EQ(run({"lock", h200, "-o", (dir / "h200.lock").string(), "--host-root", dir.string()}, out), 3) << out;
  EXPECT_NE(out.find("535.309.01"), std::string::npos) << out;
  EXPECT_NE(out.find("H200"), std::string::npos) << out;
  EXPECT_FALSE(fs::exists(dir / "h200.lock"));
  const std::string h100 = vm_spec(*server, dir, "h100", "H100", "distro");
  EXPECT_EQ(run({"lock", h100, "--driver", "550.54.15", "-o", (dir / "d.lock").string(), "--host-root", dir.string()}, out), 2) << out;
  EXPECT_NE(out.find("cli.driver_with_vm_driver"), std::string::npos) << out;
  // The usage error comes before any repository is read: offline, from an empty cache, it is still exit 2.
  EXPECT_EQ(run({"lock", h100, "--driver", "550.54.15", "--offline", "--host-root", dir.string()}, out, "empty-cache-driver"), 2) << out;
  EXPECT_NE(out.find("cli.driver_with_vm_driver"), std::string::npos) << out;
  const std::string tesla = vm_spec(*server, dir, "tesla", "H100", "{module: nvidia-tesla-535-kernel-dkms, packages: [firmware-nvidia-gsp]}");
  EXPECT_EQ(run({"lock", tesla, "-o", (dir / "t.lock").string(), "--host-root", dir.string()}, out), 3) << out;
  EXPECT_NE(out.find("apt.not_found"), std::string::npos) << out;
  EXPECT_NE(out.find("non-free"), std::string::npos) << out;
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
