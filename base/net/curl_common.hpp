#pragma once
// What the two libcurl adapters (the Fetcher and the registry's HttpClient) share: global initialisation and
// which failures are worth another attempt.
#include <curl/curl.h>

#include <optional>
#include <random>
#include <string>

#include "base/net/net_limits.hpp"

namespace gpuenv {

/// curl_global_init, once per process.
void init_curl_once();

/// What every gpuenv transfer sets, the same for the fetcher and the registry's HTTP client: TLS peer and host
/// verification, an extra CA bundle (when not empty), the connect timeout, the rate rule (fewer than
/// limits.min_rate bytes/s, at least 1, for limits.rate_window), the attempt's time limit TIMEOUT_MS (what is
/// left of its deadline), the user agent. The strings must outlive the transfer.
void set_transfer_options(CURL* easy, const std::string& ca_bundle, const NetLimits& limits, long timeout_ms, const std::string& user_agent);

/// Milliseconds from now until DEADLINE, at least 1 (curl reads 0 as "no limit").
long millis_until(NetworkBudget::Clock::time_point deadline);

/// Whether a timed-out attempt ran into its request's deadline (rather than the connect timeout or the rate rule).
inline bool hit_deadline(CURLcode code, NetworkBudget::Clock::time_point deadline) {
  return code == CURLE_OPERATION_TIMEDOUT && NetworkBudget::Clock::now() + std::chrono::milliseconds(20) >= deadline;
}

/// The wait before the attempt after ATTEMPT: BASE doubled per attempt, at most CAP, jittered; or what the
/// server asked with Retry-After, when longer, cut to limits.retry_after_cap. Appends the Retry-After to WHY
/// (", Retry-After 120 s cut to 60 s (GPUENV_RETRY_AFTER_CAP)") so that the announced retry says it. A Retry-After
/// at or past DEADLINE is not waited for at all: the delay returned then ends after DEADLINE, so the caller gives
/// up at once, and WHY says why.
std::chrono::milliseconds retry_delay(int attempt, std::chrono::milliseconds base, std::chrono::milliseconds cap, std::optional<long> retry_after_s,
                                      const NetLimits& limits, NetworkBudget::Clock::time_point deadline, std::mt19937& rng, std::string* why);

/// The line announced before a retry: "GET URL: WHY; retrying in 2 s (attempt 2 of 5)".
std::string retry_notice(const std::string& where, const std::string& why, std::chrono::milliseconds delay, int next_attempt, int max_attempts);

/// Connection, timeout, reset and TLS-handshake failures: a retry can help.
bool retryable_curl(CURLcode code);

/// 408, 429 and 5xx answers: a retry can help.
inline bool retryable_http(long status) { return status == 408 || status == 429 || status >= 500; }

}  // namespace gpuenv
