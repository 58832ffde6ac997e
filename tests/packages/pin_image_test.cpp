// Pinning a whole image, end to end through the ports: a signed apt repository and a simple index served by the
// FakeFetcher, the real gpgv and the real cache.
#include "packages/pin_image.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "base/digest.hpp"
#include "fakes/catalog_fixture.hpp"
#include "fakes/fake_fetcher.hpp"
#include "fakes/scratch.hpp"
#include "resolver/lockfile.hpp"

namespace {

namespace fs = std::filesystem;
using namespace gpuenv;
using namespace gpuenv::packages;

std::string sha_hex(const std::string& s) { return gpuenv::sha256_hex(s); }

std::string pin_stanza(const std::string& name, const std::string& version, const std::string& extra) {
  const std::string deb = "deb bytes of " + name;
  return "Package: " + name + "\nVersion: " + version + "\nArchitecture: amd64\n" + extra + "Filename: pool/main/" + name + "_" + version +
         "_amd64.deb\nSize: " + std::to_string(deb.size()) + "\nSHA256: " + sha_hex(deb) + "\nDescription: test\n\n";
}

class PinImage : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (std::system("command -v gpg >/dev/null && command -v gpgv >/dev/null") != 0) return;
    dir = fs::temp_directory_path() / ("gpuenv-pin-" + std::to_string(::getpid()));
    fs::create_directories(dir / "gnupg");
    fs::permissions(dir / "gnupg", fs::perms::owner_all);
    const std::string gpg = "GNUPGHOME=" + (dir / "gnupg").string() + " gpg --batch --quiet --passphrase '' ";
    packages = pin_stanza("base-files", "12.4", "Priority: required\nEssential: yes\n") + pin_stanza("libpython3.11", "3.11.2-6", "") +
               pin_stanza("python3", "3.11.2-1+b1", "Depends: libpython3.11 (>= 3.11.2)\n") + pin_stanza("curl", "7.88.1-10", "");
    std::ofstream(dir / "Release") << "Origin: test\nSuite: bookworm\nCodename: bookworm\nDate: Mon, 30 Nov 2026 00:00:00 UTC\n"
                                      "Architectures: amd64\nComponents: main\nSHA256:\n "
                                   << sha_hex(packages) << " " << packages.size() << " main/binary-amd64/Packages\n";
    ready = std::system((gpg + "--quick-gen-key 'repo <r@example.com>' ed25519 sign never 2>/dev/null").c_str()) == 0 &&
            std::system((gpg + "--export > " + (dir / "repo.gpg").string()).c_str()) == 0 &&
            std::system((gpg + "--clearsign -o " + (dir / "InRelease").string() + " " + (dir / "Release").string()).c_str()) == 0;
  }
  static void TearDownTestSuite() {
    gpuenv::testing::remove_scratch(dir, dir / "gnupg");
  }
  void SetUp() override {
    if (!ready) GTEST_SKIP() << "gpg/gpgv are not installed";
    std::ifstream in(dir / "InRelease");
    fetcher.files["http://apt.example/debian/dists/bookworm/InRelease"] = std::string(std::istreambuf_iterator<char>(in), {});
    fetcher.files["http://apt.example/debian/dists/bookworm/main/binary-amd64/Packages"] = packages;
    wheel("torch", "2.5.1", "torch-2.5.1-cp311-cp311-manylinux1_x86_64.whl", "Requires-Dist: numpy\nRequires-Dist: nvidia-nccl-cu12==2.21.5; platform_system == \"Linux\"\n");
    wheel("numpy", "2.1.3", "numpy-2.1.3-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl", "");
    wheel("nvidia-nccl-cu12", "2.21.5", "nvidia_nccl_cu12-2.21.5-py3-none-manylinux2014_x86_64.whl", "");
    cache_dir = dir / ("cache-" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    cache = make_dir_blob_store(cache_dir.string());
    runner = make_process_runner();
    fs::create_directories(dir / "work");
    apt.fetcher = &fetcher;
    apt.cache = cache.get();
    apt.runner = runner.get();
    apt.work_dir = (dir / "work").string();
  }

  void wheel(const std::string& project, const std::string& version, const std::string& filename, const std::string& requires_dist) {
    const std::string url = "http://files.example/" + filename;
    const std::string body = "wheel " + filename;
    const std::string md = "Metadata-Version: 2.1\nName: " + project + "\nVersion: " + version + "\n" + requires_dist;
    fetcher.files[url] = body;
    fetcher.files[url + ".metadata"] = md;
    fetcher.files["http://pypi.example/simple/" + project + "/"] =
        R"({"meta": {"api-version": "1.1"}, "name": ")" + project + R"(", "files": [{"filename": ")" + filename + R"(", "url": ")" + url +
        R"(", "hashes": {"sha256": ")" + sha_hex(body) + R"("}, "core-metadata": {"sha256": ")" + sha_hex(md) + R"("}, "size": )" +
        std::to_string(body.size()) + "}]}";
  }

  gpuenv::Result<ImagePins> pin(const std::string& spec_yaml, SourceSet& sources) {
    spec = gpuenv::testing::spec_of(spec_yaml);
    resolution = gpuenv::testing::resolve_yaml(spec_yaml);
    EXPECT_TRUE(resolution.ok) << gpuenv::testing::conflicts_text(resolution);
    AptSource s;
    s.uri = "http://apt.example/debian/";
    s.suite = "bookworm";
    s.components = {"main"};
    s.signed_by = {(dir / "repo.gpg").string()};
    s.where = "test";
    sources.apt = {s};
    sources.pip.index_url = {"http://pypi.example/simple", "test"};
    const auto* distro = gpuenv::testing::catalog().distro(spec.base_distro, spec.base_release);
    const PinImageRequest request{&spec, &resolution, distro, &sources};
    GPUENV_TRY(universe, open_apt_universe(request, apt));
    return pin_image(request, universe, apt);
  }

  static inline fs::path dir;
  static inline std::string packages;
  static inline bool ready = false;
  gpuenv::testing::FakeFetcher fetcher;
  fs::path cache_dir;
  std::unique_ptr<BlobStore> cache;
  std::unique_ptr<CommandRunner> runner;
  AptFetchContext apt;
  gpuenv::resolver::Spec spec;
  gpuenv::resolver::Resolution resolution;
};

const char* k_spec = "name: t\nbase: debian:12\nframeworks: {torch: '2.5.1'}\ngpu: {models: [H100], driver: '550.54.15'}\npackages: {apt: [curl]}\n";

TEST_F(PinImage, PinsDebsAndWheels) {
  SourceSet sources;
  auto r = pin(k_spec, sources);
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  std::vector<std::string> names;
  for (const auto& p : r->packages) names.push_back(std::string(gpuenv::resolver::to_string(p.kind)) + ":" + p.name + "=" + p.version);
  EXPECT_EQ(names, (std::vector<std::string>{"deb:base-files=12.4", "deb:curl=7.88.1-10", "deb:libpython3.11=3.11.2-6",
                                             "deb:python3=3.11.2-1+b1", "wheel:numpy=2.1.3", "wheel:nvidia-nccl-cu12=2.21.5",
                                             "wheel:torch=2.5.1"}));
  for (const auto& p : r->packages) {
    EXPECT_EQ(p.sha256.hex().size(), 64u) << p.name;
    EXPECT_GT(p.size, 0u) << p.name;
  }
  EXPECT_EQ(r->packages[3].url, "http://apt.example/debian/pool/main/python3_3.11.2-1+b1_amd64.deb");
  EXPECT_EQ(r->requirements, std::vector<std::string>{"torch==2.5.1"});
  bool asked_json = false;
  for (const auto& a : fetcher.accepts) asked_json = asked_json || a.find("application/vnd.pypi.simple.v1+json") == 0;
  EXPECT_TRUE(asked_json);  // PEP 691 content negotiation
}

TEST_F(PinImage, SameInputsGiveAByteIdenticalLock) {
  SourceSet s1, s2;
  auto a = pin(k_spec, s1);
  auto b = pin(k_spec, s2);
  ASSERT_TRUE(a.ok() && b.ok());
  auto render = [&](const ImagePins& pins) {
    std::vector<gpuenv::resolver::LockedPackage> locked;
    for (const auto& p : pins.packages) locked.push_back({p.name, p.version, p.kind, p.architecture, p.url, p.sha256, p.source, p.size});
    return gpuenv::resolver::render_lock(gpuenv::resolver::lock_of(spec, resolution, {"s", "c", "gpuenv test"}, locked));
  };
  EXPECT_EQ(render(*a), render(*b));
  EXPECT_NE(render(*a).find("kind: \"wheel\""), std::string::npos);
}

TEST_F(PinImage, TamperedPackagesIndexIsRefused) {
  fetcher.files["http://apt.example/debian/dists/bookworm/main/binary-amd64/Packages"] = packages + "\n";
  SourceSet sources;
  auto r = pin(k_spec, sources);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().id, "fetch.hash_mismatch");
}

TEST_F(PinImage, MissingWheelIsNamed) {
  fetcher.files.erase("http://pypi.example/simple/numpy/");
  SourceSet sources;
  auto r = pin(k_spec, sources);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().id, "wheel.not_found");
}

TEST(PinRequirements, VariantsAndIndexes) {
  gpuenv::resolver::Resolution r;
  gpuenv::resolver::ChosenFramework torch;
  torch.name = "torch";
  torch.version = *gpuenv::resolver::Version::parse("2.5.1");
  torch.variant = "cu118";
  torch.is_default = false;
  gpuenv::resolver::ChosenFramework jax;
  jax.name = "jax";
  jax.version = *gpuenv::resolver::Version::parse("0.10.2");
  jax.variant = "cuda12";
  jax.is_default = true;
  gpuenv::resolver::ChosenFramework tf;
  tf.name = "tensorflow";
  tf.version = *gpuenv::resolver::Version::parse("2.18.0");
  tf.variant = "cuda12";
  tf.is_default = true;
  r.frameworks = {torch, tf, jax};
  EXPECT_EQ(framework_requirements(r), (std::vector<std::string>{"torch==2.5.1+cu118", "tensorflow[and-cuda]==2.18.0", "jax[cuda12]==0.10.2"}));
  PipIndexConfig pip;
  pip.index_url = {"http://pypi.example/simple", "x"};
  pip.extra_index_urls = {{"http://torch.example/whl/{variant}", "x"}, {"http://extra.example/simple", "x"}};
  EXPECT_EQ(wheel_indexes(pip, r), (std::vector<std::string>{"http://torch.example/whl/cu118", "http://pypi.example/simple", "http://extra.example/simple"}));
}

TEST(PinRequirements, AServingFrameworkAndTheTorchItPins) {
  // vllm 0.33.0 pins torch 2.14.0; the resolution lists both, and pip's resolution gets both pinned (torch's default
  // variant, from the Python package index like vllm's own CUDA 13.0 wheel).
  gpuenv::resolver::Resolution r;
  gpuenv::resolver::ChosenFramework vllm;
  vllm.name = "vllm";
  vllm.version = *gpuenv::resolver::Version::parse("0.33.0");
  vllm.variant = "cu130";
  vllm.is_default = true;
  gpuenv::resolver::ChosenFramework torch;
  torch.name = "torch";
  torch.version = *gpuenv::resolver::Version::parse("2.14.0");
  torch.variant = "cu130";
  torch.is_default = true;
  torch.pinned_by = "vllm 0.33.0";
  gpuenv::resolver::ChosenFramework sglang = vllm;
  sglang.name = "sglang";
  sglang.version = *gpuenv::resolver::Version::parse("0.5.23");
  r.frameworks = {vllm, torch, sglang};
  EXPECT_EQ(framework_requirements(r), (std::vector<std::string>{"vllm==0.33.0", "torch==2.14.0", "sglang==0.5.23"}));
}

}  // namespace
