// Revocation against a real OCSP responder on 127.0.0.1 (`openssl ocsp`, started by each test over a chain the
// test makes with the openssl command line, shaped as a GPU's: the certificate checked is an intermediate, its
// issuer the root): good, revoked, certificateHold allowed or not, an answer signed by a stranger, no responder.
// Skips, saying why, where openssl is missing. (openssl ocsp takes only a port number and listens on every
// interface for the few seconds of a test; the client talks to 127.0.0.1 only.)
#include "attest/ocsp.hpp"

#include <gtest/gtest.h>

#include <ctime>

#include "base/net/http_client.hpp"
#include "fakes/docker_registry.hpp"

namespace {

using namespace gpuenv;
using namespace gpuenv::attest;
using gpuenv::testing::Child;
using gpuenv::testing::RegistryTempDir;

std::string der_of_pem(const std::string& pem_path) {
  auto der = gpuenv::testing::run("openssl x509 -in " + pem_path + " -outform DER");
  return der.value_or("");
}

/// A root, an intermediate it issued (serial 0x10) and a leaf the intermediate issued, in DIR.
bool make_chain(const RegistryTempDir& dir, int port) {
  const std::string d = dir.path();
  const std::string ec = " -newkey ec -pkeyopt ec_paramgen_curve:P-384 -nodes ";
  const std::string ext = d + "/ext.cnf";
  gpuenv::testing::write_file(ext, "[ca]\nbasicConstraints=critical,CA:TRUE\nkeyUsage=critical,keyCertSign,cRLSign\nauthorityInfoAccess=OCSP;URI:http://127.0.0.1:" +
                                       std::to_string(port) + "\n[leaf]\nbasicConstraints=critical,CA:FALSE\n");
  const std::string q = " 2>/dev/null >/dev/null";
  return gpuenv::testing::run("openssl req -x509" + ec + "-keyout " + d + "/root.key -out " + d + "/root.pem -subj /CN=Test-Root -days 3650 -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign" + q) &&
         gpuenv::testing::run("openssl req -new" + ec + "-keyout " + d + "/inter.key -out " + d + "/inter.csr -subj /CN=Test-Intermediate" + q) &&
         gpuenv::testing::run("openssl x509 -req -in " + d + "/inter.csr -CA " + d + "/root.pem -CAkey " + d + "/root.key -set_serial 0x10 -days 3650 -extfile " + ext +
                              " -extensions ca -out " + d + "/inter.pem" + q) &&
         gpuenv::testing::run("openssl req -new" + ec + "-keyout " + d + "/leaf.key -out " + d + "/leaf.csr -subj /CN=Test-Leaf" + q) &&
         gpuenv::testing::run("openssl x509 -req -in " + d + "/leaf.csr -CA " + d + "/inter.pem -CAkey " + d + "/inter.key -set_serial 0x20 -days 3650 -extfile " + ext +
                              " -extensions leaf -out " + d + "/leaf.pem" + q) &&
         gpuenv::testing::run("openssl req -x509" + ec + "-keyout " + d + "/stranger.key -out " + d + "/stranger.pem -subj /CN=Stranger -days 3650" + q);
}

struct Responder {
  RegistryTempDir dir;
  Child child;
  int port = gpuenv::testing::free_port();
  std::vector<std::string> chain;

  /// Serves the root's index: the intermediate with STATUS ("V", or "R" with REVOKED "time,reason"); answers signed by SIGNER.
  bool start(const std::string& status, const std::string& revoked = "", const std::string& signer = "root") {
    if (!make_chain(dir, port)) return false;
    gpuenv::testing::write_file(dir / "index.txt", status + "\t351231000000Z\t" + revoked + "\t10\tunknown\t/CN=Test-Intermediate\n");
    gpuenv::testing::write_file(dir / "index.txt.attr", "unique_subject = no\n");
    child.start({"openssl", "ocsp", "-index", dir / "index.txt", "-port", std::to_string(port), "-rsigner", dir / (signer + ".pem"), "-rkey",
                 dir / (signer + ".key"), "-CA", dir / "root.pem", "-nmin", "60"},
                dir / "ocsp.log");
    // Ready when it says so: a probing connect would hang this one-connection-at-a-time server.
    auto ready = [&] { return gpuenv::testing::read_file(dir / "ocsp.log").find("waiting for OCSP client connections") != std::string::npos; };
    for (int i = 0; i < 100 && !ready(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    chain = {der_of_pem(dir / "leaf.pem"), der_of_pem(dir / "inter.pem"), der_of_pem(dir / "root.pem")};
    return ready();
  }
};

#define NEED_OPENSSL() \
  if (!gpuenv::testing::have("openssl")) GTEST_SKIP() << "openssl is not installed: no OCSP responder to test against"

Claim check(Responder& r, const OcspOptions& options = {}) {
  auto http = make_curl_http_client(HttpOptions{});
  auto transport = make_http_ocsp_transport(*http);
  return check_revocation("revocation", r.chain, 1, *transport, options, std::time(nullptr));
}

TEST(Ocsp, AGoodIntermediatePassesThroughItsOwnResponderUrl) {
  NEED_OPENSSL();
  Responder r;
  ASSERT_TRUE(r.start("V"));
  const Claim c = check(r);  // no URL given: the certificate's AIA names the responder
  EXPECT_EQ(c.status, ClaimStatus::pass) << c.detail;
  EXPECT_EQ(c.detail, "1 certificate good by OCSP");
}

TEST(Ocsp, ARevokedIntermediateFailsAndSaysWhy) {
  NEED_OPENSSL();
  Responder r;
  ASSERT_TRUE(r.start("R", "240101000000Z,keyCompromise"));
  const Claim c = check(r);
  EXPECT_EQ(c.status, ClaimStatus::fail);
  EXPECT_NE(c.detail.find("Test-Intermediate is revoked (keyCompromise)"), std::string::npos) << c.detail;
}

TEST(Ocsp, CertificateHoldIsRevokedUnlessThePolicyAllowsIt) {
  NEED_OPENSSL();
  Responder r;
  ASSERT_TRUE(r.start("R", "240101000000Z,certificateHold"));
  EXPECT_EQ(check(r).status, ClaimStatus::fail);
  OcspOptions allow;
  allow.allow_certificate_hold = true;
  EXPECT_EQ(check(r, allow).status, ClaimStatus::pass);
}

TEST(Ocsp, AnAnswerSignedByAStrangerIsNotTrustedAndNotARevocation) {
  NEED_OPENSSL();
  Responder r;
  ASSERT_TRUE(r.start("R", "240101000000Z,keyCompromise", "stranger"));
  const Claim c = check(r);
  EXPECT_EQ(c.status, ClaimStatus::not_checked) << c.detail;
  EXPECT_NE(c.detail.find("could not check revocation: the answer from"), std::string::npos) << c.detail;
}

TEST(Ocsp, NoResponderIsCouldNotCheckNeverAPass) {
  NEED_OPENSSL();
  Responder r;
  ASSERT_TRUE(r.start("V"));
  r.child.stop();
  const Claim c = check(r);
  EXPECT_EQ(c.status, ClaimStatus::not_checked);
  EXPECT_NE(c.detail.find("could not check revocation: no answer from http://127.0.0.1:"), std::string::npos) << c.detail;
  // A given URL wins over the certificate's own.
  OcspOptions elsewhere;
  elsewhere.url = "http://127.0.0.1:9";
  EXPECT_NE(check(r, elsewhere).detail.find("no answer from http://127.0.0.1:9"), std::string::npos);
}

}  // namespace
