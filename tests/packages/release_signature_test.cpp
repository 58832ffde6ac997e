// InRelease verification with the real gpgv: a test key made with gpg, and the host's own apt lists
// verified against debian-archive-keyring when they are present. Also the process runner's contract.
#include "packages/apt/release_signature.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

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

// Issue 33, case 6: a child's output was kept without a cap (debugfs printing a 400 MiB lock took inspect to 537 MB
// of memory before the lock's own 64 MiB limit was checked). Now the runner stops it at its limit.
TEST(ProcessRunner, AChildThatWritesWithoutEndIsStoppedAtTheOutputLimit) {
  const auto start = std::chrono::steady_clock::now();
  auto endless = make_process_runner(1u << 20)->run({"yes"}, {}, 30s);
  ASSERT_FALSE(endless.ok());
  EXPECT_EQ(endless.error().id, "process.output_limit");
  EXPECT_NE(endless.error().message.find("standard output"), std::string::npos) << endless.error().message;
  auto noisy = make_process_runner(1u << 20)->run({"sh", "-c", "yes >&2"}, {}, 30s);
  ASSERT_FALSE(noisy.ok());
  EXPECT_NE(noisy.error().message.find("standard error"), std::string::npos) << noisy.error().message;
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
  auto under = make_process_runner(1u << 20)->run({"head", "-c", "1048576", "/dev/zero"}, {}, 30s);
  ASSERT_TRUE(under.ok()) << "exactly the limit is kept";
  EXPECT_EQ(under->out.size(), 1u << 20);
}

// Issue 33, case 4: a qemu-img blocked on a FIFO stayed after gpuenv was killed. A child now dies with its parent.
TEST(ProcessRunner, AChildDiesWithTheProcessThatStartedIt) {
  char dir_template[] = "/tmp/gpuenv-runner-XXXXXX";
  ASSERT_NE(mkdtemp(dir_template), nullptr);
  const std::string pid_file = std::string(dir_template) + "/pid";
  const pid_t parent = fork();
  ASSERT_GE(parent, 0);
  if (parent == 0) {
    (void)make_process_runner()->run({"sh", "-c", "echo $$ > " + pid_file + ".tmp && mv " + pid_file + ".tmp " + pid_file + " && exec sleep 60"}, {}, 120s);
    _exit(0);
  }
  pid_t child = 0;
  for (int i = 0; i < 500 && child == 0; ++i) {
    std::ifstream in(pid_file);
    if (!(in >> child)) child = 0;
    if (child == 0) std::this_thread::sleep_for(10ms);
  }
  ASSERT_GT(child, 0) << "the child never started";
  kill(parent, SIGKILL);
  int status = 0;
  waitpid(parent, &status, 0);
  bool gone = false;
  for (int i = 0; i < 300 && !gone; ++i) {
    std::ifstream stat("/proc/" + std::to_string(child) + "/stat");
    std::string line;
    std::getline(stat, line);
    // Gone, or a zombie waiting for init to reap it: either way no longer running.
    const auto close = line.rfind(')');
    gone = line.empty() || (close != std::string::npos && line.size() > close + 2 && line[close + 2] == 'Z');
    if (!gone) std::this_thread::sleep_for(10ms);
  }
  EXPECT_TRUE(gone) << "pid " << child << " outlived the gpuenv that started it";
  if (!gone) kill(child, SIGKILL);
  std::filesystem::remove_all(dir_template);
}

}  // namespace
