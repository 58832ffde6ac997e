#include "base/file_lock.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>
#include <vector>

#include "fakes/temp_dir.hpp"

namespace {

using gpuenv::FileLock;
using gpuenv::LockMode;
using gpuenv::LockOptions;

LockOptions options(LockMode mode, std::chrono::milliseconds patience) {
  LockOptions o;
  o.mode = mode;
  o.patience = patience;
  o.what = "the test's lock";
  o.io = {"test.io", "a test hint"};
  o.locked_id = "test.locked";
  return o;
}

/// A child process that holds PATH's lock until the object is destroyed.
class HoldingChild {
 public:
  HoldingChild(const std::string& path, LockMode mode) {
    int ready[2], release[2];
    if (::pipe(ready) != 0 || ::pipe(release) != 0) throw std::runtime_error("pipe");
    m_pid = ::fork();
    if (m_pid == 0) {
      ::close(ready[0]);
      ::close(release[1]);
      auto lock = FileLock::acquire(path, options(mode, std::chrono::milliseconds(0)));
      const char c = lock.ok() ? '1' : '0';
      (void)!::write(ready[1], &c, 1);
      char x = 0;
      (void)!::read(release[0], &x, 1);  // returns when the parent closes its end
      ::_exit(0);
    }
    ::close(ready[1]);
    ::close(release[0]);
    m_release = release[1];
    char c = 0;
    m_holds = ::read(ready[0], &c, 1) == 1 && c == '1';
    ::close(ready[0]);
  }
  ~HoldingChild() {
    ::close(m_release);
    int status = 0;
    ::waitpid(m_pid, &status, 0);
  }
  HoldingChild(const HoldingChild&) = delete;
  HoldingChild& operator=(const HoldingChild&) = delete;
  [[nodiscard]] pid_t pid() const { return m_pid; }
  [[nodiscard]] bool holds() const { return m_holds; }

 private:
  pid_t m_pid = -1;
  int m_release = -1;
  bool m_holds = false;
};

class Lock : public ::testing::Test {
 protected:
  gpuenv::testing::TempDir m_dir{"gpuenv-lock"};
  const std::string path = (m_dir.path() / "lock").string();

  /// PATH locked in MODE, tried once unless PATIENCE says otherwise.
  [[nodiscard]] gpuenv::Result<FileLock> take(LockMode mode, std::chrono::milliseconds patience = std::chrono::milliseconds(0)) const {
    return FileLock::acquire(path, options(mode, patience));
  }
};

TEST_F(Lock, SharedHoldersHoldItTogether) {
  auto first = take(LockMode::shared);
  ASSERT_TRUE(first.ok()) << first.error().to_string();
  auto second = take(LockMode::shared);
  EXPECT_TRUE(second.ok()) << second.error().to_string();
}

TEST_F(Lock, ExclusiveIsRefusedUnderASharedHolderAndSharedUnderAnExclusiveOne) {
  for (const auto& [held, asked] : {std::pair{LockMode::shared, LockMode::exclusive}, std::pair{LockMode::exclusive, LockMode::shared}}) {
    auto holder = take(held);
    ASSERT_TRUE(holder.ok()) << holder.error().to_string();
    auto refused = take(asked);
    ASSERT_FALSE(refused.ok());
    EXPECT_EQ(refused.error().id, "test.locked");
    EXPECT_NE(refused.error().message.find("it was busy"), std::string::npos) << refused.error().message;
  }
}

TEST_F(Lock, IsReleasedWhenDestroyed) {
  {
    auto held = take(LockMode::exclusive);
    ASSERT_TRUE(held.ok()) << held.error().to_string();
  }
  auto again = take(LockMode::exclusive);
  EXPECT_TRUE(again.ok()) << again.error().to_string();
}

TEST_F(Lock, TimesOutNamingWhatIsLockedAndTheHoldingProcess) {
  HoldingChild child(path, LockMode::exclusive);
  ASSERT_TRUE(child.holds());
  const auto start = std::chrono::steady_clock::now();
  auto lock = take(LockMode::exclusive, std::chrono::milliseconds(150));
  const auto waited = std::chrono::steady_clock::now() - start;
  ASSERT_FALSE(lock.ok());
  EXPECT_GE(waited, std::chrono::milliseconds(150));
  const gpuenv::Error& e = lock.error();
  EXPECT_EQ(e.id, "test.locked");
  EXPECT_EQ(e.kind, gpuenv::ErrorKind::environment);
  EXPECT_EQ(e.where, path);
  EXPECT_NE(e.message.find("the test's lock is locked"), std::string::npos) << e.message;
  EXPECT_NE(e.message.find("held by pid " + std::to_string(child.pid())), std::string::npos) << e.message;
  EXPECT_NE(e.message.find("gave up after 150 ms"), std::string::npos) << e.message;
  EXPECT_EQ(e.hint, "wait for the holder to finish");
}

TEST_F(Lock, NamesThisProcessAsHolderAndSaysSoWhenNoneIsVisible) {
  auto held = take(LockMode::exclusive);
  ASSERT_TRUE(held.ok()) << held.error().to_string();
  EXPECT_EQ(gpuenv::flock_holders(held->fd()), std::vector<long>{static_cast<long>(::getpid())});
  EXPECT_NE(gpuenv::describe_holders(held->fd()).find("held by pid " + std::to_string(::getpid())), std::string::npos);

  const std::string unlocked = (m_dir.path() / "unlocked").string();
  gpuenv::UniqueFd plain(::open(unlocked.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
  ASSERT_GE(plain.get(), 0);
  EXPECT_TRUE(gpuenv::flock_holders(plain.get()).empty());
  EXPECT_NE(gpuenv::describe_holders(plain.get()).find("no holder is visible from here"), std::string::npos);
}

TEST_F(Lock, AnUnopenableLockFileIsAnIoErrorNamingWhatIsLocked) {
  const std::string missing = (m_dir.path() / "missing" / "lock").string();
  auto lock = FileLock::acquire(missing, options(LockMode::exclusive, std::chrono::milliseconds(0)));
  ASSERT_FALSE(lock.ok());
  EXPECT_EQ(lock.error().id, "test.io");
  EXPECT_EQ(lock.error().where, missing);
  EXPECT_EQ(lock.error().message, "cannot open the lock of the test's lock: No such file or directory");
  EXPECT_EQ(lock.error().hint, "a test hint");
}

extern "C" void note_signal(int) {}

/// How long take_from_a_holder's holder keeps the lock.
constexpr auto k_hold = std::chrono::milliseconds(200);

/// What take_from_a_holder saw.
struct Contended {
  gpuenv::Result<FileLock> lock;
  bool holder_held = false;           ///< the holder got the lock before the waiter tried
  bool after_release = false;         ///< the waiter got it only once the holder had begun to release it
  std::chrono::nanoseconds waited{};  ///< how long the waiter's acquire took
};

/// Takes PATH in MODE with PATIENCE while another thread holds it exclusively (its own open file, so it conflicts
/// with this thread's) for k_hold; with INTERRUPT, SIGUSR1 (installed without SA_RESTART, so a blocked flock
/// returns EINTR) reaches this thread every 10 ms meanwhile. The signal's former action is restored.
Contended take_from_a_holder(const std::string& path, LockMode mode, std::chrono::milliseconds patience, bool interrupt) {
  std::atomic<bool> holding{false}, holder_done{false}, releasing{false}, stop{false};
  std::thread holder([&] {
    auto lock = FileLock::acquire(path, options(LockMode::exclusive, std::chrono::milliseconds(0)));
    if (lock.ok()) {
      holding = true;
      std::this_thread::sleep_for(k_hold);
      releasing = true;  // set while still held: a waiter that holds the lock afterwards must see it
    }
    holder_done = true;
  });  // the lock is released when the lambda's `lock` is destroyed, after `releasing`
  while (!holding && !holder_done) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  Contended out{gpuenv::make_error(gpuenv::ErrorKind::internal, "test.not_tried", "the holder could not lock", path, "")};
  out.holder_held = holding;
  if (!out.holder_held) {
    holder.join();
    return out;
  }
  struct sigaction sa {}, old {};
  sa.sa_handler = note_signal;
  sigemptyset(&sa.sa_mask);
  if (interrupt) ::sigaction(SIGUSR1, &sa, &old);
  const pthread_t self = ::pthread_self();
  std::thread signals([&] {
    while (interrupt && !stop) {
      ::pthread_kill(self, SIGUSR1);
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  });
  const auto start = std::chrono::steady_clock::now();
  out.lock = FileLock::acquire(path, options(mode, patience));
  out.waited = std::chrono::steady_clock::now() - start;
  out.after_release = releasing;
  stop = true;
  signals.join();
  if (interrupt) ::sigaction(SIGUSR1, &old, nullptr);
  holder.join();
  return out;
}

/// The waiter held the lock only after the holder let it go, having waited about the holder's time for it.
void expect_waited_for_the_holder(const Contended& c) {
  ASSERT_TRUE(c.holder_held);
  ASSERT_TRUE(c.lock.ok()) << c.lock.error().to_string();
  EXPECT_TRUE(c.after_release);
  EXPECT_GE(c.waited, k_hold - std::chrono::milliseconds(50));  // the holder slept k_hold after the waiter saw it hold
}

TEST_F(Lock, WaitsForAHolderThatReleasesWithinThePatience) {
  expect_waited_for_the_holder(take_from_a_holder(path, LockMode::exclusive, std::chrono::seconds(20), false));
}

TEST_F(Lock, AWaitForeverSurvivesSignalsUntilTheHolderReleases) {
  expect_waited_for_the_holder(take_from_a_holder(path, LockMode::exclusive, LockOptions::k_forever, true));
}

// A bounded wait polls with LOCK_NB, which never blocks and so never returns EINTR: what signals interrupt here are
// the sleeps between its tries, and the wait must neither give up early nor take the lock before the holder leaves.
TEST_F(Lock, ABoundedWaitKeepsPollingThroughSignalsUntilTheHolderReleases) {
  expect_waited_for_the_holder(take_from_a_holder(path, LockMode::shared, std::chrono::seconds(20), true));
}

TEST_F(Lock, ATryOnceWithoutDescriptionSaysOnlyThatItIsLocked) {
  auto held = take(LockMode::exclusive);
  ASSERT_TRUE(held.ok()) << held.error().to_string();
  LockOptions o = options(LockMode::exclusive, std::chrono::milliseconds(0));
  o.describe = false;
  auto again = FileLock::acquire(path, o);
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.error().id, "test.locked");
  EXPECT_EQ(again.error().message, "the test's lock is locked; it was busy");
}

TEST(ProcLocks, HoldersOfTheDeviceAndInodeLeavingOutWaitersAndOtherLocks) {
  const std::string text =
      "1: FLOCK  ADVISORY  WRITE 7849 fe:00:10953026 0 EOF\n"
      "1: -> FLOCK  ADVISORY  WRITE 7850 fe:00:10953026 0 EOF\n"
      "2: POSIX  ADVISORY  WRITE 7851 fe:00:10953026 0 EOF\n"
      "3: FLOCK  ADVISORY  READ 7700 fe:00:10953026 0 EOF\n"
      "4: FLOCK  ADVISORY  READ 7700 fe:00:10953026 0 EOF\n"
      "5: FLOCK  ADVISORY  WRITE 9999 fe:00:42 0 EOF\n"
      "6: FLOCK  ADVISORY  WRITE 8888 00:2d:10953026 0 EOF\n";
  EXPECT_EQ(gpuenv::flock_holders_in(text, 0xfe, 0, 10953026), (std::vector<long>{7700, 7849}));
}

TEST(ProcLocks, FallsBackToTheInodeAloneWhenNoLineNamesTheDevice) {
  // btrfs subvolumes and overlayfs: fstat's st_dev (here 0:52) is not the superblock's device /proc/locks names.
  const std::string text =
      "1: FLOCK  ADVISORY  WRITE 4242 00:2d:777 0 EOF\n"
      "2: FLOCK  ADVISORY  WRITE 4343 00:2d:778 0 EOF\n";
  EXPECT_EQ(gpuenv::flock_holders_in(text, 0, 0x52, 777), std::vector<long>{4242});
  EXPECT_TRUE(gpuenv::flock_holders_in(text, 0, 0x52, 779).empty());
}

TEST(ProcLocks, SkipsMalformedLines) {
  const std::string text =
      "\n"
      "garbage\n"
      "1: FLOCK\n"
      "2: FLOCK  ADVISORY  WRITE notapid fe:00:5 0 EOF\n"
      "3: FLOCK  ADVISORY  WRITE -4 fe:00:5 0 EOF\n"
      "4: FLOCK  ADVISORY  WRITE 12 fe:00 0 EOF\n"
      "5: FLOCK  ADVISORY  WRITE 13 fe:zz:5 0 EOF\n"
      "6: FLOCK  ADVISORY  WRITE 14 fe:00:5x 0 EOF\n"
      "7: FLOCK  ADVISORY  WRITE 15 fe:00:5 0 EOF";  // the last line, unterminated, still counts
  EXPECT_EQ(gpuenv::flock_holders_in(text, 0xfe, 0, 5), std::vector<long>{15});
}

}  // namespace
