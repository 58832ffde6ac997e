#include "base/net/curl_common.hpp"

#include <algorithm>
#include <mutex>

namespace gpuenv {

void init_curl_once() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

bool retryable_curl(CURLcode c) {
  switch (c) {
    case CURLE_COULDNT_CONNECT:
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
    case CURLE_PARTIAL_FILE:
    case CURLE_GOT_NOTHING:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
    case CURLE_SSL_CONNECT_ERROR:
      return true;
    default:
      return false;
  }
}

void set_transfer_options(CURL* e, const std::string& ca_bundle, const NetLimits& limits, long timeout_ms, const std::string& user_agent) {
  curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, 1L);
  curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, 2L);
  if (!ca_bundle.empty()) curl_easy_setopt(e, CURLOPT_CAINFO, ca_bundle.c_str());
  curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(limits.connect_timeout.count()));
  curl_easy_setopt(e, CURLOPT_LOW_SPEED_LIMIT, static_cast<long>(std::clamp<std::uint64_t>(limits.min_rate, 1, 1u << 30)));
  curl_easy_setopt(e, CURLOPT_LOW_SPEED_TIME, static_cast<long>(std::max<long long>(1, limits.rate_window.count())));
  curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, std::max(1L, timeout_ms));
  curl_easy_setopt(e, CURLOPT_USERAGENT, user_agent.c_str());
}

long millis_until(NetworkBudget::Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - NetworkBudget::Clock::now()).count();
  return std::max<long>(1, static_cast<long>(std::min<long long>(left, 1LL << 30)));
}

std::chrono::milliseconds retry_delay(int attempt, std::chrono::milliseconds base, std::chrono::milliseconds cap, std::optional<long> retry_after_s,
                                      const NetLimits& limits, NetworkBudget::Clock::time_point deadline, std::mt19937& rng, std::string* why) {
  auto delay = std::min<std::chrono::milliseconds>(base * (1L << std::min(attempt - 1, 16)), cap);
  std::uniform_int_distribution<long> jitter(0, delay.count() / 4 + 1);
  delay += std::chrono::milliseconds(jitter(rng));
  if (!retry_after_s) return delay;
  const auto left = std::max(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - NetworkBudget::Clock::now()), std::chrono::milliseconds(0));
  if (*retry_after_s >= (left.count() + 999) / 1000) {  // the server's own wait, in seconds (it may be near LONG_MAX)
    // A wait the request's deadline cannot hold is never honoured in part: waiting the cap and asking again, as
    // before, held a command for three announced minutes against a server that asked for 100000 s each time.
    *why += ", Retry-After " + std::to_string(*retry_after_s) + " s, more than the " + describe_wait(left) + " left of the request's time: not waited for";
    return left + std::chrono::milliseconds(1);  // past the deadline: the caller gives up now
  }
  bool capped = false;
  const auto asked = retry_after_wait(limits, *retry_after_s, &capped);  // at most GPUENV_RETRY_AFTER_CAP
  *why += ", Retry-After " + std::to_string(*retry_after_s) + " s";
  if (capped) *why += " cut to " + describe_wait(asked) + " (GPUENV_RETRY_AFTER_CAP)";
  return std::max<std::chrono::milliseconds>(delay, asked);
}

std::string retry_notice(const std::string& where, const std::string& why, std::chrono::milliseconds delay, int next_attempt, int max_attempts) {
  return where + ": " + why + "; retrying in " + describe_wait(delay) + " (attempt " + std::to_string(next_attempt) + " of " + std::to_string(max_attempts) + ")";
}

}  // namespace gpuenv
