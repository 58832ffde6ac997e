// validate/multinode: the Slurm hostlist parser, the rendezvous protocol's frames (hostile ones too), the RDMA ports
// read from fixture sysfs trees and the reference they give, and the TCP rendezvous between ranks on 127.0.0.1 in
// threads of this process (a fake NCCL side): the happy path, a rank that never arrives, a refused token, hostile
// connections, and a rank that dies during the all-reduce. The same code across processes and network namespaces,
// on the CPU NCCL double, is tests/validate/multinode_processes.sh.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <thread>

#include "validate/checks/judge.hpp"
#include "validate/multinode/hostlist.hpp"
#include "validate/multinode/nic.hpp"
#include "validate/multinode/rendezvous.hpp"
#include "validate/multinode/wire.hpp"

namespace {

namespace mn = gpuenv::validate::multinode;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// ---- hostlist ------------------------------------------------------------------------------------------------

std::vector<std::string> hosts(const std::string& list) {
  auto r = mn::expand_hostlist(list);
  EXPECT_TRUE(r) << list << ": " << (r ? "" : r.error().message);
  return r ? *r : std::vector<std::string>{};
}

TEST(Hostlist, ExpandsRangesListsAndPadding) {
  EXPECT_EQ(hosts("node01"), (std::vector<std::string>{"node01"}));
  EXPECT_EQ(hosts("node[01-02,05]"), (std::vector<std::string>{"node01", "node02", "node05"}));
  EXPECT_EQ(hosts("a[8-11],login1"), (std::vector<std::string>{"a8", "a9", "a10", "a11", "login1"}));
  EXPECT_EQ(hosts("gpu[098-101]"), (std::vector<std::string>{"gpu098", "gpu099", "gpu100", "gpu101"}));
  EXPECT_EQ(hosts("r[1-2]-n[1-2]"), (std::vector<std::string>{"r1-n1", "r1-n2", "r2-n1", "r2-n2"}));
  EXPECT_EQ(hosts("x[3],y.example.org"), (std::vector<std::string>{"x3", "y.example.org"}));
}

TEST(Hostlist, RefusesMalformedAndOversizeLists) {
  for (const char* bad : {"", "node[", "node]", "node[1-]", "node[-2]", "node[3-1]", "node[a-b]", "a,,b", "node[[1]]",
                          "no de", "node[1-2", "bad;host", "node[1-99999]", "node[0-4096]"}) {
    auto r = mn::expand_hostlist(bad);
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error().id, "multinode.hostlist") << bad;
  }
  // Products of groups are bounded too, not only single ranges.
  auto r = mn::expand_hostlist("a[0-99]b[0-99]");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("4096"), std::string::npos);
  EXPECT_FALSE(mn::expand_hostlist(std::string(70000, 'a')));
}

// ---- frames --------------------------------------------------------------------------------------------------

TEST(Wire, RoundTripsAMessageAndWaitsForTheRest) {
  auto bytes = mn::encode_message(mn::MessageType::hello, mn::hello_json({1, 2, 4, "tok", "node02", 8, 5, "standard"}));
  ASSERT_TRUE(bytes);
  for (std::size_t cut = 0; cut < bytes->size(); ++cut) {
    auto partial = mn::decode_message(std::string_view(*bytes).substr(0, cut), "test");
    ASSERT_TRUE(partial) << cut;
    EXPECT_FALSE(*partial) << cut;
  }
  auto whole = mn::decode_message(*bytes + "trailing", "test");
  ASSERT_TRUE(whole && *whole);
  EXPECT_EQ((*whole)->used, bytes->size());
  auto hello = mn::parse_hello((*whole)->message.body, "test");
  ASSERT_TRUE(hello);
  EXPECT_EQ(hello->rank, 2);
  EXPECT_EQ(hello->world, 4);
  EXPECT_EQ(hello->gpus, 8);
  EXPECT_EQ(hello->token, "tok");
}

TEST(Wire, RefusesHostileFrames) {
  const std::string header = std::string("GEMN") + '\x01' + '\x01' + '\0' + '\0';
  auto length = [](std::uint32_t n) {
    return std::string{static_cast<char>(n >> 24), static_cast<char>(n >> 16), static_cast<char>(n >> 8), static_cast<char>(n)};
  };
  const std::vector<std::string> bad = {
      "GET / HTTP/1.1\r\n",                                            // another protocol
      std::string("GEMN") + '\x02' + '\x01' + '\0' + '\0' + length(2) + "{}",  // version 2
      std::string("GEMN") + '\x01' + '\x09' + '\0' + '\0' + length(2) + "{}",  // unknown type
      std::string("GEMN") + '\x01' + '\x01' + '\x01' + '\0' + length(2) + "{}",  // reserved byte
      header + length(0xffffffffu),                                    // 4 GiB promised
      header + length(static_cast<std::uint32_t>(mn::k_max_payload + 1)),
      header + length(5) + "[1,2]",                                    // not an object
      header + length(3) + "{\"a",                                     // not JSON
  };
  for (const auto& b : bad) {
    auto r = mn::decode_message(b, "a connection from 10.0.0.9");
    ASSERT_FALSE(r) << b;
    EXPECT_EQ(r.error().id, "multinode.protocol");
    EXPECT_NE(r.error().message.find("10.0.0.9"), std::string::npos);
  }
}

TEST(Wire, RefusesHellosWithMissingOrOutOfRangeFields) {
  const nlohmann::json good = mn::hello_json({1, 1, 2, "t", "h", 1, 3, "quick"});
  EXPECT_TRUE(mn::parse_hello(good, "x"));
  for (const char* field : {"protocol", "rank", "world", "token", "host", "gpus", "samples", "level"}) {
    nlohmann::json j = good;
    j.erase(field);
    EXPECT_FALSE(mn::parse_hello(j, "x")) << field;
  }
  for (const auto& [field, value] : std::vector<std::pair<std::string, nlohmann::json>>{
           {"protocol", 2}, {"rank", 2}, {"rank", -1}, {"world", 0}, {"world", 100000}, {"gpus", 0}, {"token", 7},
           {"token", std::string(300, 't')}, {"host", std::string(300, 'h')}, {"rank", 1.5}, {"samples", 0},
           {"samples", 1001}, {"level", std::string(40, 'l')}}) {
    nlohmann::json j = good;
    j[field] = value;
    EXPECT_FALSE(mn::parse_hello(j, "x")) << field << "=" << value.dump();
  }
  nlohmann::json escaped = good;
  escaped["host"] = "evil\x1b[2Jhost";
  auto h = mn::parse_hello(escaped, "x");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->host.find('\x1b'), std::string::npos);  // made safe for a terminal
}

TEST(Wire, UniqueIdsRoundTripAsHex) {
  mn::UniqueId id{};
  for (std::size_t i = 0; i < id.size(); ++i) id[i] = static_cast<std::uint8_t>(i * 7);
  auto back = mn::id_from_hex(mn::id_to_hex(id), "x");
  ASSERT_TRUE(back);
  EXPECT_EQ(*back, id);
  EXPECT_FALSE(mn::id_from_hex("abc", "x"));
  EXPECT_FALSE(mn::id_from_hex(std::string(256, 'g'), "x"));
  EXPECT_FALSE(mn::id_from_hex(42, "x"));
}

// ---- NICs ----------------------------------------------------------------------------------------------------

class SysfsTree : public ::testing::Test {
 protected:
  fs::path root;
  void SetUp() override {
    root = fs::temp_directory_path() / ("gpuenv-sysfs-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root);
  }
  void TearDown() override { fs::remove_all(root); }
  void port(const std::string& device, const std::string& n, const std::string& rate, const std::string& state,
            const std::string& layer = "InfiniBand") {
    const fs::path dir = root / "class" / "infiniband" / device / "ports" / n;
    fs::create_directories(dir);
    std::ofstream(dir / "rate") << rate << "\n";
    std::ofstream(dir / "state") << state << "\n";
    std::ofstream(dir / "link_layer") << layer << "\n";
  }
};

TEST(NicRate, ParsesTheKernelsFormat) {
  EXPECT_DOUBLE_EQ(*mn::parse_nic_rate("400 Gb/sec (4X NDR)"), 400);
  EXPECT_DOUBLE_EQ(*mn::parse_nic_rate("200 Gb/sec (2X NDR)"), 200);
  EXPECT_DOUBLE_EQ(*mn::parse_nic_rate("2.5 Gb/sec (1X SDR)"), 2.5);
  EXPECT_DOUBLE_EQ(*mn::parse_nic_rate("100 Gb/sec (4X EDR)"), 100);
  for (const char* bad : {"", "fast", "400 Mb/sec", "-1 Gb/sec", "0 Gb/sec (4X)", "400Gb/sec", "1e9 Gb/sec"})
    EXPECT_FALSE(mn::parse_nic_rate(bad)) << bad;
}

TEST_F(SysfsTree, EachGpuDrivesOneOfTheFastestActivePorts) {
  for (int d = 0; d < 8; ++d) port("mlx5_" + std::to_string(d), "1", "400 Gb/sec (4X NDR)", "4: ACTIVE");
  port("mlx5_bond", "1", "100 Gb/sec (4X EDR)", "1: DOWN", "Ethernet");
  const mn::NicSummary nics = mn::read_nics(root.string());
  ASSERT_EQ(nics.ports.size(), 9u);
  EXPECT_DOUBLE_EQ(mn::node_nic_gbs(nics, 8), 400.0);  // 8 GPUs, each on a 400 Gb/s NIC: the node's 3200 Gb/s
  EXPECT_DOUBLE_EQ(mn::node_nic_gbs(nics, 1), 50.0);   // one GPU drives one NIC
  EXPECT_DOUBLE_EQ(mn::node_nic_gbs(nics, 2), 100.0);
  EXPECT_DOUBLE_EQ(mn::node_nic_gbs(nics, 16), 400.0);  // more GPUs than NICs: the NICs bound it
  EXPECT_DOUBLE_EQ(mn::node_nic_gbs(nics, 0), 0.0);
  EXPECT_EQ(mn::active_ports(nics), 8);
  EXPECT_EQ(mn::inactive_ports(nics), "mlx5_bond/1");  // not counted, even as the ninth port of 16 GPUs
  EXPECT_NE(mn::describe_nics(nics).find("8 x 400 Gb/sec (4X NDR) active"), std::string::npos);
  EXPECT_NE(mn::describe_nics(nics).find("1 port(s) not active"), std::string::npos);

  gpuenv::validate::ThresholdTable table;
  table.derived.rdma_nic = gpuenv::validate::SourcedFraction{0.8, "test"};
  const auto rule = gpuenv::validate::nic_reference(&table, mn::node_nic_gbs(nics, 8), mn::describe_nics(nics));
  ASSERT_TRUE(rule.reference);
  EXPECT_DOUBLE_EQ(rule.reference->value, 320.0);  // 0.8 x 400 GB/s
  EXPECT_DOUBLE_EQ(rule.fail_fraction, 1.0);        // the line itself is the acceptance line
  EXPECT_NE(rule.reference->basis.find("0.80 x"), std::string::npos);
}

TEST_F(SysfsTree, MixedRatesUseTheFastestPortsFirst) {
  port("mlx5_0", "1", "100 Gb/sec (4X EDR)", "4: ACTIVE");
  port("mlx5_1", "1", "400 Gb/sec (4X NDR)", "4: ACTIVE");
  port("mlx5_2", "1", "200 Gb/sec (2X NDR)", "4: ACTIVE");
  const mn::NicSummary nics = mn::read_nics(root.string());
  EXPECT_DOUBLE_EQ(mn::node_nic_gbs(nics, 1), 50.0);          // the 400 Gb/s port
  EXPECT_DOUBLE_EQ(mn::node_nic_gbs(nics, 2), 75.0);          // 400 + 200
  EXPECT_DOUBLE_EQ(mn::node_nic_gbs(nics, 4), 87.5);          // all three
  EXPECT_EQ(mn::inactive_ports(nics), "");
}

TEST_F(SysfsTree, NoActivePortOrNoTreeLeavesTheFigureMeasured) {
  EXPECT_TRUE(mn::read_nics(root.string()).ports.empty());
  EXPECT_NE(mn::read_nics(root.string()).note.find("does not exist"), std::string::npos);
  port("mlx5_0", "1", "400 Gb/sec (4X NDR)", "1: DOWN");
  port("mlx5_1", "1", "garbage\x1b[31m", "4: ACTIVE");
  const mn::NicSummary nics = mn::read_nics(root.string());
  EXPECT_EQ(mn::node_nic_gbs(nics, 8), 0.0);
  EXPECT_NE(nics.note.find("unreadable rates: mlx5_1/1"), std::string::npos);
  EXPECT_EQ(nics.note.find('\x1b'), std::string::npos);
  gpuenv::validate::ThresholdTable table;
  table.derived.rdma_nic = gpuenv::validate::SourcedFraction{0.8, "test"};
  EXPECT_FALSE(gpuenv::validate::nic_reference(&table, 0, "none").reference);
  EXPECT_FALSE(gpuenv::validate::nic_reference(nullptr, 50, "x").reference);
}

// ---- the rendezvous, in threads ------------------------------------------------------------------------------

int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  EXPECT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len), 0);
  ::close(fd);
  return ntohs(a.sin_port);
}

mn::NodeConfig node(int rank, int world, int port, std::chrono::milliseconds timeout = std::chrono::milliseconds(3000)) {
  mn::NodeConfig c;
  c.rank = rank;
  c.world = world;
  for (int r = 0; r < world; ++r) c.hosts.push_back(r == 0 ? "127.0.0.1" : "host" + std::to_string(r));
  c.port = port;
  c.token = "test-token";
  c.local_host = rank >= 0 && rank < world ? c.hosts[static_cast<std::size_t>(rank)] : "nowhere";
  c.rendezvous_timeout = timeout;
  c.result_timeout = timeout;
  c.buffer_bytes = 16u << 20;
  return c;
}

// A fake NCCL side: the id is fixed, each rank's "all-reduce" reports its rank as bandwidth after watching the
// channel for `busy`; every rank records the id, ranks and buffer it was given.
struct FakeNccl {
  std::chrono::milliseconds busy{50};
  std::atomic<int> measured{0};
  mn::NcclRanks ranks() {
    mn::NcclRanks n;
    n.unique_id = [] {
      mn::UniqueId id{};
      id.fill(0xab);
      return gpuenv::Result<mn::UniqueId>(id);
    };
    n.measure = [this](const mn::UniqueId& id, int first, int total, std::uint64_t bytes,
                       const mn::Watch& watch) -> gpuenv::Result<std::optional<gpuenv::validate::Samples>> {
      EXPECT_EQ(id[0], 0xab);
      EXPECT_EQ(bytes, 16u << 20);
      const auto until = Clock::now() + busy;
      while (Clock::now() < until) {
        if (auto s = watch(); !s) return s.error();
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
      }
      ++measured;
      gpuenv::validate::Samples s;
      s.values = {10.0 + first, 11.0 + first, 12.0 + first};
      s.unit = "GB/s";
      s.engine = "nccl";
      s.data_verified = true;
      s.library = "fake of " + std::to_string(total);
      return std::optional<gpuenv::validate::Samples>(s);
    };
    return n;
  }
};

TEST(Rendezvous, ThreeRanksMeetRunAndRankZeroGathersEveryResult) {
  const int port = free_port();
  FakeNccl nccl;
  const auto ranks = nccl.ranks();
  std::vector<std::future<gpuenv::Result<mn::MultiNodeResult>>> runs;
  for (int r = 2; r >= 0; --r)  // rank 0 last: the others retry their connects until it listens
    runs.push_back(std::async(std::launch::async, [r, port, &ranks] { return mn::run_rank(node(r, 3, port), 2, {}, ranks); }));
  for (auto& f : runs) ASSERT_TRUE(f.get().ok());
  EXPECT_EQ(nccl.measured.load(), 3);
  auto again = std::async(std::launch::async, [port, &ranks] { return mn::run_rank(node(1, 2, port), 2, {}, ranks); });
  auto root = mn::run_rank(node(0, 2, port), 2, {}, ranks);
  ASSERT_TRUE(root) << root.error().message;
  ASSERT_TRUE(again.get());
  ASSERT_EQ(root->ranks.size(), 2u);
  EXPECT_EQ(root->ranks[1].rank, 1);
  EXPECT_EQ(root->ranks[1].host, "host1");
  ASSERT_TRUE(root->ranks[1].samples);
  EXPECT_EQ(root->ranks[1].samples->values.front(), 12.0);  // NCCL ranks 2 and 3 are rank 1's
  EXPECT_EQ(root->ranks[1].samples->library, "fake of 4");
}

TEST(Rendezvous, RankZeroNamesEveryMissingRankInBoundedTime) {
  const int port = free_port();
  FakeNccl nccl;
  const auto ranks = nccl.ranks();
  auto present = std::async(std::launch::async, [port, &ranks] { return mn::run_rank(node(2, 4, port), 1, {}, ranks); });
  const auto start = Clock::now();
  auto root = mn::run_rank(node(0, 4, port, std::chrono::milliseconds(1500)), 1, {}, ranks);
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(5));
  ASSERT_FALSE(root);
  EXPECT_EQ(root.error().id, "multinode.peer_missing");
  EXPECT_NE(root.error().message.find("rank 1 (host1)"), std::string::npos) << root.error().message;
  EXPECT_NE(root.error().message.find("rank 3 (host3)"), std::string::npos);
  EXPECT_EQ(root.error().message.find("rank 2"), std::string::npos);
  // The rank that came is told, and says the same.
  auto told = present.get();
  ASSERT_FALSE(told);
  EXPECT_EQ(told.error().id, "multinode.peer_missing");
  EXPECT_NE(told.error().message.find("rank 3 (host3)"), std::string::npos);
  EXPECT_EQ(nccl.measured.load(), 0);
}

TEST(Rendezvous, APeerWithoutRankZeroGivesUpInBoundedTime) {
  FakeNccl nccl;
  const auto start = Clock::now();
  auto r = mn::run_rank(node(1, 2, free_port(), std::chrono::milliseconds(800)), 1, {}, nccl.ranks());
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(4));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().id, "multinode.connect");
  EXPECT_NE(r.error().message.find("rank 0 (127.0.0.1)"), std::string::npos);
}

TEST(Rendezvous, ATokenOfAnotherRunIsRefused) {
  const int port = free_port();
  FakeNccl nccl;
  const auto ranks = nccl.ranks();
  auto stranger = std::async(std::launch::async, [port, &ranks] {
    mn::NodeConfig c = node(1, 2, port);
    c.token = "another-job";
    return mn::run_rank(c, 1, {}, ranks);
  });
  auto root = mn::run_rank(node(0, 2, port, std::chrono::milliseconds(1500)), 1, {}, ranks);
  auto refused = stranger.get();
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().id, "multinode.refused");
  EXPECT_NE(refused.error().message.find("run token"), std::string::npos);
  ASSERT_FALSE(root);
  EXPECT_EQ(root.error().id, "multinode.peer_missing");
  EXPECT_NE(root.error().message.find("run token"), std::string::npos);  // what rank 0 turned away is said too
}

int connect_to(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  for (int i = 0; i < 200 && ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  return fd;
}

TEST(Rendezvous, HostileConnectionsDoNotStopTheRun) {
  const int port = free_port();
  FakeNccl nccl;
  const auto ranks = nccl.ranks();
  auto root = std::async(std::launch::async, [port, &ranks] { return mn::run_rank(node(0, 2, port), 1, {}, ranks); });
  // Garbage, a header promising 4 GiB, a silent connection: each is dropped without holding the others up.
  const int garbage = connect_to(port);
  ASSERT_GT(::send(garbage, "GET / HTTP/1.0\r\n\r\n", 18, MSG_NOSIGNAL), 0);
  const int huge = connect_to(port);
  const char header[12] = {'G', 'E', 'M', 'N', 1, 1, 0, 0, '\xff', '\xff', '\xff', '\xff'};
  ASSERT_EQ(::send(huge, header, sizeof header, MSG_NOSIGNAL), 12);
  const int silent = connect_to(port);
  auto peer = mn::run_rank(node(1, 2, port), 1, {}, ranks);
  ASSERT_TRUE(peer) << peer.error().message;
  auto r = root.get();
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->ranks.size(), 2u);
  for (int fd : {garbage, huge, silent}) ::close(fd);
}

TEST(Rendezvous, APeerThatDiesDuringTheAllReduceIsNamedByRankZero) {
  const int port = free_port();
  FakeNccl nccl;
  nccl.busy = std::chrono::milliseconds(20000);  // rank 0 would measure for 20 s: only the watch ends it early
  // Rank 1 is a raw client: it says hello, takes the start, then its connection closes as a killed process's does.
  std::thread dying([port] {
    const int fd = connect_to(port);
    auto hello = mn::encode_message(mn::MessageType::hello, mn::hello_json({1, 1, 2, "test-token", "host1", 1, 1, ""}));
    ASSERT_TRUE(hello);
    ASSERT_EQ(::send(fd, hello->data(), hello->size(), MSG_NOSIGNAL), static_cast<ssize_t>(hello->size()));
    char buffer[4096];
    ASSERT_GT(::recv(fd, buffer, sizeof buffer, 0), 0);  // the start
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    ::close(fd);
  });
  const auto start = Clock::now();
  auto root = mn::run_rank(node(0, 2, port), 1, {}, nccl.ranks());
  dying.join();
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(5));
  ASSERT_FALSE(root);
  EXPECT_EQ(root.error().id, "multinode.peer_lost");
  EXPECT_NE(root.error().message.find("rank 1 (host1)"), std::string::npos) << root.error().message;
}

TEST(Rendezvous, APeerWhoseRankZeroDiesNamesIt) {
  const int port = free_port();
  FakeNccl nccl;
  nccl.busy = std::chrono::milliseconds(20000);
  // Rank 0 is a raw server: it takes the hello, sends a start, then goes away.
  const int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  const int one = 1;
  ::setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::listen(listener, 4), 0);
  std::thread root([listener] {
    const int fd = ::accept(listener, nullptr, nullptr);
    char buffer[4096];
    ASSERT_GT(::recv(fd, buffer, sizeof buffer, 0), 0);
    mn::UniqueId id{};
    id.fill(0xab);
    auto start = mn::encode_message(mn::MessageType::start, {{"id", mn::id_to_hex(id)}, {"bytes", 16u << 20}});
    ASSERT_TRUE(start);
    ASSERT_GT(::send(fd, start->data(), start->size(), MSG_NOSIGNAL), 0);
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    ::close(fd);
    ::close(listener);
  });
  const auto started = Clock::now();
  auto peer = mn::run_rank(node(1, 2, port), 1, {}, nccl.ranks());
  root.join();
  EXPECT_LT(Clock::now() - started, std::chrono::seconds(5));
  ASSERT_FALSE(peer);
  EXPECT_EQ(peer.error().id, "multinode.peer_lost");
  EXPECT_NE(peer.error().message.find("rank 0 (127.0.0.1)"), std::string::npos) << peer.error().message;
}

TEST(Rendezvous, RefusesConfigsThatCannotBe) {
  FakeNccl nccl;
  for (const auto& c : {node(2, 2, 1), node(-1, 2, 1), node(0, 2, 0), node(0, 0, 1)})
    EXPECT_EQ(mn::run_rank(c, 1, {}, nccl.ranks()).error().id, "validate.bad_request");
  EXPECT_EQ(mn::run_rank(node(0, 1, 1), 0, {}, nccl.ranks()).error().id, "validate.bad_request");
  mn::NodeConfig no_samples = node(0, 1, 1);
  no_samples.samples = 0;
  EXPECT_EQ(mn::run_rank(no_samples, 1, {}, nccl.ranks()).error().id, "validate.bad_request");
}

TEST(Rendezvous, ARankOfAnotherLevelIsRefusedNamingBoth) {
  const int port = free_port();
  FakeNccl nccl;
  const auto ranks = nccl.ranks();
  auto other = std::async(std::launch::async, [port, &ranks] {
    mn::NodeConfig c = node(1, 2, port);
    c.samples = 10;
    c.level = "long";
    return mn::run_rank(c, 1, {}, ranks);
  });
  mn::NodeConfig root_config = node(0, 2, port, std::chrono::milliseconds(1500));
  root_config.samples = 5;
  root_config.level = "standard";
  auto root = mn::run_rank(root_config, 1, {}, ranks);
  auto refused = other.get();
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().id, "multinode.refused");
  EXPECT_NE(refused.error().message.find("level long (10 samples), rank 0 runs level standard (5 samples)"),
            std::string::npos)
      << refused.error().message;
  ASSERT_FALSE(root);
  EXPECT_EQ(root.error().id, "multinode.peer_missing");
  EXPECT_EQ(nccl.measured.load(), 0);  // nobody measured a count the others do not share
}

TEST(Rendezvous, AResultWithNeitherFiguresNorAnErrorIsAProtocolError) {
  const int port = free_port();
  FakeNccl nccl;
  // Rank 1 is a raw client: hello, the start, then a result that holds nothing.
  std::thread empty([port] {
    const int fd = connect_to(port);
    auto hello = mn::encode_message(mn::MessageType::hello, mn::hello_json({1, 1, 2, "test-token", "host1", 1, 1, ""}));
    ASSERT_TRUE(hello);
    ASSERT_EQ(::send(fd, hello->data(), hello->size(), MSG_NOSIGNAL), static_cast<ssize_t>(hello->size()));
    char buffer[4096];
    ASSERT_GT(::recv(fd, buffer, sizeof buffer, 0), 0);  // the start
    auto result = mn::encode_message(mn::MessageType::result,
                                     {{"rank", 1}, {"host", "host1"}, {"gpus", 1}, {"error_id", ""}, {"nics", nlohmann::json::array()}});
    ASSERT_TRUE(result);
    ASSERT_GT(::send(fd, result->data(), result->size(), MSG_NOSIGNAL), 0);
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    ::close(fd);
  });
  auto root = mn::run_rank(node(0, 2, port), 1, {}, nccl.ranks());
  empty.join();
  ASSERT_FALSE(root);
  EXPECT_EQ(root.error().id, "multinode.protocol");
  EXPECT_NE(root.error().message.find("neither a measurement nor an error"), std::string::npos) << root.error().message;
}

TEST(Rendezvous, AnEmptyMeasurementIsSentAsAnError) {
  const int port = free_port();
  FakeNccl nccl;
  mn::NcclRanks absent = nccl.ranks();
  absent.measure = [](const mn::UniqueId&, int, int, std::uint64_t, const mn::Watch&)
      -> gpuenv::Result<std::optional<gpuenv::validate::Samples>> { return std::optional<gpuenv::validate::Samples>{}; };
  const auto ranks = nccl.ranks();
  auto peer = std::async(std::launch::async, [port, &absent] { return mn::run_rank(node(1, 2, port), 1, {}, absent); });
  auto root = mn::run_rank(node(0, 2, port), 1, {}, ranks);
  auto p = peer.get();
  ASSERT_FALSE(p);
  EXPECT_EQ(p.error().id, "nccl.missing");
  ASSERT_FALSE(root);  // never a result without a figure
  EXPECT_EQ(root.error().id, "multinode.peer_failed");
  EXPECT_NE(root.error().message.find("no NCCL library"), std::string::npos) << root.error().message;
}

}  // namespace
