// The evidence parser against published NVIDIA evidence (../shared/cc_vectors, read at run time, never copied
// into the repository; each test skips, saying so, where it is absent) and against NVIDIA's own parser output for
// one report (sdk/spdm_parsed_output.json, an oracle); and every prefix of a report refused without a crash.
#include "attest/evidence.hpp"

#include <gtest/gtest.h>

#include "fakes/cc_vectors.hpp"

#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>

#include <nlohmann/json.hpp>

namespace {

namespace fs = std::filesystem;
using namespace gpuenv::attest;

const fs::path& k_vectors = gpuenv::testing::k_cc_vectors;
using gpuenv::testing::slurp;

/// The report in vector file NAME, parsed (raw or hex text).
gpuenv::Result<Report> vector_report(const std::string& name) {
  const std::string path = (k_vectors / name).string();
  GPUENV_TRY(bytes, report_bytes(slurp(path), path));
  return parse_report(bytes, path);
}

std::string hex_of(const std::string& hex) {
  std::string out;
  for (std::size_t i = 0; i + 1 < hex.size(); i += 2) out += static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16));
  return out;
}

TEST(Evidence, EveryFieldMatchesNvidiasOwnParserOutput) {
  NEED_VECTORS();
  auto r = vector_report("sdk/hopperAttestationReport.txt");
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  const auto req = nlohmann::json::parse(slurp(k_vectors / "sdk/spdm_req_parsed_output.json"));
  EXPECT_EQ("0x" + to_hex(r->request.nonce), req["Nonce"]);
  EXPECT_EQ(r->request.param1, 0x01);
  EXPECT_EQ(r->request.param2, 0xFF);
  const auto resp = nlohmann::json::parse(slurp(k_vectors / "sdk/spdm_parsed_output.json"));
  EXPECT_EQ(r->blocks.size(), resp["NumberOfBlocks"].get<std::size_t>());
  EXPECT_EQ("0x" + to_hex(r->responder_nonce), resp["Nonce"]);
  EXPECT_EQ("0x" + to_hex(r->signature), resp["Signature"]);
  std::size_t opaque_bytes = 0;
  for (const auto& f : r->opaque.fields) opaque_bytes += 4 + f.value.size();
  EXPECT_EQ(opaque_bytes, resp["OpaqueLength"].get<std::size_t>());
  for (const auto& b : r->blocks) {
    const auto& want = resp["MeasurementRecord"]["MeasurementBlocks"][std::to_string(b.index)];
    ASSERT_TRUE(want.is_object()) << "block " << int(b.index);
    EXPECT_EQ(b.value_type, want["DMTFSpecMeasurementValueType"].get<int>()) << int(b.index);
    EXPECT_EQ("0x" + to_hex(b.value), want["DMTFSpecMeasurementValue"]) << int(b.index);
  }
  EXPECT_EQ(r->signed_length + 96, r->bytes.size());
  EXPECT_EQ(to_hex(r->request.nonce), "5bb22e377702d4e1e8215a903ba094826b9ac7f731dee1fe8102958bf2840aca");
  EXPECT_EQ(r->driver_version(), "580.159.03");
  EXPECT_EQ(r->vbios_version(), "96.00.74.00.20");
  EXPECT_EQ(r->opaque_version(), 1u);
}

TEST(Evidence, PublishedReportsSayWhatTheirPublishersFound) {
  NEED_VECTORS();
  struct Want {
    const char* file;
    const char* nonce;
    const char* driver;
    const char* vbios;
    bool fwid;
  };
  // vectors.json's verdicts for these files (driver, VBIOS, FWID field present or not, the caller's nonce).
  const Want wants[] = {
      {"e2e_nvtrust_2023/attestationReport.hex", "4cff7f5380ead8fad8ec2c531c110aca4302a88f603792801a8ca29ee151af2e", "545.00", "96.00.5E.00.01", false},
      {"e2e_azure_h100_595/gpu0-attestation-report.bin", "690bb51b904351e28100a0610fe60624255c26d7d38c53fb1285ecfed1cab17a", "595.71.05", "96.00.9F.00.04", true},
      {"nvtrust/hopperAttestationReport.txt", "931d8dd0add203ac3d8b4fbde75e115278eefcdceac5b87671a748f32364dfcb", "550.90.07", "96.00.9F.00.01", true},
      {"sdk/gpu/hopperAttestationReport.txt", "27a328247bf7935c993341cf587be6f05986ccce4fe7ba2c54100bd616a58f66", "535.86.09", "96.00.5E.00.01", false},
      {"sdk/gpu/blackwellAttestationReport.txt", nullptr, "575.32", "97.00.88.00.0F", true},
      {"sdk/switch/switchAttestationReport.txt", nullptr, nullptr, "96.10.55.00.01", false},
  };
  for (const auto& w : wants) {
    auto r = vector_report(w.file);
    ASSERT_TRUE(r.ok()) << w.file << ": " << r.error().to_string();
    if (w.nonce) EXPECT_EQ(to_hex(r->request.nonce), w.nonce) << w.file;
    if (w.driver) EXPECT_EQ(r->driver_version(), w.driver) << w.file;
    EXPECT_EQ(r->vbios_version(), w.vbios) << w.file;
    EXPECT_EQ(r->fwid().has_value(), w.fwid) << w.file;
    if (w.fwid) EXPECT_EQ(r->fwid()->size(), 48u) << w.file;
    EXPECT_EQ(r->signature.size(), 96u) << w.file;
  }
  auto azure = vector_report("e2e_azure_h100_595/gpu0-attestation-report.bin");
  ASSERT_TRUE(azure.ok());
  EXPECT_EQ(azure->bytes.size(), 4129u);
  EXPECT_EQ(to_hex(*azure->fwid()).substr(0, 8), "209ce00c");
  EXPECT_EQ(azure->nvdec0_status(), 0x55);
  EXPECT_EQ(azure->opaque_version(), 1u);
  EXPECT_EQ(azure->text_field(k_project), "1010");
  EXPECT_EQ(azure->text_field(k_project_sku), "0210");
  EXPECT_EQ(azure->text_field(k_chip_sku), "886");
  EXPECT_EQ(azure->blocks.size(), 64u);
  auto sw = vector_report("sdk/switch/switchAttestationReport.txt");
  ASSERT_TRUE(sw.ok());
  EXPECT_EQ(sw->blocks.size(), 31u);
}

TEST(Evidence, MixedBlockSizesAndTheVersionedOpaqueFormatAreRead) {
  NEED_VECTORS();
  auto fsp = vector_report("sdk_2026_10/blackwellFspAttestationReport.txt");
  ASSERT_TRUE(fsp.ok()) << fsp.error().to_string();
  EXPECT_EQ(fsp->blocks.size(), 52u);
  std::set<std::size_t> sizes;
  for (const auto& b : fsp->blocks) sizes.insert(b.value.size());
  EXPECT_GT(sizes.size(), 3u) << "not every block is a 48-byte digest";
  auto v = vector_report("sdk_2026_10/sample_nvdaod_transcript.txt");
  ASSERT_TRUE(v.ok()) << v.error().to_string();
  EXPECT_TRUE(v->opaque.versioned);
  EXPECT_EQ(v->opaque.major, 2);
  EXPECT_EQ(v->opaque.minor, 0);
  EXPECT_EQ(v->opaque.patch, 0);
  EXPECT_EQ(v->opaque_version(), 2u);
  EXPECT_EQ(v->driver_version(), "620.12");
  EXPECT_EQ(v->vbios_version(), "96.00.D9.00.0F");
  EXPECT_EQ(v->nvdec0_status(), 0xAA);
  EXPECT_EQ(v->text_field(k_project), "G520");
  EXPECT_EQ(v->text_field(k_project_sku), "0201");
  EXPECT_EQ(v->text_field(k_chip_sku), "884");
}

TEST(Evidence, TheEvidenceJsonCarriesTheReportAndChainAndTheNonceTheReportNames) {
  NEED_VECTORS();
  const std::string path = (k_vectors / "e2e_azure_h100_595/gpu-evidence.json").string();
  auto e = parse_evidence_json(slurp(path), path);
  ASSERT_TRUE(e.ok()) << e.error().to_string();
  EXPECT_EQ(e->arch, "HOPPER");
  ASSERT_EQ(e->items.size(), 1u);
  EXPECT_EQ(e->items[0].report, slurp(k_vectors / "e2e_azure_h100_595/gpu0-attestation-report.bin"));
  EXPECT_EQ(e->items[0].cert_chain, slurp(k_vectors / "e2e_azure_h100_595/gpu0-cert-chain.pem"));
  auto r = parse_report(e->items[0].report, path);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->request.nonce, e->nonce);
  const std::string ppcie = (k_vectors / "ppcie/gpu_evidence.json").string();
  auto eight = parse_evidence_json(slurp(ppcie), ppcie);
  ASSERT_TRUE(eight.ok()) << eight.error().to_string();
  EXPECT_EQ(eight->items.size(), 8u);
  for (const auto& item : eight->items) {
    auto one = parse_report(item.report, ppcie);
    ASSERT_TRUE(one.ok()) << one.error().to_string();
    EXPECT_EQ(one->request.nonce, item.nonce);
    EXPECT_EQ(item.nonce, eight->nonce);
    EXPECT_EQ(one->driver_version(), "590.12");
  }
}

TEST(Evidence, ATrailingByteIsRefusedAndEveryPrefixIsRefusedWithoutACrash) {
  NEED_VECTORS();
  const std::string path = (k_vectors / "trustee/hopper_coco_report1.txt").string();
  auto bytes = report_bytes(slurp(path), path);
  ASSERT_TRUE(bytes.ok());
  ASSERT_EQ(bytes->size(), 4130u);
  auto r = parse_report(*bytes, path);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().id, "attest.trailing");
  EXPECT_NE(r.error().message.find("1 byte after the signature"), std::string::npos) << r.error().message;
  EXPECT_TRUE(parse_report(bytes->substr(0, 4129), path).ok()) << "without the stray byte it is a whole report";
  for (std::size_t n = 0; n < 4129; ++n) {
    auto cut = parse_report(bytes->substr(0, n), path);
    ASSERT_FALSE(cut.ok()) << n;
    ASSERT_EQ(cut.error().id, "attest.bad_report") << n;
  }
}

TEST(Evidence, MalformedInputsNameWhatIsWrong) {
  std::string req(37, '\0');
  req[0] = 0x11;
  req[1] = static_cast<char>(0xE0);
  req[2] = 0x01;
  // A response of one block, no opaque data and a signature: RECORD is the measurement record.
  auto response = [](const std::string& record, char blocks) {
    std::string r = {0x11, 0x60, 0, 0, blocks, static_cast<char>(record.size()), 0, 0};
    return r + record + std::string(32, 'n') + std::string(2, '\0') + std::string(96, 's');
  };
  const std::string block = std::string{1, 1, 4, 0, 1, 1, 0} + "x";             // index 1, DMTF, 4 bytes: type 1, 1 byte "x"
  const std::string too_long = std::string{1, 1, 5, 0, 1, 1, 0} + "xy";         // says 5 bytes, its value needs 4
  auto r = parse_report(req + response(too_long, 1), "r");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("says 5 bytes but its value needs 4"), std::string::npos) << r.error().message;
  auto ok = parse_report(req + response(block, 1), "r");
  ASSERT_TRUE(ok.ok()) << ok.error().to_string();
  EXPECT_EQ(ok->blocks[0].value, "x");
  EXPECT_EQ(ok->signed_length, 37u + 8 + block.size() + 32 + 2);
  const std::string good = response(block, 1);
  EXPECT_NE(parse_report(req + response(block, 2), "r").error().message.find("says 2 measurement blocks"), std::string::npos);
  std::string other = req;
  other[0] = 0x12;
  EXPECT_NE(parse_report(other + good, "r").error().message.find("not 11"), std::string::npos);
  EXPECT_FALSE(report_bytes("not hex, not a report", "r").ok());
  EXPECT_EQ(*report_bytes("0x11e0 01ff\n", "r"), std::string("\x11\xe0\x01\xff"));
  for (const char* bad : {"{}", "[]", "[{\"evidence\": \"\", \"certificate\": \"\"}]", "{\"nonce\": \"00\", \"evidence_list\": []}",
                          "{\"nonce\": \"0000000000000000000000000000000000000000000000000000000000000000\", \"evidence_list\": [{\"evidence\": \"$$\", \"certificate\": \"\"}]}"})
    EXPECT_EQ(parse_evidence_json(bad, "e").error().id, "attest.bad_evidence") << bad;
}

}  // namespace
