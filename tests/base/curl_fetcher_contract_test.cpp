// Contract tests of the libcurl Fetcher against a real loopback server that injects faults.
#include "base/net/curl_fetcher.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>

#include <signal.h>
#include <sys/resource.h>

#include "base/digest.hpp"
#include "fakes/loopback_server.hpp"

namespace {

namespace fs = std::filesystem;
using namespace gpuenv;

gpuenv::Digest sha256(const std::string& s) { return gpuenv::Digest::of(s); }

std::string slurp_fetched(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

class CurlFetcherContract : public ::testing::Test {
 protected:
  void SetUp() override {
    m_dir = fs::temp_directory_path() / ("gpuenv-fetch-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(m_dir / "srv");
    fs::create_directories(m_dir / "out");
    std::mt19937 rng(1);
    m_big.resize(1 << 20);
    for (auto& c : m_big) c = static_cast<char>(rng());
    std::ofstream(m_dir / "srv" / "big.bin", std::ios::binary) << m_big;
    for (int i = 0; i < 50; ++i) std::ofstream(m_dir / "srv" / ("f" + std::to_string(i))) << "file " << i << std::string(static_cast<std::size_t>(i) * 100, 'x');
    m_server = std::make_unique<gpuenv::testing::LoopbackServer>((m_dir / "srv").string());
    ASSERT_GT(m_server->port(), 0) << "fault server did not start";
  }
  void TearDown() override {
    m_server.reset();
    fs::remove_all(m_dir);
  }
  FetchOptions fast() {
    FetchOptions o;
    o.backoff_base = std::chrono::milliseconds(10);
    o.backoff_cap = std::chrono::milliseconds(50);
    o.limits.rate_window = std::chrono::seconds(1);
    o.limits.connect_timeout = std::chrono::milliseconds(2000);
    return o;
  }
  FetchRequest big(const std::string& query) {
    return FetchRequest{m_server->url("big.bin" + query), (m_dir / "out" / "big.bin").string(), sha256(m_big), m_big.size()};
  }
  bool leftovers() const {
    for (const auto& e : fs::directory_iterator(m_dir / "out"))
      if (e.path().extension() == ".part") return true;
    return false;
  }
  fs::path m_dir;
  std::string m_big;
  std::unique_ptr<gpuenv::testing::LoopbackServer> m_server;
};

TEST_F(CurlFetcherContract, FetchesManyFilesConcurrentlyAndVerifiesThem) {
  std::vector<FetchRequest> reqs;
  for (int i = 0; i < 50; ++i) {
    const std::string body = slurp_fetched(m_dir / "srv" / ("f" + std::to_string(i)));
    reqs.push_back({m_server->url("f" + std::to_string(i)), (m_dir / "out" / ("f" + std::to_string(i))).string(), sha256(body), body.size()});
  }
  auto f = make_curl_fetcher(fast());
  auto results = f->fetch_all(reqs);
  ASSERT_EQ(results.size(), 50u);
  for (std::size_t i = 0; i < results.size(); ++i) {
    ASSERT_TRUE(results[i].ok()) << results[i].error().to_string();
    EXPECT_EQ(slurp_fetched(reqs[i].dest), slurp_fetched(m_dir / "srv" / ("f" + std::to_string(i))));
    EXPECT_EQ(results[i]->attempts, 1);
  }
  EXPECT_FALSE(leftovers());
}

// fetch_each tells of each file as it finishes, in place and verified, while slower ones still arrive; a
// failure is told too, and everything before fetch_each returns.
TEST_F(CurlFetcherContract, TellsOfEachFileAsItFinishesWhileOthersStillArrive) {
  const std::string slow_body = slurp_fetched(m_dir / "srv" / "f10"), quick_body = slurp_fetched(m_dir / "srv" / "f2");
  const std::vector<FetchRequest> reqs = {
      {m_server->url("f10?fault=trickle&rate=2000"), (m_dir / "out" / "slow").string(), sha256(slow_body), slow_body.size()},
      {m_server->url("f2"), (m_dir / "out" / "quick").string(), sha256(quick_body), quick_body.size()},
      {m_server->url("nothere"), (m_dir / "out" / "missing").string(), std::nullopt, std::nullopt}};
  auto f = make_curl_fetcher(fast());
  std::vector<int> told(reqs.size(), 0);
  std::vector<std::size_t> order;
  bool quick_before_slow_was_there = false, quick_in_place = false;
  auto results = f->fetch_each(reqs, [&](std::size_t i, const Result<FetchedFile>& r) {
    ASSERT_LT(i, reqs.size());
    ++told[i];
    order.push_back(i);
    if (i == 1) {
      quick_in_place = r.ok() && slurp_fetched(reqs[1].dest) == quick_body;
      quick_before_slow_was_there = !fs::exists(reqs[0].dest);
    }
    if (i == 2) {
      EXPECT_FALSE(r.ok());
      if (!r.ok()) EXPECT_EQ(r.error().id, "fetch.not_found");
    }
  });
  EXPECT_EQ(told, (std::vector<int>{1, 1, 1}));
  ASSERT_EQ(order.size(), 3u);
  EXPECT_EQ(order.back(), 0u) << "the trickled file finishes last (plain http: the others do not wait for its connection)";
  EXPECT_TRUE(quick_in_place);
  EXPECT_TRUE(quick_before_slow_was_there);
  ASSERT_TRUE(results[0].ok()) << results[0].error().to_string();
  EXPECT_EQ(slurp_fetched(reqs[0].dest), slow_body);
  EXPECT_FALSE(results[2].ok());
  EXPECT_FALSE(leftovers());
}

TEST_F(CurlFetcherContract, GetsADocumentIntoMemory) {
  auto f = make_curl_fetcher(fast());
  auto r = f->get(m_server->url("f3"));
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  EXPECT_EQ(*r, slurp_fetched(m_dir / "srv" / "f3"));
}

TEST_F(CurlFetcherContract, RetriesServerErrorsWithBackoff) {
  auto f = make_curl_fetcher(fast());
  auto r = f->fetch_all({big("?fault=status=503&times=2")});
  ASSERT_TRUE(r[0].ok()) << r[0].error().to_string();
  EXPECT_EQ(r[0]->attempts, 3);
  EXPECT_EQ(slurp_fetched(m_dir / "out" / "big.bin"), m_big);
}

TEST_F(CurlFetcherContract, HonoursRetryAfterOn429) {
  auto f = make_curl_fetcher(fast());
  const auto start = std::chrono::steady_clock::now();
  auto r = f->fetch_all({big("?fault=status=429&times=1")});
  ASSERT_TRUE(r[0].ok()) << r[0].error().to_string();
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(900));
}

TEST_F(CurlFetcherContract, ResumesADroppedDownloadWithRange) {
  auto f = make_curl_fetcher(fast());
  auto r = f->fetch_all({big("?fault=drop&times=1")});
  ASSERT_TRUE(r[0].ok()) << r[0].error().to_string();
  EXPECT_EQ(r[0]->attempts, 2);
  EXPECT_EQ(slurp_fetched(m_dir / "out" / "big.bin"), m_big);
  auto log = f->get(m_server->url("log"));
  ASSERT_TRUE(log.ok());
  EXPECT_NE(log->find("range=bytes=524288-"), std::string::npos) << *log;
}

TEST_F(CurlFetcherContract, AFullDiskIsAClearErrorAndLeavesNoPartFile) {
  // A file size limit makes write() fail with EFBIG part way, as a full disk fails with ENOSPC.
  auto fetch_with_a_small_disk = [&] {
    ::signal(SIGXFSZ, SIG_IGN);
    const rlimit limit{256 * 1024, 256 * 1024};
    ::setrlimit(RLIMIT_FSIZE, &limit);
    auto f = make_curl_fetcher(fast());
    auto r = f->fetch_all({big("")});
    if (r[0].ok()) std::_Exit(1);
    std::cerr << r[0].error().to_string() << "\n";
    std::_Exit(leftovers() || fs::exists(m_dir / "out" / "big.bin") ? 2 : 0);
  };
  EXPECT_EXIT(fetch_with_a_small_disk(), ::testing::ExitedWithCode(0), "cannot write .*big.bin.part: File too large");
}

TEST_F(CurlFetcherContract, RestartsWhenTheServerIgnoresRange) {
  auto f = make_curl_fetcher(fast());
  auto r = f->fetch_all({big("?fault=truncate&times=1&noranges=1")});
  ASSERT_TRUE(r[0].ok()) << r[0].error().to_string();
  EXPECT_EQ(slurp_fetched(m_dir / "out" / "big.bin"), m_big);
}

TEST_F(CurlFetcherContract, AbortsAndRetriesAStalledTransfer) {
  auto f = make_curl_fetcher(fast());
  auto r = f->fetch_all({big("?fault=stall&times=1")});
  ASSERT_TRUE(r[0].ok()) << r[0].error().to_string();
  EXPECT_EQ(slurp_fetched(m_dir / "out" / "big.bin"), m_big);
}

TEST_F(CurlFetcherContract, AlteredBodyIsRetriedOnceThenRefused) {
  auto f = make_curl_fetcher(fast());
  auto healed = f->fetch_all({big("?fault=alter&times=1")});
  ASSERT_TRUE(healed[0].ok()) << healed[0].error().to_string();
  fs::remove(m_dir / "out" / "big.bin");
  auto r = f->fetch_all({big("?fault=alter&times=9")});
  ASSERT_FALSE(r[0].ok());
  EXPECT_EQ(r[0].error().id, "fetch.hash_mismatch");
  EXPECT_FALSE(fs::exists(m_dir / "out" / "big.bin"));
  EXPECT_FALSE(leftovers());
}

TEST_F(CurlFetcherContract, NotFoundIsNotRetried) {
  auto f = make_curl_fetcher(fast());
  auto r = f->fetch_all({{m_server->url("missing"), (m_dir / "out" / "m").string(), std::nullopt, std::nullopt}});
  ASSERT_FALSE(r[0].ok());
  EXPECT_EQ(r[0].error().id, "fetch.not_found");
  EXPECT_NE(r[0].error().message.find("after 1 attempt)"), std::string::npos) << r[0].error().message;
  EXPECT_FALSE(leftovers());
}

TEST_F(CurlFetcherContract, GivesUpAfterMaxAttempts) {
  auto o = fast();
  o.max_attempts = 3;
  auto f = make_curl_fetcher(o);
  auto r = f->fetch_all({big("?fault=status=500&times=99")});
  ASSERT_FALSE(r[0].ok());
  EXPECT_EQ(r[0].error().id, "fetch.failed");
  EXPECT_NE(r[0].error().message.find("HTTP 500 (after 3 attempts)"), std::string::npos) << r[0].error().message;
}

TEST_F(CurlFetcherContract, ConnectionRefusedIsRetriedThenReported) {
  auto o = fast();
  o.max_attempts = 2;
  auto f = make_curl_fetcher(o);
  auto r = f->get("http://127.0.0.1:1/nothing");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().id, "fetch.failed");
}

TEST_F(CurlFetcherContract, LargerThanPromisedIsRefused) {
  auto f = make_curl_fetcher(fast());
  auto r = f->fetch_all({{m_server->url("big.bin"), (m_dir / "out" / "big.bin").string(), std::nullopt, 1000}});
  ASSERT_FALSE(r[0].ok());
  EXPECT_EQ(r[0].error().id, "fetch.too_large");
  EXPECT_FALSE(fs::exists(m_dir / "out" / "big.bin"));
  auto o = fast();
  o.max_document_bytes = 1000;
  EXPECT_EQ(make_curl_fetcher(o)->get(m_server->url("big.bin")).error().id, "fetch.too_large");
}

TEST_F(CurlFetcherContract, GetsByteRanges) {
  auto f = make_curl_fetcher(fast());
  auto r = f->get_range(m_server->url("big.bin"), 1000, 4096);
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  EXPECT_EQ(*r, m_big.substr(1000, 4096));
  auto tail = f->get_range(m_server->url("big.bin"), m_big.size() - 10, 10);
  ASSERT_TRUE(tail.ok());
  EXPECT_EQ(*tail, m_big.substr(m_big.size() - 10));
  auto none = f->get_range(m_server->url("big.bin?noranges=1"), 1000, 4096);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.error().id, "fetch.no_ranges");
}

TEST_F(CurlFetcherContract, UnwritableDestinationIsAnIoError) {
  auto f = make_curl_fetcher(fast());
  auto r = f->fetch_all({{m_server->url("f1"), (m_dir / "nope" / "f1").string(), std::nullopt, std::nullopt}});
  ASSERT_FALSE(r[0].ok());
  EXPECT_EQ(r[0].error().id, "fetch.io");
}

}  // namespace
