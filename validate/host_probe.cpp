#include "validate/host_probe.hpp"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <sstream>

namespace gpuenv::validate {

resolver::HostFacts detect_host(const std::vector<HostProbe*>& probes) {
  // The first probe that finds the driver gives the facts; later probes only fill in what it could not
  // tell (libcuda knows GPUs but not the driver version, which procfs has).
  std::optional<resolver::HostFacts> found;
  std::vector<std::string> notes;
  for (HostProbe* p : probes) {
    if (found && found->driver) break;
    auto r = p->probe();
    if (!r) {
      notes.push_back(p->name() + ": " + r.error().message);
      continue;
    }
    if (!r->has_value()) {
      notes.push_back(p->name() + ": not present");
      continue;
    }
    resolver::HostFacts facts = std::move(**r);
    for (auto& n : facts.notes) notes.push_back(std::move(n));
    if (!found) {
      found = std::move(facts);
      continue;
    }
    if (!found->driver && facts.driver) {
      found->driver = facts.driver;
      found->source += "+" + facts.source;
    }
    if (!found->driver_cuda) found->driver_cuda = facts.driver_cuda;
    if (found->gpus.empty()) found->gpus = std::move(facts.gpus);
  }
  resolver::HostFacts out = found ? std::move(*found) : resolver::HostFacts{};
  out.notes = std::move(notes);
  if (!found) out.notes.push_back("no NVIDIA driver found");
  return out;
}

std::optional<resolver::Version> parse_proc_driver_version(std::string_view text) {
  const auto line_end = text.find('\n');
  std::string first(text.substr(0, line_end));
  if (first.find("NVRM version:") == std::string::npos) return std::nullopt;
  std::istringstream words(first);
  std::string w;
  while (words >> w) {
    if (std::count(w.begin(), w.end(), '.') >= 1 && std::isdigit(static_cast<unsigned char>(w[0]))) {
      auto v = resolver::Version::parse(w);
      if (v && v->parts().size() >= 2) return *v;
    }
  }
  return std::nullopt;
}

namespace {

class ProcfsProbe final : public HostProbe {
 public:
  explicit ProcfsProbe(std::string path) : m_path(std::move(path)) {}
  [[nodiscard]] std::string name() const override { return "procfs"; }
  Result<std::optional<resolver::HostFacts>> probe() override {
    std::ifstream in(m_path);
    if (!in) return std::optional<resolver::HostFacts>{};
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    auto v = parse_proc_driver_version(text);
    if (!v) {
      return make_error(ErrorKind::environment, "detect.procfs_format", "cannot read a driver version from " + m_path, m_path,
                        "is the NVIDIA kernel module loaded correctly? see `dmesg | grep NVRM`");
    }
    resolver::HostFacts f;
    f.driver = *v;
    f.source = "procfs";
    f.notes.push_back("procfs: only the driver version is known (GPUs need NVML or libcuda)");
    return std::optional<resolver::HostFacts>(std::move(f));
  }

 private:
  std::string m_path;
};

}  // namespace

std::unique_ptr<HostProbe> make_procfs_probe(std::string path) { return std::make_unique<ProcfsProbe>(std::move(path)); }

}  // namespace gpuenv::validate
