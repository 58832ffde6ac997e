#pragma once
// tests/images/registry_fake.py on 127.0.0.1 for the duration of a test: an in-memory OCI registry with a bearer-token
// service, and faults a real registry does not produce (altered, short, stalled or endless blobs).
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "base/net/http_client.hpp"
#include "fakes/docker_registry.hpp"

namespace gpuenv::testing {

/// tests/images/registry_fake.py in a mode.
class FakeRegistry {
 public:
  explicit FakeRegistry(const std::string& mode, const std::string& creds = {}) {
    std::vector<std::string> argv = {"python3", std::string(GPUENV_SOURCE_DIR) + "/tests/images/registry_fake.py", mode};
    if (!creds.empty()) argv.push_back(creds);
    int fd = -1;
    m_child.start(argv, m_dir / "fake.log", &fd);
    if (fd < 0) return;
    std::string line;
    char c;
    while (::read(fd, &c, 1) == 1 && c != '\n') line += c;
    ::close(fd);
    m_port = std::atoi(line.c_str());
  }
  [[nodiscard]] int port() const { return m_port; }
  [[nodiscard]] std::string host() const { return "127.0.0.1:" + std::to_string(m_port); }
  /// Requests seen, "METHOD PATH" per line.
  [[nodiscard]] std::string log() const {
    gpuenv::HttpRequest req;
    req.url = "http://" + host() + "/log";
    const auto r = gpuenv::make_curl_http_client(gpuenv::HttpOptions{})->send(req);
    return r.ok() ? r->body : std::string();
  }

 private:
  RegistryTempDir m_dir;
  Child m_child;
  int m_port = 0;
};

}  // namespace gpuenv::testing
