// The device half of attestation on published evidence (../shared/cc_vectors, read at run time; each test skips,
// saying so, where it is absent): every claim of the valid reports passes, and each invalid one fails the claim
// its publisher found broken (signature, chain, FWID, nonce), naming why.
#include "attest/verify.hpp"

#include <gtest/gtest.h>

#include "fakes/cc_vectors.hpp"

#include <filesystem>
#include <fstream>
#include <iterator>

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

namespace {

namespace fs = std::filesystem;
using namespace gpuenv::attest;

const fs::path& k_verify_vectors = gpuenv::testing::k_cc_vectors;
using gpuenv::testing::slurp;
constexpr std::int64_t k_verify_now = 1796169600;  // 2026-12-02

std::string unhex(const std::string& hex) {
  std::string out;
  for (std::size_t i = 0; i + 1 < hex.size(); i += 2) out += static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16));
  return out;
}

/// The claims of REPORT (a vector file) with CHAIN, the nonce given as hex (or none).
DeviceClaims claims(const std::string& report, const std::string& chain, const std::optional<std::string>& nonce_hex = std::nullopt) {
  const std::string path = (k_verify_vectors / report).string();
  auto bytes = report_bytes(slurp(path), path);
  EXPECT_TRUE(bytes.ok());
  auto r = parse_report(*bytes, path);
  EXPECT_TRUE(r.ok()) << r.error().to_string();
  std::optional<std::string> nonce;
  if (nonce_hex) nonce = unhex(*nonce_hex);
  auto c = verify_device(*r, slurp(k_verify_vectors / chain), nonce, k_verify_now);
  EXPECT_TRUE(c.ok()) << c.error().to_string();
  return *c;
}

std::string status(const DeviceClaims& c, const char* name) {
  const Claim* claim = c.find(name);
  return claim ? std::string(to_string(claim->status)) + ": " + claim->detail : std::string("(no claim)");
}

TEST(Verify, ThePinnedRootIsTheOneNvidiaPublishes) {
  NEED_VECTORS();
  const std::string pem = slurp(k_verify_vectors / "roots/verifier_device_root.pem");
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  X509* root = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr);
  ASSERT_NE(root, nullptr);
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  X509_digest(root, EVP_sha256(), md, &len);
  EXPECT_EQ(to_hex(std::string_view(reinterpret_cast<const char*>(md), len)), k_device_root_sha256);
  X509_free(root);
  BIO_free(bio);
}

TEST(Verify, ValidEvidencePassesEveryClaim) {
  NEED_VECTORS();
  struct Case {
    const char *report, *chain, *nonce;
    bool fwid;
  };
  const Case cases[] = {
      {"e2e_azure_h100_595/gpu0-attestation-report.bin", "e2e_azure_h100_595/gpu0-cert-chain.pem",
       "690bb51b904351e28100a0610fe60624255c26d7d38c53fb1285ecfed1cab17a", true},
      {"e2e_nvtrust_2023/attestationReport.hex", "e2e_nvtrust_2023/gpuAkCertChain.pem", "4cff7f5380ead8fad8ec2c531c110aca4302a88f603792801a8ca29ee151af2e",
       false},
      {"nvtrust/hopperAttestationReport.txt", "nvtrust/hopperCertChain.txt", "931d8dd0add203ac3d8b4fbde75e115278eefcdceac5b87671a748f32364dfcb", true},
      {"sdk/gpu/blackwellAttestationReport.txt", "sdk/gpu/blackwellCertChain.txt", nullptr, true},  // FWID from the DICE extension
      {"sdk/switch/switchAttestationReport.txt", "sdk/switch/switchCertChain.txt", nullptr, false},
      {"sdk_2026_10/blackwellFspAttestationReport.txt", "sdk_2026_10/blackwellFspCertChain.txt", nullptr, false},
  };
  for (const auto& k : cases) {
    const DeviceClaims c = claims(k.report, k.chain, k.nonce ? std::optional<std::string>(k.nonce) : std::nullopt);
    EXPECT_EQ(status(c, "signature").rfind("pass", 0), 0u) << k.report << ": " << status(c, "signature");
    EXPECT_EQ(status(c, "chain").rfind("pass", 0), 0u) << k.report << ": " << status(c, "chain");
    EXPECT_EQ(status(c, "fwid").rfind(k.fwid ? "pass" : "not_checked", 0), 0u) << k.report << ": " << status(c, "fwid");
    EXPECT_EQ(status(c, "nonce").rfind(k.nonce ? "pass" : "not_checked", 0), 0u) << k.report << ": " << status(c, "nonce");
  }
}

TEST(Verify, EachBrokenPieceFailsItsOwnClaim) {
  NEED_VECTORS();
  // A signature that does not verify, and a FWID that is not the chain's (the SDK's invalid-signature sample).
  DeviceClaims c = claims("sdk/gpu/hopperAttestationReportInvalidSignature.txt", "sdk/gpu/hopperCertChainExpired.txt");
  EXPECT_EQ(status(c, "signature").rfind("fail", 0), 0u) << status(c, "signature");
  EXPECT_EQ(status(c, "fwid").rfind("fail", 0), 0u) << status(c, "fwid");
  EXPECT_EQ(status(c, "chain").rfind("pass", 0), 0u) << status(c, "chain");
  c = claims("sdk/switch/switchAttestationReportInvalidSignature.txt", "sdk/switch/switchCertChain.txt");
  EXPECT_EQ(status(c, "signature").rfind("fail", 0), 0u) << status(c, "signature");
  // The nonce the SDK's bad-nonce test sends.
  c = claims("sdk/gpu/hopperAttestationReport.txt", "sdk/gpu/hopperCertChain.txt", std::string(64, '0'));
  EXPECT_EQ(status(c, "nonce").rfind("fail", 0), 0u) << status(c, "nonce");
  EXPECT_NE(status(c, "nonce").find("27a328247bf7935c"), std::string::npos) << status(c, "nonce");
  EXPECT_EQ(status(c, "signature").rfind("pass", 0), 0u);
  // Chains cut short (trustee's cases): root only, provisioner missing, leaf missing.
  for (const char* chain : {"trustee/hopper_cert_chain_case2.txt", "trustee/hopper_cert_chain_case3.txt", "trustee/hopper_cert_chain_case4.txt"}) {
    c = claims("nvtrust/hopperAttestationReport.txt", chain);
    EXPECT_EQ(status(c, "chain").rfind("fail", 0), 0u) << chain << ": " << status(c, "chain");
  }
  // Another GPU's chain: the signature is not its leaf's, and the FWIDs differ.
  c = claims("nvtrust/hopperAttestationReport.txt", "e2e_azure_h100_595/gpu0-cert-chain.pem");
  EXPECT_EQ(status(c, "signature").rfind("fail", 0), 0u);
  EXPECT_EQ(status(c, "fwid").rfind("fail", 0), 0u);
  EXPECT_EQ(status(c, "chain").rfind("pass", 0), 0u) << "a whole chain, but of another GPU";
  // A chain ending in a root that is not NVIDIA's: the RIM root in its place.
  std::string chain = slurp(k_verify_vectors / "nvtrust/hopperCertChain.txt");
  const std::string end = "-----END CERTIFICATE-----";
  std::size_t cut = 0;
  for (int i = 0; i < 4; ++i) cut = chain.find(end, cut) + end.size();
  const std::string swapped = chain.substr(0, cut) + "\n" + slurp(k_verify_vectors / "roots/verifier_RIM_root.pem");
  auto bytes = report_bytes(slurp(k_verify_vectors / "nvtrust/hopperAttestationReport.txt"), "r");
  auto report = parse_report(*bytes, "r");
  ASSERT_TRUE(report.ok());
  auto v = verify_device(*report, swapped, std::nullopt, k_verify_now);
  ASSERT_TRUE(v.ok());
  EXPECT_NE(status(*v, "chain").find("not NVIDIA's device identity root"), std::string::npos) << status(*v, "chain");
  EXPECT_EQ(verify_device(*report, "no certificate here", std::nullopt, k_verify_now).error().id, "attest.bad_chain");
}

TEST(Verify, TheDiceFwidIsReadFromItsTaggedFieldAndNothingElse) {
  auto der = [](unsigned char tag, const std::string& content) { return std::string{static_cast<char>(tag), static_cast<char>(content.size())} + content; };
  const std::string sha384 = der(0x06, std::string("\x60\x86\x48\x01\x65\x03\x04\x02\x02", 9));
  const std::string digest(48, 'f');
  const std::string tcb = der(0x30, der(0x80, "NVIDIA") + der(0xA6, der(0x30, sha384 + der(0x04, digest))));
  EXPECT_EQ(dice_tcb_info_fwid(tcb), digest);
  EXPECT_FALSE(dice_tcb_info_fwid(der(0x30, der(0x80, "NVIDIA"))).has_value()) << "no fwids";
  EXPECT_FALSE(dice_tcb_info_fwid(tcb.substr(0, tcb.size() - 1)).has_value()) << "cut short";
  EXPECT_FALSE(dice_tcb_info_fwid("").has_value());
  EXPECT_FALSE(leaf_fwid("not a certificate").has_value());
}

}  // namespace
