// data_read: the measurement through the DataFiles port (a fake for faults and time, the real POSIX adapter on real
// files in temporary directories), the judgement, and the check as the runner sees it.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>

#include "fakes/fake_data_files.hpp"
#include "fakes/fake_gpu_backend.hpp"
#include "fakes/temp_dir.hpp"
#include "validate/check.hpp"
#include "validate/data_read.hpp"
#include "validate/error_codes.hpp"
#include "validate/report.hpp"
#include "validate/runner.hpp"

using gpuenv::testing::FakeDataFiles;
using gpuenv::testing::TempDir;
using gpuenv::validate::CheckStatus;
using gpuenv::validate::DataOwner;
using gpuenv::validate::DataPathInfo;
using gpuenv::validate::DataPathKind;
using gpuenv::validate::DataReadFigures;
using gpuenv::validate::Level;
namespace fs = std::filesystem;
namespace v = gpuenv::validate;

namespace {

constexpr std::uint64_t k_mib = 1024 * 1024;

// A deadline far enough away that only the plan's own limits stop anything (the fake's clock starts at zero).
std::chrono::steady_clock::time_point far() { return std::chrono::steady_clock::time_point{} + std::chrono::hours(1); }

DataPathInfo directory(std::uint64_t free_bytes) { return {DataPathKind::directory, 0, free_bytes, false}; }

// A user's file of SIZE bytes in the fake.
void add_file(FakeDataFiles& f, const std::string& path, std::uint64_t size) {
  f.paths[path] = {DataPathKind::regular_file, size, 0, false};
  f.contents[path] = std::string(size, 'x');
}

// The final names of the directories the fake made (made under .gpuenv-data-new-*, renamed to .gpuenv-data-read-*).
std::vector<std::string> finals(const FakeDataFiles& f) {
  std::vector<std::string> out;
  for (const auto& m : f.made) {
    const auto at = m.find(v::k_data_new_prefix);
    out.push_back(m.substr(0, at) + v::k_data_dir_prefix + m.substr(at + std::strlen(v::k_data_new_prefix)));
  }
  return out;
}

// --- file mode -----------------------------------------------------------------------------------------------------

TEST(DataRead, AFileIsReadWholeAndNothingIsWritten) {
  FakeDataFiles f;
  add_file(f, "/data/shard-0", 40 * k_mib);
  auto r = v::measure_data_read(f, "/data/shard-0", Level::standard, far());
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_FALSE(r->own_file);
  EXPECT_EQ(r->bytes_read, 40 * k_mib);
  EXPECT_EQ(r->bytes_to_read, 40 * k_mib);
  EXPECT_FALSE(r->read_stopped);
  EXPECT_TRUE(r->direct);
  EXPECT_TRUE(f.created.empty());
  EXPECT_TRUE(f.made.empty());
  EXPECT_DOUBLE_EQ(r->seconds, 0.06);  // five 8 MiB reads of 10 ms and the one that finds the end
}

TEST(DataRead, ShortReadsAreAddedUp) {
  FakeDataFiles f;
  add_file(f, "/data/f", 3 * k_mib + 4096);
  f.short_read = 1 << 20;
  auto r = v::measure_data_read(f, "/data/f", Level::quick, far());
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->bytes_read, 3 * k_mib + 4096);
}

TEST(DataRead, ReadingStopsAtTheLevelsReadTimeAndSaysSo) {
  FakeDataFiles f;
  add_file(f, "/data/big", 200 * k_mib);
  f.per_call = std::chrono::milliseconds(1000);  // 8 MiB a second: quick's 3 s read only 24 MiB
  auto r = v::measure_data_read(f, "/data/big", Level::quick, far());
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_TRUE(r->read_stopped);
  EXPECT_EQ(r->bytes_read, 24 * k_mib);
  EXPECT_DOUBLE_EQ(r->seconds, 3.0);
  const auto out = v::judge_data_read(*r, 1e9);
  EXPECT_EQ(out.status, CheckStatus::fail);
  EXPECT_NE(out.message.find("stopped at the read time limit after 24.0 MiB of 200"), std::string::npos) << out.message;
}

TEST(DataRead, TheChecksDeadlineStopsReadingBeforeTheLevelsLimit) {
  FakeDataFiles f;
  add_file(f, "/data/big", 200 * k_mib);
  f.per_call = std::chrono::milliseconds(500);
  // 2.5 s left: 1.5 s are kept for cleaning up, so reading stops after 1 s.
  auto r = v::measure_data_read(f, "/data/big", Level::long_, std::chrono::steady_clock::time_point{} + std::chrono::milliseconds(2500));
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_TRUE(r->read_stopped);
  EXPECT_EQ(r->bytes_read, 16 * k_mib);
}

TEST(DataRead, AnIoErrorIsAnErrorWithItsId) {
  FakeDataFiles f;
  add_file(f, "/data/f", 64 * k_mib);
  f.read_error = v::k_data_io;
  f.read_error_after = 16 * k_mib;
  auto r = v::measure_data_read(f, "/data/f", Level::standard, far());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().id, v::k_data_io);
}

TEST(DataRead, DirectRefusedPartWayIsReportedAsAFallback) {
  FakeDataFiles f;
  add_file(f, "/data/f", 16 * k_mib);
  f.refuse_direct_on_read = true;
  auto r = v::measure_data_read(f, "/data/f", Level::quick, far());
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->direct);
  EXPECT_TRUE(r->fell_back);
  EXPECT_NE(v::judge_data_read(*r, std::nullopt).message.find("O_DIRECT refused part-way"), std::string::npos);
}

TEST(DataRead, MissingAndUnsupportedPathsAreErrors) {
  FakeDataFiles f;
  auto missing = v::measure_data_read(f, "/nowhere", Level::quick, far());
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().id, v::k_data_missing);
  f.paths["/dev/sda"] = {DataPathKind::other, 0, 0, false};
  auto other = v::measure_data_read(f, "/dev/sda", Level::quick, far());
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.error().id, "data.unsupported");
}

// --- directory mode ------------------------------------------------------------------------------------------------

TEST(DataRead, ADirectoryGetsOwnFileUnderTheCapReadBackAndRemoved) {
  FakeDataFiles f;
  f.paths["/data"] = directory(1ull << 40);  // 1 TiB free: the cap decides
  auto r = v::measure_data_read(f, "/data", Level::quick, far());
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_TRUE(r->own_file);
  EXPECT_EQ(r->bytes_read, 256 * k_mib);
  ASSERT_EQ(f.made.size(), 1u);
  EXPECT_EQ(f.made[0], "/data/.gpuenv-data-new-fake0");
  // Made under a temporary name, renamed once the owner file is in it: a final name always holds its owner.
  EXPECT_EQ(f.renamed, (std::vector<std::string>{"/data/.gpuenv-data-new-fake0 -> /data/.gpuenv-data-read-fake0"}));
  EXPECT_EQ(f.owner_at_rename, (std::vector<std::string>{v::data_owner_text(f.me)}));
  EXPECT_EQ(f.created, (std::vector<std::string>{"/data/.gpuenv-data-new-fake0/owner", "/data/.gpuenv-data-read-fake0/data"}));
  EXPECT_EQ(r->file, "/data/.gpuenv-data-read-fake0/data");
  EXPECT_EQ(f.removed, finals(f));
  EXPECT_TRUE(f.contents.empty());
}

TEST(DataRead, TheFileIsATenthOfTheFreeSpaceAtMost) {
  FakeDataFiles f;
  f.paths["/data"] = directory(300 * k_mib);  // a tenth: 30 MiB, rounded down to 24 MiB (8 MiB blocks)
  auto r = v::measure_data_read(f, "/data", Level::quick, far());
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->bytes_read, 24 * k_mib);
}

TEST(DataRead, TooLittleFreeSpaceIsNoSpaceAndWritesNothing) {
  FakeDataFiles f;
  f.paths["/data"] = directory(100 * k_mib);
  auto r = v::measure_data_read(f, "/data", Level::standard, far());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().id, v::k_data_no_space);
  EXPECT_TRUE(f.made.empty());
}

TEST(DataRead, NoSpaceWhileWritingRemovesTheDirectory) {
  FakeDataFiles f;
  f.paths["/data"] = directory(1ull << 40);
  f.write_error = v::k_data_no_space;
  auto r = v::measure_data_read(f, "/data", Level::quick, far());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().id, v::k_data_no_space);
  EXPECT_EQ(f.removed, finals(f));
}

TEST(DataRead, AReadOnlyFileSystemAsksForAFile) {
  FakeDataFiles f;
  f.paths["/mnt/ro"] = {DataPathKind::directory, 0, 1ull << 40, true};
  auto r = v::measure_data_read(f, "/mnt/ro", Level::quick, far());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().id, v::k_data_read_only);
  EXPECT_TRUE(f.made.empty());
  const auto* code = v::find_error_code("data_read_only");
  ASSERT_NE(code, nullptr);
  EXPECT_NE(std::string(code->hint).find("--data FILE"), std::string::npos);
}

TEST(DataRead, WritingStopsAtItsTimeAndTheSmallerFileIsRead) {
  FakeDataFiles f;
  f.paths["/data"] = directory(1ull << 40);
  f.per_call = std::chrono::milliseconds(1000);  // quick writes for 4 s: 32 MiB
  auto r = v::measure_data_read(f, "/data", Level::quick, far());
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_TRUE(r->write_stopped);
  EXPECT_EQ(r->bytes_to_read, 32 * k_mib);
  EXPECT_EQ(r->bytes_read, 24 * k_mib);  // and reading stops after 3 s
}

TEST(DataRead, OwnFileReadBackWrongIsAMismatch) {
  FakeDataFiles f;
  f.paths["/data"] = directory(1ull << 40);
  f.corrupt = true;
  auto r = v::measure_data_read(f, "/data", Level::quick, far());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().id, "data.mismatch");
  EXPECT_EQ(f.removed, finals(f));
}

// --- directories left behind ---------------------------------------------------------------------------------------

TEST(DataOwner, TextRoundTripsAndJunkIsRefused) {
  const DataOwner o{"node1", "0b1c-boot", "pid:[4026531836]", 4242};
  auto back = v::parse_data_owner(v::data_owner_text(o));
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->host, "node1");
  EXPECT_EQ(back->boot_id, "0b1c-boot");
  EXPECT_EQ(back->pid_namespace, "pid:[4026531836]");
  EXPECT_EQ(back->pid, 4242);
  EXPECT_FALSE(v::parse_data_owner("").has_value());
  EXPECT_FALSE(v::parse_data_owner("gpuenv-data-read-owner-v1\nboot_id=b\npid=x\n").has_value());
  EXPECT_FALSE(v::parse_data_owner("gpuenv-data-read-owner-v1\nboot_id=b\npid=-3\n").has_value());
}

TEST(DataOwner, GoneOnlyWhenThisHostCanTell) {
  const DataOwner self{"node1", "boot-1", "pid:[1]", 100};
  EXPECT_TRUE(v::data_owner_gone({"node1", "boot-1", "pid:[1]", 7}, self, false));   // dead here
  EXPECT_FALSE(v::data_owner_gone({"node1", "boot-1", "pid:[1]", 7}, self, true));   // running here
  EXPECT_FALSE(v::data_owner_gone({"node1", "boot-1", "pid:[2]", 7}, self, false));  // another container's
  EXPECT_TRUE(v::data_owner_gone({"node1", "boot-0", "pid:[1]", 7}, self, true));    // this host rebooted since
  EXPECT_FALSE(v::data_owner_gone({"node2", "boot-9", "pid:[1]", 7}, self, false));  // another host's (NFS)
  EXPECT_FALSE(v::data_owner_gone({"node1", "boot-0", "pid:[1]", 7}, {"node1", "", "pid:[1]", 100}, false));
}

TEST(DataRead, StaleDirectoriesOfDeadRunsAreRemovedLiveOnesKept) {
  FakeDataFiles f;
  f.paths["/data"] = directory(1ull << 40);
  const std::string dead = "/data/.gpuenv-data-read-aaaaaa", live = "/data/.gpuenv-data-read-bbbbbb";
  const std::string other_host = "/data/.gpuenv-data-read-cccccc", foreign = "/data/.gpuenv-data-read-dddddd";
  const std::chrono::seconds day(86400);  // old: only the owner file decides
  f.listings["/data"] = {{".gpuenv-data-read-aaaaaa", true, true, day}, {".gpuenv-data-read-bbbbbb", true, true, day},
                         {".gpuenv-data-read-cccccc", true, true, day}, {".gpuenv-data-read-dddddd", true, false, day},
                         {"train-000.tar", false, true, day}, {".gpuenv-data-read-eeeeee", false, true, day}};
  f.contents[dead + "/owner"] = v::data_owner_text({"node1", "boot-1", "pid:[1]", 7});
  f.contents[live + "/owner"] = v::data_owner_text({"node1", "boot-1", "pid:[1]", 8});
  f.contents[other_host + "/owner"] = v::data_owner_text({"node2", "boot-2", "pid:[1]", 9});
  f.contents[foreign + "/owner"] = v::data_owner_text({"node1", "boot-1", "pid:[1]", 10});
  f.live = {8};
  auto r = v::measure_data_read(f, "/data", Level::quick, far());
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_EQ(f.removed.size(), 2u);
  EXPECT_EQ(f.removed[0], dead);
  EXPECT_EQ(f.removed[1], finals(f).at(0));
  EXPECT_TRUE(f.contents.count(live + "/owner"));
  const std::string notes = ::testing::PrintToString(r->notes);
  EXPECT_NE(notes.find("removed " + dead), std::string::npos) << notes;
  EXPECT_NE(notes.find("kept " + live), std::string::npos) << notes;
  EXPECT_NE(notes.find("kept " + other_host), std::string::npos) << notes;
  EXPECT_EQ(notes.find(foreign), std::string::npos) << notes;  // another user's: not ours to judge
}

// A run killed between making its directory and renaming it leaves a .gpuenv-data-new-* directory, perhaps without
// an owner file or with a torn one: removed once stale, kept while fresh (its run may be writing the owner now).
TEST(DataRead, DirectoriesWithoutAnOwnerAreRemovedOnceStaleFreshOnesKept) {
  FakeDataFiles f;
  using std::chrono::seconds;
  const seconds hour(3600), moment(3), stale = v::k_data_stale_age;
  const std::string torn = "gpuenv-data-read-owner-v1\nhost=node1\nboot_i";
  f.listings["/data"] = {{".gpuenv-data-new-old000", true, true, hour},   {".gpuenv-data-new-new000", true, true, moment},
                         {".gpuenv-data-new-torn00", true, true, stale},  {".gpuenv-data-new-torn01", true, true, moment},
                         {".gpuenv-data-new-node20", true, true, hour},   {".gpuenv-data-new-node21", true, true, moment},
                         {".gpuenv-data-new-dead00", true, true, moment}, {".gpuenv-data-read-none00", true, true, hour},
                         {".gpuenv-data-read-none01", true, true, moment}, {".gpuenv-data-new-other0", true, false, hour}};
  f.contents["/data/.gpuenv-data-new-old000/data"] = "left behind";
  f.contents["/data/.gpuenv-data-new-torn00/owner"] = torn;
  f.contents["/data/.gpuenv-data-new-torn01/owner"] = torn;
  f.contents["/data/.gpuenv-data-new-node20/owner"] = v::data_owner_text({"node2", "boot-2", "pid:[1]", 9});
  f.contents["/data/.gpuenv-data-new-node21/owner"] = v::data_owner_text({"node2", "boot-2", "pid:[1]", 9});
  f.contents["/data/.gpuenv-data-new-dead00/owner"] = v::data_owner_text({"node1", "boot-1", "pid:[1]", 7});
  const auto notes = v::remove_stale_data_directories(f, "/data");
  EXPECT_EQ(f.removed, (std::vector<std::string>{"/data/.gpuenv-data-new-old000", "/data/.gpuenv-data-new-torn00",
                                                 "/data/.gpuenv-data-new-node20", "/data/.gpuenv-data-new-dead00",
                                                 "/data/.gpuenv-data-read-none00"}));
  EXPECT_FALSE(f.contents.count("/data/.gpuenv-data-new-old000/data"));
  EXPECT_TRUE(f.contents.count("/data/.gpuenv-data-new-torn01/owner"));
  const std::string all = ::testing::PrintToString(notes);
  EXPECT_EQ(notes.size(), 9u) << all;
  EXPECT_NE(all.find("removed /data/.gpuenv-data-new-old000, left without a readable owner file"), std::string::npos) << all;
  EXPECT_NE(all.find("removed /data/.gpuenv-data-new-node20, left by a run killed before it renamed it"), std::string::npos) << all;
  EXPECT_NE(all.find("kept /data/.gpuenv-data-new-new000: no owner file gpuenv can read in it yet"), std::string::npos) << all;
  EXPECT_NE(all.find("kept /data/.gpuenv-data-new-node21: its run (pid 9 on node2) may still be going"), std::string::npos) << all;
  EXPECT_NE(all.find("kept /data/.gpuenv-data-read-none01"), std::string::npos) << all;
  EXPECT_EQ(all.find("other0"), std::string::npos) << all;  // another user's
}

TEST(DataRead, AFailedOwnerFileOrRenameRemovesTheNewDirectory) {
  for (const bool owner_fails : {true, false}) {
    FakeDataFiles f;
    f.paths["/data"] = directory(1ull << 40);
    (owner_fails ? f.owner_error : f.rename_error) = v::k_data_no_space;
    auto r = v::measure_data_read(f, "/data", Level::quick, far());
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().id, v::k_data_no_space);
    EXPECT_EQ(f.removed, f.made);  // the .gpuenv-data-new-* directory, never a final name
    EXPECT_TRUE(f.renamed.empty());
    EXPECT_TRUE(f.opened_for_reading.empty());
  }
}

// --- no time left --------------------------------------------------------------------------------------------------

TEST(DataRead, NoTimeLeftToWriteSaysSoAndMakesNothing) {
  FakeDataFiles f;
  f.paths["/data"] = directory(1ull << 40);
  // quick keeps 3 s for reading and 1.5 s for removing: a deadline 4 s away leaves no time to write.
  auto r = v::measure_data_read(f, "/data", Level::quick, f.clock + std::chrono::seconds(4));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().id, v::k_data_no_time);
  EXPECT_NE(r.error().message.find("no time left to write data_read's test file in /data: 4.0 s of the check's deadline "
                                   "remained, not more than the 4.5 s kept for reading"),
            std::string::npos)
      << r.error().message;
  EXPECT_TRUE(f.made.empty());
  EXPECT_TRUE(f.created.empty());
}

TEST(DataRead, NoTimeLeftAfterMakingTheDirectoryRemovesIt) {
  FakeDataFiles f;
  f.paths["/data"] = directory(1ull << 40);
  f.per_make = std::chrono::seconds(2);  // a slow file system: 5 s left before, 3 s after
  auto r = v::measure_data_read(f, "/data", Level::quick, f.clock + std::chrono::seconds(5));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().id, v::k_data_no_time);
  EXPECT_NE(r.error().message.find("3.0 s of the check's deadline remained"), std::string::npos) << r.error().message;
  EXPECT_EQ(f.removed, finals(f));
  EXPECT_TRUE(f.contents.empty());
}

TEST(DataRead, NoTimeLeftToReadAFileSaysSo) {
  FakeDataFiles f;
  add_file(f, "/data/shard", 64 * k_mib);
  auto r = v::measure_data_read(f, "/data/shard", Level::quick, f.clock + std::chrono::seconds(1));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().id, v::k_data_no_time);
  EXPECT_TRUE(f.opened_for_reading.empty());
}

// --- the judgement -------------------------------------------------------------------------------------------------

DataReadFigures figures(std::uint64_t bytes, double seconds) {
  DataReadFigures f;
  f.file = "/data/f";
  f.bytes_read = f.bytes_to_read = bytes;
  f.seconds = seconds;
  f.direct = true;
  return f;
}

TEST(DataReadJudge, PassFailAndMeasured) {
  const auto fig = figures(2048 * k_mib, 1.0);  // 2.15 GB/s
  const auto pass = v::judge_data_read(fig, 2e9);
  EXPECT_EQ(pass.status, CheckStatus::pass);
  EXPECT_TRUE(pass.code.empty());
  EXPECT_NE(pass.message.find("2.15 GB/s"), std::string::npos) << pass.message;
  const auto fail = v::judge_data_read(fig, 5e9);
  EXPECT_EQ(fail.status, CheckStatus::fail);
  EXPECT_EQ(fail.code, "data_read_slow");
  EXPECT_NE(fail.message.find("below 5.00 GB/s"), std::string::npos) << fail.message;
  const auto unjudged = v::judge_data_read(fig, std::nullopt);
  EXPECT_EQ(unjudged.status, CheckStatus::measured);  // never PASS without a threshold
  EXPECT_EQ(unjudged.code, "data_read_unjudged");
  for (const auto* o : {&pass, &fail, &unjudged}) {
    if (!o->code.empty()) EXPECT_NE(v::find_error_code(o->code), nullptr) << o->code;
    ASSERT_FALSE(o->metrics.empty());
    EXPECT_EQ(o->metrics[0].name, "read_gbs");
    EXPECT_NEAR(o->metrics[0].value, 2.147, 0.001);
  }
}

TEST(DataReadJudge, NothingReadFailsAndASmallReadIsFlagged) {
  EXPECT_EQ(v::judge_data_read(figures(0, 0), 1e9).status, CheckStatus::fail);
  EXPECT_EQ(v::judge_data_read(figures(0, 0), 1e9).code, "data_path_unusable");
  EXPECT_NE(v::judge_data_read(figures(k_mib, 0.001), std::nullopt).message.find("says little"), std::string::npos);
}

// --- the check -----------------------------------------------------------------------------------------------------

std::unique_ptr<v::Check> data_read_check() {
  for (auto& c : v::all_checks())
    if (c->key() == "data_read") return std::move(c);
  return nullptr;
}

// Runs data_read as the runner would, on INPUTS, with a backend it never touches.
std::vector<v::GpuOutcome> run_check(v::Check& check, const v::CheckInputs& inputs, std::string* skip_reason = nullptr) {
  gpuenv::testing::FakeGpuBackend backend;
  const v::DriverState driver;
  const std::vector<v::GpuInfo> gpus;
  v::CheckContext context{backend, inputs, driver, gpus, std::chrono::steady_clock::now() + check.deadline(inputs.level, 0)};
  if (auto reason = check.not_applicable(context)) {
    if (skip_reason) *skip_reason = *reason;
    return {};
  }
  return check.run(context);
}

TEST(DataReadCheck, NeedsNoGpuAndSkipsWithoutData) {
  auto check = data_read_check();
  ASSERT_NE(check, nullptr);
  EXPECT_EQ(check->category(), "data");
  EXPECT_FALSE(check->uses_gpu());
  EXPECT_FALSE(check->needs_nvidia());
  for (Level l : {Level::quick, Level::standard, Level::long_}) {
    EXPECT_TRUE(check->runs_at(l));
    const auto plan = v::data_read_plan(l);
    EXPECT_GT(check->deadline(l, 1), plan.write_time + plan.read_time + std::chrono::milliseconds(1500));
  }
  v::CheckInputs inputs;
  std::string reason;
  EXPECT_TRUE(run_check(*check, inputs, &reason).empty());
  EXPECT_NE(reason.find("--data"), std::string::npos);
}

TEST(DataReadCheck, ErrorsBecomeCataloguedFailures) {
  auto check = data_read_check();
  ASSERT_NE(check, nullptr);
  auto fake = std::make_shared<FakeDataFiles>();
  fake->paths["/mnt/ro"] = {DataPathKind::directory, 0, 1ull << 40, true};
  fake->paths["/full"] = directory(k_mib);
  add_file(*fake, "/bad", 64 * k_mib);
  v::CheckInputs inputs;
  inputs.level = Level::quick;
  inputs.data_files = fake;
  for (auto [path, code] : {std::pair{"/mnt/ro", "data_read_only"}, std::pair{"/full", "data_no_space"},
                            std::pair{"/nowhere", "data_path_unusable"}}) {
    inputs.data_path = path;
    const auto out = run_check(*check, inputs);
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].gpu, -1);
    EXPECT_EQ(out[0].status, CheckStatus::fail) << path;
    EXPECT_EQ(out[0].code, code) << out[0].message;
    EXPECT_FALSE(out[0].hint.empty());
  }
  fake->read_error = v::k_data_io;
  inputs.data_path = "/bad";
  EXPECT_EQ(run_check(*check, inputs).at(0).code, "data_io_error");
}

// No time left is a WARN with its own code: nothing was measured, which says nothing against the storage.
TEST(DataReadCheck, NoTimeLeftIsAWarningNotAFailure) {
  auto check = data_read_check();
  ASSERT_NE(check, nullptr);
  auto fake = std::make_shared<FakeDataFiles>();
  fake->paths["/data"] = directory(1ull << 40);
  fake->clock = std::chrono::steady_clock::now() + std::chrono::hours(1);  // the deadline has passed by this clock
  v::CheckInputs inputs;
  inputs.level = Level::quick;
  inputs.data_files = fake;
  inputs.data_path = "/data";
  const auto out = run_check(*check, inputs);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].status, CheckStatus::warn);
  EXPECT_EQ(out[0].code, "data_read_no_time");
  EXPECT_NE(out[0].message.find("no time left"), std::string::npos) << out[0].message;
  EXPECT_FALSE(out[0].hint.empty());
  EXPECT_TRUE(fake->made.empty());
}

TEST(DataReadCheck, JudgedByTheInputsThreshold) {
  auto check = data_read_check();
  ASSERT_NE(check, nullptr);
  auto fake = std::make_shared<FakeDataFiles>();
  add_file(*fake, "/data/f", 80 * k_mib);
  fake->per_call = std::chrono::milliseconds(1);  // ten reads and the end in 11 ms: 7.6 GB/s
  v::CheckInputs inputs;
  inputs.level = Level::standard;
  inputs.data_files = fake;
  inputs.data_path = "/data/f";
  EXPECT_EQ(run_check(*check, inputs).at(0).status, CheckStatus::measured);
  inputs.data_read_min = 5e9;
  EXPECT_EQ(run_check(*check, inputs).at(0).status, CheckStatus::pass);
  inputs.data_read_min = 10e9;
  EXPECT_EQ(run_check(*check, inputs).at(0).status, CheckStatus::fail);
}

// On a host without a driver or GPU, a run of data_read alone is a run like any other, not "could not run"; a run
// that also asks for a GPU check still says it could not run.
TEST(DataReadCheck, RunsOnAHostWithoutAGpu) {
  gpuenv::testing::FakeGpuBackend backend;
  backend.driver_state.loaded = false;
  auto fake = std::make_shared<FakeDataFiles>();
  add_file(*fake, "/data/f", 80 * k_mib);
  v::CheckInputs inputs;
  inputs.level = Level::quick;
  inputs.data_files = fake;
  inputs.data_path = "/data/f";
  inputs.data_read_min = 1e6;
  v::RunOptions only_data;
  only_data.filter = {"data"};
  auto report = v::run_validation(backend, inputs, v::all_checks(), only_data);
  ASSERT_TRUE(report.ok()) << report.error().message;
  EXPECT_FALSE(report->could_not_run);
  ASSERT_EQ(report->checks.size(), 1u);
  EXPECT_EQ(report->checks[0].key, "data_read");
  EXPECT_EQ(report->checks[0].status, CheckStatus::pass);
  EXPECT_EQ(v::exit_code(*report), 0);
  v::RunOptions with_gpu;
  with_gpu.filter = {"data_read", "hbm_bandwidth"};
  auto both = v::run_validation(backend, inputs, v::all_checks(), with_gpu);
  ASSERT_TRUE(both.ok());
  EXPECT_TRUE(both->could_not_run);
}

// --- the real adapter, on real files -------------------------------------------------------------------------------

std::set<std::string> tree(const fs::path& root) {
  std::set<std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(root)) out.insert(e.path().string());
  return out;
}

TEST(PosixDataFiles, DirectoryModeWritesOnlyInsideItsOwnDirectoryAndRemovesIt) {
  TempDir dir("gpuenv-data-read");
  std::ofstream(dir.path() / "train-000.tar") << "user data";
  const auto before = tree(dir.path());
  auto files = v::make_posix_data_files();
  auto r = v::measure_data_read(*files, dir.path().string(), Level::quick, std::chrono::steady_clock::now() + std::chrono::seconds(30));
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_TRUE(r->own_file);
  EXPECT_GT(r->bytes_read, 0u);
  EXPECT_EQ(r->bytes_read, r->bytes_to_read);
  EXPECT_EQ(r->file.rfind((dir.path() / ".gpuenv-data-read-").string(), 0), 0u) << r->file;
  EXPECT_EQ(tree(dir.path()), before);  // its own directory is gone, nothing else was touched
}

// Whether the file system of DIR refuses O_DIRECT at open (EINVAL), probed with a file of the test's own.
bool refuses_direct(const fs::path& dir) {
  const fs::path probe = dir / "direct-probe";
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_DIRECT, 0600);
  const int err = errno;
  if (fd >= 0) ::close(fd);
  std::error_code ec;
  fs::remove(probe, ec);
  return fd < 0 && err == EINVAL;
}

// A file system that refuses O_DIRECT at open: the whole measurement runs buffered, with the file's pages dropped.
// tmpfs refused it on older kernels; this machine's (Linux 6.18) takes it, and the test then says so and skips.
TEST(PosixDataFiles, AFileSystemRefusingODirectAtOpenIsReadBuffered) {
  if (!fs::is_directory("/dev/shm")) GTEST_SKIP() << "no /dev/shm (tmpfs) here";
  std::string pattern = "/dev/shm/gpuenv-data-read-XXXXXX";
  ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
  const fs::path shm = pattern;
  const bool refuses = refuses_direct(shm);
  auto files = v::make_posix_data_files();
  auto r = v::measure_data_read(*files, shm.string(), Level::quick, std::chrono::steady_clock::now() + std::chrono::seconds(30));
  std::error_code ec;
  const bool empty = fs::is_empty(shm, ec);
  fs::remove_all(shm, ec);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_GT(r->bytes_read, 0u);
  EXPECT_TRUE(empty);
  if (!refuses) GTEST_SKIP() << "this kernel's tmpfs takes O_DIRECT, so the fallback at open cannot be seen here";
  EXPECT_FALSE(r->direct);
  EXPECT_NE(v::judge_data_read(*r, std::nullopt).message.find("refuses O_DIRECT"), std::string::npos);
}

// A read the device refuses under O_DIRECT (EINVAL: here a buffer off the block alignment) goes on buffered, from
// the same offset, and the reader says it is no longer direct.
TEST(PosixDataFiles, EinvalOnADirectReadFallsBackToBuffered) {
  TempDir dir("gpuenv-data-read");
  const fs::path file = dir.path() / "f";
  std::ofstream(file, std::ios::binary) << std::string(64 * 1024, 'a') << std::string(64 * 1024, 'b');
  auto files = v::make_posix_data_files();
  auto reader = files->open_read(file.string());
  ASSERT_TRUE(reader.ok()) << reader.error().message;
  if (!(*reader)->direct()) GTEST_SKIP() << "the file system of " << dir.path() << " refuses O_DIRECT at open";
  std::vector<std::byte> storage(3 * v::k_data_alignment);
  auto* base = reinterpret_cast<std::byte*>((reinterpret_cast<std::uintptr_t>(storage.data()) + v::k_data_alignment - 1) /
                                            v::k_data_alignment * v::k_data_alignment);
  auto first = (*reader)->read(base, v::k_data_alignment);
  ASSERT_TRUE(first.ok()) << first.error().message;
  EXPECT_EQ(*first, v::k_data_alignment);
  EXPECT_TRUE((*reader)->direct());
  auto second = (*reader)->read(base + 1, v::k_data_alignment);  // misaligned: O_DIRECT refuses it
  ASSERT_TRUE(second.ok()) << second.error().message;
  EXPECT_EQ(*second, v::k_data_alignment);
  EXPECT_FALSE((*reader)->direct());
  EXPECT_EQ(static_cast<char>(base[1]), 'a');
}

TEST(PosixDataFiles, FileModeNeverWritesTheUsersFile) {
  TempDir dir("gpuenv-data-read");
  const fs::path file = dir.path() / "shard.bin";
  {
    std::ofstream out(file, std::ios::binary);
    const std::string block(1 << 20, 'd');
    for (int i = 0; i < 24; ++i) out << block;
  }
  ASSERT_EQ(::chmod(file.c_str(), 0444), 0);
  ASSERT_EQ(::chmod(dir.path().c_str(), 0555), 0);
  struct stat before {};
  ASSERT_EQ(::stat(file.c_str(), &before), 0);
  const auto dir_before = tree(dir.path());
  auto files = v::make_posix_data_files();
  auto r = v::measure_data_read(*files, file.string(), Level::quick, std::chrono::steady_clock::now() + std::chrono::seconds(30));
  struct stat after {};
  ASSERT_EQ(::stat(file.c_str(), &after), 0);
  ASSERT_EQ(::chmod(dir.path().c_str(), 0755), 0);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_FALSE(r->own_file);
  EXPECT_EQ(r->bytes_read, 24u << 20);
  EXPECT_EQ(after.st_ino, before.st_ino);
  EXPECT_EQ(after.st_size, before.st_size);
  EXPECT_EQ(after.st_mtim.tv_sec, before.st_mtim.tv_sec);
  EXPECT_EQ(after.st_mtim.tv_nsec, before.st_mtim.tv_nsec);
  EXPECT_EQ(after.st_ctim.tv_nsec, before.st_ctim.tv_nsec);  // not even its metadata changed
  EXPECT_EQ(tree(dir.path()), dir_before);
}

TEST(PosixDataFiles, MissingAndUnreadablePathsHaveTheirIds) {
  TempDir dir("gpuenv-data-read");
  auto files = v::make_posix_data_files();
  auto missing = v::measure_data_read(*files, (dir.path() / "nope").string(), Level::quick, std::chrono::steady_clock::now() + std::chrono::seconds(10));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().id, v::k_data_missing);
  auto dev = v::measure_data_read(*files, "/dev/null", Level::quick, std::chrono::steady_clock::now() + std::chrono::seconds(10));
  ASSERT_FALSE(dev.ok());
  EXPECT_EQ(dev.error().id, "data.unsupported");
  if (::geteuid() != 0) {
    const fs::path locked = dir.path() / "locked";
    std::ofstream(locked) << "x";
    ASSERT_EQ(::chmod(locked.c_str(), 0), 0);
    auto denied = v::measure_data_read(*files, locked.string(), Level::quick, std::chrono::steady_clock::now() + std::chrono::seconds(10));
    ASSERT_FALSE(denied.ok());
    EXPECT_EQ(denied.error().id, v::k_data_denied);
  }
}

// A pid that existed and is gone: a child that has exited and been reaped.
long dead_pid() {
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  int status = 0;
  ::waitpid(child, &status, 0);
  return child;
}

TEST(PosixDataFiles, ADirectoryLeftByADeadRunIsRemovedALiveOnesKept) {
  TempDir dir("gpuenv-data-read");
  auto files = v::make_posix_data_files();
  DataOwner me = files->self();
  ASSERT_FALSE(me.boot_id.empty());
  const fs::path dead = dir.path() / ".gpuenv-data-read-dead00", live = dir.path() / ".gpuenv-data-read-live00";
  for (const auto& [path, pid] : {std::pair{dead, dead_pid()}, std::pair{live, static_cast<long>(::getpid())}}) {
    fs::create_directory(path);
    DataOwner o = me;
    o.pid = pid;
    std::ofstream(path / "owner") << v::data_owner_text(o);
    std::ofstream(path / "data") << "left behind";
  }
  const auto notes = v::remove_stale_data_directories(*files, dir.path().string());
  EXPECT_FALSE(fs::exists(dead));
  EXPECT_TRUE(fs::exists(live / "data"));
  EXPECT_EQ(notes.size(), 2u) << ::testing::PrintToString(notes);
}

TEST(PosixDataFiles, RemovalNeverFollowsALinkOutOfTheDirectory) {
  TempDir dir("gpuenv-data-read");
  TempDir elsewhere("gpuenv-data-read-victim");
  std::ofstream(elsewhere.path() / "precious") << "keep";
  const fs::path own = dir.path() / ".gpuenv-data-read-link00";
  fs::create_directory(own);
  fs::create_symlink(elsewhere.path() / "precious", own / "data");
  fs::create_directory_symlink(elsewhere.path(), own / "owner");
  auto files = v::make_posix_data_files();
  ASSERT_TRUE(files->remove_directory(own.string()).ok());
  EXPECT_FALSE(fs::exists(own));
  EXPECT_TRUE(fs::exists(elsewhere.path() / "precious"));
  // A directory inside is not gpuenv's: the whole directory is left alone.
  fs::create_directories(own / "sub");
  EXPECT_FALSE(files->remove_directory(own.string()).ok());
  EXPECT_TRUE(fs::exists(own / "sub"));
}

// As above on real directories: a killed run's .gpuenv-data-new-* directory (no owner file, or a torn one) and a
// .gpuenv-data-read-* one without an owner are removed once stale; a fresh one is kept.
TEST(PosixDataFiles, ADirectoryOfAKilledRunWithoutOwnerIsRemovedOnceStale) {
  TempDir dir("gpuenv-data-read");
  const fs::path old_new = dir.path() / ".gpuenv-data-new-old000", torn = dir.path() / ".gpuenv-data-new-torn00";
  const fs::path old_final = dir.path() / ".gpuenv-data-read-none00", fresh = dir.path() / ".gpuenv-data-new-new000";
  for (const auto& d : {old_new, torn, old_final, fresh}) {
    fs::create_directory(d);
    std::ofstream(d / "data") << "left behind";
  }
  std::ofstream(torn / "owner") << "gpuenv-data-read-owner-v1\nhost=";
  const timespec an_hour_ago[2] = {{::time(nullptr) - 3600, 0}, {::time(nullptr) - 3600, 0}};
  for (const auto& d : {old_new, torn, old_final}) ASSERT_EQ(::utimensat(AT_FDCWD, d.c_str(), an_hour_ago, 0), 0);
  auto files = v::make_posix_data_files();
  auto entries = files->list(dir.path().string());
  ASSERT_TRUE(entries.ok());
  for (const auto& e : *entries)
    EXPECT_EQ(e.age >= std::chrono::minutes(59), e.name != fresh.filename().string()) << e.name << " " << e.age.count();
  const auto notes = v::remove_stale_data_directories(*files, dir.path().string());
  EXPECT_FALSE(fs::exists(old_new));
  EXPECT_FALSE(fs::exists(torn));
  EXPECT_FALSE(fs::exists(old_final));
  EXPECT_TRUE(fs::exists(fresh / "data"));
  EXPECT_EQ(notes.size(), 4u) << ::testing::PrintToString(notes);
}

// The directory is renamed under one descriptor of the data directory and never onto an existing name.
TEST(PosixDataFiles, RenameNeverReplacesADirectory) {
  TempDir dir("gpuenv-data-read");
  fs::create_directory(dir.path() / "a");
  fs::create_directory(dir.path() / "b");
  auto files = v::make_posix_data_files();
  EXPECT_FALSE(files->rename_directory(dir.path().string(), "a", "b").ok());  // even an empty one
  EXPECT_TRUE(fs::exists(dir.path() / "a"));
  ASSERT_TRUE(files->rename_directory(dir.path().string(), "a", "c").ok());
  EXPECT_TRUE(fs::is_directory(dir.path() / "c"));
  EXPECT_FALSE(fs::exists(dir.path() / "a"));
}

// --data naming a link to a directory: the link is the user's own choice and is followed; gpuenv's directory in it
// is made, renamed and removed all the same, and nothing else changes.
TEST(PosixDataFiles, ADataPathThatIsALinkToADirectoryWorks) {
  TempDir dir("gpuenv-data-read");
  fs::create_directory(dir.path() / "real");
  std::ofstream(dir.path() / "real" / "train-000.tar") << "user data";
  fs::create_directory_symlink(dir.path() / "real", dir.path() / "link");
  const auto before = tree(dir.path());
  auto files = v::make_posix_data_files();
  auto r = v::measure_data_read(*files, (dir.path() / "link").string(), Level::quick, std::chrono::steady_clock::now() + std::chrono::seconds(30));
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_GT(r->bytes_read, 0u);
  EXPECT_EQ(tree(dir.path()), before);
}

}  // namespace
