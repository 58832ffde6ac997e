// Every wait on the network is bounded and announced: the libcurl Fetcher and HttpClient against a loopback server
// (tests/fakes/fault_server.py) that trickles, hangs after its headers, or asks for an absurd Retry-After; and the
// limits read from the environment.
#include "base/net/net_limits.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <mutex>
#include <random>
#include <thread>

#include <unistd.h>

#include "base/digest.hpp"
#include "base/net/curl_fetcher.hpp"
#include "base/net/http_client.hpp"
#include "fakes/loopback_server.hpp"

namespace {

namespace fs = std::filesystem;
using namespace gpuenv;
using namespace std::chrono_literals;

/// Collects the announced lines.
struct Notices {
  std::mutex mu;
  std::vector<std::string> lines;
  std::function<void(const std::string&)> sink() {
    return [this](const std::string& l) {
      std::lock_guard lock(mu);
      lines.push_back(l);
    };
  }
  std::string all() {
    std::lock_guard lock(mu);
    std::string s;
    for (const auto& l : lines) s += l + "\n";
    return s;
  }
};

class NetLimitsContract : public ::testing::Test {
 protected:
  void SetUp() override {
    m_dir = fs::temp_directory_path() / ("gpuenv-netlimits-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(m_dir / "srv");
    fs::create_directories(m_dir / "out");
    std::mt19937 rng(7);
    m_big.resize(1 << 20);
    for (auto& c : m_big) c = static_cast<char>(rng());
    std::ofstream(m_dir / "srv" / "big.bin", std::ios::binary) << m_big;
    m_server = std::make_unique<gpuenv::testing::LoopbackServer>((m_dir / "srv").string());
    ASSERT_GT(m_server->port(), 0) << "fault server did not start";
  }
  void TearDown() override {
    m_server.reset();
    fs::remove_all(m_dir);
  }
  /// Short windows so that every case ends in seconds; the rules are those of production.
  NetLimits limits() {
    NetLimits l;
    l.connect_timeout = 2000ms;
    l.rate_window = 1s;
    l.retry_after_cap = 1s;
    l.on_notice = m_notices.sink();
    return l;
  }
  FetchOptions fetch_options(NetLimits l) {
    FetchOptions o;
    o.backoff_base = 10ms;
    o.backoff_cap = 50ms;
    o.limits = std::move(l);
    return o;
  }
  HttpOptions http_options(NetLimits l) {
    HttpOptions o;
    o.backoff_base = 10ms;
    o.backoff_cap = 50ms;
    o.limits = std::move(l);
    return o;
  }
  FetchRequest big(const std::string& query) {
    return FetchRequest{m_server->url("big.bin" + query), (m_dir / "out" / "big.bin").string(), Digest::of(m_big), m_big.size()};
  }
  bool nothing_left_in_out() const { return fs::is_empty(m_dir / "out"); }

  fs::path m_dir;
  std::string m_big;
  Notices m_notices;
  std::unique_ptr<gpuenv::testing::LoopbackServer> m_server;
};

// Before: the rate rule was 1 byte a second, so a server sending 16 bytes a second was waited on for ever.
TEST_F(NetLimitsContract, AServerThatTricklesFailsTheRateRuleAndIsGivenUp) {
  auto f = make_curl_fetcher(fetch_options(limits()));
  auto r = f->fetch_all({big("?fault=trickle&rate=16&times=99")});
  ASSERT_FALSE(r[0].ok());
  EXPECT_EQ(r[0].error().id, "fetch.too_slow") << r[0].error().to_string();
  EXPECT_NE(r[0].error().message.find("after 2 attempts"), std::string::npos) << r[0].error().message;
  EXPECT_NE(r[0].error().hint.find("GPUENV_MIN_RATE"), std::string::npos);
  EXPECT_NE(m_notices.all().find("retrying in"), std::string::npos) << "the retry after the first slow attempt is announced";
  EXPECT_TRUE(nothing_left_in_out());
}

TEST_F(NetLimitsContract, ADocumentFromATricklingServerFailsTheRateRule) {
  auto f = make_curl_fetcher(fetch_options(limits()));
  auto r = f->get(m_server->url("big.bin?fault=trickle&rate=16&times=99"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().id, "fetch.too_slow") << r.error().to_string();
}

// Before: no overall deadline; a body sent just above the rate rule took as long as the server liked.
TEST_F(NetLimitsContract, ADownloadEndsAtItsDeadlineEvenAboveTheMinimumRate) {
  NetLimits l = limits();
  l.request_deadline = 2s;
  l.deadline_bytes_per_s = 0;  // no allowance for the size: 2 s in all
  auto f = make_curl_fetcher(fetch_options(l));
  auto r = f->fetch_all({big("?fault=trickle&rate=20000&times=99")});  // 20 kB/s: 52 s for the whole file
  ASSERT_FALSE(r[0].ok());
  EXPECT_EQ(r[0].error().id, "fetch.deadline") << r[0].error().to_string();
  EXPECT_NE(r[0].error().message.find("its deadline of 2 s"), std::string::npos) << r[0].error().message;
  EXPECT_TRUE(nothing_left_in_out());
}

TEST_F(NetLimitsContract, TheDeadlineGrowsWithTheKnownSize) {
  NetLimits l = limits();
  l.request_deadline = 1s;
  l.deadline_bytes_per_s = 64 * 1024;  // + 16 s for 1 MiB
  auto f = make_curl_fetcher(fetch_options(l));
  auto r = f->fetch_all({big("?fault=trickle&rate=400000&times=1")});  // about 2.6 s
  ASSERT_TRUE(r[0].ok()) << r[0].error().to_string();
}

TEST_F(NetLimitsContract, TheCommandsNetworkBudgetEndsARequest) {
  NetLimits l = limits();
  l.budget = std::make_shared<NetworkBudget>(1s);
  auto f = make_curl_fetcher(fetch_options(l));
  auto r = f->fetch_all({big("?fault=trickle&rate=20000&times=99")});
  ASSERT_FALSE(r[0].ok());
  EXPECT_EQ(r[0].error().id, "fetch.deadline") << r[0].error().to_string();
  EXPECT_NE(r[0].error().message.find("network budget of 1 s"), std::string::npos) << r[0].error().message;
  EXPECT_NE(r[0].error().hint.find("GPUENV_NETWORK_BUDGET"), std::string::npos);
  EXPECT_EQ(l.budget->remaining(), NetworkBudget::Clock::duration::zero());
  // A spent budget ends the next request before it starts.
  auto again = f->get(m_server->url("big.bin"));
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.error().id, "fetch.deadline");
}

// Before: Retry-After was cut to 60 s without a word. A wait longer than the cap but within the request's deadline
// is cut and announced.
TEST_F(NetLimitsContract, ALongRetryAfterIsCappedAndAnnounced) {
  auto f = make_curl_fetcher(fetch_options(limits()));
  auto r = f->fetch_all({big("?fault=status=503&retry_after=30&times=1")});
  ASSERT_TRUE(r[0].ok()) << r[0].error().to_string();
  EXPECT_EQ(r[0]->attempts, 2);
  const std::string said = m_notices.all();
  EXPECT_NE(said.find("HTTP 503, Retry-After 30 s cut to 1 s (GPUENV_RETRY_AFTER_CAP); retrying in 1 s (attempt 2 of 5)"), std::string::npos) << said;
}

TEST_F(NetLimitsContract, TheHttpClientCapsAndAnnouncesRetryAfter) {
  auto http = make_curl_http_client(http_options(limits()));
  HttpRequest rq;
  rq.url = m_server->url("big.bin?fault=status=503&retry_after=30&times=1");
  rq.max_body = 2u << 20;
  auto r = http->send(rq);
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->attempts, 2);
  EXPECT_NE(m_notices.all().find("Retry-After 30 s cut to 1 s"), std::string::npos) << m_notices.all();
}

// Issue 33, case 17: a server that asks for 100000 s every time held inspect for 180 s (three announced waits of
// the 60 s cap). A wait the request's deadline cannot hold is not waited for in part: it gives up at once, saying
// so once.
TEST_F(NetLimitsContract, ARetryAfterBeyondTheRequestsDeadlineIsNotWaitedForAndSaidOnce) {
  NetLimits l = limits();
  l.retry_after_cap = 60s;
  l.request_deadline = 600s;
  const auto t0 = std::chrono::steady_clock::now();
  auto f = make_curl_fetcher(fetch_options(l));
  auto r = f->fetch_all({big("?fault=status=503&retry_after=100000&times=99")});
  ASSERT_FALSE(r[0].ok());
  EXPECT_EQ(r[0].error().id, "fetch.deadline");
  EXPECT_NE(r[0].error().message.find("Retry-After 100000 s, more than the"), std::string::npos) << r[0].error().message;
  EXPECT_TRUE(nothing_left_in_out());
  auto http = make_curl_http_client(http_options(l));
  HttpRequest rq;
  rq.url = m_server->url("big.bin?fault=status=503&retry_after=100000&times=99");
  rq.max_body = 2u << 20;
  auto answer = http->send(rq);
  ASSERT_TRUE(answer.ok()) << answer.error().to_string();
  EXPECT_EQ(answer->status, 503) << "the server's answer, as when attempts run out";
  EXPECT_EQ(answer->attempts, 1);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 10s);
  const std::string said = m_notices.all();
  EXPECT_EQ(said.find("retrying"), std::string::npos) << said;
  EXPECT_NE(said.find("not waited for; giving up"), std::string::npos) << said;
}

// Before: a registry that stalled after its headers was tried four times, in silence (122 s with the defaults).
TEST_F(NetLimitsContract, TheHttpClientGivesUpOnAServerThatStallsAfterItsHeadersTwice) {
  auto http = make_curl_http_client(http_options(limits()));
  HttpRequest rq;
  rq.url = m_server->url("big.bin?fault=hang&times=99");
  rq.max_body = 2u << 20;
  auto r = http->send(rq);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().id, "http.too_slow") << r.error().to_string();
  EXPECT_NE(r.error().message.find("after 2 attempts"), std::string::npos) << r.error().message;
  EXPECT_NE(m_notices.all().find("retrying in"), std::string::npos);
}

TEST_F(NetLimitsContract, TheHttpClientEndsAtTheRequestsDeadline) {
  NetLimits l = limits();
  l.request_deadline = 2s;
  auto http = make_curl_http_client(http_options(l));
  HttpRequest rq;
  rq.url = m_server->url("big.bin?fault=trickle&rate=20000&times=99");
  rq.max_body = 2u << 20;
  auto r = http->send(rq);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().id, "http.deadline") << r.error().to_string();
  EXPECT_NE(r.error().message.find("its deadline of 2 s"), std::string::npos) << r.error().message;
}

TEST_F(NetLimitsContract, AStallIsRetriedOnceAndThenResumes) {
  auto f = make_curl_fetcher(fetch_options(limits()));
  auto r = f->fetch_all({big("?fault=hang&times=1")});
  ASSERT_TRUE(r[0].ok()) << r[0].error().to_string();
  EXPECT_EQ(r[0]->attempts, 2);
  EXPECT_NE(m_notices.all().find("retrying in"), std::string::npos) << m_notices.all();
}

// One reader of durations for the environment and the command line (--valid-for, --max-age, --feature-ttl), bounded
// at ten years (issue 33, case 13: --valid-for 999999999999w signed a record whose notAfter was year 1985481891).
TEST(Durations, TakeSecondsMinutesHoursDaysAndWeeksUpToTenYears) {
  EXPECT_EQ(*parse_duration("90", "x"), 90s);
  EXPECT_EQ(*parse_duration("90s", "x"), 90s);
  EXPECT_EQ(*parse_duration("10m", "x"), 600s);
  EXPECT_EQ(*parse_duration("10min", "x"), 600s);
  EXPECT_EQ(*parse_duration("2h", "x"), 7200s);
  EXPECT_EQ(*parse_duration("30d", "x"), std::chrono::seconds(2592000));
  EXPECT_EQ(*parse_duration("2w", "x"), std::chrono::seconds(1209600));
  EXPECT_EQ(*parse_duration("520w", "x"), std::chrono::seconds(520 * 7 * 86400)) << "ten years, nearly";
  for (const char* bad : {"", "-1", "s", "1.5h", "1y", "1 d", "d", "99999999999999h", "999999999999w", "3700d", "99999999999999999999999"}) {
    auto r = parse_duration(bad, "GPUENV_X");
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.error().id, "config.bad_duration");
    EXPECT_EQ(r.error().where, "GPUENV_X");
  }
}

TEST(NetLimits, TheEnvironmentSetsEveryLimitAndBadValuesNameTheirVariable) {
  auto l = net_limits_from_env({{"GPUENV_NETWORK_BUDGET", "30m"},
                                {"GPUENV_REQUEST_TIMEOUT", "45"},
                                {"GPUENV_CONNECT_TIMEOUT", "5s"},
                                {"GPUENV_MIN_RATE", "4096"},
                                {"GPUENV_RATE_WINDOW", "10s"},
                                {"GPUENV_RETRY_AFTER_CAP", "0"}});
  ASSERT_TRUE(l.ok()) << l.error().to_string();
  EXPECT_EQ(l->budget->limit(), 1800s);
  EXPECT_EQ(l->request_deadline, 45s);
  EXPECT_EQ(l->connect_timeout, 5000ms);
  EXPECT_EQ(l->min_rate, 4096u);
  EXPECT_EQ(l->rate_window, 10s);
  EXPECT_EQ(l->retry_after_cap, 0s);
  auto defaults = net_limits_from_env({});
  ASSERT_TRUE(defaults.ok());
  EXPECT_EQ(defaults->budget->limit(), 7200s);
  auto bad = net_limits_from_env({{"GPUENV_REQUEST_TIMEOUT", "soon"}});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().where, "environment variable GPUENV_REQUEST_TIMEOUT");
  auto zero = net_limits_from_env({{"GPUENV_NETWORK_BUDGET", "0"}});
  ASSERT_FALSE(zero.ok());
  auto rate = net_limits_from_env({{"GPUENV_MIN_RATE", "fast"}});
  ASSERT_FALSE(rate.ok());
  EXPECT_EQ(rate.error().id, "config.bad_number");
}

TEST(NetLimits, TheBudgetCountsOverlappingRequestsOnce) {
  NetworkBudget b(3600s);
  const auto t0 = NetworkBudget::Clock::now();
  {
    NetworkBudget::Active one(&b);
    NetworkBudget::Active two(&b);
    std::this_thread::sleep_for(50ms);
  }
  const auto outside = NetworkBudget::Clock::now() - t0;
  const auto spent = NetworkBudget::Clock::duration(3600s) - b.remaining();
  EXPECT_GE(spent, 50ms);
  EXPECT_LE(spent, outside) << "two requests at once spend the time once, not twice";
  const auto after = b.remaining();
  std::this_thread::sleep_for(20ms);
  EXPECT_EQ(b.remaining(), after) << "no request is in progress: nothing is spent";
}

TEST(NetLimits, WaitsAreWrittenForPeople) {
  EXPECT_EQ(describe_wait(1500ms), "1.5 s");
  EXPECT_EQ(describe_wait(42s), "42 s");
  EXPECT_EQ(describe_wait(600s), "10 min");
  EXPECT_EQ(describe_wait(7200s), "2 h");
}

}  // namespace
