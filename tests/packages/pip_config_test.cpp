#include "packages/wheels/pip_config.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

using gpuenv::packages::discover_pip_indexes;
using gpuenv::packages::parse_pip_config;
using gpuenv::packages::PipConfigOption;
using gpuenv::packages::PipIndexConfig;

namespace fs = std::filesystem;

namespace {

// A fresh directory standing in for "/" (system files) with a home directory inside it.
class PipConfigDiscovery : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "gpuenv-pipconf-XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    m_root = pattern;
    m_home = m_root + "/home/user";
    fs::create_directories(m_home);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(m_root, ec);
  }
  // Writes `text` to `path`, which is taken relative to the fake root.
  std::string write(const std::string& path, const std::string& text) {
    const std::string full = m_root + path;
    fs::create_directories(fs::path(full).parent_path());
    std::ofstream(full, std::ios::binary) << text;
    return full;
  }
  PipIndexConfig discover(const std::map<std::string, std::string>& env = {}, const std::string& site = {}) {
    auto r = discover_pip_indexes(env, m_home, m_root, site);
    EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().to_string());
    return r.ok() ? *r : PipIndexConfig{};
  }
  static std::vector<std::string> urls(const PipIndexConfig& c) {
    std::vector<std::string> out;
    for (const auto& u : c.extra_index_urls) out.push_back(u.url);
    return out;
  }

  std::string m_root;
  std::string m_home;
};

const PipConfigOption* find(const std::vector<PipConfigOption>& options, const std::string& section,
                            const std::string& key) {
  for (const auto& o : options) {
    if (o.section == section && o.key == key) return &o;
  }
  return nullptr;
}

TEST(PipConfigParser, ReadsSectionsKeysAndContinuationLines) {
  const char* text =
      "# pip configuration\n"
      "[global]\n"
      "Index_URL = http://127.0.0.1:8080/simple \n"
      "extra-index-url =\n"
      "    http://example.com/a/simple\n"
      "\n"
      "    ; a comment inside the value\n"
      "    http://example.com/b/simple http://example.com/c/simple\n"
      "[install]\r\n"
      "--timeout: 30\r\n";
  auto parsed = parse_pip_config(text, "pip.conf");
  ASSERT_TRUE(parsed.ok()) << parsed.error().to_string();
  const auto* index = find(*parsed, "global", "index-url");
  ASSERT_NE(index, nullptr);
  EXPECT_EQ(index->value, "http://127.0.0.1:8080/simple");
  EXPECT_EQ(index->line, 3);
  const auto* extra = find(*parsed, "global", "extra-index-url");
  ASSERT_NE(extra, nullptr);
  EXPECT_EQ(extra->value, "\nhttp://example.com/a/simple\n\nhttp://example.com/b/simple http://example.com/c/simple");
  ASSERT_EQ(extra->value_lines.size(), 2U);
  EXPECT_EQ(extra->value_lines[0].first, 5);
  EXPECT_EQ(extra->value_lines[1].first, 8);
  const auto* timeout = find(*parsed, "install", "timeout");
  ASSERT_NE(timeout, nullptr);
  EXPECT_EQ(timeout->value, "30");
}

TEST(PipConfigParser, CopiesDefaultValuesIntoEverySection) {
  auto parsed = parse_pip_config("[DEFAULT]\nindex-url = http://example.com/d\n[global]\n[install]\n"
                                 "index-url = http://example.com/i\n",
                                 "pip.conf");
  ASSERT_TRUE(parsed.ok());
  ASSERT_NE(find(*parsed, "global", "index-url"), nullptr);
  EXPECT_EQ(find(*parsed, "global", "index-url")->value, "http://example.com/d");
  EXPECT_EQ(find(*parsed, "install", "index-url")->value, "http://example.com/i");
  EXPECT_EQ(find(*parsed, "DEFAULT", "index-url"), nullptr);
}

TEST(PipConfigParser, RejectsWhatConfigparserRejectsWithFileAndLine) {
  struct Case {
    const char* text;
    const char* where;
  };
  for (const Case& c : {Case{"index-url = x\n", "p.conf:1"}, Case{"[global]\njust words\n", "p.conf:2"},
                        Case{"[global]\n= value\n", "p.conf:2"}, Case{"[global]\n[install]\n[global]\n", "p.conf:3"},
                        Case{"[global]\na = 1\nA = 2\n", "p.conf:3"}}) {
    auto parsed = parse_pip_config(c.text, "p.conf");
    ASSERT_FALSE(parsed.ok()) << c.text;
    EXPECT_EQ(parsed.error().id, "pip_config.syntax");
    EXPECT_EQ(parsed.error().where, c.where) << c.text;
  }
}

TEST_F(PipConfigDiscovery, ReturnsNothingWhenNothingIsConfigured) {
  const auto c = discover();
  EXPECT_TRUE(c.index_url.url.empty());
  EXPECT_TRUE(c.extra_index_urls.empty());
  EXPECT_TRUE(c.files_read.empty());
}

TEST_F(PipConfigDiscovery, LaterFilesOverrideEarlierOnes) {
  write("/etc/xdg/pip/pip.conf", "[global]\nindex-url = http://example.com/xdg\n");
  write("/etc/pip.conf", "[global]\nindex-url = http://example.com/etc\n");
  EXPECT_EQ(discover().index_url.url, "http://example.com/etc");
  write("/home/user/.pip/pip.conf", "[global]\nindex-url = http://example.com/legacy\n");
  EXPECT_EQ(discover().index_url.url, "http://example.com/legacy");
  write("/home/user/.config/pip/pip.conf", "[global]\nindex-url = http://example.com/user\n");
  const auto c = discover();
  EXPECT_EQ(c.index_url.url, "http://example.com/user");
  EXPECT_EQ(c.index_url.origin, m_home + "/.config/pip/pip.conf:2");
  EXPECT_EQ(c.files_read.size(), 4U);
  const std::string venv = m_root + "/venv";
  write("/venv/pip.conf", "[global]\nindex-url = http://example.com/site\n");
  EXPECT_EQ(discover({{"VIRTUAL_ENV", venv}}).index_url.url, "http://example.com/site");
  EXPECT_EQ(discover({}, venv).index_url.url, "http://example.com/site");
  const std::string custom = write("/custom.conf", "[global]\nindex-url = http://example.com/custom\n");
  EXPECT_EQ(discover({{"PIP_CONFIG_FILE", custom}, {"VIRTUAL_ENV", venv}}).index_url.url,
            "http://example.com/custom");
}

TEST_F(PipConfigDiscovery, ExistingPipConfigFileSkipsTheUserFiles) {
  write("/home/user/.config/pip/pip.conf", "[global]\nextra-index-url = http://example.com/user\n");
  const std::string custom = write("/custom.conf", "[global]\nindex-url = http://example.com/custom\n");
  auto c = discover({{"PIP_CONFIG_FILE", custom}});
  EXPECT_TRUE(c.extra_index_urls.empty());
  EXPECT_EQ(c.index_url.url, "http://example.com/custom");
  // A PIP_CONFIG_FILE that does not exist leaves the user files in place.
  c = discover({{"PIP_CONFIG_FILE", m_root + "/missing.conf"}});
  EXPECT_EQ(urls(c), (std::vector<std::string>{"http://example.com/user"}));
}

TEST_F(PipConfigDiscovery, InstallSectionBeatsGlobalWhateverTheFile) {
  write("/etc/pip.conf", "[install]\nindex-url = http://example.com/install\n");
  write("/home/user/.config/pip/pip.conf", "[global]\nindex-url = http://example.com/global\n");
  EXPECT_EQ(discover().index_url.url, "http://example.com/install");
}

TEST_F(PipConfigDiscovery, EnvironmentBeatsFilesAndSplitsExtraUrlsOnSpaces) {
  write("/etc/pip.conf", "[install]\nindex-url = http://example.com/install\nextra-index-url = http://example.com/x\n");
  const auto c = discover({{"PIP_INDEX_URL", "http://127.0.0.1/simple"},
                           {"PIP_EXTRA_INDEX_URL", " http://127.0.0.1/a  http://127.0.0.1/b "}});
  EXPECT_EQ(c.index_url.url, "http://127.0.0.1/simple");
  EXPECT_EQ(c.index_url.origin, "PIP_INDEX_URL");
  EXPECT_EQ(urls(c), (std::vector<std::string>{"http://127.0.0.1/a", "http://127.0.0.1/b"}));
  EXPECT_EQ(c.extra_index_urls[1].origin, "PIP_EXTRA_INDEX_URL");
}

TEST_F(PipConfigDiscovery, EmptyEnvironmentValuesAreIgnored) {
  write("/etc/pip.conf", "[global]\nindex-url = http://example.com/etc\n");
  EXPECT_EQ(discover({{"PIP_INDEX_URL", ""}}).index_url.url, "http://example.com/etc");
}

TEST_F(PipConfigDiscovery, DevNullConfigFileDisablesEveryFileButNotTheEnvironment) {
  write("/etc/pip.conf", "[global]\nindex-url = http://example.com/etc\n");
  auto c = discover({{"PIP_CONFIG_FILE", "/dev/null"}});
  EXPECT_TRUE(c.index_url.url.empty());
  EXPECT_TRUE(c.files_read.empty());
  c = discover({{"PIP_CONFIG_FILE", "/dev/null"}, {"PIP_EXTRA_INDEX_URL", "http://127.0.0.1/a"}});
  EXPECT_EQ(urls(c), (std::vector<std::string>{"http://127.0.0.1/a"}));
}

TEST_F(PipConfigDiscovery, EmptyValueInALaterFileClearsTheKey) {
  write("/etc/pip.conf", "[global]\nindex-url = http://example.com/etc\n");
  write("/home/user/.config/pip/pip.conf", "[global]\nindex-url =\n");
  EXPECT_TRUE(discover().index_url.url.empty());
}

TEST_F(PipConfigDiscovery, MultiLineExtraIndexUrlsKeepTheirLines) {
  write("/home/user/.config/pip/pip.conf",
        "[global]\nextra-index-url =\n  http://example.com/a\n  http://example.com/b\n");
  const auto c = discover();
  ASSERT_EQ(urls(c), (std::vector<std::string>{"http://example.com/a", "http://example.com/b"}));
  EXPECT_EQ(c.extra_index_urls[0].origin, m_home + "/.config/pip/pip.conf:3");
  EXPECT_EQ(c.extra_index_urls[1].origin, m_home + "/.config/pip/pip.conf:4");
}

TEST_F(PipConfigDiscovery, HonoursXdgDirectories) {
  write("/xdgsys/pip/pip.conf", "[global]\nindex-url = http://example.com/sys\n");
  EXPECT_EQ(discover({{"XDG_CONFIG_DIRS", "/xdgsys"}}).index_url.url, "http://example.com/sys");
  write("/home/user/cfg/pip/pip.conf", "[global]\nindex-url = http://example.com/cfg\n");
  EXPECT_EQ(discover({{"XDG_CONFIG_HOME", m_home + "/cfg"}}).index_url.url, "http://example.com/cfg");
}

TEST_F(PipConfigDiscovery, ReportsMalformedFilesAndIndexUrls) {
  write("/etc/pip.conf", "[global]\nindex-url = http://example.com/a http://example.com/b\n");
  auto r = discover_pip_indexes({}, m_home, m_root);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().id, "pip_config.index_url");
  EXPECT_EQ(r.error().where, m_root + "/etc/pip.conf:2");

  write("/etc/pip.conf", "index-url = http://example.com/a\n");
  r = discover_pip_indexes({}, m_home, m_root);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().id, "pip_config.syntax");
  EXPECT_EQ(r.error().where, m_root + "/etc/pip.conf:1");

  fs::remove(m_root + "/etc/pip.conf");
  fs::create_directories(m_root + "/etc/pip.conf");
  r = discover_pip_indexes({}, m_home, m_root);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().id, "pip_config.read");
}

}  // namespace
