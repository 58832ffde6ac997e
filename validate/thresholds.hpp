#pragma once
// Per-GPU performance references (recipes/gpus/thresholds.yaml), keyed by PCI device id, with units checked when
// loaded. The default rule: a measurement below fail_fraction x the reference fails; a GPU below
// (1 - node_tolerance) x the node's mean fails. Where no reference exists the metric is reported unjudged.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.hpp"

namespace gpuenv::validate {

/// A known-good figure for one metric on one GPU model, or one derived from the hardware (`basis` says how).
struct Reference {
  double value = 0;    ///< in the metric's canonical unit (GB/s for bandwidths, TFLOPS for GEMM)
  std::string unit;    ///< the canonical unit
  std::string source;  ///< where the figure comes from (URL or "measured on ... with ...")
  std::string basis;   ///< for a derived reference, the derivation in short: "0.8 x PCIe Gen5 x16 payload 63.0 GB/s"
};

/// A fraction a derivation rule applies, with the reason it was chosen.
struct SourcedFraction {
  double value = 0;
  std::string source;
};

/// One PCIe generation's signalling, with its source.
struct PcieGeneration {
  int gen = 0;
  double transfer_rate_gts = 0;  ///< transfers per second per lane, in 1e9
  std::string encoding;          ///< "8b/10b" or "128b/130b"
  double efficiency = 0;         ///< payload bits per line bit: 0.8 or 128/130
  std::string source;
};

/// The rules that derive a reference from the hardware where no known-good figure is listed for a model
/// (docs/thresholds.md, "Derived references"). A rule that is absent derives nothing: the figure is MEASURED.
struct DerivedRules {
  /// h2d/d2h: fraction x the PCIe link's payload rate per direction (link's maximum generation and width).
  std::optional<SourcedFraction> host_device;
  std::vector<PcieGeneration> pcie;
  /// h2d/d2h with confidential computing on: copies go through encrypted bounce buffers (the CPU encrypts), so the
  /// PCIe rule and a model's own reference do not apply; this measured figure does, for every model.
  std::optional<Reference> host_device_confidential;
  /// gemm_tflops.<type>: fraction x the model's datasheet dense peak for the type.
  std::optional<SourcedFraction> gemm;
  /// p2p_bandwidth, nccl_allreduce: fraction x active NVLink links x the model's per-link rate per direction.
  std::optional<SourcedFraction> nvlink;
  /// nccl_allreduce across nodes (--multi-node): fraction x the active RDMA ports' link rate per NCCL rank.
  std::optional<SourcedFraction> rdma_nic;
};

/// The references of one GPU model.
struct GpuThresholds {
  std::string model;                            ///< "H200 SXM 141GB"
  std::vector<std::uint32_t> pci_device_ids;    ///< 0x2335
  std::map<std::string, Reference> references;  ///< metric key ("hbm_bandwidth", "gemm_tflops.bf16") -> reference
  std::optional<double> fail_fraction;          ///< overrides the table's default
  std::map<std::string, Reference> dense_peaks; ///< "gemm_tflops.bf16" -> the datasheet's dense peak
  std::optional<Reference> nvlink_link;         ///< one NVLink link's bandwidth per direction, GB/s
  /// The whole GPU's SM count (unit "SMs"), which a MIG instance's GEMM reference is scaled by: instance SMs / this.
  std::optional<Reference> sm_count;
};

/// All loaded references plus the default rule.
struct ThresholdTable {
  double fail_fraction = 0.75;   ///< fail below this fraction of the reference
  double node_tolerance = 0.10;  ///< fail below (1 - tolerance) x the node's mean
  DerivedRules derived;
  std::vector<GpuThresholds> gpus;
  /// The model with this PCI device id, or null.
  [[nodiscard]] const GpuThresholds* find(std::uint32_t pci_device_id) const;
};

/// The canonical unit of a metric key ("hbm_bandwidth" -> "GB/s", "gemm_tflops.bf16" -> "TFLOPS"), or empty for
/// a metric gpuenv does not know.
std::string canonical_unit(std::string_view metric);

/// Parses the thresholds YAML. Values given in another unit of the same quantity (TB/s, MB/s, GFLOPS) are
/// converted; a unit of the wrong quantity, a missing source, a value outside the plausible range for the metric
/// (the unit slip DCGM shipped) or an unknown metric key is an error naming the file and line.
Result<ThresholdTable> parse_thresholds(std::string_view yaml_text, std::string_view origin);

}  // namespace gpuenv::validate
