#pragma once
// The libcurl adapter of the Fetcher port.
#include <memory>

#include "base/net/fetcher.hpp"

namespace gpuenv {

/// A Fetcher over libcurl's multi interface: concurrent transfers with connection reuse, retries with
/// exponential backoff, Range resume, stall detection, TLS verification always on. libcurl itself honours
/// the proxy variables (http_proxy, https_proxy, no_proxy).
std::unique_ptr<Fetcher> make_curl_fetcher(FetchOptions options);

}  // namespace gpuenv
