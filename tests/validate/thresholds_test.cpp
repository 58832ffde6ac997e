#include "validate/thresholds.hpp"

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <sstream>
#include <string>

using gpuenv::validate::canonical_unit;
using gpuenv::validate::parse_thresholds;
using gpuenv::validate::ThresholdTable;

namespace {

/// A one-model document whose hbm_bandwidth reference is `reference` (the lines under "hbm_bandwidth:").
std::string one_reference(const std::string& metric, const std::string& reference) {
  return "schema: gpuenv-thresholds-v1\n"
         "gpus:\n"
         "  - model: \"H200 SXM 141GB\"\n"
         "    pci_device_ids: [\"0x2335\"]\n"
         "    references:\n"
         "      " + metric + ":\n" + reference;
}

std::string hbm(const std::string& value, const std::string& unit) {
  return one_reference("hbm_bandwidth", "        value: " + value + "\n        unit: " + unit +
                                            "\n        source: \"test figure\"\n");
}

std::string read_shipped() {
  std::ifstream in(std::string(GPUENV_SOURCE_DIR) + "/recipes/gpus/thresholds.yaml", std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(Thresholds, ShippedTableParsesWithASourceForEveryReference) {
  const std::string text = read_shipped();
  ASSERT_FALSE(text.empty()) << "recipes/gpus/thresholds.yaml not found under " << GPUENV_SOURCE_DIR;
  auto table = parse_thresholds(text, "recipes/gpus/thresholds.yaml");
  ASSERT_TRUE(table.ok()) << table.error().to_string();
  EXPECT_DOUBLE_EQ(table->fail_fraction, 0.75);
  EXPECT_DOUBLE_EQ(table->node_tolerance, 0.10);
  EXPECT_GE(table->gpus.size(), 11u);
  for (const auto& gpu : table->gpus) {
    EXPECT_FALSE(gpu.pci_device_ids.empty()) << gpu.model;
    for (const auto& [metric, ref] : gpu.references) {
      EXPECT_FALSE(ref.source.empty()) << gpu.model << " " << metric;
      EXPECT_EQ(ref.unit, canonical_unit(metric)) << gpu.model << " " << metric;
    }
  }
}

TEST(Thresholds, ShippedTableCoversTheCommonDataCenterGpus) {
  auto table = parse_thresholds(read_shipped(), "recipes/gpus/thresholds.yaml");
  ASSERT_TRUE(table.ok()) << table.error().to_string();
  // H100 SXM, H100 PCIe, H200 SXM, A100 SXM4 40/80GB, A100 PCIe, L4, L40S, A10, T4, B200
  for (std::uint32_t id : {0x2330u, 0x2331u, 0x2335u, 0x20b0u, 0x20b2u, 0x20f1u, 0x27b8u, 0x26b9u, 0x2236u, 0x1eb8u,
                           0x2901u}) {
    const auto* gpu = table->find(id);
    ASSERT_NE(gpu, nullptr) << std::hex << id;
    EXPECT_EQ(gpu->references.count("hbm_bandwidth"), 1u) << gpu->model;
  }
}

TEST(Thresholds, ShippedH200ReferenceIsInGigabytesNotDcgmsSlip) {
  auto table = parse_thresholds(read_shipped(), "recipes/gpus/thresholds.yaml");
  ASSERT_TRUE(table.ok()) << table.error().to_string();
  const auto* h200 = table->find(0x2335);
  ASSERT_NE(h200, nullptr);
  const auto& ref = h200->references.at("hbm_bandwidth");
  EXPECT_DOUBLE_EQ(ref.value, 3110);
  EXPECT_EQ(ref.unit, "GB/s");
}

TEST(Thresholds, FindsModelByPciDeviceId) {
  auto table = parse_thresholds(
      "schema: gpuenv-thresholds-v1\n"
      "gpus:\n"
      "  - model: A\n"
      "    pci_device_ids: [\"0x2330\", \"0x2331\"]\n"
      "  - model: B\n"
      "    pci_device_ids: [\"0X27B8\"]\n",
      "t.yaml");
  ASSERT_TRUE(table.ok()) << table.error().to_string();
  ASSERT_NE(table->find(0x2331), nullptr);
  EXPECT_EQ(table->find(0x2331)->model, "A");
  ASSERT_NE(table->find(0x27b8), nullptr);
  EXPECT_EQ(table->find(0x27b8)->model, "B");
  EXPECT_EQ(table->find(0x2901), nullptr);
  EXPECT_TRUE(table->find(0x2330)->references.empty());
}

TEST(Thresholds, ConvertsTerabytesToGigabytes) {
  auto table = parse_thresholds(hbm("4.8", "TB/s"), "t.yaml");
  ASSERT_TRUE(table.ok()) << table.error().to_string();
  const auto& ref = table->find(0x2335)->references.at("hbm_bandwidth");
  EXPECT_DOUBLE_EQ(ref.value, 4800);
  EXPECT_EQ(ref.unit, "GB/s");
  EXPECT_EQ(ref.source, "test figure");
}

TEST(Thresholds, ConvertsMegabytesAndGigaflops) {
  auto mb = parse_thresholds(hbm("3110000", "MB/s"), "t.yaml");
  ASSERT_TRUE(mb.ok()) << mb.error().to_string();
  EXPECT_DOUBLE_EQ(mb->gpus[0].references.at("hbm_bandwidth").value, 3110);

  auto gf = parse_thresholds(one_reference("gemm_tflops.fp64", "        value: 18300\n        unit: GFLOPS\n"
                                                               "        source: \"x\"\n"),
                             "t.yaml");
  ASSERT_TRUE(gf.ok()) << gf.error().to_string();
  const auto& ref = gf->gpus[0].references.at("gemm_tflops.fp64");
  EXPECT_DOUBLE_EQ(ref.value, 18.3);
  EXPECT_EQ(ref.unit, "TFLOPS");
}

TEST(Thresholds, RejectsUnitSlipAndSaysTheLikelyUnit) {
  auto table = parse_thresholds(hbm("4.8", "GB/s"), "t.yaml");
  ASSERT_FALSE(table.ok());
  EXPECT_EQ(table.error().id, "thresholds.implausible_value");
  EXPECT_NE(table.error().message.find("TB/s"), std::string::npos) << table.error().message;
  EXPECT_EQ(table.error().where, "t.yaml:7:16");
}

TEST(Thresholds, RejectsDcgmsH200SlipOfMegabytesForGigabytes) {
  auto table = parse_thresholds(hbm("2333", "MB/s"), "t.yaml");
  ASSERT_FALSE(table.ok());
  EXPECT_EQ(table.error().id, "thresholds.implausible_value");
  EXPECT_NE(table.error().message.find("probably meant in GB/s"), std::string::npos) << table.error().message;
}

TEST(Thresholds, RejectsGigaflopsWrittenAsTeraflops) {
  auto table = parse_thresholds(one_reference("gemm_tflops.fp64", "        value: 18300\n        unit: TFLOPS\n"
                                                                  "        source: \"x\"\n"),
                                "t.yaml");
  ASSERT_FALSE(table.ok());
  EXPECT_EQ(table.error().id, "thresholds.implausible_value");
  EXPECT_NE(table.error().message.find("GFLOPS"), std::string::npos) << table.error().message;
}

TEST(Thresholds, RejectsUnitOfTheWrongQuantity) {
  auto table = parse_thresholds(hbm("4800", "TFLOPS"), "t.yaml");
  ASSERT_FALSE(table.ok());
  EXPECT_EQ(table.error().id, "thresholds.wrong_unit");
  EXPECT_EQ(table.error().where, "t.yaml:8:15");

  auto gemm = parse_thresholds(one_reference("gemm_tflops.bf16", "        value: 700\n        unit: GB/s\n"
                                                                 "        source: \"x\"\n"),
                               "t.yaml");
  ASSERT_FALSE(gemm.ok());
  EXPECT_EQ(gemm.error().id, "thresholds.wrong_unit");
}

TEST(Thresholds, RejectsUnknownAndBinaryUnits) {
  auto gbit = parse_thresholds(hbm("4800", "Gb/s"), "t.yaml");
  ASSERT_FALSE(gbit.ok());
  EXPECT_EQ(gbit.error().id, "thresholds.unknown_unit");

  auto gib = parse_thresholds(hbm("4800", "GiB/s"), "t.yaml");
  ASSERT_FALSE(gib.ok());
  EXPECT_EQ(gib.error().id, "thresholds.unknown_unit");
  EXPECT_NE(gib.error().hint.find("binary units"), std::string::npos);
}

TEST(Thresholds, RejectsReferenceWithoutSource) {
  auto missing = parse_thresholds(one_reference("hbm_bandwidth", "        value: 3110\n        unit: GB/s\n"), "t.yaml");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().id, "thresholds.missing_source");
  EXPECT_EQ(missing.error().where.rfind("t.yaml:7:", 0), 0u) << missing.error().where;

  auto blank = parse_thresholds(hbm("3110", "GB/s\n        source: \"  \""), "t.yaml");
  ASSERT_FALSE(blank.ok());
}

TEST(Thresholds, RejectsUnknownMetric) {
  auto table = parse_thresholds(one_reference("hbm_bandwith", "        value: 3110\n        unit: GB/s\n"
                                                               "        source: \"x\"\n"),
                                "t.yaml");
  ASSERT_FALSE(table.ok());
  EXPECT_EQ(table.error().id, "thresholds.unknown_metric");
  EXPECT_EQ(table.error().where, "t.yaml:6:7");
  EXPECT_NE(table.error().hint.find("hbm_bandwidth"), std::string::npos);
}

TEST(Thresholds, RejectsUnknownKeysAtEveryLevel) {
  auto top = parse_thresholds("schema: gpuenv-thresholds-v1\ngpus: []\nfail_fractoin: 0.5\n", "t.yaml");
  ASSERT_FALSE(top.ok());
  EXPECT_EQ(top.error().id, "thresholds.unknown_key");
  EXPECT_EQ(top.error().where, "t.yaml:3:1");

  auto gpu = parse_thresholds(
      "schema: gpuenv-thresholds-v1\ngpus:\n  - model: A\n    pci_device_ids: [\"0x2330\"]\n    arch: 90\n", "t.yaml");
  ASSERT_FALSE(gpu.ok());
  EXPECT_EQ(gpu.error().id, "thresholds.unknown_key");

  auto ref = parse_thresholds(hbm("3110", "GB/s\n        note: extra"), "t.yaml");
  ASSERT_FALSE(ref.ok());
  EXPECT_EQ(ref.error().id, "thresholds.unknown_key");
}

TEST(Thresholds, UnknownKeyHintOffersTheNearestKey) {
  auto top = parse_thresholds("schema: gpuenv-thresholds-v1\ngpus: []\nfail_fractoin: 0.5\n", "t.yaml");
  ASSERT_FALSE(top.ok());
  EXPECT_EQ(top.error().hint.rfind("did you mean 'fail_fraction'?", 0), 0u) << top.error().hint;
  auto ref = parse_thresholds(hbm("3110", "GB/s\n        sorce: x"), "t.yaml");
  ASSERT_FALSE(ref.ok());
  EXPECT_EQ(ref.error().id, "thresholds.unknown_key");
  EXPECT_EQ(ref.error().hint.rfind("did you mean 'source'?", 0), 0u) << ref.error().hint;
}

TEST(Thresholds, RejectsQuotedNumbersAtTheirPosition) {
  auto table = parse_thresholds(hbm("\"3110\"", "GB/s"), "t.yaml");
  ASSERT_FALSE(table.ok());
  EXPECT_EQ(table.error().id, "thresholds.wrong_type");
  EXPECT_EQ(table.error().where, "t.yaml:7:16");
}

TEST(Thresholds, RejectsPciIdListedUnderTwoModels) {
  auto table = parse_thresholds(
      "schema: gpuenv-thresholds-v1\n"
      "gpus:\n"
      "  - model: H200 SXM\n"
      "    pci_device_ids: [\"0x2335\"]\n"
      "  - model: H200 NVL\n"
      "    pci_device_ids: [\"0x233b\", \"0x2335\"]\n",
      "t.yaml");
  ASSERT_FALSE(table.ok());
  EXPECT_EQ(table.error().id, "thresholds.duplicate_pci_id");
  EXPECT_NE(table.error().message.find("0x2335"), std::string::npos);
  EXPECT_NE(table.error().message.find("H200 SXM"), std::string::npos);
  EXPECT_EQ(table.error().where, "t.yaml:6:32");
}

TEST(Thresholds, RejectsMalformedPciIds) {
  for (const char* bad : {"2335", "0x233", "0x23355", "0xzz35", "[1]"}) {
    const std::string doc = std::string("schema: gpuenv-thresholds-v1\ngpus:\n  - model: A\n    pci_device_ids: [") +
                            (bad[0] == '[' ? bad : "\"" + std::string(bad) + "\"") + "]\n";
    auto table = parse_thresholds(doc, "t.yaml");
    ASSERT_FALSE(table.ok()) << bad;
    EXPECT_EQ(table.error().id, "thresholds.bad_pci_id") << bad;
  }
}

TEST(Thresholds, RejectsWrongSchemaAndMissingParts) {
  auto schema = parse_thresholds("schema: gpuenv-thresholds-v2\ngpus: []\n", "t.yaml");
  ASSERT_FALSE(schema.ok());
  EXPECT_EQ(schema.error().id, "thresholds.schema");

  auto no_schema = parse_thresholds("gpus: []\n", "t.yaml");
  ASSERT_FALSE(no_schema.ok());
  EXPECT_EQ(no_schema.error().id, "thresholds.missing_key");

  auto no_ids = parse_thresholds("schema: gpuenv-thresholds-v1\ngpus:\n  - model: A\n", "t.yaml");
  ASSERT_FALSE(no_ids.ok());
  EXPECT_EQ(no_ids.error().id, "thresholds.missing_key");

  auto empty = parse_thresholds("# nothing\n", "t.yaml");
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.error().id, "thresholds.empty");
}

TEST(Thresholds, ReadsFractionsAndPerModelOverride) {
  auto table = parse_thresholds(
      "schema: gpuenv-thresholds-v1\n"
      "fail_fraction: 0.8\n"
      "node_tolerance: 0.05\n"
      "gpus:\n"
      "  - model: A\n"
      "    pci_device_ids: [\"0x2330\"]\n"
      "    fail_fraction: 0.6\n"
      "  - model: B\n"
      "    pci_device_ids: [\"0x2331\"]\n",
      "t.yaml");
  ASSERT_TRUE(table.ok()) << table.error().to_string();
  EXPECT_DOUBLE_EQ(table->fail_fraction, 0.8);
  EXPECT_DOUBLE_EQ(table->node_tolerance, 0.05);
  ASSERT_TRUE(table->find(0x2330)->fail_fraction.has_value());
  EXPECT_DOUBLE_EQ(*table->find(0x2330)->fail_fraction, 0.6);
  EXPECT_FALSE(table->find(0x2331)->fail_fraction.has_value());
}

TEST(Thresholds, RejectsFractionsOutOfRange) {
  for (const char* doc : {"schema: gpuenv-thresholds-v1\nfail_fraction: 75\ngpus: []\n",
                          "schema: gpuenv-thresholds-v1\nfail_fraction: 0\ngpus: []\n",
                          "schema: gpuenv-thresholds-v1\nnode_tolerance: 1.5\ngpus: []\n"}) {
    auto table = parse_thresholds(doc, "t.yaml");
    ASSERT_FALSE(table.ok()) << doc;
    EXPECT_EQ(table.error().id, "thresholds.bad_fraction") << doc;
  }
}

TEST(Thresholds, RejectsValuesThatAreNotPlainNumbers) {
  for (const char* value : {"\"3110\"", "3110 GB/s", ".inf", "-5", "0", "[1]"}) {
    auto table = parse_thresholds(hbm(value, "GB/s"), "t.yaml");
    EXPECT_FALSE(table.ok()) << value;
  }
}

TEST(Thresholds, ReportsYamlSyntaxErrorWithLine) {
  auto table = parse_thresholds("schema: gpuenv-thresholds-v1\ngpus: [\n", "t.yaml");
  ASSERT_FALSE(table.ok());
  EXPECT_EQ(table.error().id, "thresholds.yaml_syntax");
  EXPECT_EQ(table.error().where.rfind("t.yaml:", 0), 0u);
}

TEST(Thresholds, CanonicalUnitPerMetric) {
  EXPECT_EQ(canonical_unit("hbm_bandwidth"), "GB/s");
  EXPECT_EQ(canonical_unit("h2d_bandwidth"), "GB/s");
  EXPECT_EQ(canonical_unit("d2h_bandwidth"), "GB/s");
  EXPECT_EQ(canonical_unit("p2p_bandwidth"), "GB/s");
  EXPECT_EQ(canonical_unit("nccl_allreduce"), "GB/s");
  EXPECT_EQ(canonical_unit("gemm_tflops.bf16"), "TFLOPS");
  EXPECT_EQ(canonical_unit("gemm_tflops.fp16"), "TFLOPS");
  EXPECT_EQ(canonical_unit("gemm_tflops.tf32"), "TFLOPS");
  EXPECT_EQ(canonical_unit("gemm_tflops.fp64"), "TFLOPS");
  EXPECT_EQ(canonical_unit("gemm_tflops.fp8"), "");
  EXPECT_EQ(canonical_unit("gemm_tflops"), "");
}

// Derived references (issue 14): the rules and the hardware figures they derive from, each with its source.

TEST(Thresholds, ShippedTableDerivesReferencesFromSourcedHardwareFigures) {
  auto table = parse_thresholds(read_shipped(), "recipes/gpus/thresholds.yaml");
  ASSERT_TRUE(table.ok()) << table.error().to_string();
  const auto& d = table->derived;
  ASSERT_TRUE(d.host_device && d.gemm && d.nvlink);
  EXPECT_FALSE(d.host_device->source.empty());
  EXPECT_FALSE(d.gemm->source.empty());
  EXPECT_FALSE(d.nvlink->source.empty());
  std::map<int, double> rate;
  for (const auto& g : d.pcie) {
    EXPECT_FALSE(g.source.empty()) << g.gen;
    rate[g.gen] = g.transfer_rate_gts;
  }
  EXPECT_DOUBLE_EQ(rate[4], 16);
  EXPECT_DOUBLE_EQ(rate[5], 32);
  for (std::uint32_t id : {0x2330u, 0x2335u, 0x20b2u, 0x27b8u}) {  // the recorded H100, H200, A100, L4
    const auto* gpu = table->find(id);
    ASSERT_NE(gpu, nullptr) << std::hex << id;
    for (const char* dtype : {"bf16", "fp16", "tf32"}) {
      auto peak = gpu->dense_peaks.find(std::string("gemm_tflops.") + dtype);
      ASSERT_NE(peak, gpu->dense_peaks.end()) << gpu->model << " " << dtype;
      EXPECT_FALSE(peak->second.source.empty()) << gpu->model << " " << dtype;
      EXPECT_EQ(peak->second.unit, "TFLOPS");
    }
  }
  // Datasheet dense = half the sparse figure: H100 SXM bf16 1,979* -> 989.5.
  EXPECT_DOUBLE_EQ(table->find(0x2330)->dense_peaks.at("gemm_tflops.bf16").value, 989.5);
  ASSERT_TRUE(table->find(0x2330)->nvlink_link.has_value());
  EXPECT_DOUBLE_EQ(table->find(0x2330)->nvlink_link->value, 25);
  EXPECT_FALSE(table->find(0x27b8)->nvlink_link.has_value()) << "the L4 has no NVLink";
}

std::string with_derived(const std::string& derived) {
  return "schema: gpuenv-thresholds-v1\nderived:\n" + derived + "gpus: []\n";
}

TEST(Thresholds, ReadsDerivedRulesAndPcieEncodings) {
  auto table = parse_thresholds(with_derived("  host_device:\n    fraction: 0.8\n    source: rule\n"
                                             "    pcie_generations:\n"
                                             "      - {gen: 2, transfer_rate_gts: 5, encoding: 8b/10b, source: s}\n"
                                             "      - {gen: 5, transfer_rate_gts: 32, encoding: 128b/130b, source: s}\n"
                                             "  gemm: {fraction: 0.6, source: rule}\n"),
                                "t.yaml");
  ASSERT_TRUE(table.ok()) << table.error().to_string();
  ASSERT_EQ(table->derived.pcie.size(), 2u);
  EXPECT_DOUBLE_EQ(table->derived.pcie[0].efficiency, 0.8);
  EXPECT_DOUBLE_EQ(table->derived.pcie[1].efficiency, 128.0 / 130.0);
  EXPECT_DOUBLE_EQ(table->derived.gemm->value, 0.6);
  EXPECT_FALSE(table->derived.nvlink.has_value());
}

TEST(Thresholds, RejectsDerivedRulesWithoutSourceOrWithAnUnknownEncoding) {
  auto no_source = parse_thresholds(with_derived("  gemm: {fraction: 0.6}\n"), "t.yaml");
  ASSERT_FALSE(no_source.ok());
  EXPECT_NE(no_source.error().to_string().find("source"), std::string::npos) << no_source.error().to_string();
  auto bad_fraction = parse_thresholds(with_derived("  nvlink: {fraction: 1.5, source: s}\n"), "t.yaml");
  EXPECT_FALSE(bad_fraction.ok());
  auto encoding = parse_thresholds(
      with_derived("  host_device:\n    fraction: 0.8\n    source: s\n    pcie_generations:\n"
                   "      - {gen: 6, transfer_rate_gts: 64, encoding: PAM4, source: s}\n"),
      "t.yaml");
  ASSERT_FALSE(encoding.ok());
  EXPECT_NE(encoding.error().to_string().find("PAM4"), std::string::npos) << encoding.error().to_string();
  auto no_gen_source = parse_thresholds(
      with_derived("  host_device:\n    fraction: 0.8\n    source: s\n    pcie_generations:\n"
                   "      - {gen: 5, transfer_rate_gts: 32, encoding: 128b/130b}\n"),
      "t.yaml");
  EXPECT_FALSE(no_gen_source.ok());
}

TEST(Thresholds, DensePeaksHoldGemmFiguresOnly) {
  const std::string head = "schema: gpuenv-thresholds-v1\ngpus:\n  - model: X\n    pci_device_ids: [\"0x2330\"]\n";
  auto ok = parse_thresholds(head + "    dense_peaks:\n      gemm_tflops.bf16: {value: 989.5, unit: TFLOPS, source: s}\n"
                                    "    nvlink_link: {value: 25, unit: GB/s, source: s}\n",
                             "t.yaml");
  ASSERT_TRUE(ok.ok()) << ok.error().to_string();
  EXPECT_DOUBLE_EQ(ok->gpus[0].dense_peaks.at("gemm_tflops.bf16").value, 989.5);
  EXPECT_DOUBLE_EQ(ok->gpus[0].nvlink_link->value, 25);
  auto hbm_peak = parse_thresholds(head + "    dense_peaks:\n      hbm_bandwidth: {value: 3350, unit: GB/s, source: s}\n",
                                   "t.yaml");
  ASSERT_FALSE(hbm_peak.ok());
  EXPECT_NE(hbm_peak.error().to_string().find("GEMM peaks only"), std::string::npos) << hbm_peak.error().to_string();
  auto no_source = parse_thresholds(head + "    nvlink_link: {value: 25, unit: GB/s}\n", "t.yaml");
  EXPECT_FALSE(no_source.ok());
}

}  // namespace
