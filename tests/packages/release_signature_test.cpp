// InRelease verification with the real gpgv: a test key made with gpg, and the host's own apt lists
// verified against debian-archive-keyring when they are present. Also the process runner's contract.
#include "packages/apt/release_signature.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "fakes/scratch.hpp"

namespace {

namespace fs = std::filesystem;
using namespace gpuenv;
using namespace gpuenv::packages;
using namespace std::chrono_literals;

const char* k_release = "Origin: Test\nSuite: stable\nCodename: test\nSHA256:\n 0123 12 main/binary-amd64/Packages\n";

class ReleaseSignature : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (std::system("command -v gpg >/dev/null 2>&1 && command -v gpgv >/dev/null 2>&1") != 0) return;
    home = fs::temp_directory_path() / ("gpuenv-gpg-" + std::to_string(::getpid()));
    fs::create_directories(home);
    fs::permissions(home, fs::perms::owner_all);
    const std::string g = "GNUPGHOME=" + home.string() + " gpg --batch --quiet --passphrase '' ";
    ok = std::system((g + "--quick-gen-key 'gpuenv test <t@example.com>' ed25519 sign never 2>/dev/null").c_str()) == 0 &&
         std::system((g + "--export 'gpuenv test' > " + (home / "key.gpg").string()).c_str()) == 0 &&
         std::system((g + "--armor --export 'gpuenv test' > " + (home / "key.asc").string()).c_str()) == 0 &&
         std::system((g + "--quick-gen-key 'other <o@example.com>' ed25519 sign never 2>/dev/null").c_str()) == 0 &&
         std::system((g + "--export 'other' > " + (home / "other.gpg").string()).c_str()) == 0;
    std::ofstream(home / "Release") << k_release;
    ok = ok && std::system((g + "-u 'gpuenv test' --clearsign -o " + (home / "InRelease").string() + " " + (home / "Release").string()).c_str()) == 0 &&
         std::system((g + "-u 'gpuenv test' --detach-sign -o " + (home / "Release.gpg").string() + " " + (home / "Release").string()).c_str()) == 0;
  }
  static void TearDownTestSuite() {
    gpuenv::testing::remove_scratch(home, home);
  }
  void SetUp() override {
    if (!ok) GTEST_SKIP() << "gpg/gpgv are not installed or could not make a test key";
    runner = make_process_runner();
  }
  static std::string read(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
  static inline fs::path home;
  static inline bool ok = false;
  std::unique_ptr<CommandRunner> runner;
};

TEST_F(ReleaseSignature, AcceptsAGoodSignatureAndReturnsWhatWasSigned) {
  auto v = verify_inrelease(*runner, read(home / "InRelease"), {(home / "key.gpg").string()}, "test", home.string());
  ASSERT_TRUE(v.ok()) << v.error().to_string();
  EXPECT_EQ(v->text, k_release);
  EXPECT_EQ(v->fingerprint.size(), 40u);
}

TEST_F(ReleaseSignature, AcceptsArmoredKeyrings) {
  auto v = verify_inrelease(*runner, read(home / "InRelease"), {(home / "key.asc").string()}, "test", home.string());
  ASSERT_TRUE(v.ok()) << v.error().to_string();
}

TEST_F(ReleaseSignature, RefusesATamperedRelease) {
  std::string text = read(home / "InRelease");
  text.replace(text.find("Codename: test"), 14, "Codename: evil");
  auto v = verify_inrelease(*runner, text, {(home / "key.gpg").string()}, "test", home.string());
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.error().id, "apt.bad_signature");
}

TEST_F(ReleaseSignature, RefusesAnotherKeyAndUnsignedFiles) {
  auto v = verify_inrelease(*runner, read(home / "InRelease"), {(home / "other.gpg").string()}, "test", home.string());
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.error().id, "apt.bad_signature");
  auto u = verify_inrelease(*runner, k_release, {(home / "key.gpg").string()}, "test", home.string());
  ASSERT_FALSE(u.ok());
  EXPECT_EQ(u.error().id, "apt.unsigned");
  EXPECT_EQ(verify_inrelease(*runner, read(home / "InRelease"), {}, "test", home.string()).error().id, "apt.no_keyring");
}

TEST_F(ReleaseSignature, DetachedSignatures) {
  EXPECT_TRUE(verify_detached_release(*runner, k_release, read(home / "Release.gpg"), {(home / "key.gpg").string()}, "t", home.string()).ok());
  auto bad = verify_detached_release(*runner, std::string(k_release) + "X", read(home / "Release.gpg"), {(home / "key.gpg").string()}, "t",
                                     home.string());
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().id, "apt.bad_signature");
}

TEST(HostAptLists, VerifyAgainstDebianArchiveKeyring) {
  const std::string keyring = "/usr/share/keyrings/debian-archive-keyring.gpg";
  if (!fs::exists(keyring) || !fs::exists("/var/lib/apt/lists")) GTEST_SKIP() << "no debian-archive-keyring or apt lists on this host";
  auto runner = make_process_runner();
  int checked = 0;
  for (const auto& e : fs::directory_iterator("/var/lib/apt/lists")) {
    const std::string name = e.path().filename().string();
    if (name.size() < 10 || name.substr(name.size() - 10) != "_InRelease") continue;
    std::ifstream in(e.path(), std::ios::binary);
    const std::string text(std::istreambuf_iterator<char>(in), {});
    if (text.find("Origin: Debian") == std::string::npos) continue;
    auto v = verify_inrelease(*runner, text, {keyring}, name, fs::temp_directory_path().string());
    ASSERT_TRUE(v.ok()) << name << ": " << v.error().to_string();
    EXPECT_NE(v->text.find("SHA256:"), std::string::npos);
    ++checked;
  }
  if (checked == 0) GTEST_SKIP() << "no Debian InRelease files in /var/lib/apt/lists";
}

TEST(Dearmor, DecodesAndRefusesGarbage) {
  auto d = dearmor("-----BEGIN PGP PUBLIC KEY BLOCK-----\n\naGVsbG8=\n=abcd\n-----END PGP PUBLIC KEY BLOCK-----\n", "k");
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(*d, "hello");
  EXPECT_FALSE(dearmor("not armored", "k").ok());
  EXPECT_FALSE(dearmor("-----BEGIN PGP PUBLIC KEY BLOCK-----\n\n!!!\n-----END PGP PUBLIC KEY BLOCK-----\n", "k").ok());
}

TEST(ProcessRunner, RunsWithInputAndCapturesOutput) {
  auto r = make_process_runner()->run({"cat"}, "hello", 5s);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->out, "hello");
  EXPECT_EQ(r->exit_code, 0);
  auto f = make_process_runner()->run({"sh", "-c", "echo err >&2; exit 3"}, {}, 5s);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->exit_code, 3);
  EXPECT_EQ(f->err, "err\n");
}

TEST(ProcessRunner, MissingProgramAndTimeout) {
  EXPECT_EQ(make_process_runner()->run({"gpuenv-no-such-program"}, {}, 5s).error().id, "process.not_found");
  const auto start = std::chrono::steady_clock::now();
  auto t = make_process_runner()->run({"sleep", "10"}, {}, 200ms);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.error().id, "process.timeout");
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
}

}  // namespace
