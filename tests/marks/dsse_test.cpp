// Signing keys and DSSE envelopes, checked against OpenSSL's command line and, where the test script made its
// virtual environment, PyPI's securesystemslib (independent readers of the same bytes).
#include "marks/dsse.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>

#include "marks/keys.hpp"

namespace {

namespace fs = std::filesystem;
using namespace gpuenv::marks;

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::string capture(const std::string& cmd) {
  std::string out;
  FILE* f = ::popen((cmd + " 2>&1").c_str(), "r");
  if (f == nullptr) return out;
  char buf[4096];
  std::size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
  ::pclose(f);
  return out;
}

class Marks : public ::testing::Test {
 protected:
  void SetUp() override {
    dir = fs::temp_directory_path() / ("gpuenv-marks-" + std::to_string(::getpid()) + "-" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir);
  }
  void TearDown() override { fs::remove_all(dir); }
  Key pair(const std::string& name) {
    auto k = generate_key();
    EXPECT_TRUE(k.ok());
    EXPECT_TRUE(write_key_pair(*k, (dir / name).string(), false).ok());
    return std::move(*k);
  }
  fs::path dir;
};

TEST(Dsse, PreAuthenticationEncodingIsTheSpecsTestVector) {
  EXPECT_EQ(pre_authentication_encoding("http://example.com/HelloWorld", "hello world"), "DSSEv1 29 http://example.com/HelloWorld 11 hello world");
  EXPECT_EQ(pre_authentication_encoding(k_in_toto_payload_type, ""), "DSSEv1 28 application/vnd.in-toto+json 0 ");
}

TEST(Dsse, Base64IsStandardWithPaddingAndReadsUrlSafeToo) {
  EXPECT_EQ(base64_encode(""), "");
  EXPECT_EQ(base64_encode("f"), "Zg==");
  EXPECT_EQ(base64_encode("fo"), "Zm8=");
  EXPECT_EQ(base64_encode("foobar"), "Zm9vYmFy");
  EXPECT_EQ(base64_encode("\xfb\xff"), "+/8=");
  EXPECT_EQ(base64_decode("+/8="), std::optional<std::string>("\xfb\xff"));
  EXPECT_EQ(base64_decode("-_8"), std::optional<std::string>("\xfb\xff"));  // URL-safe, unpadded
  EXPECT_EQ(base64_decode("Zm9vYmFy"), std::optional<std::string>("foobar"));
  EXPECT_FALSE(base64_decode("Zm9v!mFy"));
  EXPECT_FALSE(base64_decode("Z"));
  EXPECT_FALSE(base64_decode("Zh=="));  // trailing bits set: not what any encoder writes
}

TEST_F(Marks, AGeneratedPairIsAPrivateFileAndAPublicOneThatReadBack) {
  const Key key = pair("k");
  struct stat st {};
  ASSERT_EQ(::stat((dir / "k/gpuenv.key").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_NE(slurp(dir / "k/gpuenv.key").find("-----BEGIN PRIVATE KEY-----"), std::string::npos);
  EXPECT_NE(slurp(dir / "k/gpuenv.pub").find("-----BEGIN PUBLIC KEY-----"), std::string::npos);
  auto priv = read_private_key((dir / "k/gpuenv.key").string());
  auto pub = read_public_key((dir / "k/gpuenv.pub").string());
  ASSERT_TRUE(priv.ok()) << priv.error().to_string();
  ASSERT_TRUE(pub.ok()) << pub.error().to_string();
  EXPECT_TRUE(priv->can_sign());
  EXPECT_FALSE(pub->can_sign());
  EXPECT_EQ(pub->fingerprint(), key.fingerprint());
  EXPECT_EQ(pub->public_pem(), slurp(dir / "k/gpuenv.pub"));
  // OpenSSL reads both as a P-256 pair.
  EXPECT_NE(capture("openssl pkey -in " + (dir / "k/gpuenv.key").string() + " -noout -text").find("prime256v1"), std::string::npos);
  EXPECT_EQ(capture("openssl pkey -in " + (dir / "k/gpuenv.key").string() + " -pubout"), slurp(dir / "k/gpuenv.pub"));
  auto again = write_key_pair(key, (dir / "k").string(), false);
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.error().id, "key.exists");
}

TEST_F(Marks, KeysThatAreNotP256PrivatePemFilesOfTheirOwnerAreRefusedWithAReason) {
  pair("k");
  const std::string priv = (dir / "k/gpuenv.key").string();
  ::chmod(priv.c_str(), 0644);
  auto open = read_private_key(priv);
  ASSERT_FALSE(open.ok());
  EXPECT_EQ(open.error().id, "key.permissions");
  EXPECT_NE(open.error().hint.find("chmod 600"), std::string::npos);
  EXPECT_EQ(open.error().message.find("PRIVATE KEY"), std::string::npos) << "no key bytes in errors";
  EXPECT_EQ(read_private_key((dir / "nothere.key").string()).error().id, "key.not_found");
  EXPECT_EQ(parse_private_key("-----BEGIN ENCRYPTED PRIVATE KEY-----\nAAAA\n-----END ENCRYPTED PRIVATE KEY-----\n", "x").error().id, "key.bad_private");
  EXPECT_EQ(parse_private_key("not a key", "x").error().id, "key.bad_private");
  EXPECT_EQ(parse_public_key(slurp(priv), "x").error().id, "key.bad_public");  // a private key where the public one goes
  const std::string p384 = (dir / "p384.pem").string(), rsa = (dir / "rsa.pem").string();
  ASSERT_EQ(std::system(("openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-384 -out " + p384 + " 2>/dev/null").c_str()), 0);
  ASSERT_EQ(std::system(("openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out " + rsa + " 2>/dev/null").c_str()), 0);
  auto curve = parse_private_key(slurp(p384), p384);
  ASSERT_FALSE(curve.ok());
  EXPECT_NE(curve.error().message.find("P-256"), std::string::npos);
  EXPECT_EQ(parse_private_key(slurp(rsa), rsa).error().id, "key.bad_private");
  EXPECT_EQ(parse_public_key(capture("openssl pkey -in " + p384 + " -pubout"), "x").error().id, "key.bad_public");
}

TEST_F(Marks, AnEnvelopeVerifiesUnderItsKeyOnlyAndOpenSslAgreesOnTheBytes) {
  const Key signer = pair("a"), other = pair("b");
  const std::string payload = R"({"_type":"https://in-toto.io/Statement/v1","subject":[]})";
  auto env_text = sign_envelope(payload, k_in_toto_payload_type, signer);
  ASSERT_TRUE(env_text.ok()) << env_text.error().to_string();
  auto env = parse_envelope(*env_text, "env.json");
  ASSERT_TRUE(env.ok()) << env.error().to_string();
  EXPECT_EQ(env->payload, payload);
  EXPECT_EQ(env->payload_type, "application/vnd.in-toto+json");
  ASSERT_EQ(env->signatures.size(), 1u);
  const auto signer_pub = read_public_key((dir / "a/gpuenv.pub").string());
  const auto other_pub = read_public_key((dir / "b/gpuenv.pub").string());
  ASSERT_TRUE(signer_pub.ok() && other_pub.ok());
  EXPECT_EQ(verifying_key(*env, {&*other_pub, &*signer_pub}), 1);
  EXPECT_EQ(verifying_key(*env, {&*other_pub}), -1);
  Envelope changed = *env;
  changed.payload[10] ^= 1;
  EXPECT_EQ(verifying_key(changed, {&*signer_pub}), -1);
  Envelope retyped = *env;
  retyped.payload_type = "application/json";
  EXPECT_EQ(verifying_key(retyped, {&*signer_pub}), -1);
  // The envelope as cosign reads it: standard base64 and an empty keyid.
  EXPECT_NE(env_text->find(R"("keyid":"")"), std::string::npos);
  EXPECT_NE(env_text->find("\"payload\":\"" + base64_encode(payload) + "\""), std::string::npos);
  // OpenSSL verifies the DER signature over pre-authentication bytes this test builds itself.
  std::ofstream(dir / "pae.bin", std::ios::binary) << "DSSEv1 28 application/vnd.in-toto+json " << payload.size() << " " << payload;
  std::ofstream(dir / "sig.der", std::ios::binary) << env->signatures[0];
  EXPECT_EQ(capture("openssl dgst -sha256 -verify " + (dir / "a/gpuenv.pub").string() + " -signature " + (dir / "sig.der").string() + " " + (dir / "pae.bin").string()),
            "Verified OK\n");
  EXPECT_NE(capture("openssl dgst -sha256 -verify " + (dir / "b/gpuenv.pub").string() + " -signature " + (dir / "sig.der").string() + " " + (dir / "pae.bin").string()),
            "Verified OK\n");
  // securesystemslib (PyPI) verifies the envelope as DSSE's reference implementation does.
  const fs::path python = fs::path(GPUENV_TEST_VENV) / "bin/python";
  if (!fs::exists(python)) GTEST_SKIP() << "no " << python << " with securesystemslib (scripts/test.sh makes it)";
  std::ofstream(dir / "env.json") << *env_text;
  std::ofstream(dir / "check.py") << "import sys\nfrom securesystemslib.dsse import Envelope\nfrom securesystemslib.signer import SSlibKey\n"
                                     "env = Envelope.from_dict(__import__('json').load(open(sys.argv[1])))\n"
                                     "key = SSlibKey('', 'ecdsa', 'ecdsa-sha2-nistp256', {'public': open(sys.argv[2]).read()})\n"
                                     "try:\n    env.verify([key], 1)\n    print('verified')\nexcept Exception as e:\n    print('refused', type(e).__name__)\n";
  EXPECT_EQ(capture(python.string() + " " + (dir / "check.py").string() + " " + (dir / "env.json").string() + " " + (dir / "a/gpuenv.pub").string()), "verified\n");
  EXPECT_EQ(capture(python.string() + " " + (dir / "check.py").string() + " " + (dir / "env.json").string() + " " + (dir / "b/gpuenv.pub").string()).rfind("refused", 0), 0u);
}

TEST(Dsse, MalformedEnvelopesSayWhatIsWrong) {
  for (const char* text : {"", "[]", "{\"payloadType\":\"x\"}", "{\"payload\":\"Zm9v\",\"payloadType\":\"x\",\"signatures\":[]}",
                           "{\"payload\":\"!!\",\"payloadType\":\"x\",\"signatures\":[{\"sig\":\"AA==\"}]}",
                           "{\"payload\":\"Zm9v\",\"payloadType\":\"x\",\"signatures\":[{\"keyid\":\"\"}]}"}) {
    auto e = parse_envelope(text, "layer");
    ASSERT_FALSE(e.ok()) << text;
    EXPECT_EQ(e.error().id, "mark.bad_envelope") << text;
    EXPECT_EQ(e.error().where, "layer");
  }
  EXPECT_FALSE(parse_envelope(std::string(5u << 20, ' '), "big").ok());
}

}  // namespace
