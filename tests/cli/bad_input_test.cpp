// Hostile spec files through the whole command: each exits 2 with a message naming the file.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "cli/context.hpp"

namespace {

namespace fs = std::filesystem;

struct Case {
  std::string name;
  std::string bytes;
  std::string expect_id;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

std::vector<Case> corpus() {
  std::vector<Case> c;
  c.push_back({"empty", "", "spec.empty"});
  std::mt19937 rng(42);
  std::string binary("\x7f" "ELF\x02\x01\x01\x00\x00\x00", 10);  // an executable's header, then noise
  for (int i = 0; i < 4096; ++i) binary += static_cast<char>(rng());
  c.push_back({"binary", binary, "yaml.binary"});
  std::string noise;
  for (int i = 0; i < 4096; ++i) noise += static_cast<char>(rng() | 0x80);
  c.push_back({"random_high_bytes", noise, "yaml.not_utf8"});
  c.push_back({"not_utf8", "name: x\nbase: debian:12\ncuda: \"12\xff\"\n", "yaml.not_utf8"});
  c.push_back({"nested_flow", "name: " + std::string(10000, '[') + std::string(10000, ']') + "\n", "yaml.too_deep"});
  std::string dashes;
  for (int i = 0; i < 10000; ++i) dashes += "- ";
  c.push_back({"nested_block", dashes + "x\n", "yaml.too_deep"});
  std::string bomb = "lol0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n";
  for (int i = 1; i < 10; ++i) {
    bomb += "lol" + std::to_string(i) + ": &l" + std::to_string(i) + " [";
    for (int k = 0; k < 10; ++k) bomb += std::string(k ? ", " : "") + "*l" + std::to_string(i - 1);
    bomb += "]\n";
  }
  c.push_back({"alias_bomb", bomb, "spec.unknown_key"});
  c.push_back({"alias_bomb_in_known_key", "packages:\n  pip: &a [x, x]\n  apt: [*a, *a]\n", "spec.wrong_type"});
  c.push_back({"duplicate_keys", "name: a\nname: b\n", "spec.duplicate_key"});
  c.push_back({"tabs_and_garbage", "name: x\n\tcuda: 12\n", "spec.yaml_syntax"});
  c.push_back({"scalar_document", "just a string\n", "spec.wrong_type"});
  c.push_back({"huge_number", "cuda: \"99999999999999999999\"\n", "version.constraint_syntax"});
  c.push_back({"bom_and_crlf_ok_but_unknown", "\xef\xbb\xbfname: x\r\nbogus: 1\r\n", "spec.unknown_key"});
  return c;
}

class BadInput : public ::testing::TestWithParam<Case> {};

TEST_P(BadInput, ExitsTwoWithAClearMessage) {
  const Case& k = GetParam();
  const fs::path p = fs::temp_directory_path() / ("gpuenv-bad-" + std::to_string(::getpid()) + "-" + k.name + ".yaml");
  { std::ofstream(p, std::ios::binary) << k.bytes; }
  std::ostringstream out, err;
  gpuenv::cli::Context ctx;
  ctx.out = &out;
  ctx.err = &err;
  ctx.make_probes = [] { return std::vector<std::unique_ptr<gpuenv::validate::HostProbe>>{}; };
  const int code = gpuenv::cli::run({"resolve", p.string(), "--json"}, ctx);
  fs::remove(p);
  EXPECT_EQ(code, 2) << err.str();
  EXPECT_NE(err.str().find(p.string()), std::string::npos) << err.str();
  EXPECT_NE(out.str().find("\"id\": \"" + k.expect_id + "\""), std::string::npos) << out.str();
}

INSTANTIATE_TEST_SUITE_P(Corpus, BadInput, ::testing::ValuesIn(corpus()),
                         [](const ::testing::TestParamInfo<Case>& i) { return i.param.name; });

TEST(BadInputFile, HundredMegabyteSpecIsRefusedBySize) {
  const fs::path p = fs::temp_directory_path() / ("gpuenv-big-" + std::to_string(::getpid()) + ".yaml");
  { std::ofstream(p) << "name: x\n"; }
  fs::resize_file(p, 100u << 20);
  std::ostringstream out, err;
  gpuenv::cli::Context ctx;
  ctx.out = &out;
  ctx.err = &err;
  const int code = gpuenv::cli::run({"resolve", p.string()}, ctx);
  fs::remove(p);
  EXPECT_EQ(code, 2);
  EXPECT_NE(err.str().find("the limit is 1048576"), std::string::npos) << err.str();
}

// A FIFO given as the spec, the lock or the replay file is refused at once (opened non-blocking, checked, then
// read), never waited on, and named for what it is (a replay FIFO was "Operation not supported", exit 4).
TEST(BadInputFile, AFifoIsRefusedAtOnceWhereverAFileIsExpected) {
  const fs::path fifo = fs::temp_directory_path() / ("gpuenv-fifo-" + std::to_string(::getpid()) + ".yaml");
  fs::remove(fifo);
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"resolve", fifo.string()}, {"lock", fifo.string()}, {"build", fifo.string()}, {"validate", "--backend", "replay:" + fifo.string()}}) {
    std::ostringstream out, err;
    gpuenv::cli::Context ctx;
    ctx.out = &out;
    ctx.err = &err;
    ctx.make_probes = [] { return std::vector<std::unique_ptr<gpuenv::validate::HostProbe>>{}; };
    const int code = gpuenv::cli::run(args, ctx);
    EXPECT_EQ(code, 2) << args[0] << ": " << err.str();
    EXPECT_NE(err.str().find("not a regular file"), std::string::npos) << args[0] << ": " << err.str();
  }
  fs::remove(fifo);
}

}  // namespace
