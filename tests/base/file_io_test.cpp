// Contract tests of the file helpers (AtomicFile, limited reads) against a temporary directory, and the TRY macros.
#include "base/file_io.hpp"

#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

#include "base/digest.hpp"
#include "base/yaml_guard.hpp"
#include "fakes/temp_dir.hpp"

namespace {

namespace fs = std::filesystem;

class Io : public ::testing::Test {
 protected:
  gpuenv::testing::TempDir tmp{"gpuenv-io"};
  fs::path dir = tmp.path();
  [[nodiscard]] long entries() const { return std::distance(fs::directory_iterator(dir), fs::directory_iterator{}); }
};

std::string read(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

TEST_F(Io, AtomicWriteReplacesWholeFile) {
  const std::string p = (dir / "f").string();
  ASSERT_TRUE(gpuenv::write_file_atomic(p, "one").ok());
  ASSERT_TRUE(gpuenv::write_file_atomic(p, "two").ok());
  EXPECT_EQ(*gpuenv::read_yaml_file(p, 100), "two");
  EXPECT_EQ(entries(), 1);
}

// Issue 33, cases 9 to 11: a killed writer's temporary stayed beside its output for good. The next writer of the
// same file removes those whose process has exited, and only those (a live writer's, another file's, stay).
TEST_F(Io, TheNextWriterOfAFileRemovesWhatKilledWritersOfItLeft) {
  const pid_t child = ::fork();
  if (child == 0) _exit(0);
  ::waitpid(child, nullptr, 0);
  const std::string& host = gpuenv::writer_host();
  ASSERT_FALSE(host.empty()) << "/proc tells the boot id and the PID namespace";
  const std::string dead = "." + std::string("out.tar") + ".tmp." + std::to_string(child) + "." + host + ".0.0badf00d";
  const std::string live = ".out.tar.tmp." + std::to_string(::getppid()) + "." + host + ".0.cafecafe";  // the test runner: alive
  const std::string other = ".other.tar.tmp." + std::to_string(child) + "." + host + ".0.0badf00d";
  // The same PID on another machine sharing the directory (NFS), or in another PID namespace: not judged by PID here.
  const std::string elsewhere = ".out.tar.tmp." + std::to_string(child) + ".000000000000n1.0.0badf00d";
  const std::string unstamped = ".out.tar.tmp." + std::to_string(child) + ".0.0badf00d";
  // ... unless nobody wrote to it for a day: a writer that was killed wherever it ran.
  const std::string stale = ".out.tar.tmp." + std::to_string(::getppid()) + ".000000000000n1.0.5ca1ab1e";
  for (const auto& name : {dead, live, other, elsewhere, unstamped, stale}) std::ofstream(dir / name) << "x";
  fs::last_write_time(dir / stale, fs::file_time_type::clock::now() - std::chrono::hours(25));
  ASSERT_TRUE(gpuenv::write_file_atomic((dir / "out.tar").string(), "archive").ok());
  EXPECT_FALSE(fs::exists(dir / dead));
  EXPECT_TRUE(fs::exists(dir / live));
  EXPECT_TRUE(fs::exists(dir / other)) << "another file's writers are its own next writer's to clean";
  EXPECT_TRUE(fs::exists(dir / elsewhere)) << "a PID of another machine or namespace says nothing here";
  EXPECT_TRUE(fs::exists(dir / unstamped));
  EXPECT_FALSE(fs::exists(dir / stale));
  // A tool's temporary (qemu-img's qcow2) is named the same way, and asking for one cleans up the same way.
  std::ofstream(dir / dead) << "x";
  const std::string fresh = gpuenv::temporary_beside((dir / "out.tar").string());
  EXPECT_FALSE(fs::exists(dir / dead));
  EXPECT_EQ(fs::path(fresh).parent_path(), dir);
  EXPECT_EQ(fs::path(fresh).filename().string().rfind(".out.tar.tmp." + std::to_string(::getpid()) + "." + host + ".", 0), 0u) << fresh;
  EXPECT_EQ(gpuenv::writer_stamp('-'), std::to_string(::getpid()) + "-" + host);
  EXPECT_TRUE(gpuenv::writer_gone(std::to_string(child) + "-" + host + "-1-2", '-'));
  EXPECT_FALSE(gpuenv::writer_gone(std::to_string(child) + "-" + host, '-')) << "the stamp ends with its separator";
  EXPECT_FALSE(gpuenv::writer_gone(std::to_string(child) + "-1-2", '-'));
  EXPECT_EQ(gpuenv::leading_pid("4242-1-9", '-'), 4242);
  for (const char* bad : {"", "-1-2", "x-1", "42", "0-1"}) EXPECT_EQ(gpuenv::leading_pid(bad, '-'), 0) << bad;
  EXPECT_FALSE(gpuenv::process_gone(::getpid()));
  EXPECT_FALSE(gpuenv::process_gone(1)) << "init is alive";
}

TEST_F(Io, AtomicWriteFailureLeavesNothing) {
  if (::geteuid() == 0) {
    // root ignores directory permissions; use a missing directory instead
    auto st = gpuenv::write_file_atomic((dir / "missing" / "f").string(), "x");
    EXPECT_FALSE(st.ok());
    EXPECT_EQ(st.error().kind, gpuenv::ErrorKind::environment);
  } else {
    fs::permissions(dir, fs::perms::owner_read | fs::perms::owner_exec);
    EXPECT_FALSE(gpuenv::write_file_atomic((dir / "f").string(), "x").ok());
    fs::permissions(dir, fs::perms::owner_all);
  }
  EXPECT_EQ(entries(), 0);
}

TEST_F(Io, ReadRefusesLargeFilesWithoutReadingThem) {
  const std::string p = (dir / "big").string();
  { std::ofstream(p) << "x"; }
  fs::resize_file(p, 100u << 20);  // sparse 100 MB
  auto r = gpuenv::read_yaml_file(p, 1u << 20);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().id, "yaml.too_large");
  EXPECT_EQ(r.error().kind, gpuenv::ErrorKind::spec);
  auto plain = gpuenv::read_file_limited(p, 1u << 20);
  ASSERT_FALSE(plain.ok());
  EXPECT_EQ(plain.error().id, "io.too_large");
  EXPECT_EQ(plain.error().kind, gpuenv::ErrorKind::environment);
}

TEST_F(Io, ReadRefusesDirectoriesAndMissingFiles) {
  EXPECT_EQ(gpuenv::read_yaml_file(dir.string(), 10).error().id, "io.not_a_file");
  EXPECT_EQ(gpuenv::read_yaml_file((dir / "nope").string(), 10).error().kind, gpuenv::ErrorKind::usage);
}

TEST_F(Io, AnUncommittedFileLeavesNothingAndTheTargetUntouched) {
  ASSERT_TRUE(gpuenv::write_file_atomic((dir / "f").string(), "old").ok());
  {
    auto f = gpuenv::AtomicFile::create((dir / "f").string());
    ASSERT_TRUE(f.ok());
    ASSERT_TRUE(f->write("half of the new").ok());
    EXPECT_EQ(entries(), 2);  // the target and the temporary beside it
  }
  EXPECT_EQ(entries(), 1);
  EXPECT_EQ(read(dir / "f"), "old");
}

TEST_F(Io, CommitAppliesTheModeAndCannotBeRepeated) {
  auto f = gpuenv::AtomicFile::create((dir / "tool").string(), 0755);
  ASSERT_TRUE(f.ok());
  ASSERT_TRUE(f->write("#!/bin/sh\n").ok());
  ASSERT_TRUE(f->commit().ok());
  EXPECT_EQ(fs::status(dir / "tool").permissions() & fs::perms::all, fs::perms(0755));
  EXPECT_FALSE(f->commit().ok());
  EXPECT_EQ(read(dir / "tool"), "#!/bin/sh\n");
}

TEST_F(Io, ConcurrentWritersOfOneFileNeverShareATemporary) {
  // Each writer holds its temporary open at the same time: fixed temporary names would collide here.
  std::vector<gpuenv::AtomicFile> open;
  for (int i = 0; i < 8; ++i) {
    auto f = gpuenv::AtomicFile::create((dir / "shared").string());
    ASSERT_TRUE(f.ok()) << f.error().to_string();
    ASSERT_TRUE(f->write("writer " + std::to_string(i)).ok());
    open.push_back(std::move(*f));
  }
  EXPECT_EQ(entries(), 8);
  for (auto& f : open) ASSERT_TRUE(f.commit().ok());
  EXPECT_EQ(entries(), 1);
  EXPECT_EQ(read(dir / "shared"), "writer 7");
}

TEST_F(Io, InsideADirectoryOnlyOneComponentIsAccepted) {
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ASSERT_GE(dfd, 0);
  EXPECT_FALSE(gpuenv::AtomicFile::create_in(dfd, "../escape").ok());
  EXPECT_FALSE(gpuenv::AtomicFile::create_in(dfd, "..").ok());
  auto f = gpuenv::AtomicFile::create_in(dfd, "inside");
  ASSERT_TRUE(f.ok());
  ASSERT_TRUE(f->write("x").ok());
  ASSERT_TRUE(f->commit().ok());
  ::close(dfd);
  EXPECT_EQ(read(dir / "inside"), "x");
}

gpuenv::Result<int> half(int x) {
  if (x % 2 != 0) return gpuenv::make_error(gpuenv::ErrorKind::usage, "odd", "odd number");
  return x / 2;
}

gpuenv::Result<int> quarter(int x) {
  GPUENV_TRY(h, half(x));
  GPUENV_TRY(q, half(h));
  return q;
}

gpuenv::Status even(int x) {
  GPUENV_CHECK(half(x));
  return gpuenv::ok_status();
}

TEST(Try, ReturnsTheFirstErrorOrGoesOn) {
  EXPECT_EQ(*quarter(8), 2);
  ASSERT_FALSE(quarter(6).ok());
  EXPECT_EQ(quarter(6).error().id, "odd");
  EXPECT_TRUE(even(4).ok());
  EXPECT_EQ(even(3).error().id, "odd");
}

TEST(Sha256, MatchesKnownVector) {
  EXPECT_EQ(gpuenv::sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

// A FIFO (or any special file) given where a file is expected is refused at once; opening it blocking would wait
// for a writer forever.
TEST_F(Io, AFifoIsRefusedWithoutWaitingForAWriter) {
  const std::string fifo = (dir / "spec.yaml").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  auto r = gpuenv::read_file_limited(fifo, 1024);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().id, "io.not_a_file");
  auto y = gpuenv::read_yaml_file(fifo, 1024);
  ASSERT_FALSE(y.ok());
  EXPECT_EQ(y.error().id, "io.not_a_file");
}

}  // namespace

TEST_F(Io, ATreeIsRemovedByRenamingItFirst) {
  const fs::path tree = dir / "entry";
  fs::create_directories(tree / "a/b");
  std::ofstream(tree / "a/b/f") << "x";
  EXPECT_TRUE(gpuenv::remove_tree_renamed(tree.string()));
  EXPECT_FALSE(fs::exists(tree));
  for (const auto& e : fs::directory_iterator(dir)) EXPECT_EQ(e.path().filename().string().rfind(".removing-", 0), std::string::npos) << e.path();
  EXPECT_FALSE(gpuenv::remove_tree_renamed(tree.string()));  // gone already
}

namespace {

constexpr gpuenv::IoArea k_test_io{"test.io", "a test hint"};

/// A staged tree beside TARGET holding one file, FILE, with TEXT.
fs::path stage(const fs::path& dir, const std::string& name, const std::string& text) {
  const fs::path staged = dir / name;
  fs::create_directories(staged / "sub");
  std::ofstream(staged / "sub" / "file") << text;
  return staged;
}

TEST_F(Io, ACommittedDirectoryTakesTheTargetsNameAndItsStagedNameIsGone) {
  for (const auto durability : {gpuenv::Durability::synced, gpuenv::Durability::scratch}) {
    const fs::path target = dir / (durability == gpuenv::Durability::synced ? "synced" : "scratch");
    const fs::path staged = stage(dir, ".staged", "new");
    auto r = gpuenv::commit_directory(staged.string(), target.string(), durability, k_test_io, "cannot commit");
    ASSERT_TRUE(r.ok()) << r.error().to_string();
    EXPECT_EQ(*r, gpuenv::DirCommit::placed);
    EXPECT_EQ(read(target / "sub" / "file"), "new");
    EXPECT_FALSE(fs::exists(staged));
  }
}

TEST_F(Io, ACommittedDirectoryReplacesAnEmptyTargetDirectory) {
  const fs::path target = dir / "out";
  fs::create_directories(target);
  const fs::path staged = stage(dir, ".out.new", "new");
  auto r = gpuenv::commit_directory(staged.string(), target.string(), gpuenv::Durability::synced, k_test_io, "cannot commit");
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  EXPECT_EQ(*r, gpuenv::DirCommit::placed);
  EXPECT_EQ(read(target / "sub" / "file"), "new");
  EXPECT_EQ(entries(), 1);
}

TEST_F(Io, AnotherWritersCommittedDirectoryStaysAndTheStagedOneIsRemoved) {
  const fs::path target = stage(dir, "out", "theirs");
  const fs::path staged = stage(dir, ".out.new", "ours");
  auto r = gpuenv::commit_directory(staged.string(), target.string(), gpuenv::Durability::synced, k_test_io, "cannot commit");
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  EXPECT_EQ(*r, gpuenv::DirCommit::already_there);
  EXPECT_EQ(read(target / "sub" / "file"), "theirs");
  EXPECT_FALSE(fs::exists(staged));
  EXPECT_EQ(entries(), 1);
}

TEST_F(Io, AFailedDirectoryCommitLeavesNoTemporaryAndNamesTheTarget) {
  const fs::path target = dir / "a-file";
  std::ofstream(target) << "not a directory";
  const fs::path staged = stage(dir, ".a-file.new", "ours");
  auto r = gpuenv::commit_directory(staged.string(), target.string(), gpuenv::Durability::synced, k_test_io, "cannot commit the tree");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().id, "test.io");
  EXPECT_EQ(r.error().kind, gpuenv::ErrorKind::environment);
  EXPECT_EQ(r.error().where, target.string());
  EXPECT_EQ(r.error().message, "cannot commit the tree: Not a directory");
  EXPECT_EQ(r.error().hint, "a test hint");
  EXPECT_FALSE(fs::exists(staged));
  EXPECT_EQ(read(target), "not a directory");
  EXPECT_EQ(entries(), 1);
}

TEST(IoError, SaysWhatFailedWithTheSystemsReasonUnderTheAreasIdAndHint) {
  const gpuenv::Error e = gpuenv::io_error(k_test_io, "cannot open", "/some/where", ENOENT);
  EXPECT_EQ(e.kind, gpuenv::ErrorKind::environment);
  EXPECT_EQ(e.id, "test.io");
  EXPECT_EQ(e.message, "cannot open: No such file or directory");
  EXPECT_EQ(e.where, "/some/where");
  EXPECT_EQ(e.hint, "a test hint");
  errno = EACCES;
  EXPECT_EQ(gpuenv::io_error(k_test_io, "cannot write", "x").message, "cannot write: Permission denied");
}

}  // namespace
