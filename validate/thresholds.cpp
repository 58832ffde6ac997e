#include "validate/thresholds.hpp"

#include <yaml-cpp/yaml.h>

#include <array>
#include <charconv>
#include <cmath>
#include <optional>
#include <set>
#include <sstream>
#include <utility>

#include "base/text.hpp"
#include "base/yaml_guard.hpp"
#include "base/yaml_reader.hpp"

namespace gpuenv::validate {
namespace {

constexpr std::string_view k_schema = "gpuenv-thresholds-v1";
constexpr std::size_t k_max_bytes = 1u << 20;  // the shipped table is ~20 KB
constexpr std::size_t k_max_depth = 64;        // the guard counts indentation columns, and sources are indented
constexpr std::string_view k_doc_hint = "see docs/thresholds.md for the format";

/// A metric gpuenv measures, its canonical unit and the range a real GPU's figure can fall in. Each range spans
/// at most a few thousand times its lower bound, so a value written in a unit 1000x off lands outside it.
struct MetricInfo {
  std::string_view key;
  std::string_view unit;
  double min;
  double max;
};

constexpr std::array<MetricInfo, 9> k_metrics = {{
    {"hbm_bandwidth", "GB/s", 50, 20000},  // T4 GDDR6 ~0.3 TB/s to beyond B300's 8 TB/s
    {"h2d_bandwidth", "GB/s", 1, 1000},    // PCIe Gen3 x4 to NVLink-C2C (450 GB/s per direction on GH200)
    {"d2h_bandwidth", "GB/s", 1, 1000},
    {"p2p_bandwidth", "GB/s", 2, 4000},   // PCIe Gen3 x8 to NVLink 5 (900 GB/s per direction)
    {"nccl_allreduce", "GB/s", 2, 4000},  // bus bandwidth
    {"gemm_tflops.bf16", "TFLOPS", 5, 10000},
    {"gemm_tflops.fp16", "TFLOPS", 5, 10000},
    {"gemm_tflops.tf32", "TFLOPS", 2, 5000},
    {"gemm_tflops.fp64", "TFLOPS", 0.05, 200},  // T4's ~0.25 TFLOPS to B200's ~40
}};

/// A unit accepted in the file and its factor to the canonical unit of its quantity.
struct UnitInfo {
  std::string_view name;
  std::string_view canonical;
  double factor;
};

constexpr std::array<UnitInfo, 6> k_threshold_units = {{
    {"GB/s", "GB/s", 1},
    {"SMs", "SMs", 1},  // sm_count only
    {"TB/s", "GB/s", 1000},
    {"MB/s", "GB/s", 0.001},
    {"TFLOPS", "TFLOPS", 1},
    {"GFLOPS", "TFLOPS", 0.001},
}};

const MetricInfo* metric_info(std::string_view key) {
  for (const auto& m : k_metrics) {
    if (m.key == key) return &m;
  }
  return nullptr;
}

const UnitInfo* unit_info(std::string_view name) {
  for (const auto& u : k_threshold_units) {
    if (u.name == name) return &u;
  }
  return nullptr;
}

std::string format_number(double v) {
  std::ostringstream out;
  out.precision(6);
  out << v;
  return out.str();
}

std::string pci_id_text(std::uint32_t id) {
  constexpr std::string_view k_hex = "0123456789abcdef";
  std::string out = "0x";
  for (int shift = 12; shift >= 0; shift -= 4) out += k_hex[(id >> shift) & 0xfu];
  return out;
}

std::string known_metrics() {
  std::string out;
  for (const auto& m : k_metrics) out += (out.empty() ? "" : ", ") + std::string(m.key);
  return out;
}

std::string units_of(std::string_view canonical) {
  std::string out;
  for (const auto& u : k_threshold_units) {
    if (u.canonical == canonical) out += (out.empty() ? "" : ", ") + std::string(u.name);
  }
  return out;
}

std::string trim(const std::string& s) { return std::string(text::trim(s)); }

/// Reads the thresholds document node by node with the shared accessors; every failure is an Error at the offending
/// node's position.
class Parser : private YamlReader {
 public:
  explicit Parser(const std::string& origin)
      : YamlReader({origin, ErrorKind::spec, "thresholds", std::string(k_doc_hint)}) {}

  Result<ThresholdTable> table(const YAML::Node& root) {
    GPUENV_TRY(top, map(root, "thresholds", {"schema", "fail_fraction", "node_tolerance", "derived", "gpus"}));
    ThresholdTable out;
    bool have_schema = false;
    bool have_gpus = false;
    for (const auto& [key, value] : top) {
      const std::string k = key.Scalar();
      if (k == "schema") {
        GPUENV_TRY(schema, scalar(value, "schema"));
        if (schema != k_schema) {
          return error(value, "schema",
                       "schema is '" + schema + "'; this gpuenv reads '" + std::string(k_schema) + "'",
                       "write 'schema: " + std::string(k_schema) + "' or upgrade gpuenv");
        }
        have_schema = true;
      } else if (k == "fail_fraction") {
        GPUENV_TRY(f, fail_fraction(value, "fail_fraction"));
        out.fail_fraction = f;
      } else if (k == "node_tolerance") {
        GPUENV_TRY(t, number(value, "node_tolerance"));
        if (!(t >= 0 && t < 1)) {
          return error(value, "bad_fraction",
                       "node_tolerance is " + format_number(t) + "; it must be at least 0 and below 1",
                       "0.10 fails a GPU more than 10% below the node's mean");
        }
        out.node_tolerance = t;
      } else if (k == "derived") {
        GPUENV_TRY(rules, derived_rules(value));
        out.derived = std::move(rules);
      } else if (k == "gpus") {
        GPUENV_TRY(gpus, gpu_list(value));
        out.gpus = std::move(gpus);
        have_gpus = true;
      }
    }
    if (!have_schema) {
      return error(root, "missing_key", "the file has no 'schema'",
                   "start it with 'schema: " + std::string(k_schema) + "'");
    }
    if (!have_gpus) return error(root, "missing_key", "the file has no 'gpus' list");
    return out;
  }

 private:
  Result<double> fail_fraction(const YAML::Node& n, const std::string& what) const {
    GPUENV_TRY(f, number(n, what));
    if (!(f > 0 && f <= 1)) {
      return error(n, "bad_fraction", what + " is " + format_number(f) + "; it must be above 0 and at most 1",
                   "0.75 fails a measurement below 75% of the reference");
    }
    return f;
  }

  Result<DerivedRules> derived_rules(const YAML::Node& n) const {
    GPUENV_TRY(entries, map(n, "derived", {"host_device", "host_device_confidential", "gemm", "nvlink", "rdma_nic"}));
    DerivedRules out;
    for (const auto& [key, value] : entries) {
      const std::string k = key.Scalar();
      if (k == "host_device_confidential") {
        GPUENV_TRY(ref, reference(value, *metric_info("h2d_bandwidth")));
        out.host_device_confidential = std::move(ref);
      } else if (k == "host_device") {
        GPUENV_TRY(rule, map(value, "derived.host_device", {"fraction", "source", "pcie_generations"}));
        GPUENV_TRY(f, sourced_fraction(value, "derived.host_device"));
        out.host_device = std::move(f);
        for (const auto& [rk, rv] : rule) {
          if (rk.Scalar() != "pcie_generations") continue;
          GPUENV_TRY(gens, pcie_generations(rv));
          out.pcie = std::move(gens);
        }
      } else {
        GPUENV_TRY(rule, map(value, "derived." + k, {"fraction", "source"}));
        (void)rule;
        GPUENV_TRY(f, sourced_fraction(value, "derived." + k));
        (k == "gemm" ? out.gemm : k == "nvlink" ? out.nvlink : out.rdma_nic) = std::move(f);
      }
    }
    return out;
  }

  // `fraction` (0 < f <= 1) and its non-empty `source` under a rule.
  Result<SourcedFraction> sourced_fraction(const YAML::Node& n, const std::string& what) const {
    GPUENV_TRY(f_node, field(n, "fraction"));
    GPUENV_TRY(f, fail_fraction(f_node, what + ".fraction"));
    GPUENV_TRY(source_node, field(n, "source"));
    GPUENV_TRY(source, text(source_node, what + ".source"));
    if (trim(source).empty()) {
      return error(n, "missing_source", what + " has no source",
                   "say why the fraction was chosen, or where it comes from");
    }
    return SourcedFraction{f, trim(source)};
  }

  Result<std::vector<PcieGeneration>> pcie_generations(const YAML::Node& n) const {
    GPUENV_TRY(items, list(n, "pcie_generations"));
    std::vector<PcieGeneration> out;
    for (const auto& item : items) {
      GPUENV_TRY(entries, map(item, "pcie_generations item", {"gen", "transfer_rate_gts", "encoding", "source"}));
      (void)entries;
      PcieGeneration g;
      GPUENV_TRY(gen_node, field(item, "gen"));
      GPUENV_TRY(gen, integer(gen_node, "gen"));
      GPUENV_TRY(rate_node, field(item, "transfer_rate_gts"));
      GPUENV_TRY(rate, number(rate_node, "transfer_rate_gts"));
      GPUENV_TRY(enc_node, field(item, "encoding"));
      GPUENV_TRY(encoding, scalar(enc_node, "encoding"));
      GPUENV_TRY(source_node, field(item, "source"));
      GPUENV_TRY(source, text(source_node, "source"));
      if (gen < 1 || gen > 7 || !(rate > 0 && rate <= 256)) {
        return error(item, "bad_value", "PCIe generation " + std::to_string(gen) + " at " + format_number(rate) +
                                            " GT/s is not a PCIe link", "gen is 1..7, transfer_rate_gts as PCI-SIG gives it (32 for Gen5)");
      }
      if (encoding != "8b/10b" && encoding != "128b/130b") {
        return error(enc_node, "bad_value", "unknown PCIe encoding '" + encoding + "'", "write 8b/10b or 128b/130b");
      }
      if (trim(source).empty()) return error(item, "missing_source", "PCIe Gen" + std::to_string(gen) + " has no source");
      for (const auto& seen : out)
        if (seen.gen == gen) return error(item, "duplicate_key", "PCIe Gen" + std::to_string(gen) + " is listed twice");
      out.push_back({gen, rate, encoding, encoding == "8b/10b" ? 0.8 : 128.0 / 130.0, trim(source)});
    }
    return out;
  }

  Result<std::vector<GpuThresholds>> gpu_list(const YAML::Node& n) {
    if (!n.IsSequence()) {
      return error(n, "wrong_type", "'gpus' must be a list, found " + yaml_type_name(n),
                   "write one '- model: ...' entry per GPU model");
    }
    std::vector<GpuThresholds> out;
    std::map<std::uint32_t, std::string> owner;  // PCI device id -> model
    std::set<std::string> models;
    for (const auto& item : n) {
      GPUENV_TRY(gpu, gpu_entry(item));
      if (!models.insert(gpu.model).second) {
        return error(item, "duplicate_model", "model '" + gpu.model + "' is listed twice",
                     "merge the two entries");
      }
      for (std::size_t i = 0; i < gpu.pci_device_ids.size(); ++i) {
        const std::uint32_t id = gpu.pci_device_ids[i];
        const auto [it, inserted] = owner.emplace(id, gpu.model);
        if (!inserted) {
          const std::string in = it->second == gpu.model ? "twice under '" + gpu.model + "'"
                                                         : "under '" + it->second + "' and '" + gpu.model + "'";
          return error(item["pci_device_ids"][i], "duplicate_pci_id",
                       "PCI device id " + pci_id_text(id) + " is listed " + in,
                       "a device id names one model; keep it under the model whose references it should get");
        }
      }
      out.push_back(std::move(gpu));
    }
    return out;
  }

  Result<GpuThresholds> gpu_entry(const YAML::Node& n) {
    GPUENV_TRY(entries, map(n, "gpus item",
                            {"model", "pci_device_ids", "fail_fraction", "references", "dense_peaks", "nvlink_link",
                             "sm_count"}));
    GpuThresholds gpu;
    bool have_ids = false;
    for (const auto& [key, value] : entries) {
      const std::string k = key.Scalar();
      if (k == "model") {
        GPUENV_TRY(model, scalar(value, "model"));
        gpu.model = trim(model);
      } else if (k == "pci_device_ids") {
        GPUENV_TRY(ids, pci_ids(value));
        gpu.pci_device_ids = std::move(ids);
        have_ids = true;
      } else if (k == "fail_fraction") {
        GPUENV_TRY(f, fail_fraction(value, "fail_fraction"));
        gpu.fail_fraction = f;
      } else if (k == "references") {
        GPUENV_TRY(refs, references(value));
        gpu.references = std::move(refs);
      } else if (k == "dense_peaks") {
        GPUENV_TRY(peaks, references(value));
        for (const auto& [metric, peak] : peaks) {
          if (metric.rfind("gemm_tflops.", 0) != 0) {
            return error(value[metric], "unknown_metric", "'dense_peaks' holds GEMM peaks only, not '" + metric + "'",
                         "list gemm_tflops.<type> entries with the datasheet's dense figure");
          }
        }
        gpu.dense_peaks = std::move(peaks);
      } else if (k == "nvlink_link") {
        constexpr MetricInfo k_link{"nvlink_link", "GB/s", 1, 500};  // one link, one direction
        GPUENV_TRY(link, reference(value, k_link));
        gpu.nvlink_link = std::move(link);
      } else if (k == "sm_count") {
        constexpr MetricInfo k_sms{"sm_count", "SMs", 1, 1000};  // the whole GPU's streaming multiprocessors
        GPUENV_TRY(sms, reference(value, k_sms));
        gpu.sm_count = std::move(sms);
      }
    }
    if (gpu.model.empty()) {
      return error(n, "missing_key", "a 'gpus' entry has no 'model'", "name the model, e.g. \"H200 SXM 141GB\"");
    }
    if (!have_ids) {
      return error(n, "missing_key", "model '" + gpu.model + "' has no 'pci_device_ids'",
                   "list its PCI device ids as in recipes/catalog/gpus.yaml, e.g. [\"0x2335\"]");
    }
    return gpu;
  }

  Result<std::vector<std::uint32_t>> pci_ids(const YAML::Node& n) const {
    if (!n.IsSequence() || n.size() == 0) {
      return error(n, "wrong_type", "'pci_device_ids' must be a non-empty list, found " + yaml_type_name(n),
                   "write them as [\"0x2335\"]");
    }
    std::vector<std::uint32_t> out;
    for (const auto& item : n) {
      const std::string text = item.IsScalar() ? item.Scalar() : std::string();
      std::uint32_t id = 0;
      bool ok = text.size() == 6 && text[0] == '0' && (text[1] == 'x' || text[1] == 'X');
      if (ok) {
        const char* end = text.data() + text.size();
        const auto [ptr, ec] = std::from_chars(text.data() + 2, end, id, 16);
        ok = ec == std::errc() && ptr == end;
      }
      if (!ok) {
        return error(item, "bad_pci_id", "'" + text + "' is not a PCI device id",
                     "write 0x and four hex digits, e.g. \"0x2335\" (the device id, without the vendor 10de)");
      }
      out.push_back(id);
    }
    return out;
  }

  Result<std::map<std::string, Reference>> references(const YAML::Node& n) const {
    GPUENV_TRY(entries, map(n, "references", {}));
    std::map<std::string, Reference> out;
    for (const auto& [key, value] : entries) {
      const std::string metric = key.Scalar();
      const MetricInfo* info = metric_info(metric);
      if (info == nullptr) {
        return error(key, "unknown_metric", "unknown metric '" + metric + "'",
                     "gpuenv measures: " + known_metrics());
      }
      GPUENV_TRY(ref, reference(value, *info));
      out.emplace(metric, std::move(ref));
    }
    return out;
  }

  Result<Reference> reference(const YAML::Node& n, const MetricInfo& metric) const {
    const std::string what = "reference '" + std::string(metric.key) + "'";
    GPUENV_TRY(entries, map(n, "references." + std::string(metric.key), {"value", "unit", "source"}));
    // A default-constructed YAML::Node is a defined null, so presence is kept in optionals.
    std::optional<YAML::Node> value_node, unit_node, source_node;
    for (const auto& [key, value] : entries) {
      const std::string k = key.Scalar();
      if (k == "value") value_node = value;
      if (k == "unit") unit_node = value;
      if (k == "source") source_node = value;
    }
    if (!source_node || !source_node->IsScalar() || trim(source_node->Scalar()).empty()) {
      return error(source_node ? *source_node : n, "missing_source", what + " has no source",
                   "every reference says where it comes from: a URL, or repository + path + what it says, or "
                   "\"measured on <machine> with <tool>\"");
    }
    if (!value_node) return error(n, "missing_key", what + " has no 'value'");
    if (!unit_node) {
      return error(n, "missing_key", what + " has no 'unit'", "say the unit: " + units_of(metric.unit));
    }
    GPUENV_TRY(unit_text, scalar(*unit_node, "unit"));
    const UnitInfo* unit = unit_info(unit_text);
    if (unit == nullptr) {
      std::string hint = "accepted for " + std::string(metric.key) + ": " + units_of(metric.unit);
      if (unit_text.find("iB") != std::string::npos) {
        hint += "; binary units are not accepted: convert (1 GiB/s = 1.073741824 GB/s) and say so in the source";
      }
      return error(*unit_node, "unknown_unit", "unknown unit '" + unit_text + "' in " + what, hint);
    }
    if (unit->canonical != metric.unit) {
      return error(*unit_node, "wrong_unit",
                   what + " is in " + std::string(unit->name) + ", a unit of " +
                       (unit->canonical == "GB/s" ? "bandwidth" : unit->canonical == "SMs" ? "SM count" : "compute throughput") + "; " +
                       std::string(metric.key) + " is measured in " + std::string(metric.unit),
                   "accepted for " + std::string(metric.key) + ": " + units_of(metric.unit));
    }
    GPUENV_TRY(raw, number(*value_node, "value"));
    if (!(raw > 0)) {
      return error(*value_node, "bad_value", what + " is " + format_number(raw) + "; it must be above 0",
                   "a reference is a figure a healthy GPU reaches");
    }
    const double canonical = raw * unit->factor;
    if (canonical < metric.min || canonical > metric.max) {
      const std::string range = format_number(metric.min) + ".." + format_number(metric.max) + " " +
                                std::string(metric.unit);
      std::string probably;
      for (const auto& alt : k_threshold_units) {
        if (alt.canonical != metric.unit || alt.name == unit->name) continue;
        const double v = raw * alt.factor;
        if (v >= metric.min && v <= metric.max) probably = std::string(alt.name);
      }
      std::string message = what + " = " + format_number(raw) + " " + unit_text;
      if (unit->factor != 1) message += " (" + format_number(canonical) + " " + std::string(metric.unit) + ")";
      message += " is outside the plausible range " + range;
      std::string hint;
      if (!probably.empty()) {
        message += "; the value was probably meant in " + probably;
        hint = "a unit slip (DCGM shipped an H200 floor of 2333 'MB/s' meant as GB/s): write unit: " + probably +
               " if that is what the source gives";
      } else {
        hint = "check the figure and its unit against the source";
      }
      return error(*value_node, "implausible_value", message, hint);
    }
    return Reference{canonical, std::string(metric.unit), trim(source_node->Scalar()), {}};
  }

};

}  // namespace

const GpuThresholds* ThresholdTable::find(std::uint32_t pci_device_id) const {
  for (const auto& gpu : gpus) {
    for (const std::uint32_t id : gpu.pci_device_ids) {
      if (id == pci_device_id) return &gpu;
    }
  }
  return nullptr;
}

std::string canonical_unit(std::string_view metric) {
  const MetricInfo* info = metric_info(metric);
  return info == nullptr ? std::string() : std::string(info->unit);
}

Result<ThresholdTable> parse_thresholds(std::string_view yaml_text, std::string_view origin) {
  const std::string path(origin);
  if (auto st = gpuenv::check_yaml_bytes(yaml_text, path, k_max_bytes, k_max_depth); !st) {
    return std::move(st).error().while_("reading the GPU thresholds");
  }
  try {
    GPUENV_TRY(root, load_yaml(yaml_text, path, ErrorKind::spec, "thresholds.yaml_syntax", "check indentation, quotes and colons around this position"));
    if (!root.IsDefined() || root.IsNull()) {
      return make_error(ErrorKind::spec, "thresholds.empty", "the thresholds file has no content", path,
                        std::string(k_doc_hint));
    }
    return Parser(path).table(root);
  } catch (const std::exception& e) {  // yaml-cpp node access should not throw here; never let it escape
    return make_error(ErrorKind::internal, "thresholds.unexpected", std::string("while reading thresholds: ") + e.what(),
                      path, "report this as a bug with the file attached");
  }
}

}  // namespace gpuenv::validate
