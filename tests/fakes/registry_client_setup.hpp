#pragma once
// How the registry client tests reach a registry on 127.0.0.1: short retries and timeouts, plain HTTP, references
// parsed with the failure reported to the test.
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "base/net/http_client.hpp"
#include "images/registry/registry_client.hpp"

namespace gpuenv::testing {

/// HTTP options for a loopback registry: three attempts, 20 ms backoff, a 3 s connect timeout; CA for TLS.
inline HttpOptions quick_http(const std::string& ca = {}) {
  HttpOptions o;
  o.ca_bundle = ca;
  o.max_attempts = 3;
  o.backoff_base = std::chrono::milliseconds(20);
  o.limits.connect_timeout = std::chrono::milliseconds(3000);
  o.limits.rate_window = std::chrono::seconds(10);
  return o;
}

/// Options for a loopback registry that speaks plain HTTP.
inline images::RegistryOptions plain_http_options() {
  images::RegistryOptions o;
  o.plain_http = true;
  return o;
}

/// TEXT as a reference; a failure fails the test (and gives an empty reference).
inline images::ImageReference parse_ref(const std::string& text) {
  auto r = images::parse_image_reference(text);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().to_string());
  return r.ok() ? *r : images::ImageReference{};
}

}  // namespace gpuenv::testing
