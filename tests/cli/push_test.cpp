// `gpuenv build LOCK --push REF` in process against the real docker-registry on 127.0.0.1 serving TLS (a test CA)
// and htpasswd basic auth together: credentials from GPUENV_REGISTRY_USER/PASSWORD and from a Docker config.json,
// the CA from --ca-bundle and from GPUENV_CA_BUNDLE. What was pushed is read back with skopeo. A wrong password
// and a missing CA are clear errors (exit 4) that never show the password.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "cli/context.hpp"
#include "fakes/cli_in_process.hpp"
#include "fakes/docker_registry.hpp"
#include "fakes/registry_suite.hpp"
#include "base/net/curl_fetcher.hpp"
#include "images/registry/registry_client.hpp"

namespace {

namespace fs = std::filesystem;
using gpuenv::testing::DockerRegistry;

/// A lock with no packages and no Python: it builds, offline, into an image holding only gpuenv's metadata layer.
const std::string k_empty_lock_path = std::string(GPUENV_SOURCE_DIR) + "/tests/data/locks/empty.lock";

using CliResult = gpuenv::testing::CliOutcome;

class CliPush : public gpuenv::testing::RegistrySuite<DockerRegistry::Setup::tls_basic> {
 protected:
  void SetUp() override {
    RegistrySuite::SetUp();
    if (IsSkipped()) return;
    gpuenv::testing::write_file(m_dir / "empty.lock", gpuenv::testing::read_file(k_empty_lock_path));
    fs::create_directories(m_dir / "home");  // no ~/.docker/config.json there
  }

  /// `gpuenv build` on the empty lock with `args` after it, with only the given variables (and the cache, HOME and
  /// SOURCE_DATE_EPOCH) in the environment.
  CliResult build(std::vector<std::string> args, const std::map<std::string, std::string>& env) {
    std::map<std::string, std::string> all = {{"GPUENV_CACHE_DIR", m_dir / "cache"}, {"HOME", m_dir / "home"}, {"SOURCE_DATE_EPOCH", "1700000000"}};
    for (const auto& [k, v] : env) all[k] = v;
    args.insert(args.begin(), {"build", m_dir / "empty.lock"});
    return gpuenv::testing::run_cli_in_process(args, all);
  }

  /// The digest skopeo reports for `ref`, trusting only the test CA and logging in with the test user.
  static std::string skopeo_digest(const std::string& ref) {
    const auto out = gpuenv::testing::run("skopeo inspect --tls-verify=true --cert-dir " + s_registry->cert_dir() + " --creds " +
                                          DockerRegistry::k_user + ":" + DockerRegistry::k_password + " docker://" + ref + " 2>/dev/null");
    if (!out) return "(skopeo failed)";
    const auto j = nlohmann::json::parse(*out, nullptr, false);
    return j.is_object() && j.contains("Digest") ? j["Digest"].get<std::string>() : "(no Digest)";
  }

  /// Checks a successful `--json` build that pushed to `ref`: the pushed digest is the built one, and skopeo sees it.
  static void expect_pushed(const CliResult& r, const std::string& ref) {
    ASSERT_EQ(r.code, 0) << r.err << r.out;
    const auto j = nlohmann::json::parse(r.out, nullptr, false);
    ASSERT_TRUE(j.is_object()) << r.out;
    const std::string digest = j.value("digest", "");
    ASSERT_EQ(digest.rfind("sha256:", 0), 0u) << r.out;
    ASSERT_EQ(j["layers"].size(), 1u) << r.out;
    EXPECT_EQ(j["layers"][0]["name"], "metadata");
    EXPECT_EQ(j["push"]["reference"], ref);
    EXPECT_EQ(j["push"]["digest"], digest);
    if (gpuenv::testing::have("skopeo")) {
      EXPECT_EQ(skopeo_digest(ref), digest);
    }
  }

  gpuenv::testing::RegistryTempDir m_dir;
};

TEST_F(CliPush, CredentialsFromTheEnvironmentAndTheCaFromTheOption) {
  const std::string ref = s_registry->host() + "/ml/x:1";
  const CliResult r = build({"-o", m_dir / "img", "--push", ref, "--ca-bundle", s_registry->ca(), "--json"},
                            {{"GPUENV_REGISTRY_USER", DockerRegistry::k_user}, {"GPUENV_REGISTRY_PASSWORD", DockerRegistry::k_password}});
  expect_pushed(r, ref);
  EXPECT_EQ(r.out.find(DockerRegistry::k_password), std::string::npos);
  EXPECT_EQ(r.err.find(DockerRegistry::k_password), std::string::npos);
}

TEST_F(CliPush, CredentialsFromADockerConfigAndTheCaFromTheEnvironment) {
  fs::create_directories(m_dir / "docker");
  const std::string auth = gpuenv::images::base64_encode(std::string(DockerRegistry::k_user) + ":" + DockerRegistry::k_password);
  gpuenv::testing::write_file(m_dir / "docker/config.json", R"({"auths":{")" + s_registry->host() + R"(":{"auth":")" + auth + R"("}}})");
  const std::string ref = s_registry->host() + "/ml/x:2";
  const CliResult r = build({"-o", m_dir / "img", "--push", ref, "--json"}, {{"DOCKER_CONFIG", m_dir / "docker"}, {"GPUENV_CA_BUNDLE", s_registry->ca()}});
  expect_pushed(r, ref);
}

TEST_F(CliPush, WrongPasswordIsAnAuthErrorThatNeverShowsThePassword) {
  const std::string wrong = "Wr0ng-pa55word-xyz";
  const CliResult r = build({"-o", m_dir / "img", "--push", s_registry->host() + "/ml/x:3", "--ca-bundle", s_registry->ca(), "--json"},
                            {{"GPUENV_REGISTRY_USER", DockerRegistry::k_user}, {"GPUENV_REGISTRY_PASSWORD", wrong}});
  EXPECT_EQ(r.code, 4) << r.err << r.out;
  EXPECT_NE(r.err.find("[registry.auth]"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("pushing to " + s_registry->host() + "/ml/x:3"), std::string::npos) << r.err;
  const auto j = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << r.out;
  EXPECT_NE(j.dump().find("registry.auth"), std::string::npos) << r.out;
  for (const std::string& secret : {wrong, gpuenv::images::base64_encode(std::string(DockerRegistry::k_user) + ":" + wrong)}) {
    EXPECT_EQ(r.out.find(secret), std::string::npos) << r.out;
    EXPECT_EQ(r.err.find(secret), std::string::npos) << r.err;
  }

  // The same password in a Docker config instead: the same error, still not shown.
  fs::create_directories(m_dir / "docker");
  gpuenv::testing::write_file(m_dir / "docker/config.json",
                              R"({"auths":{")" + s_registry->host() + R"(":{"username":")" + DockerRegistry::k_user + R"(","password":")" + wrong + R"("}}})");
  const CliResult c = build({"-o", m_dir / "img", "--push", s_registry->host() + "/ml/x:3"}, {{"DOCKER_CONFIG", m_dir / "docker"}, {"GPUENV_CA_BUNDLE", s_registry->ca()}});
  EXPECT_EQ(c.code, 4) << c.err << c.out;
  EXPECT_NE(c.err.find("[registry.auth]"), std::string::npos) << c.err;
  EXPECT_EQ(c.out.find(wrong), std::string::npos) << c.out;
  EXPECT_EQ(c.err.find(wrong), std::string::npos) << c.err;
}

TEST_F(CliPush, WithoutTheCaTheServerIsNotTrusted) {
  const CliResult r = build({"-o", m_dir / "img", "--push", s_registry->host() + "/ml/x:4", "--json"},
                            {{"GPUENV_REGISTRY_USER", DockerRegistry::k_user}, {"GPUENV_REGISTRY_PASSWORD", DockerRegistry::k_password}});
  EXPECT_EQ(r.code, 4) << r.err << r.out;
  EXPECT_NE(r.err.find("[http.tls]"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("pushing to " + s_registry->host() + "/ml/x:4"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find(DockerRegistry::k_password), std::string::npos) << r.err;
  if (gpuenv::testing::have("skopeo")) {
    EXPECT_EQ(skopeo_digest(s_registry->host() + "/ml/x:4"), "(skopeo failed)");  // nothing was tagged
  }
}

}  // namespace
