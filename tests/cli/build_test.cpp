// `gpuenv build` in process, through the real adapters, against a signed apt repository and a simple index
// served on 127.0.0.1: real .debs (a libc taken from this machine, a library with an ld.so.conf.d entry, a
// program needing it) and real wheels. The image is read back by independent tools (skopeo, umoci) and run
// in a chroot; two builds under different umask, time zone, directories and caches must give one digest.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "app/build.hpp"
#include "cli/context.hpp"
#include "fakes/fake_fetcher.hpp"
#include "fakes/memory_blob_store.hpp"
#include "fakes/memory_registry.hpp"
#include "fakes/docker_registry.hpp"
#include "fakes/loopback_server.hpp"
#include "fakes/scratch.hpp"
#include "base/digest.hpp"
#include "resolver/lockfile.hpp"
#include "base/net/curl_fetcher.hpp"
#include "fakes/files.hpp"
#include "base/base64.hpp"
#include "base/time.hpp"
#include "base/net/http_client.hpp"
#include "images/registry/build_cache.hpp"
#include "marks/dsse.hpp"
#include "marks/keys.hpp"

namespace {

namespace fs = std::filesystem;

bool sh(const std::string& cmd) { return std::system(cmd.c_str()) == 0; }

using gpuenv::testing::read_all;

std::string capture(const std::string& cmd) {
  std::string out;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return out;
  char buf[4096];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  ::pclose(p);
  return out;
}

// Test doubles of NVIDIA's CUDA packages, shaped as NVIDIA ships them (names, versions, layout, the
// metapackages' pins), holding stub libraries whose version calls answer CUDA 12.9 and cuDNN 9.17.0:
// - wheels: cuda-toolkit 12.9.1 (extras pin nvidia-cuda-runtime-cu12 12.9.79 and nvidia-cublas-cu12 12.9.1.4),
//   those two, and nvidia-cudnn-cu12 9.17.0.29, libraries under site-packages/nvidia/<part>/lib;
// - a flat apt repository (NVIDIA's layout) at www/cuda: cuda-libraries-12-9 12.9.1-1 depending on
//   cuda-cudart-12-9 (>= 12.9.79) and libcublas-12-9 (>= 12.9.1.4); cuda-cudart-12-9 also at 12.9.37-1 (12.9.0's);
//   libcudnn9-cuda-12 at 9.17.0.29-1 and 9.18.0.77-1.
template <class Wheel>
bool cuda_doubles(const fs::path& dir, const fs::path& www, Wheel&& wheel, const std::string& gpg) {
  const fs::path stubs = dir / "cuda-stubs";
  fs::create_directories(stubs);
  std::ofstream(stubs / "cudart.c") << "int cudaRuntimeGetVersion(int* v) { *v = 12090; return 0; }\n";
  std::ofstream(stubs / "cublas.c") << "int cublasGetVersion_v2(void* h, int* v) { (void)h; *v = 120901; return 0; }\n";
  std::ofstream(stubs / "cudnn.c") << "#include <stddef.h>\nsize_t cudnnGetVersion(void) { return 91700; }\n";
  auto lib = [&](const char* src, const char* soname) {
    return sh("cc -shared -fPIC -Wl,-soname," + std::string(soname) + " -o " + (stubs / soname).string() + " " + (stubs / src).string());
  };
  if (!lib("cudart.c", "libcudart.so.12") || !lib("cublas.c", "libcublas.so.12") || !lib("cudnn.c", "libcudnn.so.9")) return false;
  const std::string plat = " --plat manylinux2014_x86_64";
  bool ok = wheel("nvidia-cuda-runtime-cu12", "12.9.79", "", "--file nvidia/cuda_runtime/lib/libcudart.so.12=" + (stubs / "libcudart.so.12").string() + plat) &&
            wheel("nvidia-cublas-cu12", "12.9.1.4", "", "--file nvidia/cublas/lib/libcublas.so.12=" + (stubs / "libcublas.so.12").string() + plat) &&
            wheel("nvidia-cudnn-cu12", "9.17.0.29", "nvidia-cublas-cu12", "--file nvidia/cudnn/lib/libcudnn.so.9=" + (stubs / "libcudnn.so.9").string() + plat) &&
            wheel("cuda-toolkit", "12.9.1", "", "--extra cudart --extra cublas",
                  "\"nvidia-cuda-runtime-cu12==12.9.79.*; extra == 'cudart'\" \"nvidia-cublas-cu12==12.9.1.4.*; extra == 'cublas'\"");
  // The apt double: NVIDIA's package names, versions and paths.
  const fs::path pool = www / "cuda";
  fs::create_directories(pool);
  auto nv = [&](const std::string& name, const std::string& version, const std::string& extra, const std::function<bool(const fs::path&)>& fill) {
    const fs::path pkg = dir / "build-cuda" / (name + "_" + version);
    fs::create_directories(pkg / "DEBIAN");
    std::ofstream(pkg / "DEBIAN/control") << "Package: " << name << "\nVersion: " << version << "\nArchitecture: amd64\n" << extra
                                          << "Maintainer: t <t@example.com>\nDescription: test double\n";
    return fill(pkg) && sh("dpkg-deb --root-owner-group --build " + pkg.string() + " " + (pool / (name + "_" + version + "_amd64.deb")).string() + " >/dev/null");
  };
  const std::string targets = "usr/local/cuda-12.9/targets/x86_64-linux/lib";
  auto cudart = [&](const fs::path& p) {
    fs::create_directories(p / targets);
    fs::create_directories(p / "etc/ld.so.conf.d");
    std::ofstream(p / "etc/ld.so.conf.d/gpu-cuda-12-9.conf") << "/usr/local/cuda-12.9/targets/x86_64-linux/lib\n";
    return sh("cp " + (stubs / "libcudart.so.12").string() + " " + (p / targets).string() + "/libcudart.so.12.9.79 && ln -s libcudart.so.12.9.79 " +
              (p / targets / "libcudart.so.12").string());
  };
  auto none = [](const fs::path&) { return true; };
  ok = ok && nv("cuda-cudart-12-9", "12.9.37-1", "Depends: libc6\n", cudart) && nv("cuda-cudart-12-9", "12.9.79-1", "Depends: libc6\n", cudart) &&
       nv("libcublas-12-9", "12.9.1.4-1", "Depends: libc6\n", [&](const fs::path& p) {
         fs::create_directories(p / targets);
         return sh("cp " + (stubs / "libcublas.so.12").string() + " " + (p / targets / "libcublas.so.12").string());
       }) &&
       nv("cuda-libraries-12-9", "12.9.1-1", "Depends: cuda-cudart-12-9 (>= 12.9.79), libcublas-12-9 (>= 12.9.1.4)\n", none) &&
       nv("cuda-libraries-12-9", "12.9.0-1", "Depends: cuda-cudart-12-9 (>= 12.9.37), libcublas-12-9 (>= 12.9.0.13)\n", none);
  for (const char* v : {"9.17.0.29-1", "9.18.0.77-1"})
    ok = ok && nv("libcudnn9-cuda-12", v, "Depends: libc6\n", [&](const fs::path& p) {
      fs::create_directories(p / "usr/lib/x86_64-linux-gnu");
      return sh("cp " + (stubs / "libcudnn.so.9").string() + " " + (p / "usr/lib/x86_64-linux-gnu/libcudnn.so.9").string());
    });
  ok = ok && sh("cd " + pool.string() + " && dpkg-scanpackages --multiversion . /dev/null 2>/dev/null > Packages");
  const std::string packages = read_all(pool / "Packages");
  std::ofstream(pool / "Release") << "Origin: NVIDIA test double\nLabel: NVIDIA CUDA\nArchitectures: amd64\nDate: Mon, 30 Nov 2026 00:00:00 UTC\nSHA256:\n "
                                  << gpuenv::sha256_hex(packages) << " " << packages.size() << " Packages\n";
  return ok && sh(gpg + "--clearsign -o " + (pool / "InRelease").string() + " " + (pool / "Release").string());
}

class CliBuild : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!sh("command -v gpg >/dev/null && command -v gpgv >/dev/null && command -v dpkg-deb >/dev/null && command -v dpkg-scanpackages >/dev/null "
            "&& command -v cc >/dev/null && command -v python3 >/dev/null")) return;
    dir = fs::temp_directory_path() / ("gpuenv-clibuild-" + std::to_string(::getpid()));
    const fs::path www = dir / "www";
    fs::create_directories(dir / "gnupg");
    fs::permissions(dir / "gnupg", fs::perms::owner_all);
    const std::string gpg = "GNUPGHOME=" + (dir / "gnupg").string() + " gpg --batch --quiet --passphrase '' ";
    bool ok = sh(gpg + "--quick-gen-key 'repo <r@example.com>' ed25519 sign never 2>/dev/null") && sh(gpg + "--export > " + (dir / "repo.gpg").string());
    fs::create_directories(www / "debian/pool");
    // Each package: a staging tree under build/NAME, filled by `fill`, then dpkg-deb.
    auto deb = [&](const std::string& name, const std::string& extra, const std::function<bool(const fs::path&)>& fill) {
      const fs::path pkg = dir / "build" / name;
      fs::create_directories(pkg / "DEBIAN");
      std::ofstream(pkg / "DEBIAN/control") << "Package: " << name << "\nVersion: 1.0-1\nArchitecture: amd64\n" << extra
                                            << "Maintainer: t <t@example.com>\nDescription: test\n";
      return fill(pkg) && sh("dpkg-deb --root-owner-group --build " + pkg.string() + " " + (www / "debian/pool" / (name + ".deb")).string() + " >/dev/null");
    };
    const std::string triplet = "usr/lib/x86_64-linux-gnu";
    ok = ok && deb("base-files", "Priority: required\nEssential: yes\n", [&](const fs::path& p) {
      fs::create_directories(p / "var/mail");
      fs::create_directories(p / "usr/share/doc/base-files");
      std::ofstream(p / "usr/share/doc/base-files/README") << "left out of minimal images";
      std::ofstream(p / "etc-issue") << "x";
      fs::create_directories(p / "etc");
      std::ofstream(p / "etc/issue") << "Debian GNU/Linux 12 \\n \\l\n";
      fs::create_directories(p / "usr/lib");
      std::ofstream(p / "usr/lib/os-release") << "PRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\nID=debian\nVERSION_ID=\"12\"\n";
      fs::create_symlink("../usr/lib/os-release", p / "etc/os-release");
      fs::remove(p / "etc-issue");
      return sh("chmod 2775 " + (p / "var/mail").string());
    });
    ok = ok && deb("libc6", "Priority: required\n", [&](const fs::path& p) {
      fs::create_directories(p / triplet);
      fs::create_directories(p / "lib64");
      fs::create_directories(p / "etc/ld.so.conf.d");
      std::ofstream(p / "etc/ld.so.conf") << "include /etc/ld.so.conf.d/*.conf\n";
      return sh("cp -L /lib/x86_64-linux-gnu/libc.so.6 " + (p / triplet).string() + "/ && cp -L /lib64/ld-linux-x86-64.so.2 " + (p / "lib64").string() + "/");
    });
    ok = ok && deb("libfoo1", "Depends: libc6\n", [&](const fs::path& p) {
      fs::create_directories(p / "opt/foo/lib");
      fs::create_directories(p / "etc/ld.so.conf.d");
      std::ofstream(p / "etc/ld.so.conf.d/foo.conf") << "/opt/foo/lib\n";
      std::ofstream(dir / "foo.c") << "int foo_answer(void) { return 42; }\n";
      return sh("cc -shared -fPIC -Wl,-soname,libfoo.so.1 -o " + (p / "opt/foo/lib/libfoo.so.1.0").string() + " " + (dir / "foo.c").string()) &&
             sh("ln -s libfoo.so.1.0 " + (p / "opt/foo/lib/libfoo.so.1").string());
    });
    ok = ok && deb("foo-tools", "Depends: libfoo1, libc6\n", [&](const fs::path& p) {
      fs::create_directories(p / "usr/bin");
      std::ofstream(dir / "tool.c") << "#include <stdio.h>\nint foo_answer(void);\nint main(void){printf(\"foo says %d\\n\", foo_answer());return 0;}\n";
      return sh("cc -o " + (p / "usr/bin/foo-tool").string() + " " + (dir / "tool.c").string() + " -L" + (dir / "build/libfoo1/opt/foo/lib").string() +
                " -l:libfoo.so.1");
    });
    ok = ok && deb("broken-tool", "Depends: libc6\n", [&](const fs::path& p) {
      fs::create_directories(p / "usr/bin");
      std::ofstream(dir / "nothere.c") << "int nothere(void) { return 1; }\n";
      std::ofstream(dir / "broken.c") << "int nothere(void);\nint main(void){return nothere();}\n";
      return sh("cc -shared -fPIC -Wl,-soname,libnothere.so.7 -o " + (dir / "libnothere.so.7").string() + " " + (dir / "nothere.c").string()) &&
             sh("cc -o " + (p / "usr/bin/broken-tool").string() + " " + (dir / "broken.c").string() + " " + (dir / "libnothere.so.7").string());
    });
    ok = ok && deb("fake-driver", "", [&](const fs::path& p) {
      fs::create_directories(p / triplet);
      return sh("cp " + (dir / "libnothere.so.7").string() + " " + (p / triplet / "libcuda.so.1").string());
    });
    // dpkg: required, and asked for by python3 (as Debian's python3-minimal does, for its maintainer scripts).
    ok = ok && deb("dpkg", "Priority: required\nEssential: yes\nDepends: libc6\n", [](const fs::path& p) {
      fs::create_directories(p / "usr/bin");
      std::ofstream(p / "usr/bin/dpkg") << "#!/bin/sh\n";
      return sh("chmod 755 " + (p / "usr/bin/dpkg").string());
    });
    ok = ok && deb("python3", "Depends: libc6, dpkg (>= 1.0)\n", [](const fs::path& p) {
      fs::create_directories(p / "usr/bin");
      std::ofstream(p / "usr/bin/python3.11") << "#!/bin/sh\necho not really python\n";
      return sh("chmod 755 " + (p / "usr/bin/python3.11").string());
    });
    const fs::path dists = www / "debian/dists/bookworm";
    fs::create_directories(dists / "main/binary-amd64");
    ok = ok && sh("cd " + (www / "debian").string() + " && dpkg-scanpackages pool /dev/null 2>/dev/null > " + (dists / "main/binary-amd64/Packages").string());
    const std::string packages = read_all(dists / "main/binary-amd64/Packages");
    std::ofstream(dists / "Release") << "Origin: test\nSuite: bookworm\nCodename: bookworm\nDate: Mon, 30 Nov 2026 00:00:00 UTC\n"
                                        "Architectures: amd64\nComponents: main\nSHA256:\n "
                                     << gpuenv::sha256_hex(packages) << " " << packages.size() << " main/binary-amd64/Packages\n";
    ok = ok && sh(gpg + "--clearsign -o " + (dists / "InRelease").string() + " " + (dists / "Release").string());
    // Wheels: torch (needing numpy) and safetensors, which the spec names.
    // `raw`: more arguments for make_test_wheel.py, shell-quoted: options first, then Requires-Dist lines.
    auto wheel = [&](const std::string& project, const std::string& version, const std::string& requires_dist, const std::string& options = "",
                     const std::string& raw = "") {
      fs::create_directories(www / "files");
      fs::create_directories(www / "simple" / project);
      const std::string filename = capture("python3 " + std::string(GPUENV_SOURCE_DIR) + "/tests/data/make_test_wheel.py " + options + " " + (www / "files").string() + " " + project +
                                           " " + version + (requires_dist.empty() ? "" : " '" + requires_dist + "'") + " " + raw);
      const std::string name = filename.substr(0, filename.find('\n'));
      if (name.empty()) return false;
      const std::string body = read_all(www / "files" / name);
      std::ofstream(www / "simple" / project / "index.json")
          << R"({"meta": {"api-version": "1.1"}, "name": ")" << project << R"(", "files": [{"filename": ")" << name << R"(", "url": "../../files/)" << name
          << R"(", "hashes": {"sha256": ")" << gpuenv::sha256_hex(body) << R"("}, "size": )" << body.size() << "}]}";
      return true;
    };
    ok = ok && wheel("torch", "2.5.1", "numpy") && wheel("numpy", "2.1.3", "") && wheel("safetensors", "0.4.5", "");
    ok = ok && cuda_doubles(dir, www, wheel, gpg);
    ready = ok;
  }
  static void TearDownTestSuite() {
    gpuenv::testing::remove_scratch(dir, dir / "gnupg");
  }

  void SetUp() override {
    if (!ready) GTEST_SKIP() << "gpg, gpgv, dpkg-deb, dpkg-scanpackages, cc or python3 missing";
    server = std::make_unique<gpuenv::testing::LoopbackServer>((dir / "www").string());
    ASSERT_GT(server->port(), 0);
  }

  std::string spec(const std::string& name, const std::string& apt, const std::string& base = "debian:12", const std::string& pip = "safetensors") {
    const std::string path = (dir / (name + "-" + std::to_string(server->port()) + ".yaml")).string();
    std::ofstream(path) << "name: " << name << "\nbase: '" << base << "'\nframeworks: {torch: '2.5.1'}\n"
                        << "gpu: {models: [H100], driver: '550.54.15'}\npackages: {apt: [" << apt << "], pip: [" << pip << "]}\n"
                        << "sources:\n  apt:\n    - {uri: '" << server->url("debian") << "', suite: bookworm, components: [main], signed_by: '"
                        << (dir / "repo.gpg").string() << "'}\n  pip:\n    index_url: '" << server->url("simple") << "'\n";
    return path;
  }

  /// `gpuenv lock SPEC -o LOCK` through the real adapters, with CACHE; stderr in *err.
  int lock(const std::string& spec_path, const std::string& lock_path, const std::string& cache, std::string* err = nullptr) {
    std::ostringstream o, e;
    gpuenv::cli::Context ctx;
    ctx.out = &o;
    ctx.err = &e;
    ctx.env = {{"GPUENV_CACHE_DIR", cache}, {"HOME", dir.string()}, {"GPUENV_CONFIG", (dir / "no-config.yaml").string()}};
    ctx.make_runner = [] { return gpuenv::make_process_runner(); };
    ctx.make_fetcher = [](const gpuenv::NetLimits& limits) {
      gpuenv::FetchOptions o;
      o.limits = limits;
      return gpuenv::make_curl_fetcher(o);
    };
    const int code = gpuenv::cli::run({"lock", spec_path, "-o", lock_path, "--host-root", dir.string()}, ctx);
    if (err) *err = e.str();
    return code;
  }

  int build(std::vector<std::string> args, const std::string& cache, std::string* out = nullptr, std::string* err = nullptr,
            const std::map<std::string, std::string>& env = {}) {
    std::ostringstream o, e;
    gpuenv::cli::Context ctx;
    ctx.out = &o;
    ctx.err = &e;
    ctx.env = {{"GPUENV_CACHE_DIR", cache}, {"HOME", dir.string()}, {"GPUENV_CONFIG", (dir / "no-config.yaml").string()}, {"SOURCE_DATE_EPOCH", "1700000000"}};
    for (const auto& [k, v] : env) ctx.env[k] = v;
    ctx.make_runner = [] { return gpuenv::make_process_runner(); };
    ctx.make_fetcher = [this](const gpuenv::NetLimits& limits) {  // the limits the command read from its environment
      gpuenv::FetchOptions options;
      options.limits = limits;
      options.max_attempts = 2;
      auto f = gpuenv::make_curl_fetcher(options);
      return wrap_fetcher ? wrap_fetcher(std::move(f)) : std::move(f);
    };
    if (http_client) ctx.make_http_client = http_client;
    args.insert(args.begin(), "build");
    args.insert(args.end(), {"--host-root", dir.string()});
    const int code = gpuenv::cli::run(args, ctx);
    if (out) *out = o.str();
    if (err) *err = e.str();
    return code;
  }

  static inline fs::path dir;
  static inline bool ready = false;
  std::unique_ptr<gpuenv::testing::LoopbackServer> server;
  /// Wraps the build's real fetcher (a test double around it), when set.
  std::function<std::unique_ptr<gpuenv::Fetcher>(std::unique_ptr<gpuenv::Fetcher>)> wrap_fetcher;
  /// The build's registry client (a double), when set; else the real one.
  std::function<std::unique_ptr<gpuenv::HttpClient>(const gpuenv::HttpOptions&)> http_client;
};

/// Around the real fetcher: of a batch of files it fetches the first, tells of it, then waits (up to 60 s) until
/// `used()` says the build has unpacked it before it fetches the rest. A build that waits for every download
/// before it unpacks anything never gets there, and `*overlapped` stays false.
class GatedFetcher final : public gpuenv::Fetcher {
 public:
  GatedFetcher(std::unique_ptr<gpuenv::Fetcher> inner, std::function<bool()> used, bool* overlapped)
      : m_inner(std::move(inner)), m_used(std::move(used)), m_overlapped(overlapped) {}
  gpuenv::Result<std::string> get(const std::string& url, const std::string& accept) override { return m_inner->get(url, accept); }
  gpuenv::Result<std::string> get_range(const std::string& url, std::uint64_t offset, std::uint64_t length) override {
    return m_inner->get_range(url, offset, length);
  }
  std::vector<gpuenv::Result<gpuenv::FetchedFile>> fetch_all(const std::vector<gpuenv::FetchRequest>& requests) override { return fetch_each(requests, {}); }
  std::vector<gpuenv::Result<gpuenv::FetchedFile>> fetch_each(const std::vector<gpuenv::FetchRequest>& requests, const FetchDone& done) override {
    if (requests.size() < 2) return m_inner->fetch_each(requests, done);
    auto out = m_inner->fetch_each({requests.front()}, [&](std::size_t, const gpuenv::Result<gpuenv::FetchedFile>& r) {
      if (done) done(0, r);
    });
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (!m_used() && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    *m_overlapped = m_used();
    auto rest = m_inner->fetch_each({requests.begin() + 1, requests.end()}, [&](std::size_t k, const gpuenv::Result<gpuenv::FetchedFile>& r) {
      if (done) done(k + 1, r);
    });
    for (auto& r : rest) out.push_back(std::move(r));
    return out;
  }

 private:
  std::unique_ptr<gpuenv::Fetcher> m_inner;
  std::function<bool()> m_used;
  bool* m_overlapped;
};

TEST_F(CliBuild, WritesAnImageThatSkopeoUmociAndAChrootAccept) {
  const std::string layout = (dir / "out-a").string();
  std::string out, err;
  ASSERT_EQ(build({spec("demo", "foo-tools"), "-o", layout, "--tag", "registry.example.com/ml/demo:1.0", "--json"}, (dir / "cache-a").string(), &out, &err), 0) << err << out;
  const auto j = nlohmann::json::parse(out);
  const std::string digest = j["digest"];
  std::vector<std::string> layers;
  for (const auto& l : j["layers"]) layers.push_back(l["name"]);
  EXPECT_EQ(layers, (std::vector<std::string>{"base", "framework", "user", "metadata"}));
  // The layout as the image spec wants it, index.json naming the manifest with the tag.
  const auto index = nlohmann::json::parse(read_all(fs::path(layout) / "index.json"));
  EXPECT_EQ(index["manifests"][0]["digest"], digest);
  EXPECT_EQ(index["manifests"][0]["annotations"]["org.opencontainers.image.ref.name"], "1.0");
  EXPECT_TRUE(fs::exists(fs::path(layout) / "sbom.spdx.json"));
  const auto config = nlohmann::json::parse(read_all(fs::path(layout) / "blobs/sha256" / j["config"].get<std::string>().substr(7)));
  const auto env = config["config"]["Env"];
  EXPECT_NE(std::find(env.begin(), env.end(), "NVIDIA_VISIBLE_DEVICES=all"), env.end());
  EXPECT_NE(std::find(env.begin(), env.end(), "NVIDIA_REQUIRE_CUDA=cuda>=12.4"), env.end()) << env.dump();
  EXPECT_EQ(config["config"]["Labels"]["dev.gpuenv.lock.sha256"], j["lock_sha256"]);
  EXPECT_EQ(config["created"], "2023-11-14T22:13:20Z");

  if (sh("command -v skopeo >/dev/null")) {
    const auto inspect = nlohmann::json::parse(capture("skopeo inspect oci:" + layout + ":1.0 2>&1"));
    EXPECT_EQ(inspect["Digest"], digest);
    EXPECT_EQ(inspect["Layers"].size(), 4u);
    EXPECT_TRUE(sh("skopeo copy -q oci:" + layout + ":1.0 dir:" + (dir / "skopeo-dir").string() + " >/dev/null 2>&1"));
  } else {
    ADD_FAILURE() << "skopeo missing (scripts/deps.sh installs it)";
  }
  if (sh("command -v umoci >/dev/null")) {
    const fs::path bundle = dir / "bundle";
    ASSERT_TRUE(sh("umoci unpack --image " + layout + ":1.0 " + bundle.string() + " >/dev/null 2>&1"));
    const fs::path rootfs = bundle / "rootfs";
    EXPECT_TRUE(fs::exists(rootfs / "usr/bin/foo-tool"));
    EXPECT_FALSE(fs::exists(rootfs / "usr/share/doc/base-files/README"));  // minimal: no docs
    EXPECT_TRUE(fs::exists(rootfs / "usr/local/lib/python3.11/dist-packages/torch/__init__.py"));
    EXPECT_TRUE(fs::exists(rootfs / "usr/local/lib/python3.11/dist-packages/safetensors-0.4.5.dist-info/REQUESTED"));
    EXPECT_TRUE(fs::exists(rootfs / "etc/ld.so.cache"));
    EXPECT_TRUE(fs::exists(rootfs / "var/lib/dpkg/status"));
    EXPECT_TRUE(fs::exists(rootfs / "usr/share/gpuenv/sbom.spdx.json"));
    struct stat st {};
    ASSERT_EQ(::stat((rootfs / "var/mail").c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 07777, 02775u);
    // The dynamic linker of the image finds libfoo through the cache gpuenv wrote.
    if (::geteuid() == 0) EXPECT_EQ(capture("chroot " + rootfs.string() + " /usr/bin/foo-tool 2>&1"), "foo says 42\n");
  } else {
    ADD_FAILURE() << "umoci missing (scripts/deps.sh installs it)";
  }
}

TEST_F(CliBuild, TheSameLockGivesTheSameDigestAnywhereAndARebuildIsANoOp) {
  const std::string s = spec("repro", "foo-tools");
  std::string out1, out2, out3, err;
  const mode_t old = ::umask(022);
  ::setenv("TZ", "UTC", 1);
  ASSERT_EQ(build({s, "-o", (dir / "r1").string(), "--json", "--threads", "1"}, (dir / "cache-r1").string(), &out1, &err), 0) << err;
  ::umask(077);
  ::setenv("TZ", "Asia/Tokyo", 1);
  ASSERT_EQ(build({s, "-o", (dir / "elsewhere/r2").string(), "--json", "--threads", "3"}, (dir / "cache-r2").string(), &out2, &err), 0) << err;
  ::umask(old);
  ::unsetenv("TZ");
  const auto a = nlohmann::json::parse(out1), b = nlohmann::json::parse(out2);
  EXPECT_EQ(a["digest"], b["digest"]);
  EXPECT_EQ(a["layers"], b["layers"]);
  EXPECT_FALSE(b["unchanged"].get<bool>());
  ASSERT_EQ(build({s, "-o", (dir / "r1").string(), "--json"}, (dir / "cache-r1").string(), &out3, &err), 0) << err;
  const auto c = nlohmann::json::parse(out3);
  EXPECT_TRUE(c["unchanged"].get<bool>());
  EXPECT_EQ(c["digest"], a["digest"]);
}

// Builds at the speed of what changed: a package added to the spec unpacks and writes only its own layer (and
// gpuenv's metadata), the others are taken as they are, and the image is the one a cold build of the same lock
// gives in a fresh cache. Each package is unpacked once into the cache's store, whatever the number of builds.
TEST_F(CliBuild, AnAddedPackageRebuildsOnlyItsLayerAndGivesTheImageAColdBuildGives) {
  const std::string cache = (dir / "cache-inc").string(), layout = (dir / "inc").string();
  const std::string first = spec("inc-a", "foo-tools"), second = spec("inc-b", "foo-tools", "debian:12", "safetensors, numpy");
  std::string out1, out2, cold, err;
  ASSERT_EQ(build({first, "-o", layout, "--json"}, cache, &out1, &err), 0) << err;
  const auto trees = [&] {
    std::size_t n = 0;
    for (const auto& e : fs::directory_iterator(fs::path(cache) / "trees")) n += e.is_directory() ? 1 : 0;
    return n;
  };
  const std::size_t unpacked = trees();
  ASSERT_EQ(build({second, "-o", layout, "--json"}, cache, &out2, &err), 0) << err;
  EXPECT_EQ(trees(), unpacked + 1) << "numpy moves to the user layer: a wheel installed as REQUESTED is a new tree";
  std::map<std::string, bool> reused;
  const auto second_result = nlohmann::json::parse(out2);
  for (const auto& l : second_result["layers"]) reused[l["name"].get<std::string>()] = l["reused"].get<bool>();
  EXPECT_TRUE(reused["base"]) << out2;
  EXPECT_FALSE(reused["user"]) << out2;
  EXPECT_FALSE(reused["framework"]) << "numpy left the framework layer";
  EXPECT_FALSE(reused["metadata"]);
  ASSERT_EQ(build({second, "-o", (dir / "inc-cold").string(), "--json"}, (dir / "cache-inc-cold").string(), &cold, &err), 0) << err;
  EXPECT_EQ(nlohmann::json::parse(out2)["digest"], nlohmann::json::parse(cold)["digest"]);
  EXPECT_NE(nlohmann::json::parse(out1)["digest"], nlohmann::json::parse(cold)["digest"]);
  // And back: the first image again, every package layer taken as it is, the first digest.
  std::string back;
  ASSERT_EQ(build({first, "-o", layout, "--json"}, cache, &back, &err), 0) << err;
  const auto back_result = nlohmann::json::parse(back);
  EXPECT_EQ(back_result["digest"], nlohmann::json::parse(out1)["digest"]);
  for (const auto& l : back_result["layers"])
    if (l["name"] != "metadata") EXPECT_TRUE(l["reused"].get<bool>()) << l.dump();
  EXPECT_EQ(trees(), unpacked + 1);
  // `cache du` counts the store and the kept layers; `prune --all` removes them, and the next build unpacks again.
  auto cache_cmd = [&](std::vector<std::string> args) {
    std::ostringstream o, e;
    gpuenv::cli::Context ctx;
    ctx.out = &o;
    ctx.err = &e;
    ctx.env = {{"GPUENV_CACHE_DIR", cache}, {"HOME", dir.string()}};
    args.insert(args.begin(), "cache");
    EXPECT_EQ(gpuenv::cli::run(args, ctx), 0) << e.str();
    return nlohmann::json::parse(o.str());
  };
  const auto du = cache_cmd({"du", "--json"});
  EXPECT_EQ(du["package_trees"], unpacked + 1);
  EXPECT_GT(du["layers"].get<int>(), 4);
  EXPECT_EQ(cache_cmd({"prune", "--json"})["package_trees_removed"], 0) << "used today";
  const auto pruned = cache_cmd({"prune", "--all", "--json"});
  EXPECT_EQ(pruned["package_trees_removed"], unpacked + 1);
  EXPECT_EQ(cache_cmd({"du", "--json"})["package_trees"], 0);
  std::string again;
  ASSERT_EQ(build({first, "-o", (dir / "inc-after-prune").string(), "--json"}, cache, &again, &err), 0) << err;
  EXPECT_EQ(nlohmann::json::parse(again)["digest"], nlohmann::json::parse(out1)["digest"]);
}

// A slim base: no required set, and dpkg, which python3 asks for, left out; the dpkg status still lists what is
// installed, and the build's DT_NEEDED check passes on what is there. The required-set base of the same spec has dpkg.
TEST_F(CliBuild, ASlimBaseLeavesOutTheRequiredSetAndTheToolsOfMaintainerScripts) {
  const std::string s = spec("slim", "foo-tools"), cache = (dir / "cache-slim").string();
  std::string text = read_all(s);
  const std::string plain = "base: 'debian:12'";
  ASSERT_NE(text.find(plain), std::string::npos);
  text.replace(text.find(plain), plain.size(), "base: {distro: 'debian:12', variant: slim}");
  std::ofstream(s) << text;
  const std::string lock_path = (dir / "slim.lock").string(), full_lock = (dir / "slim-full.lock").string();
  std::string err, out;
  ASSERT_EQ(lock(s, lock_path, cache, &err), 0) << err;
  ASSERT_EQ(lock(spec("slim-full", "foo-tools"), full_lock, cache, &err), 0) << err;
  auto debs = [](const std::string& path) {
    auto l = gpuenv::resolver::parse_lock(read_all(path), path);
    EXPECT_TRUE(l.ok());
    std::vector<std::string> names;
    if (l)
      for (const auto& p : l->packages)
        if (p.kind == gpuenv::resolver::PackageKind::deb) names.push_back(p.name);
    return names;
  };
  EXPECT_EQ(debs(lock_path), (std::vector<std::string>{"base-files", "foo-tools", "libc6", "libfoo1", "python3"}));
  EXPECT_EQ(debs(full_lock), (std::vector<std::string>{"base-files", "dpkg", "foo-tools", "libc6", "libfoo1", "python3"}));
  EXPECT_NE(read_all(lock_path).find("base_variant: \"slim\""), std::string::npos);
  const std::string layout = (dir / "slim-img").string();
  ASSERT_EQ(build({lock_path, "-o", layout, "--tag", "1", "--json"}, cache, &out, &err), 0) << err;
  if (!sh("command -v umoci >/dev/null && command -v dpkg-query >/dev/null")) {
    ADD_FAILURE() << "umoci or dpkg-query missing (scripts/deps.sh installs them)";
    return;
  }
  const fs::path bundle = dir / "slim-bundle";
  ASSERT_TRUE(sh("umoci unpack --image " + layout + ":1 " + bundle.string() + " >/dev/null 2>&1"));
  const fs::path rootfs = bundle / "rootfs";
  EXPECT_TRUE(fs::exists(rootfs / "usr/bin/foo-tool"));
  EXPECT_TRUE(fs::exists(rootfs / "usr/bin/python3.11"));
  EXPECT_FALSE(fs::exists(rootfs / "usr/bin/dpkg"));
  // dpkg's own reader of its database lists what is installed, and nothing else.
  EXPECT_EQ(capture("dpkg-query --admindir=" + (rootfs / "var/lib/dpkg").string() + " -W -f '${Package} ' 2>&1"), "base-files foo-tools libc6 libfoo1 python3 ");
  if (::geteuid() == 0) EXPECT_EQ(capture("chroot " + rootfs.string() + " /usr/bin/foo-tool 2>&1"), "foo says 42\n");
}

// Downloads overlap with unpacking: the first package is unpacked into the store while the others are still to
// come, and the image is the one a build that had every package in its cache gives.
TEST_F(CliBuild, PackagesAreUnpackedAsTheyArriveWhileTheRestDownload) {
  const std::string s = spec("overlap", "foo-tools"), lock_path = (dir / "overlap.lock").string();
  std::string err, gated, plain;
  ASSERT_EQ(lock(s, lock_path, (dir / "cache-overlap-lock").string(), &err), 0) << err;
  const fs::path cache = dir / "cache-overlap";
  bool overlapped = false;
  wrap_fetcher = [&](std::unique_ptr<gpuenv::Fetcher> inner) -> std::unique_ptr<gpuenv::Fetcher> {
    auto used = [cache] {
      std::error_code ec;
      for (const auto& e : fs::directory_iterator(cache / "trees", ec))
        if (fs::exists(e.path() / "record.json")) return true;
      return false;
    };
    return std::make_unique<GatedFetcher>(std::move(inner), used, &overlapped);
  };
  ASSERT_EQ(build({lock_path, "-o", (dir / "overlap-a").string(), "--json"}, cache.string(), &gated, &err), 0) << err;
  wrap_fetcher = nullptr;
  EXPECT_TRUE(overlapped) << "no package was unpacked before the last download";
  ASSERT_EQ(build({lock_path, "-o", (dir / "overlap-b").string(), "--json"}, (dir / "cache-overlap-lock").string(), &plain, &err), 0) << err;
  EXPECT_EQ(nlohmann::json::parse(gated)["digest"], nlohmann::json::parse(plain)["digest"]);
}

// A download that fails while others are unpacked fails the build naming the package, and leaves no image.
TEST_F(CliBuild, AFailedDownloadFailsTheBuildNamingThePackage) {
  const std::string s = spec("dlfail", "foo-tools"), lock_path = (dir / "dlfail.lock").string();
  std::string err, out;
  ASSERT_EQ(lock(s, lock_path, (dir / "cache-dlfail-lock").string(), &err), 0) << err;
  std::string text = read_all(lock_path);
  const std::string pool = "/pool/libfoo1.deb";
  ASSERT_NE(text.find(pool), std::string::npos);
  text.replace(text.find(pool), pool.size(), "/pool/libfoo1-gone.deb");
  std::ofstream(lock_path) << text;
  EXPECT_EQ(build({lock_path, "-o", (dir / "dlfail").string()}, (dir / "cache-dlfail").string(), &out, &err), 4);
  EXPECT_NE(err.find("getting libfoo1 1.0-1"), std::string::npos) << err;
  EXPECT_FALSE(fs::exists(dir / "dlfail" / "index.json"));
}

// A package tree that lost a file behind gpuenv's back fails the build naming its directory; removed, it is
// unpacked again and the image is the same.
TEST_F(CliBuild, AStoredPackageThatLostAFileFailsTheBuildNamingItsDirectory) {
  const std::string cache = (dir / "cache-lost").string(), s = spec("lost", "foo-tools");
  std::string out, again, err;
  ASSERT_EQ(build({s, "-o", (dir / "lost1").string(), "--json"}, cache, &out, &err), 0) << err;
  fs::path victim;
  for (const auto& e : fs::recursive_directory_iterator(fs::path(cache) / "trees"))
    if (e.path().filename() == "foo-tool") victim = e.path();
  ASSERT_FALSE(victim.empty());
  fs::remove(victim);
  EXPECT_EQ(build({s, "-o", (dir / "lost2").string()}, cache, nullptr, &err), 4);
  EXPECT_NE(err.find("foo-tools"), std::string::npos) << err;
  EXPECT_NE(err.find("remove that directory"), std::string::npos) << err;
  EXPECT_FALSE(fs::exists(dir / "lost2"));
  fs::path tree = victim;
  while (tree.parent_path().filename() != "trees") tree = tree.parent_path();
  fs::remove_all(tree);
  ASSERT_EQ(build({s, "-o", (dir / "lost3").string(), "--json"}, cache, &again, &err), 0) << err;
  EXPECT_EQ(nlohmann::json::parse(again)["digest"], nlohmann::json::parse(out)["digest"]);
}

// app::build through its ports alone: the packages come from a FakeFetcher and the cache is a MemoryBlobStore, and
// the image is the one the real adapters (curl, the directory store) give for the same lock.
TEST_F(CliBuild, AppBuildThroughFakePortsGivesTheImageTheRealAdaptersGive) {
  const std::string s = spec("ports", "foo-tools");
  const std::string lock_path = (dir / "ports.lock").string();
  std::string out, err;
  ASSERT_EQ(lock(s, lock_path, (dir / "cache-ports-lock").string(), &err), 0) << err;
  ASSERT_EQ(build({lock_path, "-o", (dir / "ports-real").string(), "--json"}, (dir / "cache-ports-real").string(), &out, &err), 0) << err;
  const std::string real_digest = nlohmann::json::parse(out)["digest"];

  auto lock = gpuenv::resolver::parse_lock(read_all(lock_path), lock_path);
  ASSERT_TRUE(lock.ok());
  auto fake = std::make_shared<gpuenv::testing::FakeFetcher>();
  gpuenv::testing::FakeFetcher* fetcher = fake.get();
  const std::string prefix = server->url("");
  for (const auto& p : lock->packages) {
    ASSERT_EQ(p.url.rfind(prefix, 0), 0u) << p.url;
    fetcher->files[p.url] = read_all(dir / "www" / p.url.substr(prefix.size()));
  }
  auto memory = std::make_unique<gpuenv::testing::MemoryBlobStore>(dir / "memory-store");
  gpuenv::testing::MemoryBlobStore* store = memory.get();
  int stores_opened = 0;
  gpuenv::app::Services services;
  services.env = {{"GPUENV_CACHE_DIR", (dir / "cache-ports-fake").string()}, {"HOME", dir.string()}, {"SOURCE_DATE_EPOCH", "1700000000"}};
  services.make_runner = [] { return gpuenv::make_process_runner(); };
  services.make_fetcher = [fake](const gpuenv::NetLimits&) { return std::make_unique<gpuenv::testing::BorrowedFetcher>(*fake); };
  services.make_blob_store = [&](const std::string&) {
    ++stores_opened;
    return std::make_unique<gpuenv::testing::BorrowedBlobStore>(*store);
  };
  std::vector<std::string> steps;
  services.on_step = [&](const std::string& line) { steps.push_back(line); };
  gpuenv::app::BuildRequest rq;
  rq.lock.resolve.spec_path = lock_path;
  rq.output = (dir / "ports-fake").string();
  auto built = gpuenv::app::build(rq, services);
  ASSERT_TRUE(built.ok()) << built.error().to_string();
  EXPECT_EQ(built->image.manifest.digest.str(), real_digest);
  EXPECT_EQ(built->output, rq.output);
  EXPECT_FALSE(built->unsatisfied);
  EXPECT_EQ(stores_opened, 1);
  for (const auto& p : lock->packages) {
    EXPECT_EQ(store->blobs.count(p.sha256.hex()), 1u) << p.name;  // every package went through the port's cache
    EXPECT_NE(std::find(fetcher->requested.begin(), fetcher->requested.end(), p.url), fetcher->requested.end()) << p.url;
  }
  EXPECT_FALSE(steps.empty());
  EXPECT_FALSE(fs::exists(dir / "cache-ports-fake" / "blobs"));  // nothing reached a directory store
}

TEST_F(CliBuild, AMissingSharedLibraryFailsTheBuildNamingIt) {
  std::string out, err;
  EXPECT_EQ(build({spec("broken", "broken-tool"), "-o", (dir / "broken").string()}, (dir / "cache-b").string(), &out, &err), 4);
  EXPECT_NE(err.find("build.unresolved_library"), std::string::npos) << err;
  EXPECT_NE(err.find("libnothere.so.7"), std::string::npos) << err;
  EXPECT_NE(err.find("/usr/bin/broken-tool"), std::string::npos) << err;
  EXPECT_FALSE(fs::exists(dir / "broken" / "index.json"));
  // Accepting it explicitly lets the build through.
  EXPECT_EQ(build({spec("broken", "broken-tool"), "-o", (dir / "broken").string(), "--allow-missing-lib", "libnothere.so.7"}, (dir / "cache-b").string(), &out, &err), 0) << err;
}

TEST_F(CliBuild, ADriverLibraryInAPackageIsRefused) {
  std::string out, err;
  EXPECT_EQ(build({spec("driver", "fake-driver"), "-o", (dir / "driver").string()}, (dir / "cache-d").string(), &out, &err), 4);
  EXPECT_NE(err.find("build.driver_in_image"), std::string::npos) << err;
  EXPECT_NE(err.find("libcuda.so.1"), std::string::npos) << err;
}

TEST_F(CliBuild, ADirectoryThatIsNotALayoutIsNeverWrittenInto) {
  fs::create_directories(dir / "precious");
  std::ofstream(dir / "precious" / "notes.txt") << "mine";
  std::string out, err;
  EXPECT_EQ(build({spec("demo", "foo-tools"), "-o", (dir / "precious").string()}, (dir / "cache-a").string(), &out, &err), 2);
  EXPECT_NE(err.find("oci.not_layout"), std::string::npos) << err;
  EXPECT_EQ(read_all(dir / "precious" / "notes.txt"), "mine");
  // What a first build killed early leaves (its own directories and temporary files) is taken up again.
  fs::create_directories(dir / "half" / "blobs" / "sha256");
  std::ofstream(dir / "half" / ".oci-layout.gpuenv-tmp") << "{";
  EXPECT_EQ(build({spec("demo", "foo-tools"), "-o", (dir / "half").string()}, (dir / "cache-a").string(), &out, &err), 0) << err;
}

TEST_F(CliBuild, ArchivesHoldTheSameImageAndSkopeoReadsThem) {
  if (std::system("command -v skopeo >/dev/null") != 0) GTEST_SKIP() << "skopeo missing";
  const std::string s = spec("archived", "foo-tools");
  const std::string cache = (dir / "cache-arch").string();
  std::string out, err;
  ASSERT_EQ(build({s, "-o", (dir / "arch-dir").string(), "--json"}, cache, &out, &err), 0) << err;
  const std::string digest = nlohmann::json::parse(out)["digest"];
  ASSERT_EQ(build({s, "--format", "oci-archive", "-o", (dir / "image-oci.tar").string(), "--tag", "registry.example.com/ml/archived:1", "--json"}, cache, &out, &err), 0) << err;
  EXPECT_EQ(nlohmann::json::parse(out)["digest"], digest);  // the tag is not part of the image
  EXPECT_EQ(nlohmann::json::parse(capture("skopeo inspect oci-archive:" + (dir / "image-oci.tar").string() + " 2>&1"))["Digest"], digest);
  ASSERT_EQ(build({s, "--format", "docker-archive", "-o", (dir / "image-docker.tar").string(), "--tag", "registry.example.com/ml/archived:1"}, cache, &out, &err), 0) << err;
  const auto docker = nlohmann::json::parse(capture("skopeo inspect docker-archive:" + (dir / "image-docker.tar").string() + " 2>&1"));
  EXPECT_EQ(docker["Layers"].size(), 4u) << docker.dump();
  EXPECT_NE(capture("tar -tf " + (dir / "image-docker.tar").string()).find("manifest.json"), std::string::npos);
  EXPECT_TRUE(sh("skopeo copy -q docker-archive:" + (dir / "image-docker.tar").string() + " oci:" + (dir / "from-docker").string() + ":x >/dev/null 2>&1"));
  // A directory is not a file name for an archive.
  EXPECT_EQ(build({s, "--format", "oci-archive", "-o", (dir / "arch-dir").string()}, cache, &out, &err), 2);
  // Without --format, the spec's image.format decides; --format still wins over it.
  const std::string in_spec = (dir / "archived-format.yaml").string();
  std::ofstream(in_spec) << read_all(s) << "image: {format: oci-archive}\n";
  ASSERT_EQ(build({in_spec, "-o", (dir / "from-spec.tar").string(), "--json"}, cache, &out, &err), 0) << err;
  EXPECT_EQ(nlohmann::json::parse(out)["format"], "oci-archive");
  EXPECT_TRUE(fs::is_regular_file(dir / "from-spec.tar"));
  const std::string from_spec = nlohmann::json::parse(out)["digest"];  // another spec file, so another lock and image
  EXPECT_EQ(nlohmann::json::parse(capture("skopeo inspect oci-archive:" + (dir / "from-spec.tar").string() + " 2>&1"))["Digest"], from_spec);
  ASSERT_EQ(build({in_spec, "--format", "oci-dir", "-o", (dir / "from-spec-dir").string(), "--json"}, cache, &out, &err), 0) << err;
  EXPECT_EQ(nlohmann::json::parse(out)["format"], "oci-dir");
  EXPECT_TRUE(fs::is_regular_file(dir / "from-spec-dir" / "index.json"));
}


TEST_F(CliBuild, RunExecutesTheImagesOwnProgramInASandbox) {
  if (std::system("command -v bwrap >/dev/null") != 0 && ::geteuid() != 0) GTEST_SKIP() << "neither bubblewrap nor root";
  const std::string layout = (dir / "run-img").string();
  std::string out, err;
  ASSERT_EQ(build({spec("runnable", "foo-tools"), "-o", layout}, (dir / "cache-run").string(), &out, &err), 0) << err;
  const std::string env = "GPUENV_CACHE_DIR=" + (dir / "cache-run").string() + " ";
  EXPECT_EQ(capture(env + GPUENV_BINARY + " run " + layout + " --no-gpu -- /usr/bin/foo-tool 2>&1"), "foo says 42\n");
  // The image's environment, not the caller's: NVIDIA_VISIBLE_DEVICES comes from the image config.
  EXPECT_EQ(capture(env + "SECRET=x " + GPUENV_BINARY + " run " + layout + " --no-gpu -- /usr/bin/foo-tool; echo rc=$?"), "foo says 42\nrc=0\n");
  const std::string missing = capture(env + GPUENV_BINARY + " run " + layout + " --no-gpu -- /no/such/program 2>&1; echo rc=$?");
  EXPECT_NE(missing.find("/no/such/program"), std::string::npos) << missing;
  EXPECT_EQ(missing.find("rc=0"), std::string::npos) << missing;
}

/// The real docker-registry on 127.0.0.1 (plain HTTP), storage in a temporary directory.
using Registry = gpuenv::testing::DockerRegistry;

TEST_F(CliBuild, PushesToARegistryThatSkopeoReadsBackWithTheSameDigest) {
  Registry registry(Registry::Setup::plain);
  if (!registry.skip_reason().empty()) GTEST_SKIP() << registry.skip_reason();
  const std::string ref = registry.host() + "/ml/pushed:1.0";
  std::string out, err;
  ASSERT_EQ(build({spec("pushed", "foo-tools"), "-o", (dir / "push-img").string(), "--push", ref, "--plain-http", "--json"}, (dir / "cache-push").string(), &out, &err), 0) << err;
  const auto j = nlohmann::json::parse(out);
  EXPECT_EQ(j["push"]["digest"], j["digest"]);
  EXPECT_EQ(j["push"]["blobs_uploaded"], 5);  // four layers and the config
  const auto inspect = nlohmann::json::parse(capture("skopeo inspect --tls-verify=false docker://" + ref + " 2>&1"));
  EXPECT_EQ(inspect["Digest"], j["digest"]);
  // Pushing the same image again uploads nothing.
  ASSERT_EQ(build({spec("pushed", "foo-tools"), "-o", (dir / "push-img").string(), "--push", ref, "--plain-http", "--json"}, (dir / "cache-push").string(), &out, &err), 0) << err;
  EXPECT_EQ(nlohmann::json::parse(out)["push"]["blobs_uploaded"], 0);
  // A registry that is not there is a clear error, exit 4.
  EXPECT_EQ(build({spec("pushed", "foo-tools"), "-o", (dir / "push-img").string(), "--push", "127.0.0.1:1/ml/x:1", "--plain-http"}, (dir / "cache-push").string(), &out, &err), 4);
  EXPECT_NE(err.find("pushing to"), std::string::npos) << err;
}


/// Every blob index.json reaches exists and has the digest it is named by.
std::string layout_problem(const fs::path& layout) {
  if (!fs::exists(layout / "index.json")) return "";
  const auto index = nlohmann::json::parse(read_all(layout / "index.json"), nullptr, false);
  if (index.is_discarded()) return "index.json is not JSON";
  auto check = [&](const std::string& digest) -> std::string {
    const fs::path p = layout / "blobs/sha256" / digest.substr(7);
    if (!fs::exists(p)) return "missing " + digest;
    if ("sha256:" + gpuenv::sha256_hex(read_all(p)) != digest) return "partial or wrong " + digest;
    return "";
  };
  for (const auto& m : index["manifests"]) {
    if (auto e = check(m["digest"]); !e.empty()) return e;
    const auto manifest = nlohmann::json::parse(read_all(layout / "blobs/sha256" / m["digest"].get<std::string>().substr(7)));
    if (auto e = check(manifest["config"]["digest"]); !e.empty()) return e;
    for (const auto& l : manifest["layers"])
      if (auto e = check(l["digest"]); !e.empty()) return e;
  }
  return "";
}

TEST_F(CliBuild, AnInterruptedBuildNeverLeavesAnIndexNamingAMissingOrPartialBlob) {
  const std::string s = spec("interrupted", "foo-tools");
  const fs::path layout = dir / "interrupted";
  std::string out, err;
  // The reference digest, from a build elsewhere; the cache is shared so that the runs below reach the layers.
  ASSERT_EQ(build({s, "-o", (dir / "interrupted-ref").string(), "--json"}, (dir / "cache-int").string(), &out, &err), 0) << err;
  const std::string digest = nlohmann::json::parse(out)["digest"];
  int interrupted = 0;
  for (int signal_number : {SIGKILL, SIGINT}) {
    for (int delay_ms : {5, 20, 50, 100, 200, 400, 700}) {
      fs::remove_all(layout);
      const pid_t pid = ::fork();
      if (pid == 0) {
        ::setenv("GPUENV_CACHE_DIR", (dir / "cache-int").c_str(), 1);
        ::setenv("HOME", dir.c_str(), 1);
        ::setenv("GPUENV_CONFIG", (dir / "no-config.yaml").c_str(), 1);
        ::execl(GPUENV_BINARY, GPUENV_BINARY, "build", s.c_str(), "-o", layout.c_str(), "--host-root", dir.c_str(), "--threads", "1",
                static_cast<char*>(nullptr));
        ::_exit(127);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
      ::kill(pid, signal_number);
      int status = 0;
      ::waitpid(pid, &status, 0);
      if (WIFSIGNALED(status)) ++interrupted;
      EXPECT_EQ(layout_problem(layout), "") << "signal " << signal_number << " after " << delay_ms << " ms";
    }
  }
  EXPECT_GT(interrupted, 4) << "the builds finished before the signals; the test proves little";
  // A killed first build leaves at most its hidden staging sibling, which the next build of that output removes.
  // A build after all that completes with the reference digest.
  ASSERT_EQ(build({s, "-o", layout.string(), "--json"}, (dir / "cache-int").string(), &out, &err), 0) << err;
  EXPECT_EQ(nlohmann::json::parse(out)["digest"], digest);
  EXPECT_EQ(layout_problem(layout), "");
  for (const auto& e : fs::directory_iterator(dir))
    EXPECT_EQ(e.path().filename().string().find(".interrupted.gpuenv-new-"), std::string::npos) << e.path();
}

TEST_F(CliBuild, AFailedFirstBuildLeavesNoOutputAndAFailedRebuildKeepsTheOldImage) {
  std::string out, err;
  const fs::path target = dir / "never-half";
  const std::string lock_path = (dir / "never-half.lock").string();
  ASSERT_EQ(lock(spec("never-half", "foo-tools"), lock_path, (dir / "cache-half").string(), &err), 0) << err;
  ASSERT_EQ(lock(spec("never-half", ""), lock_path + ".other", (dir / "cache-half").string(), &err), 0) << err;
  // Offline with an empty cache: the packages cannot be fetched, so the build fails while assembling the image.
  ASSERT_EQ(build({lock_path, "-o", target.string(), "--offline"}, (dir / "cache-half-empty").string(), &out, &err), 4) << err;
  EXPECT_FALSE(fs::exists(target)) << "a failed first build left " << target;
  fs::create_directories(target);  // an empty directory made for the image stays empty
  ASSERT_EQ(build({lock_path, "-o", target.string(), "--offline"}, (dir / "cache-half-empty").string(), &out, &err), 4) << err;
  EXPECT_TRUE(fs::is_empty(target));
  for (const auto& e : fs::directory_iterator(dir)) EXPECT_EQ(e.path().filename().string().find(".never-half.gpuenv-new-"), std::string::npos) << e.path();
  // A good build, then a failing one into the same layout: the first image is still there, whole.
  ASSERT_EQ(build({lock_path, "-o", target.string() + "/", "--json"}, (dir / "cache-half").string(), &out, &err), 0) << err;
  const std::string digest = nlohmann::json::parse(out)["digest"];
  ASSERT_EQ(build({lock_path + ".other", "-o", target.string(), "--offline"}, (dir / "cache-half-empty").string(), &out, &err), 4) << err;
  EXPECT_EQ(layout_problem(target), "");
  EXPECT_NE(read_all(target / "index.json").find(digest), std::string::npos);
}


TEST_F(CliBuild, InspectShowsLayersAndPackagesAndDiffShowsWhatChanged) {
  std::string out, err;
  const std::string a = (dir / "inspect-a").string(), b = (dir / "inspect-b").string();
  ASSERT_EQ(build({spec("inspected", "foo-tools"), "-o", a}, (dir / "cache-in").string(), &out, &err), 0) << err;
  ASSERT_EQ(build({spec("inspected", ""), "-o", b}, (dir / "cache-in").string(), &out, &err), 0) << err;
  auto run_cli = [&](std::vector<std::string> args) {
    std::ostringstream o, e;
    gpuenv::cli::Context ctx;
    ctx.out = &o;
    ctx.err = &e;
    EXPECT_EQ(gpuenv::cli::run(args, ctx), 0) << e.str();
    return o.str();
  };
  const auto j = nlohmann::json::parse(run_cli({"inspect", a, "--json"}));
  std::map<std::string, std::uint64_t> bytes;
  for (const auto& l : j["layers"])
    for (const auto& p : l["packages"]) bytes[l["name"].get<std::string>() + "/" + p["name"].get<std::string>()] = p["bytes"];
  EXPECT_GT(bytes["user/foo-tools"], 1000u);
  EXPECT_GT(bytes["base/libfoo1"], 1000u);
  EXPECT_GT(bytes["framework/torch"], 0u);
  EXPECT_NE(run_cli({"inspect", a}).find("layer user"), std::string::npos);
  const auto d = nlohmann::json::parse(run_cli({"inspect", a, "--diff", b, "--json"}));
  std::map<std::string, std::string> status;
  std::vector<std::string> removed;
  for (const auto& l : d["layers"]) {
    status[l["layer"]] = l["status"];
    for (const auto& p : l["packages"])
      if (p["after"].is_null()) removed.push_back(p["name"]);
  }
  EXPECT_EQ(status["framework"], "unchanged");
  EXPECT_EQ(status["base"], "changed");
  EXPECT_EQ(status["user"], "changed");
  std::sort(removed.begin(), removed.end());
  EXPECT_EQ(removed, (std::vector<std::string>{"foo-tools", "libfoo1"}));
}


TEST_F(CliBuild, AFullDiskIsAClearErrorAndLeavesNoIndex) {
  // A file size limit makes writes fail part way (EFBIG), as a full disk does (ENOSPC); SIGXFSZ is ignored so
  // that gpuenv sees the error instead of being killed.
  const std::string s = spec("diskfull", "foo-tools");
  std::string out, err;
  ASSERT_EQ(build({s, "-o", (dir / "diskfull-warm").string()}, (dir / "cache-df").string(), &out, &err), 0) << err;  // packages cached
  const fs::path layout = dir / "diskfull";
  const std::string cmd = "trap '' XFSZ; ulimit -f 64; GPUENV_CACHE_DIR=" + (dir / "cache-df").string() + " HOME=" + dir.string() +
                          " GPUENV_CONFIG=" + (dir / "none.yaml").string() + " " + GPUENV_BINARY + " build " + s + " -o " + layout.string() +
                          " --host-root " + dir.string() + " --offline 2>&1; echo rc=\\$?";
  const std::string result = capture("bash -c \"" + cmd + "\"");
  EXPECT_NE(result.find("rc=4"), std::string::npos) << result;
  EXPECT_NE(result.find("File too large"), std::string::npos) << result;
  EXPECT_FALSE(fs::exists(layout / "index.json")) << result;
  EXPECT_EQ(layout_problem(layout), "");
}

}  // namespace

// A base image from a registry (and from a layout): its layers come first, unchanged; its installed packages
// are not added again; gpuenv's layers hold only what is new, and programs find the base's libraries.
TEST_F(CliBuild, ExtendsABaseImagePulledFromARegistryOrReadFromALayout) {
  Registry registry(Registry::Setup::plain);
  if (!registry.skip_reason().empty()) GTEST_SKIP() << registry.skip_reason();
  std::string out, err;
  const std::string cache = (dir / "cache-base").string();
  const std::string base_ref = registry.host() + "/ml/base:1";
  ASSERT_EQ(build({spec("basea", "libfoo1"), "-o", (dir / "base-a").string(), "--push", base_ref, "--plain-http", "--json"}, cache, &out, &err), 0) << err;
  const auto a = nlohmann::json::parse(out);
  const std::map<std::string, std::string> insecure = {{"GPUENV_INSECURE_REGISTRIES", registry.host()}};

  ASSERT_EQ(build({spec("derived", "foo-tools", "docker://" + base_ref), "-o", (dir / "derived").string(), "--tag", "1", "--json"}, cache, &out, &err, insecure), 0) << err;
  const auto b = nlohmann::json::parse(out);
  ASSERT_GT(b["layers"].size(), a["layers"].size());
  for (std::size_t i = 0; i < a["layers"].size(); ++i) {
    EXPECT_EQ(b["layers"][i]["digest"], a["layers"][i]["digest"]) << i;
    EXPECT_EQ(b["layers"][i]["name"], "base-image");
  }
  // Only foo-tools is new: libc6, libfoo1, base-files and python3 come from the base.
  std::set<std::string> added;
  for (std::size_t i = a["layers"].size(); i < b["layers"].size(); ++i)
    for (const auto& p : b["layers"][i]["packages"]) added.insert(p.get<std::string>().substr(0, p.get<std::string>().find(' ')));
  EXPECT_TRUE(added.count("foo-tools"));
  for (const char* from_base : {"libc6", "libfoo1", "base-files", "python3"}) EXPECT_FALSE(added.count(from_base)) << from_base;

  // The derived image: skopeo reads it, its program runs and finds the base's library, dpkg knows both.
  EXPECT_EQ(nlohmann::json::parse(capture("skopeo inspect oci:" + (dir / "derived").string() + " 2>&1"))["Digest"], b["digest"]);
  const fs::path tree = dir / "derived-unpacked";
  ASSERT_TRUE(sh("umoci unpack --image " + (dir / "derived").string() + ":1 " + tree.string() + " >/dev/null 2>&1"));
  EXPECT_EQ(capture("chroot " + (tree / "rootfs").string() + " /usr/bin/foo-tool 2>&1"), "foo says 42\n");
  const std::string status = read_all(tree / "rootfs/var/lib/dpkg/status");
  for (const char* p : {"Package: foo-tools", "Package: libfoo1", "Package: libc6", "Package: base-files"}) EXPECT_NE(status.find(p), std::string::npos) << p;
  const std::string image_lock = read_all(tree / "rootfs/usr/share/gpuenv/gpuenv.lock");
  EXPECT_NE(image_lock.find("base_image: \"docker://" + base_ref + "@" + a["digest"].get<std::string>() + "\""), std::string::npos) << image_lock;
  // The SBOM names the base image and the packages it brought.
  const auto sbom = nlohmann::json::parse(read_all(tree / "rootfs/usr/share/gpuenv/sbom.spdx.json"));
  std::set<std::string> sbom_names;
  for (const auto& p : sbom["packages"]) sbom_names.insert(p["name"].get<std::string>());
  for (const char* p : {"foo-tools", "libfoo1", "libc6", "base-files"}) EXPECT_TRUE(sbom_names.count(p)) << p;
  EXPECT_TRUE(sbom_names.count("docker://" + base_ref + "@" + a["digest"].get<std::string>()));
  const auto config = nlohmann::json::parse(capture("skopeo inspect --config oci:" + (dir / "derived").string() + " 2>&1"));
  EXPECT_EQ(config["config"]["Labels"]["org.opencontainers.image.base.digest"], a["digest"]);

  // The same from the layout itself, and the same digest again from the lock alone, offline.
  ASSERT_EQ(build({spec("derived", "foo-tools", "oci:" + (dir / "base-a").string()), "-o", (dir / "derived-oci").string(), "--json"}, cache, &out, &err), 0) << err;
  const auto c = nlohmann::json::parse(out);
  EXPECT_EQ(c["layers"][0]["digest"], a["layers"][0]["digest"]);
  std::ofstream(dir / "derived.lock") << image_lock;
  ASSERT_EQ(build({(dir / "derived.lock").string(), "-o", (dir / "derived-again").string(), "--json", "--offline"}, cache, &out, &err), 0) << err;
  EXPECT_EQ(nlohmann::json::parse(out)["digest"], b["digest"]);

  // A base that does not exist, or that says nothing about its distribution: clear errors.
  EXPECT_EQ(build({spec("derived", "foo-tools", "docker://" + registry.host() + "/ml/nothere:1"), "-o", (dir / "nothere").string()}, cache, &out, &err, insecure), 4);
  EXPECT_NE(err.find("pulling the base image"), std::string::npos) << err;
  EXPECT_FALSE(fs::exists(dir / "nothere" / "index.json"));
}

// zstd layers: the option changes the media type and the digest, stays reproducible across thread counts, and
// independent readers (skopeo copy, the zstd tool) and gpuenv run accept the image.
TEST_F(CliBuild, ZstdLayersAreReproducibleAndReadable) {
  if (std::system("command -v skopeo >/dev/null && command -v zstd >/dev/null") != 0) GTEST_SKIP() << "skopeo or zstd missing (scripts/deps.sh installs them)";
  const std::string s = spec("zstd-image", "foo-tools");
  std::string out, err;
  ASSERT_EQ(build({s, "-o", (dir / "zstd-gz").string(), "--json"}, (dir / "cache-zstd").string(), &out, &err), 0) << err;
  const std::string gzip_digest = nlohmann::json::parse(out)["digest"];
  ASSERT_EQ(build({s, "-o", (dir / "zstd-1").string(), "--compression", "zstd", "--threads", "1", "--tag", "1", "--json"}, (dir / "cache-zstd").string(), &out, &err), 0) << err;
  const auto one = nlohmann::json::parse(out);
  ASSERT_EQ(build({s, "-o", (dir / "zstd-4").string(), "--compression", "zstd", "--threads", "4", "--json"}, (dir / "cache-zstd-cold").string(), &out, &err), 0) << err;
  const auto four = nlohmann::json::parse(out);
  EXPECT_EQ(one["digest"], four["digest"]);
  EXPECT_NE(one["digest"], gzip_digest);
  const auto manifest = nlohmann::json::parse(capture("skopeo inspect --raw oci:" + (dir / "zstd-1").string() + ":1 2>&1"));
  for (const auto& l : manifest["layers"]) {
    EXPECT_EQ(l["mediaType"], "application/vnd.oci.image.layer.v1.tar+zstd");
    const std::string blob = (dir / "zstd-1/blobs/sha256" / l["digest"].get<std::string>().substr(7)).string();
    EXPECT_TRUE(sh("zstd -q -t " + blob)) << blob;
  }
  EXPECT_TRUE(sh("skopeo copy -q oci:" + (dir / "zstd-1").string() + ":1 dir:" + (dir / "zstd-copy").string() + " >/dev/null 2>&1"));
  // gpuenv run unpacks the zstd layers itself.
  if (std::system("command -v bwrap >/dev/null") == 0 || ::geteuid() == 0)
    EXPECT_EQ(capture("GPUENV_CACHE_DIR=" + (dir / "cache-zstd").string() + " " + GPUENV_BINARY + " run " + (dir / "zstd-1").string() + " --no-gpu -- /usr/bin/foo-tool 2>&1"),
              "foo says 42\n");
}

namespace {

// Issue 12: a spec with CUDA and cuDNN and no framework gets them, from NVIDIA's apt repository when one is
// configured, else from NVIDIA's wheels; never an image without them.
class CliCuda : public CliBuild {
 protected:
  std::string cuda_spec(const std::string& name, const std::string& cuda, bool nvidia_repo) {
    const std::string path = (dir / (name + "-" + std::to_string(server->port()) + ".yaml")).string();
    std::ofstream f(path);
    f << "name: " << name << "\nbase: 'debian:12'\ncuda: '" << cuda << "'\ncudnn: '9.17.0'\ngpu: {models: [L4], driver: '550.54.15'}\n"
      << "sources:\n  apt:\n    - {uri: '" << server->url("debian") << "', suite: bookworm, components: [main], signed_by: '" << (dir / "repo.gpg").string() << "'}\n";
    if (nvidia_repo) f << "    - {uri: '" << server->url("cuda") << "', suite: '/', signed_by: '" << (dir / "repo.gpg").string() << "'}\n";
    f << "  pip:\n    index_url: '" << server->url("simple") << "'\n";
    return path;
  }
  // Every path in the image's layers, read from the layer blobs the manifest names.
  static std::string layer_paths(const fs::path& layout) {
    const auto index = nlohmann::json::parse(read_all(layout / "index.json"));
    const std::string manifest = index["manifests"][0]["digest"].get<std::string>().substr(7);
    std::string out;
    const auto m = nlohmann::json::parse(read_all(layout / "blobs/sha256" / manifest));
    for (const auto& l : m["layers"])
      out += capture("tar -tzf " + (layout / "blobs/sha256" / l["digest"].get<std::string>().substr(7)).string() + " 2>&1");
    return out;
  }
  // The probe of tests/data/cuda_versions.c, compiled against the CUDA headers and the stub libraries, run
  // inside the image.
  std::string probe(const std::string& layout, const std::string& cache) {
    const fs::path bin = dir / "cuda_versions";
    const fs::path stubs = dir / "cuda-stubs";
    if (!fs::exists(bin) && !sh("cc -DWITH_CUDNN -I/usr/local/cuda/include -o " + bin.string() + " " + GPUENV_SOURCE_DIR + "/tests/data/cuda_versions.c " +
                                (stubs / "libcudart.so.12").string() + " " + (stubs / "libcudnn.so.9").string()))
      return "cannot compile the probe";
    return capture("GPUENV_CACHE_DIR=" + cache + " " + GPUENV_BINARY + " run " + layout + " --no-gpu --bind " + bin.string() +
                   ":/tmp/probe/cuda_versions -- /tmp/probe/cuda_versions 2>&1");
  }
  void SetUp() override {
    CliBuild::SetUp();
    if (IsSkipped()) return;
    if (!fs::exists("/usr/local/cuda/include/cuda_runtime_api.h") || !fs::exists("/usr/local/cuda/include/cudnn.h"))
      GTEST_SKIP() << "the CUDA and cuDNN headers are not under /usr/local/cuda/include";
    if (std::system("command -v bwrap >/dev/null") != 0) GTEST_SKIP() << "bubblewrap missing";
  }
};

TEST_F(CliCuda, WithoutACudaRepositoryNvidiasWheelsBringCudaAndCudnn) {
  const std::string layout = (dir / "cuda-wheels").string(), cache = (dir / "cache-cuda-w").string();
  std::string out, err;
  ASSERT_EQ(build({cuda_spec("cuda-wheels", "12.9.1", false), "-o", layout, "--json"}, cache, &out, &err), 0) << err << out;
  std::vector<std::string> layers;
  const auto result = nlohmann::json::parse(out);
  for (const auto& l : result["layers"]) layers.push_back(l["name"]);
  EXPECT_NE(std::find(layers.begin(), layers.end(), "cuda"), layers.end()) << out;
  EXPECT_NE(std::find(layers.begin(), layers.end(), "cudnn"), layers.end()) << out;
  const std::string paths = layer_paths(layout);
  const std::string site = "usr/local/lib/python3.11/dist-packages/";
  for (const char* f : {"nvidia/cuda_runtime/lib/libcudart.so.12", "nvidia/cublas/lib/libcublas.so.12", "nvidia/cudnn/lib/libcudnn.so.9",
                        "nvidia_cuda_runtime_cu12-12.9.79.dist-info/METADATA", "nvidia_cublas_cu12-12.9.1.4.dist-info/METADATA",
                        "nvidia_cudnn_cu12-9.17.0.29.dist-info/METADATA"})
    EXPECT_NE(paths.find(site + f), std::string::npos) << f << "\n" << paths;
  EXPECT_EQ(probe(layout, cache), "cudart 12090 cudnn 91700\n");
}

TEST_F(CliCuda, NvidiasAptRepositoryWinsWhenConfiguredAtTheReleasesOwnVersions) {
  const std::string layout = (dir / "cuda-apt").string(), cache = (dir / "cache-cuda-a").string();
  std::string out, err;
  ASSERT_EQ(build({cuda_spec("cuda-apt", "12.9.1", true), "-o", layout}, cache, &out, &err), 0) << err << out;
  const std::string paths = layer_paths(layout);
  EXPECT_NE(paths.find("usr/local/cuda-12.9/targets/x86_64-linux/lib/libcudart.so.12.9.79"), std::string::npos) << paths;
  EXPECT_NE(paths.find("usr/local/cuda-12.9/targets/x86_64-linux/lib/libcublas.so.12"), std::string::npos) << paths;
  EXPECT_NE(paths.find("usr/lib/x86_64-linux-gnu/libcudnn.so.9"), std::string::npos) << paths;
  EXPECT_EQ(paths.find("dist-packages/nvidia"), std::string::npos) << "one CUDA source per image\n" << paths;
  // The packages say which versions: 12.9.1's cudart (not 12.9.0's), cuDNN 9.17.0 (not the newer 9.18).
  const auto inspect = capture("GPUENV_CACHE_DIR=" + cache + " " + GPUENV_BINARY + " inspect " + layout + " --all 2>&1");
  EXPECT_NE(inspect.find("cuda-cudart-12-9 12.9.79-1"), std::string::npos) << inspect;
  EXPECT_NE(inspect.find("libcublas-12-9 12.9.1.4-1"), std::string::npos) << inspect;
  EXPECT_NE(inspect.find("libcudnn9-cuda-12 9.17.0.29-1"), std::string::npos) << inspect;
  EXPECT_EQ(probe(layout, cache), "cudart 12090 cudnn 91700\n");
}

TEST_F(CliCuda, NoSourceWithTheResolvedReleaseIsExitThreeNamingWhatWasLookedFor) {
  const std::string layout = (dir / "cuda-none").string();
  std::string out, err;
  EXPECT_EQ(build({cuda_spec("cuda-none", "12.8.1", true), "-o", layout}, (dir / "cache-cuda-n").string(), &out, &err), 3) << err << out;
  EXPECT_NE(err.find("cuda-libraries-12-8 12.8.1"), std::string::npos) << err;
  EXPECT_NE(err.find("cuda-toolkit[cudart,cublas]==12.8.1"), std::string::npos) << err;
  EXPECT_NE(err.find("nvidia-cudnn-cu12==9.17.0.*"), std::string::npos) << err;
  EXPECT_FALSE(fs::exists(fs::path(layout) / "index.json"));
}

}  // namespace

// ---- The build cache shared through a registry (docs/build.md "A cache shared through the registry") ----------

namespace {

/// What a `--json` build said of its cache, its push and its layers.
struct CacheBuild {
  int code = -1;
  nlohmann::json j;
  std::string err;
  [[nodiscard]] int cache(const char* field) const { return j.contains("cache") ? j["cache"].value(field, -1) : -1; }
};

/// The cache at REF as a test reads and writes it directly: over plain HTTP, as any writer that can push could.
struct DirectCache {
  explicit DirectCache(const std::string& ref)
      : http(gpuenv::make_curl_http_client(gpuenv::HttpOptions{})), client(*http, plain()), store(client, *gpuenv::images::parse_image_reference(ref)) {}
  static gpuenv::images::RegistryOptions plain() {
    gpuenv::images::RegistryOptions ro;
    ro.plain_http = true;
    return ro;
  }
  /// Its documents, newest first.
  std::vector<gpuenv::images::StoredDocument> documents() {
    auto read = store.read();
    return read ? read->documents : std::vector<gpuenv::images::StoredDocument>{};
  }
  std::unique_ptr<gpuenv::HttpClient> http;
  gpuenv::images::RegistryClient client;
  gpuenv::images::RegistryBuildCache store;
};


class CliBuildCache : public CliBuild {
 protected:
  void SetUp() override {
    CliBuild::SetUp();
    if (IsSkipped()) return;
    registry = std::make_unique<Registry>(Registry::Setup::plain);
    if (!registry->skip_reason().empty()) GTEST_SKIP() << registry->skip_reason();
    keys = gpuenv::marks::generate_key_pair((tmp() / "keys").string(), false).value();
    other_keys = gpuenv::marks::generate_key_pair((tmp() / "other-keys").string(), false).value();
  }

  /// A lock of the spec NAME (foo-tools, and PIP), made once.
  std::string make_lock(const std::string& name, const std::string& pip) {
    const std::string lock_path = (tmp() / (name + ".lock")).string();
    std::string err;
    EXPECT_EQ(lock(spec(name, "foo-tools", "debian:12", pip), lock_path, (tmp() / "lock-cache").string(), &err), 0) << err;
    return lock_path;
  }

  /// `gpuenv build LOCK --json` by a runner with its own empty cache (RUNNER names it) and ARGS; counts what it fetched.
  CacheBuild run(const std::string& runner, const std::string& lock_path, std::vector<std::string> args) {
    CacheBuild r;
    fetched = 0;
    wrap_fetcher = [this](std::unique_ptr<gpuenv::Fetcher> inner) -> std::unique_ptr<gpuenv::Fetcher> {
      return std::make_unique<CountingFetcher>(std::move(inner), &fetched);
    };
    args.insert(args.begin(), {lock_path, "-o", (tmp() / ("out-" + runner)).string(), "--json", "--plain-http"});
    std::string out;
    r.code = build(args, (tmp() / ("cache-" + runner)).string(), &out, &r.err);
    wrap_fetcher = nullptr;
    r.j = nlohmann::json::parse(out, nullptr, false);
    return r;
  }

  [[nodiscard]] std::string ref(const std::string& path) const { return registry->host() + "/" + path; }

  /// Counts the files a build asks its fetcher for.
  class CountingFetcher final : public gpuenv::Fetcher {
   public:
    CountingFetcher(std::unique_ptr<gpuenv::Fetcher> inner, std::atomic<int>* count) : m_inner(std::move(inner)), m_count(count) {}
    gpuenv::Result<std::string> get(const std::string& url, const std::string& accept) override {
      ++*m_count;
      return m_inner->get(url, accept);
    }
    gpuenv::Result<std::string> get_range(const std::string& url, std::uint64_t offset, std::uint64_t length) override {
      ++*m_count;
      return m_inner->get_range(url, offset, length);
    }
    std::vector<gpuenv::Result<gpuenv::FetchedFile>> fetch_all(const std::vector<gpuenv::FetchRequest>& requests) override { return fetch_each(requests, {}); }
    std::vector<gpuenv::Result<gpuenv::FetchedFile>> fetch_each(const std::vector<gpuenv::FetchRequest>& requests, const FetchDone& done) override {
      *m_count += static_cast<int>(requests.size());
      return m_inner->fetch_each(requests, done);
    }

   private:
    std::unique_ptr<gpuenv::Fetcher> m_inner;
    std::atomic<int>* m_count;
  };

  std::unique_ptr<Registry> registry;
  gpuenv::marks::KeyPairFiles keys, other_keys;
  std::atomic<int> fetched{0};
  gpuenv::testing::RegistryTempDir m_tmp;
  [[nodiscard]] fs::path tmp() const { return fs::path(m_tmp.path()); }
};

// Runner A builds and pushes with the cache; runner B, with an empty cache of its own, builds the same lock and
// pushes it to the same registry: the whole image comes from the cache (no package fetched, no layer written, no
// layer downloaded: they stay in the registry), nothing is uploaded, and the digest is A's, which a cold build also
// gives. Runner C, not pushing, downloads the layers into a complete layout.
TEST_F(CliBuildCache, ASecondRunnerTakesTheWholeImageWithoutAPackageOrAnUpload) {
  const std::string lock_path = make_lock("shared", "safetensors");
  const std::string cache = ref("ml/cache:main");
  const CacheBuild a = run("a", lock_path, {"--cache", cache, "--cache-key", keys.private_key, "--push", ref("ml/app:a")});
  ASSERT_EQ(a.code, 0) << a.err << a.j.dump();
  EXPECT_EQ(a.cache("images_written"), 1) << a.j.dump();
  EXPECT_GE(a.cache("layers_written"), 4) << a.j.dump();
  EXPECT_EQ(a.cache("images_taken"), 0);
  EXPECT_GT(fetched.load(), 0);
  const std::string digest = a.j["digest"];

  const CacheBuild b = run("b", lock_path, {"--cache", cache, "--cache-key", keys.private_key, "--push", ref("ml/app:b")});
  ASSERT_EQ(b.code, 0) << b.err << b.j.dump();
  EXPECT_EQ(b.j["digest"], digest);
  EXPECT_EQ(b.j["push"]["digest"], digest);
  EXPECT_EQ(b.j["push"]["blobs_uploaded"], 0) << b.j.dump();
  EXPECT_EQ(b.cache("images_taken"), 1) << b.j.dump();
  EXPECT_EQ(b.cache("layers_remote"), static_cast<int>(a.j["layers"].size())) << "same registry: no layer downloaded";
  EXPECT_EQ(b.cache("images_written"), 0) << "nothing new to write";
  EXPECT_EQ(fetched.load(), 0) << "no package fetched";
  EXPECT_FALSE(fs::exists(tmp() / "cache-b" / "trees") && !fs::is_empty(tmp() / "cache-b" / "trees")) << "nothing unpacked";
  if (gpuenv::testing::have("skopeo")) {
    // Every blob of B's image is in B's repository (mounted from the cache's or already there): skopeo copies it whole.
    EXPECT_TRUE(sh("skopeo copy --quiet --src-tls-verify=false docker://" + ref("ml/app:b") + " oci:" + (tmp() / "skopeo-b").string() + ":b >/dev/null 2>&1"));
  }

  const CacheBuild c = run("c", lock_path, {"--cache", cache, "--cache-key", keys.public_key});
  ASSERT_EQ(c.code, 0) << c.err << c.j.dump();
  EXPECT_EQ(c.j["digest"], digest);
  EXPECT_EQ(c.cache("layers_remote"), 0);
  EXPECT_TRUE(c.j["cache"]["read_only"].get<bool>());
  EXPECT_EQ(layout_problem(tmp() / "out-c"), "") << "a layout of every blob";
  EXPECT_EQ(fetched.load(), 0);

  const CacheBuild cold = run("cold", lock_path, {});
  ASSERT_EQ(cold.code, 0) << cold.err;
  EXPECT_EQ(cold.j["digest"], digest);
  EXPECT_FALSE(cold.j.contains("cache"));
}

// With one pip package added, a fresh runner takes every layer the change left alone from the cache (their files
// checked against its own tree) and uploads only the layers that changed, and the image is a cold build's.
TEST_F(CliBuildCache, AnAddedPackageUploadsOnlyTheLayersThatChanged) {
  const std::string first = make_lock("grow-a", "safetensors"), second = make_lock("grow-b", "safetensors, numpy");
  const std::string cache = ref("ml/cache:grow");
  const CacheBuild a = run("a", first, {"--cache", cache, "--cache-key", keys.private_key, "--push", ref("ml/grow:a")});
  ASSERT_EQ(a.code, 0) << a.err << a.j.dump();
  const CacheBuild b = run("b", second, {"--cache", cache, "--cache-key", keys.private_key, "--push", ref("ml/grow:b")});
  ASSERT_EQ(b.code, 0) << b.err << b.j.dump();
  const CacheBuild cold = run("cold", second, {});
  ASSERT_EQ(cold.code, 0) << cold.err;
  EXPECT_EQ(b.j["digest"], cold.j["digest"]);
  EXPECT_EQ(b.cache("images_taken"), 0);
  std::set<std::string> first_layers, changed;
  for (const auto& l : a.j["layers"]) first_layers.insert(l["digest"].get<std::string>());
  for (const auto& l : b.j["layers"])
    if (!first_layers.count(l["digest"].get<std::string>())) changed.insert(l["name"].get<std::string>());
  EXPECT_EQ(changed, (std::set<std::string>{"framework", "user", "metadata"})) << b.j.dump();
  EXPECT_EQ(b.cache("layers_taken"), static_cast<int>(b.j["layers"].size() - changed.size())) << b.j.dump();
  EXPECT_EQ(b.j["push"]["blobs_uploaded"], static_cast<int>(changed.size()) + 1) << "the changed layers and the config: " << b.j.dump();
  EXPECT_EQ(b.cache("layers_written"), static_cast<int>(changed.size()));
}

// Trust: a document not signed by the cache key (signed by another, or not at all) is refused, and one signed by the
// key whose image entry names another build's manifest is refused by the assembler's check; each build goes on cold,
// says why, and gets the cold build's digest.
TEST_F(CliBuildCache, APoisonedEntryIsRefusedAndTheBuildGoesOnCold) {
  const std::string lock_a = make_lock("trust-a", "safetensors"), lock_b = make_lock("trust-b", "safetensors, numpy");
  const std::string cache = ref("ml/cache:trust");
  const CacheBuild a = run("a", lock_a, {"--cache", cache, "--cache-key", keys.private_key});
  ASSERT_EQ(a.code, 0) << a.err << a.j.dump();
  const CacheBuild other = run("b", lock_b, {"--cache", cache, "--cache-key", keys.private_key});
  ASSERT_EQ(other.code, 0) << other.err << other.j.dump();
  // The two documents (written within one second, so told apart by the image each names).
  DirectCache direct(cache);
  auto docs = direct.documents();
  ASSERT_EQ(docs.size(), 2u);
  auto payload = [](const gpuenv::images::StoredDocument& d) {
    auto e = gpuenv::marks::parse_envelope(d.envelope, d.where);
    return gpuenv::images::parse_cache_document(e.value().payload, d.where).value();
  };
  auto doc_a = payload(docs[0]), doc_b = payload(docs[1]);
  ASSERT_EQ(doc_a.images.size(), 1u);
  ASSERT_EQ(doc_b.images.size(), 1u);
  if (doc_a.images[0].manifest.digest.str() != a.j["digest"]) std::swap(doc_a, doc_b);
  ASSERT_EQ(doc_a.images[0].manifest.digest.str(), a.j["digest"]);
  ASSERT_EQ(doc_b.images[0].manifest.digest.str(), other.j["digest"]);
  // A's image key mapped to B's image: the poison.
  gpuenv::images::CacheDocument poison;
  poison.generator = doc_a.generator;
  poison.images = doc_b.images;
  poison.images[0].key = doc_a.images[0].key;
  const std::string text = gpuenv::images::render_cache_document(poison);
  auto write = [&](const std::string& envelope, const std::string& created) {
    std::vector<gpuenv::images::CacheBlob> blobs;
    for (const auto& d : poison.blobs()) blobs.push_back({d, gpuenv::images::BlobSource::remote(d.digest, d.size)});
    ASSERT_TRUE(direct.store.write(envelope, blobs, "", created)) << "writing the poisoned document";
  };
  const auto signed_by = [&](const std::string& key_path) {
    auto key = gpuenv::marks::read_private_key(key_path);
    return gpuenv::marks::sign_envelope(text, gpuenv::images::k_build_cache_payload_type, key.value()).value();
  };
  // 1. Signed by another key (someone who can write to the registry, not the cache's key holder).
  write(signed_by(other_keys.private_key), "2100-01-01T00:00:00Z");
  CacheBuild r = run("forged", lock_a, {"--cache", cache, "--cache-key", keys.public_key});
  ASSERT_EQ(r.code, 0) << r.err << r.j.dump();
  EXPECT_EQ(r.j["digest"], a.j["digest"]);
  EXPECT_EQ(r.cache("refused"), 1) << r.j.dump();
  EXPECT_NE(r.j["cache"]["notes"].dump().find("not signed by the cache key"), std::string::npos) << r.j.dump();
  EXPECT_EQ(r.cache("images_taken"), 1) << "A's own document still serves A's lock";
  // 2. Not signed at all.
  write(R"({"payload":")" + gpuenv::base64_encode(text) + R"(","payloadType":")" + std::string(gpuenv::images::k_build_cache_payload_type) + R"(","signatures":[]})",
        "2100-01-02T00:00:00Z");
  r = run("unsigned", lock_a, {"--cache", cache, "--cache-key", keys.public_key});
  ASSERT_EQ(r.code, 0) << r.err << r.j.dump();
  EXPECT_EQ(r.cache("refused"), 2) << r.j.dump();
  EXPECT_NE(r.j["cache"]["notes"].dump().find("not signed"), std::string::npos) << r.j.dump();
  EXPECT_EQ(r.j["digest"], a.j["digest"]);
  // 3. Signed by the cache key, the newest document: its entry for A's image names B's manifest. Refused by the check of
  // the manifest's build key; A's lock is built cold and gets A's digest.
  write(signed_by(keys.private_key), "2100-01-03T00:00:00Z");
  r = run("poisoned", lock_a, {"--cache", cache, "--cache-key", keys.public_key});
  ASSERT_EQ(r.code, 0) << r.err << r.j.dump();
  EXPECT_EQ(r.j["digest"], a.j["digest"]);
  EXPECT_EQ(r.cache("images_taken"), 0) << r.j.dump();
  EXPECT_NE(r.j["cache"]["notes"].dump().find("built from another lock"), std::string::npos) << r.j.dump();
  EXPECT_GT(fetched.load(), 0) << "built cold";
  // 4. Signed by the cache key, a layer entry: A's user layer's key mapped to A's base layer. A lock whose image the
  // cache lacks but whose layers are A's (another name: only its metadata layer differs) takes the other layers and
  // refuses that one, whose file list is not the user layer's, and writes it.
  ASSERT_GE(doc_a.layers.size(), 2u);
  const auto find_layer = [&](const std::string& name) {
    return *std::find_if(doc_a.layers.begin(), doc_a.layers.end(), [&](const auto& l) { return l.name == name; });
  };
  gpuenv::images::CachedLayer bad = find_layer("base");
  bad.key = find_layer("user").key;
  bad.name = "user";
  poison = {};
  poison.generator = doc_a.generator;
  poison.layers = {bad};
  const std::string layer_text = gpuenv::images::render_cache_document(poison);
  // One second after A's document: newer than the entry it shadows, older than what the next build writes.
  const auto a_created = gpuenv::parse_rfc3339_utc(docs[doc_a.images[0].manifest.digest.str() == payload(docs[0]).images[0].manifest.digest.str() ? 0 : 1].created);
  ASSERT_TRUE(a_created.has_value());
  write(gpuenv::marks::sign_envelope(layer_text, gpuenv::images::k_build_cache_payload_type, gpuenv::marks::read_private_key(keys.private_key).value()).value(),
        gpuenv::format_rfc3339_utc(*a_created + 1));
  const std::string lock_c = make_lock("trust-c", "safetensors");
  r = run("layer-poisoned", lock_c, {"--cache", cache, "--cache-key", keys.private_key});  // a writer
  ASSERT_EQ(r.code, 0) << r.err << r.j.dump();
  EXPECT_NE(r.j["cache"]["notes"].dump().find("another file list"), std::string::npos) << r.j.dump();
  EXPECT_EQ(r.cache("layers_taken"), static_cast<int>(r.j["layers"].size()) - 2) << "all but user and metadata: " << r.j.dump();
  const CacheBuild cold_c = run("cold-c", lock_c, {});
  ASSERT_EQ(cold_c.code, 0) << cold_c.err;
  EXPECT_EQ(r.j["digest"], cold_c.j["digest"]);
  // The refused entry's key got this build's layer, in a newer document: the next runner takes every layer.
  const CacheBuild after = run("after-poison", make_lock("trust-d", "safetensors"), {"--cache", cache, "--cache-key", keys.public_key});
  ASSERT_EQ(after.code, 0) << after.err << after.j.dump();
  EXPECT_EQ(after.cache("layers_taken"), static_cast<int>(after.j["layers"].size()) - 1) << "all but metadata: " << after.j.dump();
}

// An image a runner built before it used the cache (its layout already holds it) is written to the cache by the
// next build with --cache, which changes nothing else; another runner then takes it whole.
TEST_F(CliBuildCache, AnImageBuiltBeforeTheCacheIsWrittenToIt) {
  const std::string lock_path = make_lock("before", "safetensors");
  const std::string cache = ref("ml/cache:before");
  const CacheBuild first = run("a", lock_path, {});
  ASSERT_EQ(first.code, 0) << first.err;
  const CacheBuild again = run("a", lock_path, {"--cache", cache, "--cache-key", keys.private_key});
  ASSERT_EQ(again.code, 0) << again.err << again.j.dump();
  EXPECT_TRUE(again.j["unchanged"].get<bool>());
  EXPECT_EQ(again.cache("images_written"), 1) << again.j.dump();
  const CacheBuild b = run("b", lock_path, {"--cache", cache, "--cache-key", keys.public_key});
  ASSERT_EQ(b.code, 0) << b.err << b.j.dump();
  EXPECT_EQ(b.cache("images_taken"), 1) << b.j.dump();
  EXPECT_EQ(b.j["digest"], first.j["digest"]);
  EXPECT_EQ(layout_problem(tmp() / "out-b"), "");
}

// A registry that never mounts one repository's blobs into another (as some do not): the layers the cache left in the
// registry are downloaded when the push finds them missing, and the image is pushed whole, with A's digest.
TEST_F(CliBuildCache, ARegistryThatNeverMountsGetsTheTakenLayersPushedWhole) {
  const std::string lock_path = make_lock("nomount", "safetensors");
  gpuenv::testing::MemoryRegistry memory("registry.test:5000");
  http_client = [&](const gpuenv::HttpOptions&) -> std::unique_ptr<gpuenv::HttpClient> { return std::make_unique<gpuenv::testing::MemoryRegistry::Client>(memory); };
  const std::string cache = "registry.test:5000/ml/cache:main";
  const CacheBuild a = run("a", lock_path, {"--cache", cache, "--cache-key", keys.private_key, "--push", "registry.test:5000/ml/app:a"});
  ASSERT_EQ(a.code, 0) << a.err << a.j.dump();
  memory.decline_mounts();
  const CacheBuild b = run("b", lock_path, {"--cache", cache, "--cache-key", keys.private_key, "--push", "registry.test:5000/ml/other:b"});
  http_client = nullptr;
  ASSERT_EQ(b.code, 0) << b.err << b.j.dump();
  EXPECT_EQ(b.j["digest"], a.j["digest"]);
  EXPECT_EQ(b.j["push"]["digest"], a.j["digest"]);
  EXPECT_EQ(b.cache("images_taken"), 1);
  EXPECT_EQ(b.cache("layers_remote"), 0) << b.j.dump();
  EXPECT_NE(b.j["cache"]["notes"].dump().find("would not mount"), std::string::npos) << b.j.dump();
  // Every layer and the config went up (the first, refused push had sent some of them already), none mounted.
  EXPECT_EQ(b.j["push"]["blobs_uploaded"].get<int>() + b.j["push"]["blobs_present"].get<int>(), static_cast<int>(b.j["layers"].size()) + 1) << b.j.dump();
  EXPECT_EQ(b.j["push"]["blobs_mounted"], 0) << b.j.dump();
  EXPECT_GE(b.j["push"]["blobs_uploaded"].get<int>(), 1) << b.j.dump();
  EXPECT_EQ(layout_problem(tmp() / "out-b"), "");
  EXPECT_EQ(fetched.load(), 0);
}

// Without a key the cache is not used: a clear usage error before anything is built. A VM lock refuses --cache.
TEST_F(CliBuildCache, ACacheNeedsAKey) {
  const std::string lock_path = make_lock("nokey", "safetensors");
  const CacheBuild r = run("nokey", lock_path, {"--cache", ref("ml/cache:x")});
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("--cache-key"), std::string::npos) << r.err;
  EXPECT_EQ(fetched.load(), 0);
}

}  // namespace
