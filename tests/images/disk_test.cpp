// images/disk: every step of making a VM disk on its own, each read back by the tools that own the format:
// the GPT by util-linux's sfdisk, the FAT by dosfstools' fsck.fat and mtools' mtype, ext4 by e2fsck and debugfs,
// qcow2 by qemu-img. A test whose tool is missing fails, naming it (scripts/deps.sh installs them).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "base/digest.hpp"
#include "base/process/command_runner.hpp"
#include "fakes/shell.hpp"
#include "fakes/files.hpp"
#include "fakes/temp_dir.hpp"
#include "images/disk/container_disk.hpp"
#include "images/disk/disk_image.hpp"
#include "images/disk/disk_reader.hpp"
#include "images/disk/filesystems.hpp"
#include "images/disk/gpt.hpp"

namespace fs = std::filesystem;
using namespace gpuenv;
using namespace gpuenv::images::disk;
using gpuenv::testing::capture;
using gpuenv::testing::file_sha256;
using gpuenv::testing::sh_quote;
using gpuenv::testing::read_all;
using gpuenv::testing::write_tree_file;

namespace {

Guid guid(const char* text) { return *Guid::parse(text); }

}  // namespace

TEST(Gpt, GuidsParsePrintAndGoToDiskMixedEndian) {
  const Guid esp = guid(k_type_esp);
  EXPECT_EQ(esp.str(), "c12a7328-f81f-11d2-ba4b-00a0c93ec93b");
  EXPECT_EQ(Guid::parse("C12A7328-F81F-11D2-BA4B-00A0C93EC93B"), esp);
  const auto d = esp.to_disk();
  EXPECT_EQ(to_hex(d.data(), d.size()), "28732ac11ff8d211ba4b00a0c93ec93b");  // UEFI 2.10 table 5.7's byte order
  for (const char* bad : {"", "c12a7328f81f11d2ba4b00a0c93ec93b", "c12a7328-f81f-11d2-ba4b-00a0c93ec93", "g12a7328-f81f-11d2-ba4b-00a0c93ec93b"})
    EXPECT_FALSE(Guid::parse(bad)) << bad;
  const Guid a = guid_from_seed("lock sha256 x/root"), b = guid_from_seed("lock sha256 x/root"), c = guid_from_seed("lock sha256 y/root");
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  EXPECT_EQ(a.str()[14], '4');                                 // version 4
  EXPECT_NE(std::string("89ab").find(a.str()[19]), std::string::npos);  // RFC 4122 variant
}

// Each platform's root partition type (the Discoverable Partitions Specification), named and told apart.
TEST(Gpt, EachPlatformHasItsRootPartitionType) {
  using gpuenv::resolver::Platform;
  EXPECT_EQ(root_partition_type(Platform::amd64()), guid(k_type_root_x86_64));
  EXPECT_EQ(root_partition_type(Platform::arm64()).str(), "b921b045-1df0-41c3-af44-4c6f280d3fae");
  EXPECT_EQ(root_partition_platform(guid(k_type_root_arm64)), Platform::arm64());
  EXPECT_EQ(root_partition_platform(guid(k_type_root_x86_64)), Platform::amd64());
  EXPECT_FALSE(root_partition_platform(guid(k_type_esp)));
  EXPECT_EQ(partition_type_name(guid(k_type_root_x86_64)), "Linux root (x86-64)");
  EXPECT_EQ(partition_type_name(guid(k_type_root_arm64)), "Linux root (ARM64)");
  EXPECT_EQ(partition_type_name(guid("0fc63daf-8483-4772-8e79-3d69d8477de4")), "Linux filesystem");
}

TEST(Gpt, PlansAlignedPartitionsAndRefusesBadOnes) {
  const Guid disk = guid_from_seed("d");
  auto layout = plan_gpt(disk, {{guid(k_type_esp), guid_from_seed("e"), "esp", 64u << 20}, {guid(k_type_root_x86_64), guid_from_seed("r"), "root", (100u << 20) + 1}});
  ASSERT_TRUE(layout) << layout.error().message;
  ASSERT_EQ(layout->partitions.size(), 2u);
  EXPECT_EQ(layout->partitions[0].offset(), 1u << 20);
  EXPECT_EQ(layout->partitions[0].size(), 64u << 20);
  EXPECT_EQ(layout->partitions[1].offset(), 65u << 20);
  EXPECT_EQ(layout->partitions[1].size(), 101u << 20);  // rounded up to whole MiB
  EXPECT_EQ(layout->size(), (65u + 101u + 1u) << 20);    // and the last MiB for the backup table
  const GptBytes bytes = gpt_bytes(*layout);
  EXPECT_EQ(bytes.head.size(), 34u * 512);
  EXPECT_EQ(bytes.tail.size(), 33u * 512);
  EXPECT_EQ(bytes.head.substr(512, 8), "EFI PART");
  EXPECT_EQ(bytes.tail.substr(32 * 512, 8), "EFI PART");

  EXPECT_EQ(plan_gpt(disk, {}).error().id, "disk.partition");
  EXPECT_EQ(plan_gpt(disk, {{guid(k_type_esp), disk, "esp", 0}}).error().id, "disk.partition");
  EXPECT_EQ(plan_gpt(disk, {{guid(k_type_esp), disk, std::string(37, 'x'), 1}}).error().id, "disk.partition");
  EXPECT_EQ(plan_gpt(disk, {{guid(k_type_esp), disk, "r\xc3\xa9", 1}}).error().id, "disk.partition");
}

TEST(Gpt, ReadsBackWhatItWritesAndRefusesDamage) {
  auto layout = plan_gpt(guid_from_seed("d"), {{guid(k_type_esp), guid_from_seed("e"), "esp", 64u << 20}, {guid(k_type_root_x86_64), guid_from_seed("r"), "root", 8u << 20}});
  ASSERT_TRUE(layout);
  const GptBytes bytes = gpt_bytes(*layout);
  auto back = read_gpt(bytes.head, layout->size());
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(back->disk, layout->disk);
  ASSERT_EQ(back->partitions.size(), 2u);
  for (std::size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(back->partitions[i].type, layout->partitions[i].type);
    EXPECT_EQ(back->partitions[i].unique, layout->partitions[i].unique);
    EXPECT_EQ(back->partitions[i].name, layout->partitions[i].name);
    EXPECT_EQ(back->partitions[i].first_lba, layout->partitions[i].first_lba);
    EXPECT_EQ(back->partitions[i].last_lba, layout->partitions[i].last_lba);
  }
  EXPECT_EQ(partition_type_name(back->partitions[0].type), "EFI system partition");
  std::string header = bytes.head;
  header[512 + 40] ^= 1;  // first usable LBA: the header's CRC no longer matches
  EXPECT_EQ(read_gpt(header, layout->size()).error().id, "disk.gpt");
  std::string entry = bytes.head;
  entry[1024 + 32] ^= 1;  // a partition's start: the entries' CRC no longer matches
  EXPECT_NE(read_gpt(entry, layout->size()).error().message.find("entries' CRC-32"), std::string::npos);
  EXPECT_NE(read_gpt(bytes.head, layout->size() + (1u << 20)).error().message.find("ends elsewhere"), std::string::npos);
  EXPECT_EQ(read_gpt(std::string(34 * 512, '\0'), layout->size()).error().id, "disk.gpt");
  EXPECT_EQ(read_gpt("short", layout->size()).error().id, "disk.gpt");
}

// util-linux's sfdisk reads the table back: types, GUIDs, names, places, and the backup header's checksums
// (sfdisk --verify checks both tables).
TEST(DiskTools, SfdiskReadsTheTableGpuenvWrites) {
  gpuenv::testing::TempDir dir("gpuenv-gpt");
  write_tree_file(dir.path() / "a.img", std::string(1u << 20, 'a'));
  write_tree_file(dir.path() / "b.img", std::string(3u << 20, '\0') + "tail");
  const Guid disk = guid("0a0b0c0d-1111-4222-8333-444455556666");
  auto layout = write_raw_disk((dir.path() / "disk.raw").string(), disk,
                               {{{guid(k_type_esp), guid_from_seed("esp"), "esp", 0}, (dir.path() / "a.img").string()},
                                {{guid(k_type_root_x86_64), guid_from_seed("root"), "root", 8u << 20}, (dir.path() / "b.img").string()}});
  ASSERT_TRUE(layout) << layout.error().message;
  int status = 0;
  const std::string out = capture("sfdisk --json " + sh_quote(dir.path() / "disk.raw") + " 2>&1", &status);
  ASSERT_EQ(status, 0) << "sfdisk (util-linux's fdisk package) could not read the disk: " << out;
  const auto j = nlohmann::json::parse(out)["partitiontable"];
  EXPECT_EQ(j["label"], "gpt");
  EXPECT_EQ(j["id"], "0A0B0C0D-1111-4222-8333-444455556666");
  EXPECT_EQ(j["sectorsize"], 512);
  ASSERT_EQ(j["partitions"].size(), 2u);
  EXPECT_EQ(j["partitions"][0]["start"], 2048);
  EXPECT_EQ(j["partitions"][0]["size"], 2048);
  EXPECT_EQ(j["partitions"][0]["type"], "C12A7328-F81F-11D2-BA4B-00A0C93EC93B");
  EXPECT_EQ(j["partitions"][0]["uuid"], [] {
    std::string s = guid_from_seed("esp").str();
    for (auto& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    return s;
  }());
  EXPECT_EQ(j["partitions"][0]["name"], "esp");
  EXPECT_EQ(j["partitions"][1]["start"], 4096);
  EXPECT_EQ(j["partitions"][1]["size"], 8u * 2048);
  EXPECT_EQ(j["partitions"][1]["type"], "4F68BCE3-E8CD-4DB1-96E7-FBCAF984B709");
  const std::string verify = capture("sfdisk --verify " + sh_quote(dir.path() / "disk.raw") + " 2>&1", &status);
  EXPECT_EQ(status, 0) << verify;
  EXPECT_EQ(verify.find("corrupt"), std::string::npos) << verify;
  EXPECT_EQ(verify.find("checksum"), std::string::npos) << verify;
  // sfdisk warns on stderr when a table's checksum or place is wrong (and falls back to the other copy).
  const std::string list = capture("sfdisk --list " + sh_quote(dir.path() / "disk.raw") + " 2>&1", &status);
  EXPECT_EQ(status, 0) << list;
  EXPECT_EQ(list.find("corrupt"), std::string::npos) << list;
  EXPECT_EQ(list.find("mismatch"), std::string::npos) << list;
  // Each partition's bytes are where the table says, and the disk is sparse: the zeros were not written.
  std::ifstream in(dir.path() / "disk.raw", std::ios::binary);
  std::string got(4, '\0');
  in.seekg(static_cast<std::streamoff>(layout->partitions[1].offset() + (3u << 20)));
  in.read(got.data(), 4);
  EXPECT_EQ(got, "tail");
  struct stat st {};
  ASSERT_EQ(::stat((dir.path() / "disk.raw").c_str(), &st), 0);
  EXPECT_LT(static_cast<std::uint64_t>(st.st_blocks) * 512, 2u << 20) << "the raw disk is not sparse";
  std::vector<std::string> names;  // no temporary file left beside the disk
  for (const auto& e : fs::directory_iterator(dir.path())) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"a.img", "b.img", "disk.raw"}));
  EXPECT_TRUE(looks_like_disk((dir.path() / "disk.raw").string()));
  EXPECT_FALSE(looks_like_disk((dir.path() / "a.img").string()));
  EXPECT_FALSE(looks_like_disk(dir.path().string()));
  EXPECT_FALSE(looks_like_disk((dir.path() / "missing").string()));
}

TEST(DiskTools, TheEspIsFat32ThatFsckAcceptsWithTheFilesAndTheSameBytesTwice) {
  gpuenv::testing::TempDir dir("gpuenv-fat");
  write_tree_file(dir.path() / "src/loader.efi", "not really an EFI binary");
  write_tree_file(dir.path() / "src/entry.conf", "title gpuenv\n");
  auto runner = make_process_runner();
  std::string first;
  for (int round = 0; round < 2; ++round) {
    // The second round's source files are newer: their times must not reach the file system.
    if (round == 1) fs::last_write_time(dir.path() / "src/entry.conf", fs::file_time_type::clock::now());
    FatRequest rq{(dir.path() / ("esp" + std::to_string(round) + ".img")).string(), 64u << 20, 0x1234abcd, "ESP", 1700000000,
                  {{"EFI/BOOT/BOOTX64.EFI", (dir.path() / "src/loader.efi").string()}, {"loader/entries/gpuenv.conf", (dir.path() / "src/entry.conf").string()}}};
    auto st = make_fat(rq, *runner);
    ASSERT_TRUE(st) << st.error().message;
    if (round == 0) first = file_sha256(rq.out);
    else EXPECT_EQ(file_sha256(rq.out), first) << "two ESPs of the same files differ";
  }
  const fs::path img = dir.path() / "esp0.img";
  int status = 0;
  const std::string fsck = capture("fsck.fat -n " + sh_quote(img) + " 2>&1", &status);
  EXPECT_EQ(status, 0) << fsck;
  EXPECT_EQ(capture("MTOOLSRC=/dev/null mtype -i " + sh_quote(img) + " ::/EFI/BOOT/BOOTX64.EFI"), "not really an EFI binary");
  EXPECT_EQ(capture("MTOOLSRC=/dev/null mtype -i " + sh_quote(img) + " ::/loader/entries/gpuenv.conf"), "title gpuenv\n");
  const std::string dirlist = capture("MTOOLSRC=/dev/null mdir -i " + sh_quote(img) + " ::/ 2>&1");
  EXPECT_NE(dirlist.find("Serial Number is 1234-ABCD"), std::string::npos) << dirlist;
  EXPECT_NE(dirlist.find("2023-11-14"), std::string::npos) << "timestamps are not SOURCE_DATE_EPOCH: " << dirlist;

  FatRequest bad{(dir.path() / "bad.img").string(), 64u << 20, 1, "ESP", 0, {{"../evil", (dir.path() / "src/loader.efi").string()}}};
  EXPECT_EQ(make_fat(bad, *runner).error().id, "disk.path");
  bad.files = {{"EFI/a:b", (dir.path() / "src/loader.efi").string()}};
  EXPECT_EQ(make_fat(bad, *runner).error().id, "disk.path");
  bad.files = {};
  bad.size = 16u << 20;
  EXPECT_EQ(make_fat(bad, *runner).error().id, "disk.fat");
}

TEST(DiskTools, TheRootIsExt4WithTheTreeTheOwnersAndTheSameBytesTwice) {
  gpuenv::testing::TempDir dir("gpuenv-ext4");
  const fs::path root = dir.path() / "root";
  write_tree_file(root / "etc/hostname", "gpuenv\n");
  write_tree_file(root / "usr/bin/tool", "#!/bin/sh\n");
  fs::create_directories(root / "var/empty");
  fs::create_symlink("usr/bin", root / "bin");
  // Links debugfs would follow if named by path: to nothing (a masked unit) and to a file of another owner.
  fs::create_symlink("/dev/null", root / "etc/masked.service");
  fs::create_symlink("/etc/hostname", root / "etc/abs");
  auto runner = make_process_runner();
  std::string first;
  for (int round = 0; round < 2; ++round) {
    if (round == 1) {  // later ctimes and another umask's modes on the build host
      fs::permissions(root / "etc/hostname", fs::perms::owner_read | fs::perms::owner_write);
    }
    Ext4Request rq{(dir.path() / ("root" + std::to_string(round) + ".img")).string(), root.string(), 32u << 20, guid("0e5a8d2c-1111-4222-8333-444455556666"), "root",
                   1700000000,
                   {{"", 0, 0, 0755},
                    {"bin", 0, 0, std::nullopt},
                    {"etc", 0, 0, 0755},
                    {"etc/hostname", 0, 0, 0644},
                    {"etc/masked.service", 7, 7, std::nullopt},
                    {"etc/abs", 8, 8, std::nullopt},
                    {"usr", 0, 0, 0755},
                    {"usr/bin", 0, 0, 0755},
                    {"usr/bin/tool", 0, 0, 04755},
                    {"var", 0, 0, 0755},
                    {"var/empty", 100, 65534, 0700}}};
    auto st = make_ext4(rq, *runner);
    ASSERT_TRUE(st) << st.error().message;
    if (round == 0) first = file_sha256(rq.out);
    else EXPECT_EQ(file_sha256(rq.out), first) << "two roots of the same tree differ";
  }
  const fs::path img = dir.path() / "root0.img";
  int status = 0;
  const std::string fsck = capture("e2fsck -fn " + sh_quote(img) + " 2>&1", &status);
  EXPECT_EQ(status, 0) << fsck;
  EXPECT_EQ(capture("debugfs -R 'cat /etc/hostname' " + sh_quote(img) + " 2>/dev/null"), "gpuenv\n");
  const std::string tool = capture("debugfs -R 'stat /usr/bin/tool' " + sh_quote(img) + " 2>/dev/null");
  EXPECT_NE(tool.find("Mode:  04755"), std::string::npos) << tool;
  EXPECT_NE(tool.find("User:     0   Group:     0"), std::string::npos) << tool;
  EXPECT_NE(tool.find("ctime: 0x6553f100"), std::string::npos) << tool;
  const std::string empty = capture("debugfs -R 'stat /var/empty' " + sh_quote(img) + " 2>/dev/null");
  EXPECT_NE(empty.find("Type: directory    Mode:  0700"), std::string::npos) << empty;
  EXPECT_NE(empty.find("User:   100   Group: 65534"), std::string::npos) << empty;
  EXPECT_NE(capture("debugfs -R 'stat /bin' " + sh_quote(img) + " 2>/dev/null").find("Fast link dest: \"usr/bin\""), std::string::npos);
  // The links themselves got their owners; what they point at kept its own.
  const std::string etc = capture("debugfs -R 'ls -p /etc' " + sh_quote(img) + " 2>/dev/null");
  EXPECT_NE(etc.find("/120777/7/7/masked.service/"), std::string::npos) << etc;
  EXPECT_NE(etc.find("/120777/8/8/abs/"), std::string::npos) << etc;
  EXPECT_NE(etc.find("/100644/0/0/hostname/"), std::string::npos) << etc;
  const std::string super = capture("dumpe2fs -h " + sh_quote(img) + " 2>/dev/null");
  EXPECT_NE(super.find("Filesystem UUID:          0e5a8d2c-1111-4222-8333-444455556666"), std::string::npos) << super;
  EXPECT_NE(super.find("metadata_csum"), std::string::npos) << super;

  // Too small a size is a clear error, and no image is left behind.
  write_tree_file(root / "big", std::string(16u << 20, 'x'));
  Ext4Request small{(dir.path() / "small.img").string(), root.string(), 8u << 20, guid_from_seed("s"), "root", 0, {}};
  auto st = make_ext4(small, *runner);
  ASSERT_FALSE(st);
  EXPECT_EQ(st.error().id, "disk.ext4");
  EXPECT_FALSE(fs::exists(small.out));
  Ext4Request quote{(dir.path() / "q.img").string(), root.string(), 32u << 20, guid_from_seed("s"), "root", 0, {{"etc/a\"b", 0, 0, std::nullopt}}};
  EXPECT_EQ(make_ext4(quote, *runner).error().id, "disk.path");
}

// The root's listing and its fixups run debugfs in pieces: one run over a root of some hundred thousand files
// echoed more than the runner keeps of a child's output (64 MiB), which would fail the build (issue 33 review).
TEST(DiskTools, ARootOfManyDirectoriesIsListedInPiecesAndEveryInodeGetsItsOwner) {
  gpuenv::testing::TempDir dir("gpuenv-ext4-many");
  const fs::path root = dir.path() / "root";
  for (int i = 0; i < 2100; ++i) fs::create_directories(root / "d" / std::to_string(i));
  write_tree_file(root / "d/2099/last", "x\n");
  struct Counting : CommandRunner {
    std::unique_ptr<CommandRunner> real = make_process_runner();
    int listings = 0;
    Result<CommandResult> run(const std::vector<std::string>& argv, std::string_view input, std::chrono::milliseconds timeout) override {
      if (argv.size() == 4 && argv[0] == "debugfs" && argv[1] == "-f") ++listings;
      return real->run(argv, input, timeout);
    }
  } runner;
  Ext4Request rq{(dir.path() / "root.img").string(), root.string(), 64u << 20, guid_from_seed("m"), "root", 1700000000, {{"d/2099/last", 5, 6, 0600}}};
  auto st = make_ext4(rq, runner);
  ASSERT_TRUE(st) << st.error().message;
  EXPECT_EQ(runner.listings, 2) << "2,102 directories, 2,048 to a listing";
  const std::string last = capture("debugfs -R 'stat /d/2099/last' " + sh_quote(rq.out) + " 2>/dev/null");
  EXPECT_NE(last.find("User:     5   Group:     6"), std::string::npos) << last;
  EXPECT_NE(last.find("mtime: 0x6553f100"), std::string::npos) << last;
  EXPECT_NE(capture("debugfs -R 'stat /d/0' " + sh_quote(rq.out) + " 2>/dev/null").find("mtime: 0x6553f100"), std::string::npos);
}

// No SOURCE_DATE_EPOCH is an epoch of 0, which e2fsprogs reads as "no fake time": it took the wall clock for the
// superblock's times and its reserved inodes', so two builds a second apart differed (issue 31).
TEST(DiskTools, AnEpochOfZeroStillGivesTheSameRootBytes) {
  gpuenv::testing::TempDir dir("gpuenv-ext4-zero");
  const fs::path root = dir.path() / "root";
  write_tree_file(root / "etc/hostname", "gpuenv\n");
  auto runner = make_process_runner();
  Ext4Request rq{(dir.path() / "root.img").string(), root.string(), 16u << 20, guid("0e5a8d2c-1111-4222-8333-444455556666"), "root", 0, {}};
  ASSERT_TRUE(make_ext4(rq, *runner));
  const std::string super = capture("dumpe2fs -h " + sh_quote(rq.out) + " 2>/dev/null");
  for (const char* field : {"Filesystem created:       Thu Jan  1 00:00:01 1970", "Last write time:          Thu Jan  1 00:00:01 1970",
                            "Last checked:             Thu Jan  1 00:00:01 1970"})
    EXPECT_NE(super.find(field), std::string::npos) << field << "\n" << super;
  // The reserved inodes mkfs.ext4 writes (7, the resize inode; 8, the journal) carry its clock; the tree's the epoch.
  for (const char* ino : {"<7>", "<8>"})
    EXPECT_NE(capture(std::string("debugfs -R 'stat ") + ino + "' " + sh_quote(rq.out) + " 2>/dev/null").find("ctime: 0x00000001"), std::string::npos) << ino;
  EXPECT_NE(capture("debugfs -R 'stat /etc/hostname' " + sh_quote(rq.out) + " 2>/dev/null").find("mtime: 0x00000000"), std::string::npos);
}

TEST(DiskTools, Qcow2HoldsTheRawDiskAndIsTheSameTwice) {
  gpuenv::testing::TempDir dir("gpuenv-qcow2");
  write_tree_file(dir.path() / "fs.img", std::string(1u << 20, 'z'));
  auto layout = write_raw_disk((dir.path() / "disk.raw").string(), guid_from_seed("d"),
                               {{{guid(k_type_root_x86_64), guid_from_seed("r"), "root", 0}, (dir.path() / "fs.img").string()}});
  ASSERT_TRUE(layout) << layout.error().message;
  auto runner = make_process_runner();
  ASSERT_TRUE(convert_to_qcow2((dir.path() / "disk.raw").string(), (dir.path() / "a.qcow2").string(), *runner));
  ASSERT_TRUE(convert_to_qcow2((dir.path() / "disk.raw").string(), (dir.path() / "b.qcow2").string(), *runner));
  EXPECT_EQ(file_sha256(dir.path() / "a.qcow2"), file_sha256(dir.path() / "b.qcow2"));
  int status = 0;
  const std::string cmp = capture("qemu-img compare -f raw -F qcow2 " + sh_quote(dir.path() / "disk.raw") + " " + sh_quote(dir.path() / "a.qcow2") + " 2>&1", &status);
  EXPECT_EQ(status, 0) << cmp;
  const std::string info = capture("qemu-img info --output=json " + sh_quote(dir.path() / "a.qcow2"));
  EXPECT_EQ(nlohmann::json::parse(info)["format"], "qcow2") << info;
}

// A VM disk as a KubeVirt containerDisk: skopeo reads the layout, and the one layer holds disk/NAME owned by the
// qemu user (107), with the disk's bytes; the same disk gives the same manifest digest.
// inspect is given disks from anywhere: a qcow2 naming a backing file would make qemu-img read a host file (whose
// partitions and lock inspect would then show), connect to a server (nbd://), or block forever on a FIFO. Such a
// qcow2 is refused from its header, before qemu-img opens it (issue 33, cases 2 to 4).
TEST(DiskTools, InspectRefusesAQcow2ThatNamesABackingFileBeforeOpeningIt) {
  gpuenv::testing::TempDir dir("gpuenv-qcow2-backing");
  auto runner = make_process_runner();
  const fs::path host = dir.path() / "host.raw", fifo = dir.path() / "fifo";
  int status = 0;
  capture("truncate -s 64M " + sh_quote(host), &status);
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  struct Case {
    const char* name;
    std::string backing;
  };
  for (const Case& c : {Case{"a host file", host.string()}, Case{"an nbd server", "nbd://127.0.0.1:9/x"}, Case{"a FIFO", fifo.string()}}) {
    SCOPED_TRACE(c.name);
    const fs::path qcow = dir.path() / (std::string(c.name).substr(0, 4) + ".qcow2");
    // -u: qemu-img does not open the backing file while creating.
    const std::string made = capture("qemu-img create -q -f qcow2 -u -b " + sh_quote(c.backing) + " -F raw " + sh_quote(qcow) + " 64M 2>&1", &status);
    ASSERT_EQ(status, 0) << made;
    fs::create_directories(dir.path() / "read");
    const auto t0 = std::chrono::steady_clock::now();
    auto summary = read_disk(qcow.string(), (dir.path() / "read").string(), *runner);
    ASSERT_FALSE(summary);
    EXPECT_EQ(summary.error().id, "disk.qcow2");
    EXPECT_NE(summary.error().message.find("names a backing file"), std::string::npos) << summary.error().message;
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 5.0);
    EXPECT_FALSE(fs::exists(dir.path() / "read/disk.raw")) << "qemu-img ran";
  }
  // An external data file (qcow2 v3, incompatible feature bit 2) is refused the same way.
  const fs::path data = dir.path() / "data.qcow2";
  const std::string made = capture("qemu-img create -q -f qcow2 -o data_file=" + sh_quote(dir.path() / "data.bin") + " " + sh_quote(data) + " 64M 2>&1", &status);
  ASSERT_EQ(status, 0) << made;
  auto external = read_disk(data.string(), (dir.path() / "read").string(), *runner);
  ASSERT_FALSE(external);
  EXPECT_NE(external.error().message.find("external file"), std::string::npos) << external.error().message;
}

// Issue 33, case 5: a 3 MB qcow2 of compressed clusters wrote 2,022 MiB into the cache before its GPT was read. Its
// data is now summed from qemu-img's map (no data read) and bounded at 400 times the file, before any conversion.
TEST(DiskTools, InspectRefusesAQcow2ThatUnpacksToFarMoreThanItsSizeBeforeWritingIt) {
  gpuenv::testing::TempDir dir("gpuenv-qcow2-bomb");
  auto runner = make_process_runner();
  const fs::path raw = dir.path() / "a.raw", bomb = dir.path() / "bomb.qcow2";
  // One compressed cluster of 'A's that every entry of the first L2 table names: 8,192 clusters of 64 KiB, 512 MiB
  // of data, from a file of a few hundred KiB (zlib alone stops near 360:1; a shared cluster has no such limit).
  write_tree_file(raw, std::string(std::size_t{64} << 10, 'A'));
  fs::resize_file(raw, std::uintmax_t{512} << 20);
  int status = 0;
  const std::string made = capture("qemu-img convert -q -c -O qcow2 " + sh_quote(raw) + " " + sh_quote(bomb) + " 2>&1", &status);
  ASSERT_EQ(status, 0) << made;
  fs::remove(raw);
  {
    std::fstream f(bomb, std::ios::in | std::ios::out | std::ios::binary);
    auto be64 = [&](std::uint64_t at) {
      unsigned char b[8];
      f.seekg(static_cast<std::streamoff>(at));
      f.read(reinterpret_cast<char*>(b), 8);
      std::uint64_t v = 0;
      for (unsigned char c : b) v = v << 8 | c;
      return v;
    };
    const std::uint64_t l2 = be64(be64(40)) & 0x00fffffffffffe00ull;  // L1 table offset at header byte 40; L1[0] names the L2 table
    ASSERT_NE(l2, 0u);
    char entry[8];
    f.seekg(static_cast<std::streamoff>(l2));
    f.read(entry, 8);
    for (std::uint64_t i = 1; i < 8192; ++i) {
      f.seekp(static_cast<std::streamoff>(l2 + i * 8));
      f.write(entry, 8);
    }
    ASSERT_TRUE(f.good());
  }
  ASSERT_LT(fs::file_size(bomb), std::uintmax_t{1} << 20);
  fs::create_directories(dir.path() / "read");
  auto summary = read_disk(bomb.string(), (dir.path() / "read").string(), *runner);
  ASSERT_FALSE(summary);
  EXPECT_EQ(summary.error().id, "disk.qcow2");
  EXPECT_NE(summary.error().message.find("unpacks to 512 MiB"), std::string::npos) << summary.error().message;
  EXPECT_FALSE(fs::exists(dir.path() / "read/disk.raw")) << "the conversion ran";
  // A disk that says it is larger than any raw file can be is refused from its header alone.
  const fs::path huge = dir.path() / "huge.qcow2";
  ASSERT_EQ((capture("qemu-img create -q -f qcow2 " + sh_quote(huge) + " 17T 2>&1", &status), status), 0);
  auto big = read_disk(huge.string(), (dir.path() / "read").string(), *runner);
  ASSERT_FALSE(big);
  EXPECT_NE(big.error().message.find("at most 16 TiB"), std::string::npos) << big.error().message;
  // The map's reader: what counts is data that is neither zero nor absent; anything else is refused.
  auto counted = qcow2_data_bytes(R"([{"start":0,"length":4096,"data":true,"zero":false},{"start":4096,"length":8192,"data":true,"zero":true},)"
                                  R"({"start":12288,"length":100,"data":false,"zero":true},{"start":12388,"length":10,"data":true}])", "m");
  ASSERT_TRUE(counted) << counted.error().message;
  EXPECT_EQ(*counted, 4106u);
  for (const char* bad : {"", "{}", "[1]", R"([{"length":-1,"data":true}])", R"([{"length":1}])", R"([{"length":17592186044416,"data":true},{"length":1,"data":true}])"})
    EXPECT_FALSE(qcow2_data_bytes(bad, "m")) << bad;
}

TEST(DiskTools, AContainerDiskHoldsTheDiskUnderDiskOwnedByQemu) {
  gpuenv::testing::TempDir dir("gpuenv-cdisk");
  write_tree_file(dir.path() / "d.qcow2", std::string(3u << 20, 'q') + "end");
  std::string first;
  for (const char* name : {"a", "b"}) {
    ContainerDiskRequest rq{(dir.path() / name).string(), (dir.path() / "d.qcow2").string(), "gpu-node.qcow2", 1700000000, "1", {{"dev.gpuenv.lock.sha256", "x"}}};
    auto d = write_container_disk(rq);
    ASSERT_TRUE(d) << d.error().message;
    if (first.empty()) first = d->digest.str();
    else EXPECT_EQ(d->digest.str(), first);
  }
  int status = 0;
  const std::string inspect = capture("skopeo inspect " + std::string("oci:") + (dir.path() / "a").string() + ":1 2>&1", &status);
  ASSERT_EQ(status, 0) << inspect;
  const auto j = nlohmann::json::parse(inspect);
  EXPECT_EQ(j["Digest"], first);
  EXPECT_EQ(j["Labels"]["dev.gpuenv.lock.sha256"], "x");
  ASSERT_EQ(j["Layers"].size(), 1u);
  const std::string blob = (dir.path() / "a/blobs/sha256" / j["Layers"][0].get<std::string>().substr(7)).string();
  const std::string listing = capture("TZ=UTC tar --numeric-owner -tvf " + sh_quote(blob));
  std::istringstream lines(listing);
  std::vector<std::string> rows;
  for (std::string line; std::getline(lines, line);) {
    std::istringstream f(line);
    std::string mode, owner, size, day, time, path;
    f >> mode >> owner >> size >> day >> time >> path;
    rows.push_back(mode + " " + owner + " " + size + " " + day + " " + time + " " + path);
  }
  EXPECT_EQ(rows, (std::vector<std::string>{"dr-xr-xr-x 107/107 0 2023-11-14 22:13 disk/", "-r--r----- 107/107 3145731 2023-11-14 22:13 disk/gpu-node.qcow2"}))
      << listing;
  EXPECT_EQ(capture("tar -xOf " + sh_quote(blob) + " disk/gpu-node.qcow2 | sha256sum | cut -c1-64"), file_sha256(dir.path() / "d.qcow2") + "\n");
  EXPECT_EQ(write_container_disk({(dir.path() / "c").string(), (dir.path() / "d.qcow2").string(), "../x", 0, "", {}}).error().id, "disk.path");

  // The config names the disk's platform, where KubeVirt's node pulls it: amd64 without a variant, as before there
  // were platforms; arm64 with v8.
  auto config_of = [&](const std::string& layout) {
    const auto index = nlohmann::json::parse(read_all(fs::path(layout) / "index.json"));
    const std::string manifest = index["manifests"][0]["digest"].get<std::string>().substr(7);
    const auto m = nlohmann::json::parse(read_all(fs::path(layout) / "blobs/sha256" / manifest));
    return nlohmann::json::parse(read_all(fs::path(layout) / "blobs/sha256" / m["config"]["digest"].get<std::string>().substr(7)));
  };
  const auto amd64 = config_of((dir.path() / "a").string());
  EXPECT_EQ(amd64["architecture"], "amd64");
  EXPECT_FALSE(amd64.contains("variant"));
  ContainerDiskRequest arm{(dir.path() / "arm").string(), (dir.path() / "d.qcow2").string(), "gpu-node.qcow2", 1700000000, "1", {}, gpuenv::resolver::Platform::arm64()};
  auto arm_d = write_container_disk(arm);
  ASSERT_TRUE(arm_d) << arm_d.error().message;
  EXPECT_NE(arm_d->digest.str(), first);
  const auto arm64 = config_of(arm.layout_dir);
  EXPECT_EQ(arm64["architecture"], "arm64");
  EXPECT_EQ(arm64["variant"], "v8");
  EXPECT_EQ(arm64["os"], "linux");
}
