// RDMA ports from sysfs and the bus-bandwidth reference they give (nic.hpp).
#include "validate/multinode/nic.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <system_error>

#include "base/safe_text.hpp"

namespace gpuenv::validate::multinode {
namespace {

namespace fs = std::filesystem;

constexpr std::size_t k_max_devices = 64, k_max_ports = 8, k_max_file_bytes = 256;

std::string read_small(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return {};
  std::string text(k_max_file_bytes, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<std::size_t>(in.gcount()));
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text;
}

// Up to `max` entries of `dir`, sorted by name; none when it cannot be listed.
std::vector<std::string> sorted_entries(const fs::path& dir, std::size_t max) {
  std::vector<std::string> names;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    names.push_back(it->path().filename().string());
    if (names.size() >= 4 * max) break;  // a hostile tree cannot make the sort unbounded
  }
  std::sort(names.begin(), names.end());
  if (names.size() > max) names.resize(max);
  return names;
}

}  // namespace

Result<double> parse_nic_rate(std::string_view text) {
  auto bad = [&] {
    return make_error(ErrorKind::environment, "multinode.nic_rate",
                      "the RDMA port rate '" + safe_text(text, 80) + "' is not '<number> Gb/sec ...'", "sysfs",
                      "check `ibstat` or `cat /sys/class/infiniband/*/ports/*/rate`; the port may be down");
  };
  std::size_t i = 0;
  while (i < text.size() && ((text[i] >= '0' && text[i] <= '9') || text[i] == '.')) ++i;
  if (i == 0 || i > 12 || text.substr(i, 7) != " Gb/sec") return bad();
  double value = 0;
  const std::string number(text.substr(0, i));
  if (std::sscanf(number.c_str(), "%lf", &value) != 1 || !(value > 0) || value > 1e5) return bad();
  return value;
}

NicSummary read_nics(const std::string& sysfs_root) {
  NicSummary out;
  const fs::path base = fs::path(sysfs_root) / "class" / "infiniband";
  std::error_code ec;
  if (!fs::is_directory(base, ec)) {
    out.note = "no RDMA devices (" + safe_text(base.string(), 200) + " does not exist)";
    return out;
  }
  std::string unread;
  for (const std::string& device : sorted_entries(base, k_max_devices)) {
    for (const std::string& port : sorted_entries(base / device / "ports", k_max_ports)) {
      const fs::path dir = base / device / "ports" / port;
      NicPort p;
      p.device = safe_text(device, 64);
      p.port = safe_text(port, 16);
      p.rate = safe_text(read_small(dir / "rate"), 80);
      p.active = read_small(dir / "state") == "4: ACTIVE";
      p.link_layer = safe_text(read_small(dir / "link_layer"), 32);
      auto gbps = parse_nic_rate(p.rate);
      if (!gbps) {
        unread += (unread.empty() ? "" : ", ") + p.device + "/" + p.port + " ('" + p.rate + "')";
        continue;
      }
      p.gbps = *gbps;
      out.ports.push_back(std::move(p));
    }
  }
  if (out.ports.empty()) out.note = "no RDMA port with a readable rate under " + safe_text(base.string(), 200);
  if (!unread.empty()) out.note += (out.note.empty() ? "" : "; ") + std::string("unreadable rates: ") + unread;
  return out;
}

double node_nic_gbs(const NicSummary& nics, int gpus) {
  std::vector<double> rates;
  for (const NicPort& p : nics.ports)
    if (p.active) rates.push_back(p.gbps);
  if (rates.empty() || gpus < 1) return 0;
  std::sort(rates.begin(), rates.end(), [](double a, double b) { return a > b; });
  const std::size_t used = std::min(rates.size(), static_cast<std::size_t>(gpus));
  double total = 0;
  for (std::size_t i = 0; i < used; ++i) total += rates[i];
  return total / 8.0;
}

std::string inactive_ports(const NicSummary& nics) {
  std::string out;
  for (const NicPort& p : nics.ports)
    if (!p.active) out += (out.empty() ? "" : ", ") + p.device + "/" + p.port;
  return out;
}

int active_ports(const NicSummary& nics) {
  return static_cast<int>(std::count_if(nics.ports.begin(), nics.ports.end(), [](const NicPort& p) { return p.active; }));
}

std::string describe_nics(const NicSummary& nics) {
  std::map<std::string, int> rates;  // "400 Gb/sec (4X NDR)" -> active ports
  std::string names;
  int inactive = 0;
  for (const NicPort& p : nics.ports) {
    if (!p.active) {
      ++inactive;
      continue;
    }
    ++rates[p.rate];
    names += (names.empty() ? "" : ", ") + p.device + "/" + p.port;
  }
  if (rates.empty()) return nics.note.empty() ? "no active RDMA port" : nics.note;
  std::string out;
  for (const auto& [rate, count] : rates) out += (out.empty() ? "" : " + ") + std::to_string(count) + " x " + rate;
  out += " active (" + names + ")";
  if (inactive > 0) out += ", " + std::to_string(inactive) + " port(s) not active";
  return out;
}

}  // namespace gpuenv::validate::multinode
