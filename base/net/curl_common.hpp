#pragma once
// What the two libcurl adapters (the Fetcher and the registry's HttpClient) share: global initialisation and
// which failures are worth another attempt.
#include <curl/curl.h>

namespace gpuenv {

/// curl_global_init, once per process.
void init_curl_once();

/// Connection, timeout, reset and TLS-handshake failures: a retry can help.
bool retryable_curl(CURLcode code);

/// 408, 429 and 5xx answers: a retry can help.
inline bool retryable_http(long status) { return status == 408 || status == 429 || status >= 500; }

}  // namespace gpuenv
