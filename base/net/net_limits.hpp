#pragma once
// How long gpuenv waits on the network, the same rules for every HTTP request (package downloads, index
// documents, registry requests, tokens): a connect timeout, a minimum transfer rate, a deadline per request
// (every attempt and every wait between attempts included), a cap on what a server may ask with Retry-After,
// and one budget per command for all of its network phases together. Waits worth knowing about (retries,
// Retry-After) are announced through `on_notice`, never spent in silence. docs/cli.md (Network limits)
// documents the defaults and the environment variables that change them.
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "base/duration.hpp"
#include "base/error.hpp"

namespace gpuenv {

/// The time a command may spend in network phases, all of its requests together (overlapping requests count
/// once: what is measured is the wall time during which at least one request is in progress). Thread-safe.
class NetworkBudget {
 public:
  using Clock = std::chrono::steady_clock;
  explicit NetworkBudget(std::chrono::seconds limit) : m_limit(limit) {}
  /// While an Active lives, the budget is being spent.
  class Active {
   public:
    explicit Active(NetworkBudget* budget);
    ~Active();
    Active(const Active&) = delete;
    Active& operator=(const Active&) = delete;

   private:
    NetworkBudget* m_budget;
  };
  /// What is left of the limit now (zero or more).
  [[nodiscard]] Clock::duration remaining() const;
  [[nodiscard]] std::chrono::seconds limit() const { return m_limit; }

 private:
  void enter();
  void leave();
  std::chrono::seconds m_limit;
  mutable std::mutex m_mu;
  int m_active = 0;
  Clock::duration m_spent{};
  Clock::time_point m_since{};
};

struct NetLimits {
  std::chrono::milliseconds connect_timeout{15000};
  /// An attempt that moves fewer than `min_rate` bytes per second for `rate_window` fails (and is retried):
  /// this ends a stalled connection and a server that trickles.
  std::uint64_t min_rate = 1024;
  std::chrono::seconds rate_window{20};
  /// Attempts of one request that may end that way (or by the connect timeout) before it fails with
  /// "*.too_slow": a stall is worth one retry, a server that stalls again is not worth waiting for.
  int max_slow_attempts = 2;
  /// One request may take `request_deadline` plus one second per `deadline_bytes_per_s` bytes of its known
  /// size, every attempt and wait included; then it fails with "*.deadline" and is not tried again.
  std::chrono::seconds request_deadline{600};
  std::uint64_t deadline_bytes_per_s = 1u << 20;
  /// The longest wait a Retry-After answer is granted; a longer one is cut to this and announced.
  std::chrono::seconds retry_after_cap{60};
  /// The command's budget for all network phases (null: none).
  std::shared_ptr<NetworkBudget> budget;
  /// Receives one line per retry and per Retry-After wait ("GET URL: HTTP 503; retrying in 60 s ..."); may be
  /// empty. Called from any thread.
  std::function<void(const std::string&)> on_notice;

  void notice(const std::string& line) const {
    if (on_notice) on_notice(line);
  }
};

/// When one request must be done: its own deadline (from `started` and its known size) or the command's
/// budget, whichever comes first, and which of the two it is (for the message).
struct RequestDeadline {
  NetworkBudget::Clock::time_point at;
  bool from_budget = false;
  /// "its deadline of 600 s" or "the command's network budget of 7200 s (GPUENV_NETWORK_BUDGET)".
  std::string what;
};
RequestDeadline request_deadline(const NetLimits& limits, NetworkBudget::Clock::time_point started, std::optional<std::uint64_t> size);
/// The hint of an error for a request that ran past DEADLINE: which setting to raise, and that a closer
/// SERVER ("mirror", "registry") helps.
std::string deadline_hint(const RequestDeadline& deadline, const std::string& server);

/// How long to honour a Retry-After of `asked_s` seconds: at most the cap; `capped` says whether it was cut.
std::chrono::seconds retry_after_wait(const NetLimits& limits, long asked_s, bool* capped);

/// "1.5 s", "42 s", "12 min", "2 h": a wait for a message.
std::string describe_wait(std::chrono::milliseconds wait);


/// The limits from the environment: GPUENV_NETWORK_BUDGET (default 2h), GPUENV_REQUEST_TIMEOUT (600s),
/// GPUENV_CONNECT_TIMEOUT (15s), GPUENV_MIN_RATE (bytes per second, 1024) over GPUENV_RATE_WINDOW (20s),
/// GPUENV_RETRY_AFTER_CAP (60s). The budget is made here; `on_notice` is left to the caller.
/// Errors: "config.bad_duration", "config.bad_number" naming the variable.
Result<NetLimits> net_limits_from_env(const std::map<std::string, std::string>& env);

}  // namespace gpuenv
