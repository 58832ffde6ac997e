#pragma once
// What the two libcurl adapters (the Fetcher and the registry's HttpClient) share: global initialisation and
// which failures are worth another attempt.
#include <curl/curl.h>

#include <string>

namespace gpuenv {

/// curl_global_init, once per process.
void init_curl_once();

/// What every gpuenv transfer sets, the same for the fetcher and the registry's HTTP client: TLS peer and host
/// verification, an extra CA bundle (when not empty), the connect timeout, the stall rule (less than 1 byte/s for
/// STALL_SECONDS), the user agent. The strings must outlive the transfer.
void set_transfer_options(CURL* easy, const std::string& ca_bundle, long connect_timeout_ms, long stall_seconds, const std::string& user_agent);

/// Connection, timeout, reset and TLS-handshake failures: a retry can help.
bool retryable_curl(CURLcode code);

/// 408, 429 and 5xx answers: a retry can help.
inline bool retryable_http(long status) { return status == 408 || status == 429 || status >= 500; }

}  // namespace gpuenv
