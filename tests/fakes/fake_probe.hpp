#pragma once
// Test double for the HostProbe port: answers with scripted facts, absence or an error.
#include <optional>

#include "validate/host_probe.hpp"

namespace gpuenv::testing {

class FakeProbe final : public validate::HostProbe {
 public:
  FakeProbe(std::string name, Result<std::optional<resolver::HostFacts>> answer) : m_name(std::move(name)), m_answer(std::move(answer)) {}
  [[nodiscard]] std::string name() const override { return m_name; }
  Result<std::optional<resolver::HostFacts>> probe() override {
    ++calls;
    return m_answer;
  }
  int calls = 0;

 private:
  std::string m_name;
  Result<std::optional<resolver::HostFacts>> m_answer;
};

/// Facts as NVML would report them for `n` GPUs of one kind.
inline resolver::HostFacts nvml_facts(const std::string& driver, const std::string& gpu_name, const std::string& pci_id, int sm, int n) {
  resolver::HostFacts f;
  f.driver = *resolver::Version::parse(driver);
  f.driver_cuda = *resolver::Version::parse("12.4");
  f.source = "nvml";
  f.cc_state = "off";
  for (int i = 0; i < n; ++i)
    f.gpus.push_back({i, gpu_name, "GPU-" + std::to_string(i), pci_id, sm, 80ull << 30});
  return f;
}

}  // namespace gpuenv::testing
