#include "validate/replay/recording.hpp"

#include <charconv>
#include <cstdio>
#include <sstream>

#include <nlohmann/json.hpp>

#include "base/digest.hpp"

namespace gpuenv::validate {
namespace {

/// Text as a YAML double-quoted scalar: JSON's escapes are YAML's, and bytes that are not UTF-8 become U+FFFD
/// rather than a file the reader refuses.
std::string yaml_quoted(std::string_view text) {
  return nlohmann::json(std::string(text)).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

/// The shortest text that reads back to the same double.
std::string number(double v) {
  char buffer[64];
  const auto r = std::to_chars(buffer, buffer + sizeof buffer, v);
  return std::string(buffer, r.ptr);
}

std::string hex64(std::uint64_t v) {
  char buffer[24];
  std::snprintf(buffer, sizeof buffer, "0x%016llx", static_cast<unsigned long long>(v));
  return buffer;
}

std::string hex_bytes(const std::string& bytes) {
  return to_hex(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size());
}

std::string yes_no(bool b) { return b ? "true" : "false"; }

template <class T, class Write>
std::string or_unsupported(const std::optional<T>& v, Write write) {
  return v ? write(*v) : std::string("unsupported");
}

std::string u64(std::uint64_t v) { return std::to_string(v); }

std::string samples(const Samples& s) {
  std::string values;
  for (double v : s.values) values += (values.empty() ? "" : ", ") + number(v);
  return "{values: [" + values + "], unit: " + yaml_quoted(s.unit) + ", engine: " + yaml_quoted(s.engine) +
         ", data_verified: " + yes_no(s.data_verified) + "}";
}

std::string text_list(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& i : items) out += (out.empty() ? "" : ", ") + yaml_quoted(i);
  return "[" + out + "]";
}

void write_driver(std::ostringstream& y, const DriverState& d) {
  y << "  driver:\n"
    << "    loaded: " << yes_no(d.loaded) << "\n"
    << "    version: " << yaml_quoted(d.version) << "\n"
    << "    cuda_driver_version: " << d.cuda_driver_version << "\n"
    << "    nouveau_loaded: " << yes_no(d.nouveau_loaded) << "\n"
    << "    nvswitch_present: " << yes_no(d.nvswitch_present) << "\n"
    << "    fabric_manager_running: " << (d.fabric_manager_running ? yes_no(*d.fabric_manager_running) : "unknown") << "\n"
    << "    device_nodes_missing: " << text_list(d.device_nodes_missing) << "\n"
    << "    cc_state: " << d.cc_state << "\n";
  if (d.cc_gpus_ready && (d.cc_state == "on" || d.cc_state == "devtools")) y << "    cc_gpus_ready: " << yes_no(*d.cc_gpus_ready) << "\n";
  y << "    cc_environment: " << d.cc_environment << "\n";
}

void write_health(std::ostringstream& y, const char* key, const GpuHealth& h) {
  y << "      " << key << ":\n";
  auto line = [&](const char* name, const std::string& value) { y << "        " << name << ": " << value << "\n"; };
  line("ecc_enabled", or_unsupported(h.ecc_enabled, yes_no));
  line("ecc_pending_change", or_unsupported(h.ecc_pending_change, yes_no));
  line("ecc_volatile_uncorrected", or_unsupported(h.ecc_volatile_uncorrected, u64));
  line("ecc_volatile_corrected", or_unsupported(h.ecc_volatile_corrected, u64));
  line("ecc_aggregate_uncorrected", or_unsupported(h.ecc_aggregate_uncorrected, u64));
  line("row_remap", or_unsupported(h.row_remap, [](const RowRemap& r) {
         return "{corrected_rows: " + u64(r.corrected_rows) + ", uncorrected_rows: " + u64(r.uncorrected_rows) +
                ", pending: " + yes_no(r.pending) + ", failure: " + yes_no(r.failure) + "}";
       }));
  line("retired_pages", or_unsupported(h.retired_pages, [](const RetiredPages& r) {
         return "{single_bit: " + u64(r.single_bit) + ", double_bit: " + u64(r.double_bit) + ", pending: " + yes_no(r.pending) + "}";
       }));
  line("pcie_link", or_unsupported(h.pcie_link, [](const PcieLink& l) {
         return "{current_gen: " + std::to_string(l.current_gen) + ", max_gen: " + std::to_string(l.max_gen) +
                ", current_width: " + std::to_string(l.current_width) + ", max_width: " + std::to_string(l.max_width) + "}";
       }));
  line("pcie_replays", or_unsupported(h.pcie_replays, u64));
  line("clock_event_reasons", or_unsupported(h.clock_event_reasons, [](std::uint64_t v) {
         char buffer[24];
         std::snprintf(buffer, sizeof buffer, "0x%llx", static_cast<unsigned long long>(v));
         return std::string(buffer);
       }));
  auto integer = [](int v) { return std::to_string(v); };
  line("temperature_c", or_unsupported(h.temperature_c, integer));
  line("slowdown_temperature_c", or_unsupported(h.slowdown_temperature_c, integer));
  line("power_w", or_unsupported(h.power_w, number));
  line("power_limit_w", or_unsupported(h.power_limit_w, number));
  line("persistence_mode", or_unsupported(h.persistence_mode, yes_no));
  line("mig_enabled", or_unsupported(h.mig_enabled, yes_no));
  line("mig_pending_change", or_unsupported(h.mig_pending_change, yes_no));
}

void write_gpu(std::ostringstream& y, const ReplayGpu& g) {
  const GpuInfo& i = g.info;
  char device[16];
  std::snprintf(device, sizeof device, "0x%04x", i.pci_device_id & 0xffffu);
  y << "    - index: " << i.index << "\n"
    << "      uuid: " << yaml_quoted(i.uuid) << "\n"
    << "      name: " << yaml_quoted(i.name) << "\n"
    << "      pci_bus_id: " << yaml_quoted(i.pci_bus_id) << "\n"
    << "      pci_device_id: \"" << device << "\"\n"
    << "      compute_capability: \"" << i.cc_major << "." << i.cc_minor << "\"\n"
    << "      memory_total_bytes: " << i.memory_total_bytes << "\n"
    << "      numa_node: " << i.numa_node << "\n"
    << "      nvlink_links_active: " << i.nvlink_links_active << "\n";
  if (g.health) write_health(y, "health", *g.health);
  if (g.health_under_load) write_health(y, "health_under_load", *g.health_under_load);
  if (g.mig.empty()) return;
  y << "      mig_devices:\n";
  for (const MigDevice& m : g.mig) {
    y << "        - {uuid: " << yaml_quoted(m.uuid) << ", gpu_instance_id: " << m.gpu_instance_id
      << ", compute_instance_id: " << m.compute_instance_id << ", profile: " << yaml_quoted(m.profile)
      << ", memory_bytes: " << m.memory_bytes << ", sm_count: " << m.sm_count
      << ", gpu_instance_slices: " << m.gpu_instance_slices << "}\n";
  }
}

void write_measurements(std::ostringstream& y, int gpu, const std::string& mig, const ReplayMeasurements& m) {
  y << "    - gpu: " << gpu << "\n";
  if (!mig.empty()) y << "      mig: " << yaml_quoted(mig) << "\n";
  if (m.compute_mismatches) y << "      compute_mismatches: " << *m.compute_mismatches << "\n";
  if (m.memtest) {
    const MemtestResult& t = *m.memtest;
    y << "      memtest: {bytes_tested: " << t.bytes_tested << ", errors: " << t.errors;
    if (t.errors > 0)
      y << ", first_error_offset: " << t.first_error_offset << ", expected: " << hex64(t.expected) << ", actual: " << hex64(t.actual);
    y << ", patterns: " << text_list(t.patterns) << ", truncated_by_deadline: " << yes_no(t.truncated_by_deadline) << "}\n";
  }
  if (m.gemm_consistency) {
    const ConsistencyResult& c = *m.gemm_consistency;
    std::string digests;
    for (auto d : c.result_digests) digests += (digests.empty() ? "" : ", ") + hex64(d);
    y << "      gemm_consistency: {digests: [" << digests << "]";
    if (c.has_reference) y << ", reference: " << hex64(c.reference_digest);
    y << ", engine: " << yaml_quoted(c.engine) << "}\n";
  }
  if (m.hbm_bandwidth) y << "      hbm_bandwidth: " << samples(*m.hbm_bandwidth) << "\n";
  if (m.h2d_bandwidth) y << "      h2d_bandwidth: " << samples(*m.h2d_bandwidth) << "\n";
  if (m.d2h_bandwidth) y << "      d2h_bandwidth: " << samples(*m.d2h_bandwidth) << "\n";
  if (m.has_gemm_tflops && !m.gemm_tflops.empty()) {
    y << "      gemm_tflops:\n";
    for (const auto& [dtype, s] : m.gemm_tflops) y << "        " << dtype << ": " << or_unsupported(s, samples) << "\n";
  }
  if (m.cc_evidence) {
    const CcEvidence& e = *m.cc_evidence;
    y << "      cc_evidence:\n"
      << "        report: " << yaml_quoted(hex_bytes(e.report)) << "\n"
      << "        cert_chain: " << yaml_quoted(e.cert_chain) << "\n"
      << "        nonce: " << yaml_quoted(hex_bytes(e.nonce)) << "\n";
    if (!e.vbios_version.empty()) y << "        vbios_version: " << yaml_quoted(e.vbios_version) << "\n";
  }
}

void write_p2p(std::ostringstream& y, const ReplayRecording& r) {
  const Samples* first = nullptr;
  for (const auto& [pair, s] : r.p2p)
    if (s && first == nullptr) first = &*s;
  y << "  p2p:\n"
    << "    unit: \"GB/s\"\n"
    << "    engine: " << yaml_quoted(first ? first->engine : std::string("gpuenv")) << "\n"
    << "    data_verified: " << yes_no(first != nullptr && first->data_verified) << "\n"
    << "    matrix:\n";
  const int n = static_cast<int>(r.gpus.size());
  for (int src = 0; src < n; ++src) {
    std::string row;
    for (int dst = 0; dst < n; ++dst) {
      std::string cell = "~";
      auto it = r.p2p.find({src, dst});
      if (src != dst && it != r.p2p.end()) {
        cell = "unsupported";
        if (it->second) {
          cell.clear();
          for (double v : it->second->values) cell += (cell.empty() ? "" : ", ") + number(v);
          cell = "[" + cell + "]";
        }
      }
      row += (row.empty() ? "" : ", ") + cell;
    }
    y << "      - [" << row << "]\n";
  }
}

void write_faults(std::ostringstream& y, const ReplayRecording& r) {
  std::string hang, error;
  for (const auto& [key, f] : r.faults) {
    const std::string gpu = key.first >= 0 ? "gpu: " + std::to_string(key.first) + ", " : std::string();
    if (f.hang) {
      hang += "      - {" + gpu + "method: " + key.second + "}\n";
    } else {
      error += "      - {" + gpu + "method: " + key.second + ", message: " + yaml_quoted(f.message) + ", id: " + yaml_quoted(f.id) + "}\n";
    }
  }
  if (hang.empty() && error.empty()) return;
  y << "  faults:\n";
  if (!hang.empty()) y << "    hang:\n" << hang;
  if (!error.empty()) y << "    error:\n" << error;
}

}  // namespace

std::string render_replay(const ReplayRecording& recording, std::string_view header) {
  std::ostringstream y;
  std::istringstream lines{std::string(header)};
  for (std::string line; std::getline(lines, line);) {
    // A comment ends at any line break YAML knows (\r too): control characters never reach the file.
    for (char& c : line)
      if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
    y << "#" << (line.empty() ? "" : " ") << line << "\n";
  }
  y << "schema: gpuenv-replay-v1\ninventory:\n";
  write_driver(y, recording.driver);
  y << "  gpus:" << (recording.gpus.empty() ? " []" : "") << "\n";
  for (const ReplayGpu& g : recording.gpus) write_gpu(y, g);
  std::ostringstream scenario;
  if (!recording.measurements.empty()) {
    scenario << "  measurements:\n";
    for (const auto& [key, m] : recording.measurements) write_measurements(scenario, key.first, key.second, m);
  }
  if (recording.has_p2p && !recording.gpus.empty()) write_p2p(scenario, recording);
  if (recording.has_nccl) scenario << "  nccl_allreduce: " << or_unsupported(recording.nccl, samples) << "\n";
  write_faults(scenario, recording);
  if (!scenario.str().empty()) y << "scenario:\n" << scenario.str();
  return y.str();
}

}  // namespace gpuenv::validate
