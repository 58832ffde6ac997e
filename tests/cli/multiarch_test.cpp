// A two-platform image end to end, offline: a signed apt repository on 127.0.0.1 with an amd64 and an arm64
// index, `gpuenv lock` pinning each platform from its own index, `gpuenv build` writing one image per platform under
// an OCI index (the same bytes from another cache and directory), skopeo picking each platform, and `gpuenv run
// --platform linux/arm64` starting the arm64 program through qemu-aarch64-static (when this machine has it and an
// aarch64 cross compiler to make the program).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "marks/keys.hpp"
#include "base/digest.hpp"
#include "base/net/curl_fetcher.hpp"
#include "fakes/docker_registry.hpp"
#include "cli/context.hpp"
#include "fakes/files.hpp"
#include "fakes/loopback_server.hpp"
#include "fakes/scratch.hpp"
#include "fakes/shell.hpp"
#include "resolver/lockfile.hpp"

namespace {
namespace multiarch_test {

namespace fs = std::filesystem;

bool run_shell(const std::string& cmd) { return std::system(cmd.c_str()) == 0; }

std::string shell_output(const std::string& cmd) { return gpuenv::testing::capture(cmd); }

class CliMultiPlatform : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!run_shell("command -v gpg >/dev/null && command -v gpgv >/dev/null && command -v dpkg-deb >/dev/null && command -v dpkg-scanpackages >/dev/null && "
                   "command -v cc >/dev/null"))
      return;
    dir = fs::temp_directory_path() / ("gpuenv-multiarch-" + std::to_string(::getpid()));
    const fs::path www = dir / "www";
    fs::create_directories(dir / "gnupg");
    fs::permissions(dir / "gnupg", fs::perms::owner_all);
    const std::string gpg = "GNUPGHOME=" + (dir / "gnupg").string() + " gpg --batch --quiet --passphrase '' ";
    bool ok = run_shell(gpg + "--quick-gen-key 'repo <r@example.com>' ed25519 sign never 2>/dev/null") && run_shell(gpg + "--export > " + (dir / "repo.gpg").string());
    fs::create_directories(www / "debian/pool");
    auto deb = [&](const std::string& name, const std::string& arch, const std::function<bool(const fs::path&)>& fill) {
      const fs::path pkg = dir / "build" / (name + "-" + arch);
      fs::create_directories(pkg / "DEBIAN");
      std::ofstream(pkg / "DEBIAN/control") << "Package: " << name << "\nVersion: 1.0-1\nArchitecture: " << arch
                                            << "\nMaintainer: t <t@example.com>\nDescription: test\n";
      return fill(pkg) && run_shell("dpkg-deb --root-owner-group --build " + pkg.string() + " " + (www / "debian/pool" / (name + "_" + arch + ".deb")).string() + " >/dev/null");
    };
    ok = ok && deb("base-files", "all", [](const fs::path& p) {
      fs::create_directories(p / "usr/lib");
      std::ofstream(p / "usr/lib/os-release") << "ID=debian\nVERSION_ID=\"12\"\n";
      return true;
    });
    // The program: a static one of each architecture (no loader or libc needed in the image). The arm64 one needs
    // an aarch64 cross compiler; without it the arm64 package holds a text file in its place.
    std::ofstream(dir / "hello.c") << "#include <stdio.h>\nint main(void){\n#if defined(__aarch64__)\nputs(\"hello from aarch64\");\n#else\nputs(\"hello from x86_64\");\n#endif\nreturn 0;}\n";
    have_arm64_program = run_shell("command -v aarch64-linux-gnu-gcc >/dev/null");
    for (const std::string arch : {"amd64", "arm64"}) {
      ok = ok && deb("arch-note", arch, [&](const fs::path& p) {
        fs::create_directories(p / "usr/share/arch-note");
        std::ofstream(p / "usr/share/arch-note/arch") << arch << "\n";
        fs::create_directories(p / "usr/bin");
        const std::string program = (p / "usr/bin/hello-arch").string();
        if (arch == "amd64") return run_shell("cc -static -O1 -o " + program + " " + (dir / "hello.c").string());
        if (have_arm64_program) return run_shell("aarch64-linux-gnu-gcc -static -O1 -o " + program + " " + (dir / "hello.c").string());
        std::ofstream(program) << "not a program\n";
        return true;
      });
      const fs::path index = www / "debian/dists/bookworm/main" / ("binary-" + arch);
      fs::create_directories(index);
      ok = ok && run_shell("cd " + (www / "debian").string() + " && dpkg-scanpackages -a " + arch + " pool /dev/null 2>/dev/null > " + (index / "Packages").string());
    }
    const fs::path dists = www / "debian/dists/bookworm";
    std::ostringstream release;
    release << "Origin: test\nSuite: bookworm\nCodename: bookworm\nDate: Mon, 30 Nov 2026 00:00:00 UTC\nArchitectures: amd64 arm64\nComponents: main\nSHA256:\n";
    for (const std::string arch : {"amd64", "arm64"}) {
      const std::string packages = gpuenv::testing::read_all(dists / "main" / ("binary-" + arch) / "Packages");
      release << " " << gpuenv::sha256_hex(packages) << " " << packages.size() << " main/binary-" << arch << "/Packages\n";
    }
    std::ofstream(dists / "Release") << release.str();
    ok = ok && run_shell(gpg + "--clearsign -o " + (dists / "InRelease").string() + " " + (dists / "Release").string());
    ready = ok;
  }
  static void TearDownTestSuite() {
    if (!dir.empty()) gpuenv::testing::remove_scratch(dir, dir / "gnupg");
  }

  void SetUp() override {
    if (!ready) GTEST_SKIP() << "gpg, gpgv, dpkg-deb, dpkg-scanpackages or cc missing";
    server = std::make_unique<gpuenv::testing::LoopbackServer>((dir / "www").string());
    ASSERT_GT(server->port(), 0);
  }

  std::string spec(const std::string& name, const std::string& platforms) {
    const std::string path = (dir / (name + "-" + std::to_string(server->port()) + ".yaml")).string();
    std::ofstream(path) << "name: " << name << "\nbase: {distro: 'debian:12', variant: slim}\npackages: {apt: [arch-note]}\nimage: {platforms: " << platforms
                        << "}\nsources:\n  apt:\n    - {uri: '" << server->url("debian") << "', suite: bookworm, components: [main], signed_by: '"
                        << (dir / "repo.gpg").string() << "'}\n";
    return path;
  }

  int gpuenv(std::vector<std::string> args, const std::string& cache, std::string* out = nullptr, std::string* err = nullptr) {
    std::ostringstream o, e;
    gpuenv::cli::Context ctx;
    ctx.out = &o;
    ctx.err = &e;
    ctx.env = {{"GPUENV_CACHE_DIR", cache}, {"HOME", dir.string()}, {"GPUENV_CONFIG", (dir / "no-config.yaml").string()}, {"SOURCE_DATE_EPOCH", "1700000000"}};
    ctx.make_runner = [] { return gpuenv::make_process_runner(); };
    ctx.make_fetcher = [](const gpuenv::NetLimits& limits) {
      gpuenv::FetchOptions options;
      options.limits = limits;
      return gpuenv::make_curl_fetcher(options);
    };
    args.insert(args.end(), {"--host-root", dir.string()});
    const int code = gpuenv::cli::run(args, ctx);
    if (out) *out = o.str();
    if (err) *err = e.str();
    return code;
  }

  static nlohmann::json blob_json(const fs::path& layout, const std::string& digest) {
    return nlohmann::json::parse(gpuenv::testing::read_all(layout / "blobs/sha256" / digest.substr(7)));
  }

  static inline fs::path dir;
  static inline bool ready = false, have_arm64_program = false;
  std::unique_ptr<gpuenv::testing::LoopbackServer> server;
};

TEST_F(CliMultiPlatform, EachPlatformIsPinnedFromItsOwnIndex) {
  const std::string lock_path = (dir / "two.lock").string();
  std::string out, err;
  ASSERT_EQ(gpuenv({"lock", spec("two", "[linux/arm64, linux/amd64]"), "-o", lock_path}, (dir / "cache-lock").string(), &out, &err), 0) << err << out;
  auto lock = gpuenv::resolver::parse_lock(gpuenv::testing::read_all(lock_path), lock_path);
  ASSERT_TRUE(lock.ok()) << lock.error().to_string();
  ASSERT_EQ(lock->platforms, (std::vector<gpuenv::resolver::Platform>{gpuenv::resolver::Platform::amd64(), gpuenv::resolver::Platform::arm64()}));
  std::map<std::string, std::string> arch_of_note;
  for (const auto& p : lock->packages)
    if (p.name == "arch-note") arch_of_note[p.platform.str()] = p.architecture;
  EXPECT_EQ(arch_of_note, (std::map<std::string, std::string>{{"linux/amd64", "amd64"}, {"linux/arm64", "arm64"}}));
  for (const auto& platform : lock->platforms)
    EXPECT_EQ(gpuenv::resolver::lock_for_platform(*lock, platform).packages.size(), 2u) << platform.str();  // arch-note and base-files
}

TEST_F(CliMultiPlatform, OneImagePerPlatformUnderAnIndexTheSameBytesTwice) {
  const std::string spec_path = spec("index", "[linux/amd64, linux/arm64]");
  const fs::path a = dir / "index-a", b = dir / "elsewhere/index-b";
  std::string out, err;
  ASSERT_EQ(gpuenv({"build", spec_path, "-o", a.string(), "--json"}, (dir / "cache-a").string(), &out, &err), 0) << err << out;
  const auto result = nlohmann::json::parse(out);
  ASSERT_EQ(result["platforms"].size(), 2u) << out;
  const nlohmann::json top = nlohmann::json::parse(gpuenv::testing::read_all(a / "index.json"));
  ASSERT_EQ(top["manifests"].size(), 1u);
  EXPECT_EQ(top["manifests"][0]["mediaType"], "application/vnd.oci.image.index.v1+json");
  EXPECT_EQ(top["manifests"][0]["digest"], result["digest"]);
  const nlohmann::json index = blob_json(a, result["digest"]);
  ASSERT_EQ(index["manifests"].size(), 2u);
  const std::pair<const char*, const char*> want[] = {{"amd64", ""}, {"arm64", "v8"}};
  for (std::size_t i = 0; i < 2; ++i) {
    const auto& entry = index["manifests"][i];
    EXPECT_EQ(entry["platform"]["os"], "linux");
    EXPECT_EQ(entry["platform"]["architecture"], want[i].first);
    EXPECT_EQ(entry["platform"].value("variant", ""), want[i].second);
    EXPECT_EQ(entry["digest"], result["platforms"][i]["digest"]);
    const nlohmann::json config = blob_json(a, blob_json(a, entry["digest"])["config"]["digest"]);
    EXPECT_EQ(config["architecture"], want[i].first);
    EXPECT_EQ(config.value("variant", ""), want[i].second);
  }
  EXPECT_TRUE(fs::exists(a / "sbom.linux-amd64.spdx.json") && fs::exists(a / "sbom.linux-arm64.spdx.json"));
  // Another cache, another directory, another umask: the same index.
  std::string out_b;
  fs::create_directories(b.parent_path());
  const mode_t old = ::umask(077);
  ASSERT_EQ(gpuenv({"build", spec_path, "-o", b.string(), "--json"}, (dir / "cache-b").string(), &out_b, &err), 0) << err;
  ::umask(old);
  EXPECT_EQ(nlohmann::json::parse(out_b)["digest"], result["digest"]);
  // A rebuild reuses both images and writes the same index.
  std::string again;
  ASSERT_EQ(gpuenv({"build", spec_path, "-o", a.string()}, (dir / "cache-a").string(), &again, &err), 0) << err;
  EXPECT_EQ(again.substr(0, 10), "unchanged:") << again;
  EXPECT_EQ(again.substr(again.rfind("sha256:")), result["digest"].get<std::string>() + "\n");
  if (run_shell("command -v skopeo >/dev/null")) {
    for (const char* arch : {"amd64", "arm64"}) {
      const std::string config = shell_output("skopeo --override-arch " + std::string(arch) + " --override-os linux inspect --config oci:" + a.string() + " 2>&1");
      EXPECT_EQ(nlohmann::json::parse(config, nullptr, false).value("architecture", std::string()), arch) << config;
    }
  }
}

TEST_F(CliMultiPlatform, TheArm64ImageRunsThroughQemuUser) {
  if (!have_arm64_program || !run_shell("command -v qemu-aarch64-static >/dev/null && command -v bwrap >/dev/null"))
    GTEST_SKIP() << "needs aarch64-linux-gnu-gcc (to make the arm64 program), qemu-aarch64-static and bubblewrap (scripts/deps.sh installs them)";
  const fs::path layout = dir / "run";
  std::string out, err;
  ASSERT_EQ(gpuenv({"build", spec("run", "[linux/amd64, linux/arm64]"), "-o", layout.string()}, (dir / "cache-run").string(), &out, &err), 0) << err;
  const std::string run = "GPUENV_CACHE_DIR=" + (dir / "cache-run").string() + " " + GPUENV_BINARY + " run --no-gpu ";
  EXPECT_EQ(shell_output(run + layout.string() + " -- hello-arch 2>&1"), "hello from x86_64\n");
  const std::string emulated = shell_output(run + "--platform linux/arm64 " + layout.string() + " -- hello-arch 2>&1");
  EXPECT_NE(emulated.find("note: running the linux/arm64 image on this linux/amd64 host through "), std::string::npos) << emulated;
  EXPECT_NE(emulated.find("qemu-aarch64-static"), std::string::npos) << emulated;
  EXPECT_EQ(emulated.substr(emulated.find('\n') + 1), "hello from aarch64\n");
  const std::string bad = shell_output(run + "--platform linux/arm64 --emulator /nonexistent " + layout.string() + " -- hello-arch 2>&1; echo rc=$?");
  EXPECT_NE(bad.find("[run.bad_emulator]"), std::string::npos) << bad;
  EXPECT_NE(bad.find("rc=2"), std::string::npos) << bad;
  const std::string none = shell_output("PATH=/nonexistent " + run + "--platform linux/arm64 " + layout.string() + " -- hello-arch 2>&1; echo rc=$?");
  EXPECT_NE(none.find("[run.no_emulator]"), std::string::npos) << none;
}

TEST_F(CliMultiPlatform, APushWritesBothManifestsThenTheIndex) {
  gpuenv::testing::DockerRegistry registry(gpuenv::testing::DockerRegistry::Setup::plain);
  if (!registry.skip_reason().empty()) GTEST_SKIP() << registry.skip_reason();
  const std::string ref = registry.host() + "/ml/two:1";
  std::string out, err;
  ASSERT_EQ(gpuenv({"build", spec("push", "[linux/amd64, linux/arm64]"), "-o", (dir / "push").string(), "--push", ref, "--plain-http", "--json"},
                   (dir / "cache-push").string(), &out, &err),
            0)
      << err << out;
  const auto result = nlohmann::json::parse(out);
  EXPECT_EQ(result["push"]["digest"], result["digest"]);
  if (!run_shell("command -v skopeo >/dev/null")) GTEST_SKIP() << "skopeo is not installed: the registry's copy is not read back";
  const std::string raw = shell_output("skopeo inspect --raw --tls-verify=false docker://" + ref);
  EXPECT_EQ("sha256:" + gpuenv::sha256_hex(raw), result["digest"].get<std::string>());
  for (std::size_t i = 0; i < 2; ++i) {
    const std::string arch = i == 0 ? "amd64" : "arm64";
    const auto inspected = nlohmann::json::parse(
        shell_output("skopeo --override-arch " + arch + " --override-os linux inspect --tls-verify=false docker://" + ref), nullptr, false);
    EXPECT_EQ(inspected.value("Architecture", std::string()), arch);
    const std::string manifest = result["platforms"][i]["digest"].get<std::string>();
    const std::string by_digest = shell_output("skopeo inspect --raw --tls-verify=false docker://" + registry.host() + "/ml/two@" + manifest);
    EXPECT_EQ("sha256:" + gpuenv::sha256_hex(by_digest), manifest) << arch;
  }
}

// The shared build cache keeps each platform's image apart: a second runner takes both images of a two-platform lock
// from it, uploads nothing and pushes the index a cold build makes.
TEST_F(CliMultiPlatform, ASecondRunnerTakesEachPlatformsImageFromTheSharedCache) {
  gpuenv::testing::DockerRegistry registry(gpuenv::testing::DockerRegistry::Setup::plain);
  if (!registry.skip_reason().empty()) GTEST_SKIP() << registry.skip_reason();
  const auto keys = gpuenv::marks::generate_key_pair((dir / "cache-keys").string(), true);
  ASSERT_TRUE(keys.ok());
  const std::string lock = (dir / "shared.lock").string(), key = keys->private_key;
  ASSERT_EQ(gpuenv({"lock", spec("shared", "[linux/amd64, linux/arm64]"), "-o", lock}, (dir / "cache-lock").string()), 0);
  const std::vector<std::string> cache = {"--cache", registry.host() + "/ml/cache:multi", "--cache-key", key, "--plain-http", "--json"};
  auto build = [&](const std::string& runner, const std::string& push) {
    std::vector<std::string> args = {"build", lock, "-o", (dir / ("shared-" + runner)).string(), "--push", registry.host() + "/ml/multi:" + push};
    args.insert(args.end(), cache.begin(), cache.end());
    std::string out, err;
    EXPECT_EQ(gpuenv(args, (dir / ("cache-shared-" + runner)).string(), &out, &err), 0) << err << out;
    return nlohmann::json::parse(out, nullptr, false);
  };
  const auto a = build("a", "a");
  ASSERT_TRUE(a.is_object());
  EXPECT_EQ(a["cache"]["images_written"], 2) << a.dump();
  const auto b = build("b", "b");
  ASSERT_TRUE(b.is_object());
  EXPECT_EQ(b["digest"], a["digest"]);
  EXPECT_EQ(b["cache"]["images_taken"], 2) << b.dump();
  EXPECT_EQ(b["push"]["blobs_uploaded"], 0) << b.dump();
  EXPECT_FALSE(fs::exists(dir / "cache-shared-b" / "blobs")) << "no package fetched";
}

TEST_F(CliMultiPlatform, ALockWhoseOnlyFittingTorchVariantNeedsTorchsOwnIndexSaysWhyAndPinsNothing) {
  // On the synthetic catalog torch 2.10.0's default variant (cu128) is CPU-only on aarch64 on the Python package
  // index, and cu126 is not recorded there (it comes from torch's own index): the resolution picks cu126, and without
  // a variant index only the default could be pinned. The lock is unsatisfiable with rule 9's reason and the
  // suggestion, not a wheel.no_match for torch==2.10.0+cu126 on the Python package index.
  const std::string path = (dir / ("torch-210-" + std::to_string(server->port()) + ".yaml")).string();
  std::ofstream(path) << "name: torch-210\nbase: {distro: 'debian:12', variant: slim}\npython: '3.11'\nframeworks: {torch: '2.10'}\n"
                      << "gpu: {models: [GH200, H100]}\nimage: {platforms: [linux/amd64, linux/arm64]}\nsources:\n  apt:\n    - {uri: '"
                      << server->url("debian") << "', suite: bookworm, components: [main], signed_by: '" << (dir / "repo.gpg").string()
                      << "'}\n  pip: {index_url: '" << server->url("simple") << "'}\n";
  const std::string lock_path = (dir / "torch-210.lock").string();
  std::string out, err;
  EXPECT_EQ(gpuenv({"--catalog", GPUENV_SOURCE_DIR "/tests/data/arm64_catalog", "lock", path, "-o", lock_path}, (dir / "cache-210").string(), &out, &err), 3)
      << err << out;
  EXPECT_NE(out.find("torch 2.10.0's Linux aarch64 wheels on the Python package index are CPU-only"), std::string::npos) << out;
  EXPECT_NE(out.find("torch 2.10.0+cu126 is served by torch's own wheel index, and none is configured"), std::string::npos) << out;
  EXPECT_EQ(err.find("wheel.no_match"), std::string::npos) << err;
  EXPECT_FALSE(fs::exists(lock_path));
}

}  // namespace multiarch_test
}  // namespace
