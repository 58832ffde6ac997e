#include "base/cache/work_dir.hpp"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include "fakes/temp_dir.hpp"

namespace {

namespace fs = std::filesystem;
using gpuenv::sweep_abandoned_work_dirs;
using gpuenv::WorkDir;

class CacheRoot {
 public:
  [[nodiscard]] std::string root() const { return m_dir.path().string(); }
  [[nodiscard]] std::size_t entries() const {
    std::size_t n = 0;
    std::error_code ec;
    for (fs::directory_iterator it(m_dir.path() / "tmp", ec), end; !ec && it != end; it.increment(ec)) ++n;
    return n;
  }

 private:
  gpuenv::testing::TempDir m_dir{"gpuenv-workdir"};
};

TEST(WorkDir, IsRemovedWithItsContentsWhenDone) {
  CacheRoot cache;
  std::string path;
  {
    auto work = WorkDir::create(cache.root());
    ASSERT_TRUE(work.ok()) << work.error().to_string();
    path = (*work)->path();
    fs::create_directories(path + "/rootfs/usr/bin");
    std::ofstream(path + "/rootfs/usr/bin/tool") << "x";
    EXPECT_TRUE(fs::exists(path + "/.lock"));
  }
  EXPECT_FALSE(fs::exists(path));
}

TEST(WorkDir, ALiveWorkDirSurvivesASweep) {
  CacheRoot cache;
  auto work = WorkDir::create(cache.root());
  ASSERT_TRUE(work.ok());
  std::ofstream((*work)->path() + "/layer.tar") << "data";
  EXPECT_EQ(sweep_abandoned_work_dirs(cache.root()), 0u);
  EXPECT_TRUE(fs::exists((*work)->path() + "/layer.tar"));
}

TEST(WorkDir, TheWorkDirOfAKilledProcessIsSweptAway) {
  CacheRoot cache;
  int pipe_fds[2];
  ASSERT_EQ(::pipe(pipe_fds), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto work = WorkDir::create(cache.root());
    if (!work.ok()) ::_exit(2);
    fs::create_directories((*work)->path() + "/rootfs/usr/lib");
    std::ofstream((*work)->path() + "/rootfs/usr/lib/big") << std::string(4096, 'x');
    const char ready = 1;
    (void)!::write(pipe_fds[1], &ready, 1);
    ::pause();  // killed here, mid-build
    ::_exit(0);
  }
  ::close(pipe_fds[1]);
  char ready = 0;
  ASSERT_EQ(::read(pipe_fds[0], &ready, 1), 1);
  ::close(pipe_fds[0]);
  EXPECT_EQ(sweep_abandoned_work_dirs(cache.root()), 0u) << "still alive: kept";
  ASSERT_EQ(cache.entries(), 1u);
  ::kill(child, SIGKILL);
  int status = 0;
  ::waitpid(child, &status, 0);
  ASSERT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(sweep_abandoned_work_dirs(cache.root()), 1u);
  EXPECT_EQ(cache.entries(), 0u);
}

TEST(WorkDir, UnlockedDirectoriesGoOnlyWhenADayOld) {
  CacheRoot cache;
  const fs::path young = fs::path(cache.root()) / "tmp/123-1-work";
  const fs::path old = fs::path(cache.root()) / "tmp/123-2-work";
  fs::create_directories(young / "rootfs");
  fs::create_directories(old / "rootfs");
  const fs::path live_download = fs::path(cache.root()) / "tmp" / (std::to_string(::getpid()) + "-3-1.part");
  std::ofstream(live_download) << "a download in progress";
  fs::last_write_time(old, fs::file_time_type::clock::now() - std::chrono::hours(25));
  EXPECT_EQ(sweep_abandoned_work_dirs(cache.root()), 1u);
  EXPECT_TRUE(fs::exists(young));
  EXPECT_FALSE(fs::exists(old));
  EXPECT_TRUE(fs::exists(live_download)) << "a live writer's download stays; only those of writers that exited go";
}

TEST(WorkDir, AnUnwritableCacheIsACleanError) {
  auto work = WorkDir::create("/proc/gpuenv-no-such-cache");
  ASSERT_FALSE(work.ok());
  EXPECT_EQ(work.error().id, "cache.io");
  EXPECT_FALSE(work.error().hint.empty());
}

}  // namespace
