// RIMs on published manifests (../shared/cc_vectors, read at run time; each test skips, saying so, where it is
// absent): NVIDIA's signed driver and VBIOS RIMs verify to the pinned RIM root, tampered ones fail the claim their
// publisher found broken, golden measurements match the reports they were published with and mismatch, naming the
// index, where the publisher says so; malformed XML is an error, never a crash.
#include "attest/rim.hpp"

#include "attest/appraise.hpp"

#include <gtest/gtest.h>

#include "fakes/cc_vectors.hpp"

#include <filesystem>
#include <fstream>
#include <iterator>

namespace {

namespace fs = std::filesystem;
using namespace gpuenv::attest;

const fs::path& k_rim_vectors = gpuenv::testing::k_cc_vectors;
using gpuenv::testing::slurp;
constexpr std::int64_t k_rim_now = 1796169600;   // 2026-12-02
constexpr std::int64_t k_2024 = 1704067200;  // 2024-01-01, when the 2023 sample RIMs' signers were valid

CheckedRim rim(const std::string& file, std::int64_t now = k_rim_now) {
  const std::string path = (k_rim_vectors / file).string();
  auto r = check_rim(slurp(path), path, "rim", now);
  EXPECT_TRUE(r.ok()) << r.error().to_string();
  return r.ok() ? *r : CheckedRim{};
}

std::string status(const CheckedRim& r, const std::string& name) {
  for (const auto& c : r.claims)
    if (c.name == "rim." + name) return std::string(to_string(c.status)) + ": " + c.detail;
  return "(no claim)";
}

Report report(const std::string& file) {
  const std::string path = (k_rim_vectors / file).string();
  auto bytes = report_bytes(slurp(path), path);
  EXPECT_TRUE(bytes.ok());
  auto r = parse_report(*bytes, path);
  EXPECT_TRUE(r.ok()) << r.error().to_string();
  return *r;
}

std::vector<unsigned> failed(const MeasurementResult& m) {
  std::vector<unsigned> out;
  for (const auto& i : m.indices)
    if (i.status == ClaimStatus::fail) out.push_back(i.index);
  return out;
}

TEST(Rim, TheAzureH100CaptureMatchesItsRimsEndToEnd) {
  NEED_VECTORS();
  const auto driver = rim("e2e_azure_h100_595/NV_GPU_DRIVER_GH100_595.71.05.xml");
  const auto vbios = rim("e2e_azure_h100_595/NV_GPU_VBIOS_1010_0210_886_96009F0004.xml");
  for (const auto* r : {&driver, &vbios}) {
    EXPECT_EQ(status(*r, "signature").substr(0, 4), "pass") << status(*r, "signature");
    EXPECT_EQ(status(*r, "chain").substr(0, 4), "pass") << status(*r, "chain");
    EXPECT_EQ(status(*r, "cert_validity").substr(0, 4), "pass") << status(*r, "cert_validity");  // valid to 2028
  }
  EXPECT_EQ(driver.rim.version, "595.71.05");
  EXPECT_EQ(vbios.rim.version, "96.00.9F.00.04");
  EXPECT_EQ(driver.rim.product, "GH100");
  EXPECT_EQ(driver.rim.manufacturer_id, "5703");

  const Report r = report("e2e_azure_h100_595/gpu0-attestation-report.bin");
  EXPECT_EQ(driver_rim_id(r, DeviceKind::hopper), "NV_GPU_DRIVER_GH100_595.71.05");
  EXPECT_EQ(vbios_rim_id(r, DeviceKind::hopper), "NV_GPU_VBIOS_1010_0210_886_96009F0004");
  const auto m = compare_measurements(r, &driver.rim, &vbios.rim);
  EXPECT_EQ(m.claim.status, ClaimStatus::pass) << m.claim.detail;
  std::size_t driver_active = 0, vbios_active = 0, skipped = 0;
  for (const auto& i : m.indices) {
    (i.source == "driver" ? driver_active : vbios_active) += 1;
    skipped += i.status == ClaimStatus::not_checked;
  }
  EXPECT_EQ(driver_active, 22u);  // 7 and 21..41, as the capture's README counts
  EXPECT_EQ(vbios_active, 12u);   // 0-6 and 8-12
  EXPECT_EQ(skipped, 1u);         // index 35: this GPU reports NVDEC0 disabled (0x55)
}

// Issue 33, case 1: the evidence JSON's "arch" is not signed, and the kind decides what is checked (an NVSwitch has
// no driver RIM). The kind comes from the leaf certificate; an "arch" that contradicts it is refused.
TEST(Rim, TheDeviceKindComesFromTheSignedLeafAndAnArchThatContradictsItIsRefused) {
  NEED_VECTORS();
  const Report r = report("e2e_azure_h100_595/gpu0-attestation-report.bin");
  const std::string chain = slurp(k_rim_vectors / "e2e_azure_h100_595/gpu0-cert-chain.pem");
  const std::string other_driver = slurp(k_rim_vectors / "sdk/rims/NV_GPU_DRIVER_GH100_550.144.03.xml");
  for (const DeviceKind said : {DeviceKind::unknown, DeviceKind::hopper, DeviceKind::nvswitch, DeviceKind::blackwell}) {
    RimInputs rims;
    rims.driver_xml = other_driver;
    rims.driver_where = "550.144.03.xml";
    auto a = appraise_device(r, chain, r.request.nonce, said, rims, k_rim_now);
    if (said == DeviceKind::unknown || said == DeviceKind::hopper) {
      ASSERT_TRUE(a.ok()) << a.error().to_string();
      EXPECT_EQ(a->kind, DeviceKind::hopper);
      const Claim* version = a->find("driver_rim.version");
      ASSERT_NE(version, nullptr) << "a GPU's driver RIM is always judged";
      EXPECT_EQ(version->status, ClaimStatus::fail) << version->detail;
      EXPECT_FALSE(judge(*a, default_policy()).pass);
    } else {
      ASSERT_FALSE(a.ok()) << to_string(said) << " was believed over the certificate";
      EXPECT_EQ(a.error().id, "attest.arch_mismatch");
      EXPECT_NE(a.error().message.find("GH100"), std::string::npos) << a.error().message;
    }
  }
}

TEST(Rim, TheRimServiceAnswersHoldTheSameXmlAndTheirSha256IsChecked) {
  NEED_VECTORS();
  for (const std::string id : {"NV_GPU_DRIVER_GH100_595.71.05", "NV_GPU_VBIOS_1010_0210_886_96009F0004"}) {
    const std::string json = slurp(k_rim_vectors / "e2e_azure_h100_595/rim-service" / (id + ".json"));
    auto xml = rim_from_service_json(json, id, id + ".json");
    ASSERT_TRUE(xml.ok()) << xml.error().to_string();
    EXPECT_EQ(*xml, slurp(k_rim_vectors / "e2e_azure_h100_595" / (id + ".xml")));
    EXPECT_EQ(rim_from_service_json(json, "NV_GPU_DRIVER_GH100_1.0", "x").error().id, "attest.bad_rim");  // another id
    std::string tampered = json;
    const auto at = tampered.find("\"sha256\"");
    ASSERT_NE(at, std::string::npos);
    const auto digit = tampered.find_first_of("0123456789abcdef", tampered.find(':', at));
    tampered[digit] = tampered[digit] == '0' ? '1' : '0';
    auto bad = rim_from_service_json(tampered, id, "x");
    ASSERT_FALSE(bad.ok());
    EXPECT_NE(bad.error().message.find("SHA-256"), std::string::npos) << bad.error().message;
  }
}

TEST(Rim, The2023SampleMatchesItsRimsAndTheirSignersExpiredIn2025) {
  NEED_VECTORS();
  const auto driver = rim("e2e_nvtrust_2023/Driver_RIM_test_no_gpu.swidtag", k_2024);
  const auto vbios = rim("e2e_nvtrust_2023/1010_0200_882_96005E0001_test_no_gpu.swidtag", k_2024);
  for (const auto* r : {&driver, &vbios}) {
    EXPECT_EQ(status(*r, "signature").substr(0, 4), "pass") << status(*r, "signature");
    EXPECT_EQ(status(*r, "chain").substr(0, 4), "pass") << status(*r, "chain");
    EXPECT_EQ(status(*r, "cert_validity").substr(0, 4), "pass") << status(*r, "cert_validity");
  }
  const auto today = rim("e2e_nvtrust_2023/Driver_RIM_test_no_gpu.swidtag");
  EXPECT_NE(status(today, "cert_validity").find("fail: certificate 0"), std::string::npos) << status(today, "cert_validity");
  EXPECT_NE(status(today, "cert_validity").find("expired"), std::string::npos);
  EXPECT_EQ(status(today, "signature").substr(0, 4), "pass");  // expiry is its own claim

  const Report r = report("e2e_nvtrust_2023/attestationReport.hex");
  const auto m = compare_measurements(r, &driver.rim, &vbios.rim);
  EXPECT_EQ(m.claim.status, ClaimStatus::pass) << m.claim.detail;
  EXPECT_EQ(m.indices.size(), 21u + 12u);
}

TEST(Rim, AnotherIssueOfTheSameVbiosVersionMismatchesAtTheIndicesItsPublisherFound) {
  NEED_VECTORS();
  const auto driver = rim("e2e_nvtrust_2023/Driver_RIM_test_no_gpu.swidtag", k_2024);
  const auto prod = rim("e2e_nvtrust_2023/1010_0200_882_96005E0001_PROD.swidtag", k_2024);
  EXPECT_EQ(status(prod, "signature").substr(0, 4), "pass");
  const auto m = compare_measurements(report("e2e_nvtrust_2023/attestationReport.hex"), &driver.rim, &prod.rim);
  EXPECT_EQ(m.claim.status, ClaimStatus::fail);
  EXPECT_EQ(failed(m), (std::vector<unsigned>{1, 2, 3, 9}));
  EXPECT_NE(m.claim.detail.find("VBIOS index 1, 2, 3, 9 differs: reset the GPU"), std::string::npos) << m.claim.detail;
  // ... and the same RIM matches the 2025 report NVIDIA's SDK tests it with, every one of its 12 indices.
  const auto sdk = compare_measurements(report("sdk/gpu/hopperAttestationReport.txt"), nullptr, &prod.rim);
  EXPECT_TRUE(failed(sdk).empty());
  EXPECT_EQ(sdk.indices.size(), 12u);
  EXPECT_EQ(sdk.claim.status, ClaimStatus::not_checked) << sdk.claim.detail;  // half the firmware is not a pass
}

TEST(Rim, TheSdksBrokenRimsFailTheClaimTheSdkFindsBroken) {
  NEED_VECTORS();
  const auto bad_sig = rim("sdk/rims/incorrect_signature_driver_rim.xml");
  EXPECT_EQ(status(bad_sig, "signature").substr(0, 50), "fail: the SignatureValue does not verify under the");
  const auto bad_chain = rim("sdk/rims/incorrect_cert_chain_driver_rim.xml");
  EXPECT_EQ(status(bad_chain, "signature").substr(0, 4), "pass") << status(bad_chain, "signature");
  EXPECT_EQ(status(bad_chain, "chain").substr(0, 4), "fail") << status(bad_chain, "chain");
  for (const char* tampered : {"sdk/rims/NV_GPU_DRIVER_GH100_535.86.09_measurement_mismatch.xml", "sdk/rims/NV_GPU_DRIVER_GH100_570.124.03_expired.xml",
                               "sdk/rims/NV_SWITCH_BIOS_5612_0002_890_9610550001_invalid_signature.xml",
                               "sdk/rims/NV_SWITCH_BIOS_5612_0002_890_9610550001_measurement_mismatch.xml"}) {
    const auto r = rim(tampered);
    EXPECT_NE(status(r, "signature").find("fail: the document's SHA-384 is not the signed DigestValue"), std::string::npos) << tampered;
  }
  // Signed, but its index 9 is not what the SDK's report measured.
  const auto vbios = rim("sdk/rims/NV_GPU_VBIOS_1010_0200_882_96005E0001_measurement_mismatch.xml");
  EXPECT_EQ(status(vbios, "signature").substr(0, 4), "pass");
  EXPECT_EQ(failed(compare_measurements(report("sdk/gpu/hopperAttestationReport.txt"), nullptr, &vbios.rim)), (std::vector<unsigned>{9}));
}

TEST(Rim, EveryPublishedVbiosRimVerifiesToTheRimRoot) {
  NEED_VECTORS();
  std::size_t n = 0;
  for (const auto& entry : fs::directory_iterator(k_rim_vectors / "nvtrust/vbios_rims")) {
    const auto r = rim(fs::relative(entry.path(), k_rim_vectors).string());
    EXPECT_EQ(status(r, "signature").substr(0, 4), "pass") << entry.path() << status(r, "signature");
    EXPECT_EQ(status(r, "chain").substr(0, 4), "pass") << entry.path() << status(r, "chain");
    ++n;
  }
  EXPECT_EQ(n, 23u);  // the folder holds 23 (the research table counts 22)
}

TEST(Rim, TheNvswitchReportMatchesItsBiosRim) {
  NEED_VECTORS();
  const auto bios = rim("sdk/switch/switchVBIOSRim_NV_SWITCH_BIOS_5612_0002_890_9610550001.xml");
  EXPECT_EQ(status(bios, "signature").substr(0, 4), "pass") << status(bios, "signature");
  EXPECT_EQ(status(bios, "chain").substr(0, 4), "pass") << status(bios, "chain");
  const Report r = report("sdk/switch/switchAttestationReport.txt");
  EXPECT_EQ(vbios_rim_id(r, DeviceKind::nvswitch), "NV_SWITCH_BIOS_5612_0002_890_9610550001");
  EXPECT_EQ(driver_rim_id(r, DeviceKind::nvswitch), "");
  const auto m = compare_measurements(r, nullptr, &bios.rim);
  EXPECT_TRUE(failed(m).empty());
  EXPECT_EQ(m.indices.size(), 31u);
}

TEST(Rim, RimIdsFollowTheServicesNaming) {
  NEED_VECTORS();
  EXPECT_EQ(driver_rim_id(report("trustee/blackwellAttestationReport.txt"), DeviceKind::blackwell), "NV_GPU_CC_DRIVER_GB202_595.58.03");
  EXPECT_EQ(driver_rim_id(report("sdk/gpu/blackwellAttestationReport.txt"), DeviceKind::blackwell), "NV_GPU_CC_DRIVER_GB100_575.32");
  EXPECT_EQ(device_kind_of("serialNumber=75, C=US, O=NVIDIA Corporation, CN=GH100 A01 GSP FMC LF"), DeviceKind::hopper);
  EXPECT_EQ(device_kind_of("CN=GB20X A01 GSP FMC LF"), DeviceKind::blackwell);
  EXPECT_EQ(device_kind_of("CN=LS_10 A01 FSP FMC LF"), DeviceKind::nvswitch);
  EXPECT_FALSE(is_rim_id("../etc/passwd"));
  EXPECT_FALSE(is_rim_id("a/b"));
  EXPECT_FALSE(is_rim_id(""));
  EXPECT_TRUE(is_rim_id("NV_GPU_DRIVER_GH100_595.71.05"));
}

TEST(Rim, MalformedXmlIsAnErrorThatSaysWhyNeverACrash) {
  EXPECT_EQ(check_rim("not xml", "x.xml", "rim", k_rim_now).error().id, "attest.bad_rim");
  const std::string laughs = "<?xml version=\"1.0\"?><!DOCTYPE l [<!ENTITY a \"aaaaaaaaaa\"><!ENTITY b \"&a;&a;&a;&a;&a;&a;&a;\">]><l>&b;</l>";
  auto dtd = check_rim(laughs, "x.xml", "rim", k_rim_now);
  ASSERT_FALSE(dtd.ok());
  EXPECT_NE(dtd.error().message.find("document type"), std::string::npos) << dtd.error().message;
  EXPECT_EQ(check_rim("<a/>", "x.xml", "rim", k_rim_now).error().message, "the root element is not a SWID SoftwareIdentity");
  if (!fs::exists(k_rim_vectors / "vectors.json")) return;
  const std::string good = slurp(k_rim_vectors / "e2e_azure_h100_595/NV_GPU_VBIOS_1010_0210_886_96009F0004.xml");
  for (std::size_t n = 0; n < good.size(); n += 97) EXPECT_FALSE(check_rim(good.substr(0, n), "x.xml", "rim", k_rim_now).ok()) << n;
}

TEST(Rim, AChangedMeasurementOrAMovedSignatureDoesNotVerify) {
  NEED_VECTORS();
  std::string xml = slurp(k_rim_vectors / "e2e_azure_h100_595/NV_GPU_VBIOS_1010_0210_886_96009F0004.xml");
  std::string changed = xml;
  const auto at = changed.find("Hash0=\"", changed.find("index=\"9\"")) + 7;
  changed[at] = changed[at] == 'a' ? 'b' : 'a';
  auto r = check_rim(changed, "x.xml", "rim", k_rim_now);
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  EXPECT_EQ(r->claims.front().status, ClaimStatus::fail);
  // A second signature, or one inside the payload (where a wrapped copy could hide), is refused outright.
  const auto sig_at = xml.find("<ds:Signature"), end_at = xml.find("</ds:Signature>") + 15;
  const std::string sig = xml.substr(sig_at, end_at - sig_at);
  std::string twice = xml;
  twice.insert(sig_at, sig);
  EXPECT_EQ(check_rim(twice, "x.xml", "rim", k_rim_now).error().id, "attest.bad_rim");
  std::string moved = xml;
  moved.erase(sig_at, end_at - sig_at);
  moved.insert(moved.find("</ns0:Payload>"), sig);
  EXPECT_EQ(check_rim(moved, "x.xml", "rim", k_rim_now).error().id, "attest.bad_rim");
}

TEST(Rim, TheDirectoryStoreReadsXmlOrASavedServiceAnswerAndRefusesPathsAsIds) {
  NEED_VECTORS();
  auto azure = make_directory_rim_store((k_rim_vectors / "e2e_azure_h100_595").string());
  auto xml = azure->get("NV_GPU_DRIVER_GH100_595.71.05");
  ASSERT_TRUE(xml.ok()) << xml.error().to_string();
  auto service = make_directory_rim_store((k_rim_vectors / "e2e_azure_h100_595/rim-service").string());
  auto from_json = service->get("NV_GPU_DRIVER_GH100_595.71.05");
  ASSERT_TRUE(from_json.ok()) << from_json.error().to_string();
  EXPECT_EQ(*xml, *from_json);
  EXPECT_EQ(azure->get("NV_GPU_DRIVER_GH100_1.0").error().id, "attest.rim_not_found");
  EXPECT_EQ(azure->get("../e2e_nvtrust_2023/Driver_RIM_test_no_gpu").error().id, "attest.bad_rim_id");
}

}  // namespace
