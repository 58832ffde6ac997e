#include "validate/checks/judge.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>

#include "resolver/version.hpp"

namespace gpuenv::validate {
namespace {

std::string percent(double fraction) { return fixed(fraction * 100.0, 0) + "%"; }

}  // namespace

std::string fixed(double value, int decimals) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.*f", decimals, value);
  return buffer;
}

std::string measured(double value) {
  if (value == 0 || std::fabs(value) >= 1 || !std::isfinite(value)) return fixed(value, 1);
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.3g", value);  // 0.00123, not 0.0: a slow measurement still shows
  return buffer;
}

std::optional<SampleStats> sample_stats(std::vector<double> values) {
  if (values.empty()) return std::nullopt;
  std::sort(values.begin(), values.end());
  SampleStats stats;
  stats.count = values.size();
  stats.min = values.front();
  stats.max = values.back();
  const std::size_t mid = values.size() / 2;
  stats.median = values.size() % 2 == 1 ? values[mid] : (values[mid - 1] + values[mid]) / 2.0;
  return stats;
}

std::optional<std::string> samples_problem(const Samples& samples) {
  if (samples.values.size() < k_min_samples)
    return std::to_string(samples.values.size()) + " sample(s), at least " + std::to_string(k_min_samples) +
           " are needed for a median";
  if (!samples.data_verified) return std::string("the data was not verified after each sample");
  for (std::size_t i = 0; i < samples.values.size(); ++i) {
    const double v = samples.values[i];
    if (!std::isfinite(v) || v <= 0)
      return "sample " + std::to_string(i + 1) + " is " + fixed(v, 3) + ", not a positive finite number";
  }
  return std::nullopt;
}

ReferenceRule find_reference(const ThresholdTable* table, std::uint32_t pci_device_id, std::string_view metric) {
  ReferenceRule rule;
  if (table == nullptr) return rule;
  rule.fail_fraction = table->fail_fraction;
  const GpuThresholds* model = table->find(pci_device_id);
  if (model == nullptr) return rule;
  rule.model = model->model;
  if (model->fail_fraction) rule.fail_fraction = *model->fail_fraction;
  auto it = model->references.find(std::string(metric));
  if (it != model->references.end()) rule.reference = it->second;
  return rule;
}

namespace {

// The gpuenv rule's fraction of a figure as a derived reference.
Reference derived(double value, std::string unit, const SourcedFraction& fraction, const std::string& of,
                  const std::string& source) {
  return Reference{fraction.value * value, std::move(unit), source + "; fraction: " + fraction.source,
                   fixed(fraction.value, 2) + " x " + of};
}

}  // namespace

ReferenceRule host_device_reference(const ThresholdTable* table, std::uint32_t pci_device_id, std::string_view metric,
                                    const std::optional<PcieLink>& link, std::string_view cc_state) {
  ReferenceRule rule = find_reference(table, pci_device_id, metric);
  if (cc_state == "on" || cc_state == "devtools") {
    // Copies go through encrypted bounce buffers, which the host's CPU encrypts: a model's own (non-CC) figure and
    // the PCIe rule do not apply; the measured CC figure does.
    rule.reference.reset();
    if (table != nullptr && table->derived.host_device_confidential) {
      rule.reference = *table->derived.host_device_confidential;
      rule.reference->basis = "confidential computing: encrypted bounce buffers";
    } else {
      rule.why_none = "confidential computing is on, so host copies go through encrypted bounce buffers, and the "
                      "thresholds have no host_device_confidential figure";
    }
    return rule;
  }
  if (rule.reference || table == nullptr) return rule;
  if (!table->derived.host_device) {
    rule.why_none = "the thresholds have no host_device rule";
    return rule;
  }
  if (!link || link->max_gen <= 0 || link->max_width <= 0) {
    rule.why_none = "the GPU reported no PCIe link generation and width";
    return rule;
  }
  for (const auto& g : table->derived.pcie) {
    if (g.gen != link->max_gen) continue;
    const double payload = g.transfer_rate_gts * link->max_width * g.efficiency / 8.0;  // GB/s per direction
    const std::string of = "PCIe Gen" + std::to_string(g.gen) + " x" + std::to_string(link->max_width) +
                           " payload " + fixed(payload, 1) + " GB/s";
    rule.reference = derived(payload, "GB/s", *table->derived.host_device, of, g.source);
    return rule;
  }
  rule.why_none = "the thresholds have no sourced rate for PCIe Gen" + std::to_string(link->max_gen);
  return rule;
}

ReferenceRule gemm_reference(const ThresholdTable* table, std::uint32_t pci_device_id, std::string_view metric) {
  ReferenceRule rule = find_reference(table, pci_device_id, metric);
  if (rule.reference || table == nullptr) return rule;
  const GpuThresholds* model = table->find(pci_device_id);
  if (model == nullptr) return rule;
  auto peak = model->dense_peaks.find(std::string(metric));
  if (peak == model->dense_peaks.end()) {
    rule.why_none = "no sourced dense peak for " + model->model + " and " + std::string(metric);
  } else if (!table->derived.gemm) {
    rule.why_none = "the thresholds have no gemm rule";
  } else {
    rule.reference = derived(peak->second.value, peak->second.unit, *table->derived.gemm,
                             "dense peak " + fixed(peak->second.value, 1) + " " + peak->second.unit, peak->second.source);
  }
  return rule;
}

ReferenceRule nvlink_reference(const ThresholdTable* table, std::uint32_t pci_device_id, std::string_view metric,
                               int links, bool nvswitch) {
  ReferenceRule rule = find_reference(table, pci_device_id, metric);
  if (rule.reference || table == nullptr) return rule;
  const GpuThresholds* model = table->find(pci_device_id);
  if (model == nullptr) return rule;
  if (links <= 0) {
    rule.why_none = "no active NVLink link (peer traffic goes over PCIe)";
  } else if (!nvswitch) {
    rule.why_none = "direct NVLink without NVSwitch: the links to each peer are not reported";
  } else if (!model->nvlink_link) {
    rule.why_none = "no sourced NVLink link rate for " + model->model;
  } else if (!table->derived.nvlink) {
    rule.why_none = "the thresholds have no nvlink rule";
  } else {
    const double total = links * model->nvlink_link->value;
    rule.reference = derived(total, "GB/s", *table->derived.nvlink,
                             std::to_string(links) + " NVLink links x " + fixed(model->nvlink_link->value, 1) +
                                 " GB/s = " + fixed(total, 1) + " GB/s per direction",
                             model->nvlink_link->source);
  }
  return rule;
}

int mig_memory_slices(const MigDevice& device) {
  if (device.memory_bytes == 0 || device.parent_memory_bytes == 0) return 0;
  const double eighths = static_cast<double>(k_mig_memory_slices) * static_cast<double>(device.memory_bytes) /
                         static_cast<double>(device.parent_memory_bytes);
  return std::clamp(static_cast<int>(std::lround(eighths)), 1, k_mig_memory_slices);
}

ReferenceRule mig_scaled_rule(ReferenceRule rule, const ThresholdTable* table, std::uint32_t pci_device_id,
                              const MigDevice& device, std::string_view metric, int gi_compute_instances) {
  if (!rule.reference) return rule;
  const Reference whole = *rule.reference;
  const std::string whole_text = (rule.model.empty() ? std::string("the GPU") : rule.model) + " " +
                                 std::string(metric) + " " + fixed(whole.value, 1) + " " + whole.unit +
                                 (whole.basis.empty() ? std::string() : " (" + whole.basis + ")");
  rule.reference.reset();
  const std::string instance = "MIG " + device.profile;
  if (metric == "hbm_bandwidth") {
    const int slices = mig_memory_slices(device);
    if (slices == 0) {
      rule.why_none = instance + " reports no memory size to scale the whole-GPU reference by";
      return rule;
    }
    const int sharing = std::max(gi_compute_instances, 1);
    const std::string share = std::to_string(slices) + "/" + std::to_string(k_mig_memory_slices);
    const std::string shared =
        sharing > 1 ? ", shared by " + std::to_string(sharing) + " compute instances of GI " +
                          std::to_string(device.gpu_instance_id) + " measured at once (1/" + std::to_string(sharing) +
                          " each)"
                    : std::string();
    rule.reference = Reference{whole.value * slices / k_mig_memory_slices / sharing, whole.unit,
                               whole.source + "; scale: " + k_mig_memory_slices_source,
                               share + " of " + whole_text + ": " + std::to_string(slices) + " of " +
                                   std::to_string(k_mig_memory_slices) + " memory slices (MIG user guide)" + shared};
    return rule;
  }
  if (metric.rfind("gemm_tflops.", 0) == 0) {
    const GpuThresholds* model = table ? table->find(pci_device_id) : nullptr;
    if (model == nullptr || !model->sm_count || device.sm_count <= 0) {
      rule.why_none = device.sm_count <= 0 ? instance + " reports no SM count to scale the whole-GPU reference by"
                                           : "the thresholds give no sm_count for " + rule.model +
                                                 " to scale the whole-GPU reference by";
      return rule;
    }
    const double whole_sms = model->sm_count->value;
    rule.reference = Reference{whole.value * device.sm_count / whole_sms, whole.unit,
                               whole.source + "; scale: " + model->sm_count->source,
                               std::to_string(device.sm_count) + "/" + fixed(whole_sms, 0) + " of " + whole_text +
                                   ": " + std::to_string(device.sm_count) + " of the GPU's " + fixed(whole_sms, 0) +
                                   " SMs"};
    return rule;
  }
  rule.why_none = std::string(metric) + " has no scale for a MIG instance";
  return rule;
}

ReferenceRule nic_reference(const ThresholdTable* table, double share_gbs, const std::string& basis) {
  ReferenceRule rule;
  // The reference is already the acceptance line (0.8 x the line rate, below the 0.96 NCCL's maintainers see on a
  // healthy fabric): a rank below it fails. The table's fail_fraction, meant for a model's measured peak, would let
  // a 400 Gb/s fabric pass at 30 GB/s, 60% of its rate.
  rule.fail_fraction = 1.0;
  if (share_gbs <= 0) {
    rule.why_none = "no active RDMA port to judge it by (" + basis + ")";
  } else if (!table || !table->derived.rdma_nic) {
    rule.why_none = "the thresholds have no rdma_nic rule";
  } else {
    rule.reference = derived(share_gbs, "GB/s", *table->derived.rdma_nic, basis + " = " + fixed(share_gbs, 1) + " GB/s per node",
                             "the ports' rate from sysfs (/sys/class/infiniband/*/ports/*/rate)");
  }
  return rule;
}

std::string unit_suffix(std::string_view unit) {
  if (unit == "GB/s") return "gbs";
  if (unit == "TFLOPS") return "tflops";
  std::string out;
  for (char c : unit) {
    if (std::isalnum(static_cast<unsigned char>(c))) out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return out.empty() ? std::string("value") : out;
}

const char* low_code(std::string_view unit) { return unit == "TFLOPS" ? "tflops_low" : "bandwidth_low"; }

namespace {

std::string unjudged_reason(const ReferenceRule& rule, std::string_view metric) {
  if (!rule.why_none.empty()) return rule.why_none;
  return "no reference for " + (rule.model.empty() ? std::string("this GPU") : rule.model) + " and " +
         std::string(metric);
}

}  // namespace

MetricJudgement judge_samples(std::string_view metric, const Samples& samples, const ReferenceRule& rule,
                              std::string_view prefix) {
  MetricJudgement out;
  const std::string p(prefix);
  const std::string suffix = unit_suffix(samples.unit);
  out.unit = samples.unit;
  out.metrics.push_back({p + "samples", static_cast<double>(samples.values.size()), "count"});

  if (auto problem = samples_problem(samples)) {
    out.status = CheckStatus::fail;
    out.code = "unverified";
    out.message = std::string(metric) + " not trusted: " + *problem;
    return out;
  }
  // samples_problem() guarantees at least k_min_samples values.
  const SampleStats stats = *sample_stats(samples.values);
  out.median = stats.median;
  out.metrics.push_back({p + "median_" + suffix, stats.median, samples.unit});
  out.metrics.push_back({p + "min_" + suffix, stats.min, samples.unit});
  out.metrics.push_back({p + "max_" + suffix, stats.max, samples.unit});
  std::string engine = engine_text(samples.engine, samples.library, {}, samples.passed_over);
  if (!engine.empty()) engine = ", " + engine;
  out.message = "median " + measured(stats.median) + " " + samples.unit + " (min " + measured(stats.min) + ", max " +
                measured(stats.max) + ", " + std::to_string(stats.count) + " samples" + engine + ")";

  if (!rule.reference) {
    out.status = CheckStatus::measured;
    out.code = "no_threshold";
    out.message += "; not judged: " + unjudged_reason(rule, metric);
    return out;
  }
  const Reference& ref = *rule.reference;
  if (!ref.unit.empty() && ref.unit != samples.unit) {
    out.status = CheckStatus::fail;
    out.code = "internal";
    out.message = std::string(metric) + " was measured in '" + samples.unit + "' but its reference is in '" +
                  ref.unit + "'";
    return out;
  }
  if (!(ref.value > 0)) {
    out.status = CheckStatus::fail;
    out.code = "internal";
    out.message = std::string(metric) + " has a reference of " + fixed(ref.value, 3) + ", which cannot be judged against";
    return out;
  }
  const double fraction = stats.median / ref.value;
  out.metrics.push_back({p + "reference_" + suffix, ref.value, samples.unit});
  out.metrics.push_back({p + "fraction_of_reference", fraction, "ratio"});
  out.message += "; " + percent(fraction) + " of the reference " + fixed(ref.value, 1) + " " + samples.unit +
                 (ref.basis.empty() ? std::string() : " (" + ref.basis + ")") + " for " + rule.model;
  if (fraction < rule.fail_fraction) {
    out.status = CheckStatus::fail;
    out.code = low_code(samples.unit);
    out.message += ", below the fail fraction of " + percent(rule.fail_fraction);
  }
  return out;
}

std::string engine_text(const std::string& engine, const std::string& library, const std::string& otherwise,
                        const std::string& passed_over) {
  std::string out = engine.empty() ? otherwise : engine;
  if (!library.empty()) out += " from " + library;
  if (!passed_over.empty()) out += " [passed over: " + passed_over + "]";
  return out;
}

std::vector<Outlier> node_outliers(const std::vector<double>& values, double tolerance) {
  std::vector<Outlier> out;
  if (values.size() < 2) return out;
  double sum = 0;
  for (double v : values) sum += v;
  const double mean = sum / static_cast<double>(values.size());
  const double floor = (1.0 - tolerance) * mean;
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (values[i] < floor) out.push_back({i, values[i], mean, floor});
  }
  return out;
}

int expected_pcie_replays_per_minute(int gen, int width) {
  if (gen <= 0 || width <= 0) return 0;
  // Line rate per lane in GT/s; 1e-12 errors per bit x rate x 1e9 x 60 s = rate x 0.06 per lane per minute.
  static constexpr double k_rate_gts[] = {2.5, 5.0, 8.0, 16.0, 32.0, 64.0};
  const int index = std::min(gen, 6) - 1;
  return static_cast<int>(std::ceil(k_rate_gts[index] / 1000.0 * 60.0 * width));
}

std::string cuda_version_text(int cuda_driver_version) {
  if (cuda_driver_version <= 0) return {};
  return std::to_string(cuda_driver_version / 1000) + "." + std::to_string((cuda_driver_version % 1000) / 10);
}

Verdict judge_driver_floor(std::string_view driver_version, std::string_view floor) {
  auto wanted = resolver::Version::parse(floor);
  if (!wanted)
    return {CheckStatus::fail, "lock_invalid", "the lock's driver floor '" + std::string(floor) + "' is not a version"};
  if (driver_version.empty())
    return {CheckStatus::warn, "driver_version_unknown", "the driver reported no version; the lock needs >= " + wanted->str()};
  auto have = resolver::Version::parse(driver_version);
  if (!have)
    return {CheckStatus::warn, "driver_version_unknown",
            "the driver's version '" + std::string(driver_version) + "' could not be read; the lock needs >= " +
                wanted->str()};
  if (*have < *wanted)
    return {CheckStatus::fail, "driver_too_old",
            "driver " + have->str() + " is older than the lock's floor " + wanted->str()};
  return {CheckStatus::pass, "", "driver " + have->str() + " >= the lock's floor " + wanted->str()};
}

Verdict judge_driver_cuda(int cuda_driver_version, std::string_view image_cuda, std::optional<bool> forward_compat) {
  auto image = resolver::Version::parse(image_cuda);
  if (!image)
    return {CheckStatus::fail, "lock_invalid", "the lock's CUDA version '" + std::string(image_cuda) + "' is not a version"};
  const std::string driver_text = cuda_version_text(cuda_driver_version);
  if (driver_text.empty())
    return {CheckStatus::warn, "driver_version_unknown",
            "the driver reported no CUDA version; the image uses CUDA " + image->str()};
  // The driver's CUDA version is major.minor; compare the image's at the same depth (12.4.1 runs on a 12.4 driver).
  const auto driver = resolver::Version::of({static_cast<std::uint32_t>(cuda_driver_version / 1000),
                                             static_cast<std::uint32_t>((cuda_driver_version % 1000) / 10)});
  const auto wanted = image->truncated(2);
  if (driver >= wanted)
    return {CheckStatus::pass, "", "driver supports CUDA " + driver_text + " >= the image's CUDA " + image->str()};
  if (forward_compat.value_or(false))
    return {CheckStatus::warn, "forward_compat_used",
            "driver supports CUDA " + driver_text + " < the image's CUDA " + image->str() +
                "; the image runs through forward compatibility (cuda-compat)"};
  return {CheckStatus::fail, "driver_cuda_too_old",
          "driver supports CUDA " + driver_text + " < the image's CUDA " + image->str() +
              (forward_compat.has_value() ? std::string(" and the image has no forward compatibility")
                                          : std::string(" and forward compatibility is not known to be present"))};
}

}  // namespace gpuenv::validate
