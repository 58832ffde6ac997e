#include "resolver/catalog_codec.hpp"

#include <charconv>

namespace gpuenv::resolver {
namespace {

constexpr char k_sep = '\t';
constexpr char k_item = '\x1f';

std::string esc(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '\\': out += "\\\\"; break;
      case '\t': out += "\\t"; break;
      case '\n': out += "\\n"; break;
      case '\x1f': out += "\\u"; break;
      default: out += c;
    }
  }
  return out;
}

std::string unesc(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 1 < s.size()) {
      const char n = s[++i];
      out += n == 't' ? '\t' : n == 'n' ? '\n' : n == 'u' ? '\x1f' : n;
    } else {
      out += s[i];
    }
  }
  return out;
}

std::string ints(const std::vector<int>& v) {
  std::string out;
  for (std::size_t i = 0; i < v.size(); ++i) out += (i ? "," : "") + std::to_string(v[i]);
  return out;
}

std::string strings(const std::vector<std::string>& v) {
  std::string out;
  for (std::size_t i = 0; i < v.size(); ++i) out += (i ? std::string(1, k_item) : std::string()) + esc(v[i]);
  return out;
}

std::string ver(const std::optional<Version>& v) { return v ? v->str() : ""; }

class Writer {
 public:
  template <class... Fields>
  void line(const char* tag, const Fields&... fields) {
    m_out += tag;
    ((m_out += k_sep, m_out += fields), ...);
    m_out += '\n';
  }
  void sources(const std::vector<SourceRef>& s) {
    for (const auto& r : s) line("S", esc(r.title), esc(r.url), esc(r.repo), esc(r.path), esc(r.note));
  }
  std::string take() { return std::move(m_out); }

 private:
  std::string m_out;
};

/// Splits one line into fields and converts them, remembering the first failure.
class Fields {
 public:
  Fields(std::string_view line, std::size_t number) : m_number(number) {
    std::size_t start = 0;
    while (true) {
      const auto tab = line.find(k_sep, start);
      m_fields.push_back(line.substr(start, tab == std::string_view::npos ? std::string_view::npos : tab - start));
      if (tab == std::string_view::npos) break;
      start = tab + 1;
    }
  }
  [[nodiscard]] std::string_view tag() const { return m_fields[0]; }
  [[nodiscard]] std::size_t size() const { return m_fields.size(); }
  std::string text(std::size_t i) { return i < m_fields.size() ? unesc(m_fields[i]) : (fail("missing field"), ""); }
  Version version(std::size_t i) {
    auto v = opt_version(i);
    if (!v) fail("missing version");
    return v ? *v : Version{};
  }
  std::optional<Version> opt_version(std::size_t i) {
    if (i >= m_fields.size()) return fail("missing field"), std::nullopt;
    if (m_fields[i].empty()) return std::nullopt;
    auto v = Version::parse(m_fields[i]);
    if (!v) return fail(v.error().message), std::nullopt;
    return *v;
  }
  int integer(std::size_t i) {
    int n = 0;
    if (i >= m_fields.size()) return fail("missing field"), 0;
    auto [p, ec] = std::from_chars(m_fields[i].data(), m_fields[i].data() + m_fields[i].size(), n);
    if (ec != std::errc() || p != m_fields[i].data() + m_fields[i].size()) fail("bad integer");
    return n;
  }
  std::vector<int> int_list(std::size_t i) {
    std::vector<int> out;
    if (i >= m_fields.size()) return fail("missing field"), out;
    std::string_view s = m_fields[i];
    while (!s.empty()) {
      const auto comma = s.find(',');
      const std::string_view part = s.substr(0, comma);
      int n = 0;
      auto [p, ec] = std::from_chars(part.data(), part.data() + part.size(), n);
      if (ec != std::errc() || p != part.data() + part.size()) return fail("bad integer list"), out;
      out.push_back(n);
      if (comma == std::string_view::npos) break;
      s.remove_prefix(comma + 1);
    }
    return out;
  }
  std::vector<std::string> string_list(std::size_t i) {
    std::vector<std::string> out;
    if (i >= m_fields.size()) return fail("missing field"), out;
    std::string_view s = m_fields[i];
    if (s.empty()) return out;
    while (true) {
      const auto sep = s.find(k_item);
      out.push_back(unesc(s.substr(0, sep)));
      if (sep == std::string_view::npos) break;
      s.remove_prefix(sep + 1);
    }
    return out;
  }
  std::vector<Version> version_list(std::size_t i) {
    std::vector<Version> out;
    for (const auto& s : string_list(i)) {
      auto v = Version::parse(s);
      if (!v) return fail(v.error().message), out;
      out.push_back(*v);
    }
    return out;
  }
  bool flag(std::size_t i) { return text(i) == "1"; }
  void fail(const std::string& why) {
    if (!m_error) m_error = "line " + std::to_string(m_number) + ": " + why;
  }
  [[nodiscard]] const std::optional<std::string>& error() const { return m_error; }

 private:
  std::vector<std::string_view> m_fields;
  std::size_t m_number;
  std::optional<std::string> m_error;
};

}  // namespace

std::string encode_catalog(const Catalog& c) {
  Writer w;
  w.line(std::string(k_catalog_codec_header).c_str());
  w.line("CD", std::string(c.compat_datacenter_only ? "1" : "0"));
  for (const auto& m : c.majors) {
    w.line("MJ", std::to_string(m.major), m.minor_compat_driver_min.str());
    w.sources(m.sources);
  }
  for (const auto& t : c.toolkits) {
    w.line("TK", t.version.str(), t.driver_min.str(), ints(t.sm), ver(t.gcc_max));
    w.sources(t.sources);
  }
  for (const auto& p : c.compat) {
    w.line("CP", p.cuda.str(), strings(p.driver_branches));
    w.sources(p.sources);
  }
  for (const auto& r : c.cudnn) {
    w.line("CR", r.version.str());
    for (const auto& b : r.builds)
      w.line("CB", std::to_string(b.cuda_major), b.cuda_min.str(), b.cuda_max.str(), b.driver_min.str(), ints(b.sm));
    w.sources(r.sources);
  }
  for (const auto& [name, releases] : c.frameworks) {
    for (const auto& r : releases) {
      w.line("FR", esc(name), r.version.str(), r.python_min.str(), r.python_max.str(), esc(r.default_variant), ver(r.glibc_min),
             std::string(r.aarch64_cuda ? "1" : "0"), strings(r.aarch64_cuda ? *r.aarch64_cuda : std::vector<std::string>{}), ver(r.torch),
             strings(r.pins), strings(r.pins_without_wheel));
      for (const auto& v : r.variants)
        w.line("FV", esc(v.name), v.cuda.str(), ver(v.cudnn), ints(v.sm), ints(v.ptx), ver(v.driver_min), ints(v.aarch64_sm), ints(v.aarch64_ptx));
      w.sources(r.sources);
    }
  }
  for (const auto& g : c.gpus) {
    w.line("GP", esc(g.name), strings(g.aliases), std::to_string(g.sm), strings(g.pci_device_ids), ver(g.driver_min),
           std::string(g.datacenter ? "1" : "0"), std::string(g.confidential ? "1" : "0"), ver(g.confidential_driver_min), strings(g.nvml_names),
           strings(g.former_nvml_names), esc(g.host_arch));
    w.sources(g.sources);
  }
  for (const auto& d : c.distros) {
    std::vector<std::string> py;
    for (const auto& v : d.python) py.push_back(v.str());
    w.line("DS", esc(d.name), esc(d.release), esc(d.codename), strings(py), ver(d.glibc), d.gcc ? "1" + esc(*d.gcc) : std::string());
    w.sources(d.sources);
  }
  return w.take();
}

Result<Catalog> decode_catalog(std::string_view bytes) {
  Catalog c;
  std::vector<SourceRef>* last_sources = nullptr;
  FrameworkRelease* release = nullptr;  // the release that FV lines belong to
  std::size_t number = 0;
  bool header = false;
  auto bad = [](const std::string& why) {
    return make_error(ErrorKind::internal, "catalog.codec", "the compiled catalog is damaged: " + why, {},
                      "rebuild gpuenv; the catalog is compiled from recipes/catalog at build time");
  };
  while (!bytes.empty()) {
    const auto nl = bytes.find('\n');
    if (nl == std::string_view::npos) return bad("unterminated last line");
    const std::string_view line = bytes.substr(0, nl);
    bytes.remove_prefix(nl + 1);
    ++number;
    Fields f(line, number);
    const std::string_view tag = f.tag();
    if (!header) {
      if (line != k_catalog_codec_header) return bad("unknown header");
      header = true;
      continue;
    }
    if (tag != "S" && tag != "FV" && tag != "FR") release = nullptr;
    if (tag == "S") {
      if (!last_sources) return bad("line " + std::to_string(number) + ": source without a record");
      last_sources->push_back(SourceRef{f.text(1), f.text(2), f.text(3), f.text(4), f.text(5)});
    } else if (tag == "CD") {
      c.compat_datacenter_only = f.flag(1);
    } else if (tag == "MJ") {
      c.majors.push_back(CudaMajor{f.integer(1), f.version(2), {}});
      last_sources = &c.majors.back().sources;
    } else if (tag == "TK") {
      c.toolkits.push_back(CudaToolkit{f.version(1), f.version(2), f.int_list(3), f.opt_version(4), {}});
      last_sources = &c.toolkits.back().sources;
    } else if (tag == "CP") {
      c.compat.push_back(CompatPackage{f.version(1), f.string_list(2), {}});
      last_sources = &c.compat.back().sources;
    } else if (tag == "CR") {
      c.cudnn.push_back(CudnnRelease{f.version(1), {}, {}});
      last_sources = &c.cudnn.back().sources;
    } else if (tag == "CB") {
      if (c.cudnn.empty()) return bad("line " + std::to_string(number) + ": build without a release");
      c.cudnn.back().builds.push_back(CudnnBuild{f.integer(1), f.version(2), f.version(3), f.version(4), f.int_list(5)});
    } else if (tag == "FR") {
      FrameworkRelease r;
      r.framework = f.text(1);
      r.version = f.version(2);
      r.python_min = f.version(3);
      r.python_max = f.version(4);
      r.default_variant = f.text(5);
      r.glibc_min = f.opt_version(6);
      if (f.flag(7)) r.aarch64_cuda = f.string_list(8);
      else if (f.text(8) != "") f.fail("aarch64 variants without their flag");
      r.torch = f.opt_version(9);
      r.pins = f.string_list(10);
      r.pins_without_wheel = f.string_list(11);
      auto& list = c.frameworks[r.framework];
      list.push_back(std::move(r));
      release = &list.back();
      last_sources = &release->sources;
    } else if (tag == "FV") {
      if (!release) return bad("line " + std::to_string(number) + ": variant without a release");
      release->variants.push_back(
          FrameworkVariant{f.text(1), f.version(2), f.opt_version(3), f.int_list(4), f.int_list(5), f.opt_version(6), f.int_list(7), f.int_list(8)});
    } else if (tag == "GP") {
      c.gpus.push_back(GpuModel{f.text(1), f.string_list(2), f.string_list(9), f.string_list(10), f.integer(3), f.string_list(4), f.opt_version(5),
                                f.flag(6), f.flag(7), f.opt_version(8), {}, f.text(11)});
      last_sources = &c.gpus.back().sources;
    } else if (tag == "DS") {
      Distro d;
      d.name = f.text(1);
      d.release = f.text(2);
      d.codename = f.text(3);
      d.python = f.version_list(4);
      d.glibc = f.opt_version(5);
      const std::string gcc = f.text(6);
      if (!gcc.empty()) d.gcc = gcc.substr(1);
      c.distros.push_back(std::move(d));
      last_sources = &c.distros.back().sources;
    } else {
      return bad("line " + std::to_string(number) + ": unknown record '" + std::string(tag) + "'");
    }
    if (f.error()) return bad(*f.error());
  }
  if (!header) return bad("empty");
  return c;
}

}  // namespace gpuenv::resolver
