// libFuzzer target: the Python packaging parsers on untrusted bytes (the first byte picks the parser): the simple
// API (JSON and HTML), core metadata, PEP 508 requirements, wheel file names, pip configuration, PEP 440, and the
// members of an installed wheel (RECORD, WHEEL, entry_points.txt), and the remote zip reader that finds METADATA
// through the central directory with range requests, here against a Fetcher serving the input as the wheel.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "packages/wheels/markers.hpp"
#include "packages/wheels/metadata.hpp"
#include "packages/wheels/pep440.hpp"
#include "packages/wheels/pip_config.hpp"
#include "packages/wheels/remote_metadata.hpp"
#include "packages/wheels/simple_index.hpp"
#include "packages/wheels/wheel_install.hpp"
#include "packages/wheels/wheel_tags.hpp"

namespace {

/// Serves one in-memory file: ranges of it, or all of it; downloads to disk are refused.
class WheelServer final : public gpuenv::Fetcher {
 public:
  explicit WheelServer(std::string_view file) : m_file(file) {}
  gpuenv::Result<std::string> get(const std::string&, const std::string&) override { return std::string(m_file); }
  gpuenv::Result<std::string> get_range(const std::string&, std::uint64_t offset, std::uint64_t length) override {
    if (++m_requests > 16) std::abort();  // the reader asks for a few ranges, never loops
    if (offset >= m_file.size()) return std::string();
    return std::string(m_file.substr(offset, length));
  }
  std::vector<gpuenv::Result<gpuenv::FetchedFile>> fetch_all(const std::vector<gpuenv::FetchRequest>& requests) override {
    std::vector<gpuenv::Result<gpuenv::FetchedFile>> out;
    for (const auto& r : requests) out.emplace_back(gpuenv::make_error(gpuenv::ErrorKind::environment, "fetch.failed", "no downloads", r.url, ""));
    return out;
  }

 private:
  std::string_view m_file;
  int m_requests = 0;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  using namespace gpuenv;
  using namespace gpuenv::packages;
  switch (data[0] % 12) {
    case 0: (void)parse_simple_page(text, "application/vnd.pypi.simple.v1+json", "https://index.example/simple/x/"); break;
    case 1: (void)parse_simple_page(text, "text/html", "https://index.example/simple/x/"); break;
    case 2: (void)parse_core_metadata(text, "fuzz"); break;
    case 3: (void)parse_requirement(text); break;
    case 4: (void)parse_wheel_filename(text); break;
    case 5: (void)parse_pip_config(text, "fuzz"); break;
    case 6: {
      auto rows = parse_record(text, "RECORD");
      if (rows) {
        // What format_record writes, parse_record reads back as the same rows.
        auto again = parse_record(format_record(*rows), "RECORD");
        if (!again || again->size() != rows->size()) std::abort();
        for (std::size_t i = 0; i < rows->size(); ++i)
          if ((*again)[i].path != (*rows)[i].path || (*again)[i].hash != (*rows)[i].hash || (*again)[i].size != (*rows)[i].size) std::abort();
      }
      break;
    }
    case 7: (void)parse_wheel_file(text, "a-1.0.dist-info/WHEEL"); break;
    case 8: {
      auto entries = parse_script_entry_points(text, "entry_points.txt");
      if (entries)
        for (const auto& e : *entries) (void)script_wrapper(e, "/usr/bin/python3");
      break;
    }
    case 9: (void)split_wheel_filename(text); break;
    case 10: {
      WheelServer server(text);
      (void)remote_wheel_metadata(server, "https://index.example/a-1.0-py3-none-any.whl", text.size(), "a");
      break;
    }
    default: {
      auto v = Pep440Version::parse(text.substr(0, text.size() / 3));
      auto s = Pep440SpecifierSet::parse(text.substr(text.size() / 3));
      if (v && s) (void)s->contains(*v);
      break;
    }
  }
  return 0;
}
