#include "validate/report.hpp"

#include <gtest/gtest.h>

#include <cctype>
#include <cstring>
#include <string_view>
#include <vector>

namespace {

using gpuenv::validate::CheckReport;
using gpuenv::validate::GpuInfo;
using gpuenv::validate::GpuOutcome;
using gpuenv::validate::Level;
using gpuenv::validate::Report;
using gpuenv::validate::CheckStatus;

Report sample(const std::string& backend = "replay") {
  Report r;
  r.backend = backend;
  r.level = Level::quick;
  r.started_at = "2025-01-02T03:04:05Z";
  r.duration_ms = 4200;
  r.driver.loaded = true;
  r.driver.version = "550.54.15";
  r.driver.cuda_driver_version = 12040;
  GpuInfo g;
  g.index = 0;
  g.name = "NVIDIA H200";
  g.uuid = "GPU-abc";
  g.pci_bus_id = "00000000:19:00.0";
  g.pci_device_id = 0x2335;
  g.cc_major = 9;
  g.memory_total_bytes = 150754820096ULL;
  r.gpus.push_back(g);

  r.checks.push_back(CheckReport{"driver_loaded", "software", "the driver answers", CheckStatus::pass, 3,
                                 {GpuOutcome{-1, CheckStatus::pass, "driver 550.54.15 loaded", {}, {}, {}}}});
  r.checks.push_back(CheckReport{"persistence_mode", "software", "persistence", CheckStatus::warn, 1,
                                 {GpuOutcome{0, CheckStatus::warn, "persistence mode off", "persistence_off",
                                             "enable nvidia-persistenced", {}}}});
  r.checks.push_back(CheckReport{
      "memtest", "kernels", "memory test", CheckStatus::fail, 2000,
      {GpuOutcome{0, CheckStatus::fail, "1 word differs at <0x10> & \"more\" 'here'", "memtest_mismatch",
                  "drain the node & open a <ticket>", {{"bytes_tested", 1e9, "B"}, {"errors", 1, ""}}}}});
  r.checks.push_back(CheckReport{"nccl_allreduce", "throughput", "NCCL", CheckStatus::skip, 0,
                                 {GpuOutcome{0, CheckStatus::skip, "NCCL is not in the image", {}, {}, {}}}});
  r.status = CheckStatus::fail;
  return r;
}

std::size_t count(std::string_view text, std::string_view what) {
  std::size_t n = 0;
  for (auto pos = text.find(what); pos != std::string_view::npos; pos = text.find(what, pos + what.size())) ++n;
  return n;
}

// A small XML well-formedness test: balanced tags, one root, quoted attributes, `<` never in text or attribute
// values, `&` only as an entity.
bool well_formed(std::string_view x, std::string* why) {
  std::vector<std::string> open;
  int roots = 0;
  auto entity_ok = [&](std::size_t i) {
    for (const char* e : {"&amp;", "&lt;", "&gt;", "&quot;", "&apos;", "&#9;", "&#10;", "&#13;"})
      if (x.substr(i, std::strlen(e)) == e) return true;
    return false;
  };
  std::size_t i = 0;
  if (x.substr(0, 5) == "<?xml") i = x.find("?>") + 2;
  while (i < x.size()) {
    if (x[i] == '&') {
      if (!entity_ok(i)) return *why = "bare & at " + std::to_string(i), false;
      ++i;
      continue;
    }
    if (x[i] != '<') {
      ++i;
      continue;
    }
    if (x.substr(i, 2) == "</") {
      auto end = x.find('>', i);
      std::string name(x.substr(i + 2, end - i - 2));
      if (open.empty() || open.back() != name) return *why = "unbalanced </" + name + ">", false;
      open.pop_back();
      i = end + 1;
      continue;
    }
    std::size_t j = i + 1;
    while (j < x.size() && (std::isalnum(static_cast<unsigned char>(x[j])) || x[j] == '-' || x[j] == '_')) ++j;
    std::string name(x.substr(i + 1, j - i - 1));
    if (name.empty()) return *why = "bad tag at " + std::to_string(i), false;
    while (j < x.size() && x[j] != '>' && x[j] != '/') {
      if (x[j] == '"') {
        auto close = x.find('"', j + 1);
        if (close == std::string_view::npos) return *why = "unterminated attribute", false;
        for (std::size_t k = j + 1; k < close; ++k) {
          if (x[k] == '<') return *why = "< in attribute", false;
          if (x[k] == '&' && !entity_ok(k)) return *why = "bare & in attribute", false;
        }
        j = close + 1;
      } else {
        ++j;
      }
    }
    if (open.empty()) ++roots;
    if (x[j] == '/') {
      if (x.substr(j, 2) != "/>") return *why = "bad self-closing tag", false;
      i = j + 2;
    } else {
      open.push_back(name);
      i = j + 1;
    }
  }
  if (!open.empty()) return *why = "unclosed <" + open.back() + ">", false;
  if (roots != 1) return *why = "roots: " + std::to_string(roots), false;
  return true;
}

TEST(Status, NamesAndLevelsRoundTrip) {
  EXPECT_STREQ(to_string(CheckStatus::pass), "pass");
  EXPECT_STREQ(to_string(CheckStatus::warn), "warn");
  EXPECT_STREQ(to_string(CheckStatus::fail), "fail");
  EXPECT_STREQ(to_string(CheckStatus::skip), "skip");
  EXPECT_STREQ(to_string(CheckStatus::measured), "measured");
  for (Level l : {Level::quick, Level::standard, Level::long_})
    EXPECT_EQ(gpuenv::validate::parse_level(to_string(l)), l);
  EXPECT_STREQ(to_string(Level::long_), "long");
  EXPECT_FALSE(gpuenv::validate::parse_level("Quick").has_value());
  EXPECT_FALSE(gpuenv::validate::parse_level("long_").has_value());
  EXPECT_FALSE(gpuenv::validate::parse_level("").has_value());
}

TEST(Status, SkipCountsOnlyWhenNothingRan) {
  using gpuenv::validate::worse;
  EXPECT_EQ(worse(CheckStatus::skip, CheckStatus::pass), CheckStatus::pass);
  EXPECT_EQ(worse(CheckStatus::pass, CheckStatus::skip), CheckStatus::pass);
  EXPECT_EQ(worse(CheckStatus::skip, CheckStatus::skip), CheckStatus::skip);
  EXPECT_EQ(worse(CheckStatus::pass, CheckStatus::warn), CheckStatus::warn);
  EXPECT_EQ(worse(CheckStatus::fail, CheckStatus::warn), CheckStatus::fail);
  EXPECT_EQ(worse(CheckStatus::skip, CheckStatus::fail), CheckStatus::fail);
}

TEST(Status, AnUnjudgedFigureMakesACheckMeasuredNeverPass) {
  using gpuenv::validate::worse;
  EXPECT_EQ(worse(CheckStatus::pass, CheckStatus::measured), CheckStatus::measured);
  EXPECT_EQ(worse(CheckStatus::measured, CheckStatus::pass), CheckStatus::measured);
  EXPECT_EQ(worse(CheckStatus::measured, CheckStatus::warn), CheckStatus::warn);
  EXPECT_EQ(worse(CheckStatus::fail, CheckStatus::measured), CheckStatus::fail);
  EXPECT_EQ(worse(CheckStatus::skip, CheckStatus::measured), CheckStatus::measured);
}

TEST(Status, OverallRule) {
  using gpuenv::validate::overall_status;
  auto of = [](std::vector<CheckStatus> statuses) {
    std::vector<CheckReport> checks;
    for (CheckStatus s : statuses) checks.push_back(CheckReport{"k", "c", "d", s, 0, {}});
    return overall_status(checks);
  };
  EXPECT_EQ(of({}), CheckStatus::skip);
  EXPECT_EQ(of({CheckStatus::skip, CheckStatus::skip}), CheckStatus::skip);
  EXPECT_EQ(of({CheckStatus::skip, CheckStatus::pass}), CheckStatus::pass);
  EXPECT_EQ(of({CheckStatus::pass, CheckStatus::warn, CheckStatus::skip}), CheckStatus::warn);
  EXPECT_EQ(of({CheckStatus::warn, CheckStatus::fail, CheckStatus::pass}), CheckStatus::fail);
  EXPECT_EQ(of({CheckStatus::measured, CheckStatus::pass}), CheckStatus::pass) << "nothing judged failed";
  EXPECT_EQ(of({CheckStatus::measured, CheckStatus::skip}), CheckStatus::measured);
  EXPECT_EQ(of({CheckStatus::measured, CheckStatus::warn}), CheckStatus::warn);
}

TEST(ReportExitCode, MeasuredNeverFailsARun) {
  using gpuenv::validate::exit_code;
  Report r;
  r.checks.push_back(CheckReport{"h2d_bandwidth", "throughput", "d", CheckStatus::measured, 0, {}});
  r.status = gpuenv::validate::overall_status(r.checks);
  EXPECT_EQ(exit_code(r), 0);
  r.checks.push_back(CheckReport{"driver_loaded", "software", "d", CheckStatus::pass, 0, {}});
  EXPECT_EQ(exit_code(r), 0);
}

TEST(ReportJson, StatusSaysCouldNotRunAndTheSummaryCountsMeasured) {
  Report r = sample();
  r.checks[3].status = CheckStatus::measured;
  auto j = gpuenv::validate::report_json(r);
  EXPECT_EQ(j["summary"]["measured"], 1);
  EXPECT_EQ(j["status"], "fail");
  r.could_not_run = true;
  r.could_not_run_reason = "no NVIDIA driver loaded";
  r.could_not_run_hint = "install the driver";
  j = gpuenv::validate::report_json(r);
  EXPECT_EQ(j["status"], "could_not_run");
  EXPECT_EQ(j["could_not_run_hint"], "install the driver");
  EXPECT_EQ(j["exit_code"], 4);
  EXPECT_NE(gpuenv::validate::report_junit(r).find("name=\"status\" value=\"could_not_run\""), std::string::npos);
}

TEST(ReportJunit, MeasuredIsAPassedTestcaseThatSaysSo) {
  Report r = sample();
  r.checks[3].results[0].status = CheckStatus::measured;
  r.checks[3].results[0].message = "median 250 GB/s; not judged";
  const std::string x = gpuenv::validate::report_junit(r);
  EXPECT_NE(x.find("<system-out>MEASURED: median 250 GB/s; not judged"), std::string::npos) << x;
  EXPECT_NE(x.find("failures=\"1\""), std::string::npos) << "only the memtest failure counts";
}

TEST(ReportText, GpuRanges) {
  using gpuenv::validate::gpu_ranges;
  EXPECT_EQ(gpu_ranges({0, 1, 2, 3, 4, 5, 6, 7}), "0-7");
  EXPECT_EQ(gpu_ranges({7, 0, 1, 3, 4, 5, 6}), "0-1,3-7");
  EXPECT_EQ(gpu_ranges({2}), "2");
  EXPECT_EQ(gpu_ranges({0, 2, 2, 4}), "0,2,4");
  EXPECT_EQ(gpu_ranges({}), "");
}

Report eight_gpus() {
  Report r = sample("nvml+cuda");
  r.gpus.clear();
  for (int i = 0; i < 8; ++i) {
    GpuInfo g;
    g.index = i;
    g.name = "NVIDIA H100 80GB HBM3";
    g.nvlink_links_active = 18;
    r.gpus.push_back(g);
  }
  r.checks.clear();
  r.checks.push_back(CheckReport{"driver_loaded", "software", "d", CheckStatus::pass, 0,
                                 {GpuOutcome{-1, CheckStatus::pass, "driver 550.54.15 loaded", {}, {}, {}}}});
  CheckReport ecc{"ecc_errors", "health", "d", CheckStatus::fail, 0, {}};
  CheckReport hbm{"hbm_bandwidth", "throughput", "d", CheckStatus::measured, 0, {}};
  for (int i = 0; i < 8; ++i) {
    ecc.results.push_back(i == 3 ? GpuOutcome{i, CheckStatus::fail, "2 uncorrectable errors", "ecc_uncorrectable",
                                              "drain the node", {}}
                                 : GpuOutcome{i, CheckStatus::pass, "no uncorrectable ECC errors", {}, {}, {}});
    std::vector<gpuenv::validate::Metric> metrics = {{"median_gbs", 2950.0 + i, "GB/s"}};
    if (i != 5) metrics.push_back({"reference_gbs", 2540, "GB/s"});
    hbm.results.push_back(GpuOutcome{i, i == 5 ? CheckStatus::measured : CheckStatus::pass,
                                     "median " + std::to_string(2950 + i) + " GB/s", i == 5 ? "no_threshold" : "",
                                     i == 5 ? "add a reference" : "", metrics});
  }
  r.checks.push_back(ecc);
  r.checks.push_back(hbm);
  r.status = CheckStatus::fail;
  return r;
}

// The line of `text` whose check column is `key`, with runs of spaces squeezed to one.
std::string row(const std::string& text, const std::string& key) {
  std::size_t start = 0;
  while (start < text.size()) {
    const std::size_t end = text.find('\n', start);
    std::string line = text.substr(start, end - start);
    std::string squeezed;
    for (char c : line)
      if (!(c == ' ' && !squeezed.empty() && squeezed.back() == ' ')) squeezed += c;
    if (squeezed.find(" " + key + " ") != std::string::npos) return squeezed;
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return {};
}

TEST(ReportText, SeveralGpusGetOneRowPerCheckWithDetailsOnlyWhereNotPassing) {
  const std::string t = gpuenv::validate::report_text(eight_gpus(), false);
  EXPECT_EQ(row(t, "driver_loaded"), "PASS driver_loaded driver 550.54.15 loaded") << t;
  EXPECT_EQ(row(t, "ecc_errors"), "PASS 0-2,4-7, FAIL 3 ecc_errors no uncorrectable ECC errors") << t;
  EXPECT_NE(t.find("FAIL GPU 3: 2 uncorrectable errors"), std::string::npos) << t;
  EXPECT_NE(t.find("[ecc_uncorrectable] drain the node"), std::string::npos) << t;
  EXPECT_NE(t.find("PASS 0-4,6-7, MEASURED 5"), std::string::npos) << t;
  EXPECT_NE(t.find("MEASURED GPU 5: median 2955 GB/s"), std::string::npos) << t;
  EXPECT_EQ(count(t, "no uncorrectable ECC errors"), 1u) << "passing GPUs get no detail line\n" << t;
  EXPECT_EQ(t.find("PASS GPU"), std::string::npos) << t;
  // The figures table: one row per GPU; a figure no reference judged is starred.
  EXPECT_NE(t.find("figures per GPU (medians; * measured, not judged)"), std::string::npos) << t;
  EXPECT_NE(t.find("2955.0*"), std::string::npos) << t;
  EXPECT_NE(t.find("2954.0 "), std::string::npos) << t;
  EXPECT_NE(t.find("result: FAIL (1 passed, 1 measured, 0 warned, 1 failed, 0 skipped)"), std::string::npos) << t;
}

TEST(ReportExitCode, PassWarnFailCouldNotRun) {
  using gpuenv::validate::exit_code;
  Report r = sample();
  EXPECT_EQ(exit_code(r), 1);
  r.checks.erase(r.checks.begin() + 2);  // drop the failure: pass + warn + skip
  EXPECT_EQ(exit_code(r), 0);
  r.could_not_run = true;                // no GPU wins over everything
  EXPECT_EQ(exit_code(r), 4);
  Report skipped;
  skipped.checks.push_back(CheckReport{"memtest", "kernels", "d", CheckStatus::skip, 0, {}});
  EXPECT_EQ(exit_code(skipped), 4);      // nothing ran: never a pass
}

TEST(ReportJson, CarriesTheSchemaAndEveryField) {
  const auto j = gpuenv::validate::report_json(sample());
  EXPECT_EQ(j["schema"], "gpuenv-validation-v1");
  EXPECT_EQ(j["status"], "fail");
  EXPECT_EQ(j["backend"], "replay");
  EXPECT_EQ(j["level"], "quick");
  EXPECT_EQ(j["started_at"], "2025-01-02T03:04:05Z");
  EXPECT_EQ(j["duration_ms"], 4200);
  EXPECT_EQ(j["exit_code"], 1);
  EXPECT_EQ(j["could_not_run"], false);
  EXPECT_EQ(j["driver"]["version"], "550.54.15");
  EXPECT_EQ(j["driver"]["cuda_driver_version"], 12040);
  ASSERT_EQ(j["gpus"].size(), 1u);
  EXPECT_EQ(j["gpus"][0]["index"], 0);
  EXPECT_EQ(j["gpus"][0]["name"], "NVIDIA H200");
  EXPECT_EQ(j["gpus"][0]["uuid"], "GPU-abc");
  EXPECT_EQ(j["gpus"][0]["pci_bus_id"], "00000000:19:00.0");
  EXPECT_EQ(j["gpus"][0]["pci_device_id"], "0x2335");
  EXPECT_EQ(j["gpus"][0]["memory_total_bytes"], 150754820096ULL);
  EXPECT_EQ(j["summary"]["fail"], 1);
  EXPECT_EQ(j["summary"]["skip"], 1);
  ASSERT_EQ(j["checks"].size(), 4u);
  const auto& driver = j["checks"][0];
  EXPECT_EQ(driver["key"], "driver_loaded");
  EXPECT_EQ(driver["category"], "software");
  EXPECT_EQ(driver["status"], "pass");
  EXPECT_TRUE(driver["results"][0]["gpu"].is_null());  // host-wide
  EXPECT_TRUE(driver["results"][0]["code"].is_null());
  const auto& mem = j["checks"][2];
  EXPECT_EQ(mem["duration_ms"], 2000);
  EXPECT_EQ(mem["results"][0]["gpu"], 0);
  EXPECT_EQ(mem["results"][0]["status"], "fail");
  EXPECT_EQ(mem["results"][0]["code"], "memtest_mismatch");
  EXPECT_EQ(mem["results"][0]["hint"], "drain the node & open a <ticket>");
  EXPECT_EQ(mem["results"][0]["metrics"][0]["name"], "bytes_tested");
  EXPECT_EQ(mem["results"][0]["metrics"][0]["value"], 1e9);
  EXPECT_EQ(mem["results"][0]["metrics"][0]["unit"], "B");
  // Key order is part of the format: schema first.
  EXPECT_EQ(j.begin().key(), "schema");
}

TEST(ReportJson, InvalidUtf8FromADriverCannotBreakDumping) {
  Report r = sample();
  r.checks[0].results[0].message = "bad \xff\xfe bytes \xe2\x82";
  const auto j = gpuenv::validate::report_json(r);
  std::string text;
  EXPECT_NO_THROW(text = j.dump());
  EXPECT_NE(text.find("bad \xEF\xBF\xBD\xEF\xBF\xBD bytes"), std::string::npos);
}

TEST(ReportJunit, IsWellFormedWithOneTestcasePerCheckAndGpu) {
  const std::string x = gpuenv::validate::report_junit(sample());
  std::string why;
  EXPECT_TRUE(well_formed(x, &why)) << why << "\n" << x;
  EXPECT_EQ(count(x, "<testsuite "), 1u);
  EXPECT_EQ(count(x, "name=\"gpuenv-validate\""), 1u);
  EXPECT_EQ(count(x, "<testcase "), 4u);
  EXPECT_EQ(count(x, "<failure "), 1u);
  EXPECT_EQ(count(x, "<skipped "), 1u);
  EXPECT_EQ(count(x, "<system-out>"), 1u);  // the warning is a pass with its message kept
  EXPECT_NE(x.find("tests=\"4\" failures=\"1\" errors=\"0\" skipped=\"1\""), std::string::npos);
  EXPECT_NE(x.find("name=\"memtest[gpu0]\""), std::string::npos);
  EXPECT_NE(x.find("name=\"driver_loaded\""), std::string::npos);
  EXPECT_NE(x.find("type=\"memtest_mismatch\""), std::string::npos);
  EXPECT_NE(x.find("<skipped message=\"NCCL is not in the image\"/>"), std::string::npos);
  EXPECT_NE(x.find("<property name=\"backend\" value=\"replay\"/>"), std::string::npos);
}

TEST(ReportJunit, EscapesMarkupInMessagesAndHints) {
  const std::string x = gpuenv::validate::report_junit(sample());
  EXPECT_NE(x.find("message=\"1 word differs at &lt;0x10&gt; &amp; &quot;more&quot; &apos;here&apos;\""),
            std::string::npos)
      << x;
  EXPECT_NE(x.find("hint: drain the node &amp; open a &lt;ticket&gt;"), std::string::npos) << x;
  EXPECT_EQ(x.find("<0x10>"), std::string::npos);
  EXPECT_EQ(x.find("<ticket>"), std::string::npos);
}

TEST(ReportJunit, ControlCharactersAndBadBytesStayWellFormed) {
  Report r = sample();
  r.checks[2].results[0].message = std::string("nul\x01 esc\x1b[31m line\nbreak \xff");
  const std::string x = gpuenv::validate::report_junit(r);
  std::string why;
  EXPECT_TRUE(well_formed(x, &why)) << why;
  EXPECT_EQ(x.find('\x01'), std::string::npos);
  EXPECT_EQ(x.find('\x1b'), std::string::npos);
  EXPECT_NE(x.find("line&#10;break"), std::string::npos);
}

TEST(ReportText, HeaderSaysReplayIsNotARealGpu) {
  const std::string t = gpuenv::validate::report_text(sample("replay"), false);
  const std::string header = t.substr(0, t.find('\n'));
  EXPECT_NE(header.find("backend: replay (recorded answers, not a real GPU)"), std::string::npos) << header;
  EXPECT_NE(header.find("level quick"), std::string::npos);
}

TEST(ReportText, RealBackendIsNamedPlainly) {
  const std::string t = gpuenv::validate::report_text(sample("nvml+cuda"), false);
  EXPECT_NE(t.substr(0, t.find('\n')).find("backend: nvml+cuda"), std::string::npos);
  EXPECT_EQ(t.find("not a real GPU"), std::string::npos);
}

TEST(ReportText, OneRowPerCheckAndGpuWithHintsAndSummary) {
  const std::string t = gpuenv::validate::report_text(sample(), false);
  EXPECT_NE(t.find("GPU 0: NVIDIA H200 (0x2335, 00000000:19:00.0"), std::string::npos) << t;
  EXPECT_NE(t.find("driver: 550.54.15 (CUDA 12.4)"), std::string::npos) << t;
  EXPECT_NE(t.find("PASS     driver_loaded"), std::string::npos) << t;
  EXPECT_NE(t.find("FAIL     memtest"), std::string::npos) << t;
  EXPECT_NE(t.find("[memtest_mismatch] drain the node & open a <ticket>"), std::string::npos) << t;
  EXPECT_NE(t.find("SKIP     nccl_allreduce"), std::string::npos) << t;
  EXPECT_NE(t.find("NCCL is not in the image"), std::string::npos) << t;
  EXPECT_NE(t.find("result: FAIL (1 passed, 1 warned, 1 failed, 1 skipped) in 4.2 s"), std::string::npos) << t;
}

TEST(ReportText, ColourOnlyWhenAsked) {
  EXPECT_EQ(gpuenv::validate::report_text(sample(), false).find('\x1b'), std::string::npos);
  const std::string coloured = gpuenv::validate::report_text(sample(), true);
  EXPECT_NE(coloured.find("\x1b[1;31mFAIL\x1b[0m"), std::string::npos);
  EXPECT_NE(coloured.find("backend: replay (recorded answers, not a real GPU)"), std::string::npos);
}

TEST(ReportText, EscapeSequencesInMessagesAreNeutralised) {
  Report r = sample();
  r.checks[0].results[0].message = "evil\x1b[2J message";
  EXPECT_EQ(gpuenv::validate::report_text(r, false).find('\x1b'), std::string::npos);
}

TEST(ReportText, CouldNotRunIsStated) {
  Report r;
  r.backend = "nvml+cuda";
  r.could_not_run = true;
  r.could_not_run_reason = "no NVIDIA driver loaded";
  r.could_not_run_hint = "install or load the NVIDIA driver";
  r.checks.push_back(CheckReport{"driver_loaded", "software", "d", CheckStatus::fail, 0,
                                 {GpuOutcome{-1, CheckStatus::fail, "no NVIDIA driver", "no_driver", "install it", {}}}});
  for (const char* key : {"ecc_errors", "memtest", "hbm_bandwidth"})
    r.checks.push_back(CheckReport{key, "health", "d", CheckStatus::skip, 0,
                                   {GpuOutcome{-1, CheckStatus::skip, "could not run: no NVIDIA driver loaded", {},
                                               "install or load the NVIDIA driver", {}}}});
  r.status = CheckStatus::fail;
  const std::string t = gpuenv::validate::report_text(r, false);
  EXPECT_NE(t.find("driver: not loaded"), std::string::npos);
  EXPECT_NE(t.find("could not run: no NVIDIA driver loaded"), std::string::npos);
  EXPECT_EQ(count(t, "install or load the NVIDIA driver"), 1u) << t;
  EXPECT_NE(t.find("FAIL     driver_loaded"), std::string::npos) << "the checks that ran are listed\n" << t;
  EXPECT_EQ(t.find("memtest"), std::string::npos) << t;
  EXPECT_NE(t.find("SKIP 3 GPU checks: could not run (no NVIDIA driver loaded)"), std::string::npos) << t;
  EXPECT_NE(t.find("result: COULD NOT RUN"), std::string::npos) << t;
}

}  // namespace
