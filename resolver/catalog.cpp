#include "resolver/catalog.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <set>

#include "base/digest.hpp"
#include "base/yaml_guard.hpp"
#include "base/yaml_reader.hpp"
#include "resolver/platform.hpp"

namespace gpuenv::resolver {
namespace {

/// Reads typed fields of one catalog file with the shared accessors; the first failure is kept with its position
/// (every one is catalog.invalid, an internal error), and once one is kept the readers return empty values.
class Reader {
 public:
  explicit Reader(const std::string& path)
      : m_r({path, ErrorKind::internal, "catalog", "the catalog under recipes/catalog is broken; see docs/catalog.md",
             /*wrong_type=*/"invalid", /*missing=*/"invalid"}) {}

  [[nodiscard]] bool failed() const { return m_error.has_value(); }
  Error take_error() { return std::move(*m_error); }

  void fail(const YAML::Node& n, const std::string& message) { keep(m_r.error(n, "invalid", message)); }

  /// N's value under KEY; REQUIRED: present and not null.
  YAML::Node field(const YAML::Node& n, const char* key, bool required = true) {
    if (m_error) return {};
    return value_of(required ? m_r.field(n, key) : m_r.optional_field(n, key), YAML::Node{});
  }

  std::string str(const YAML::Node& n, const char* key, bool required = true) {
    YAML::Node v = field(n, key, required);
    if (absent(v)) return {};
    return value_of(m_r.text(v, key), std::string{});
  }

  Version version(const YAML::Node& n, const char* key) {
    std::optional<Version> v = opt_version(n, key, true);
    return v ? *v : Version{};
  }

  std::optional<Version> opt_version(const YAML::Node& n, const char* key, bool required = false) {
    YAML::Node v = field(n, key, required);
    if (absent(v)) return std::nullopt;
    const std::string text = value_of(m_r.scalar(v, key), std::string{});
    if (m_error) return std::nullopt;
    auto parsed = Version::parse(text);
    if (!parsed) {
      fail(v, parsed.error().message);
      return std::nullopt;
    }
    return *parsed;
  }

  int integer(const YAML::Node& n, const char* key) {
    YAML::Node v = field(n, key);
    if (m_error) return 0;
    return value_of(m_r.integer(v, key), 0);
  }

  bool boolean(const YAML::Node& n, const char* key, bool fallback) {
    YAML::Node v = field(n, key, false);
    if (absent(v)) return fallback;
    return value_of(m_r.boolean(v, key), fallback);
  }

  std::vector<int> ints(const YAML::Node& n, const char* key, bool required = true) {
    std::vector<int> out;
    YAML::Node v = field(n, key, required);
    if (absent(v)) return out;
    for (const auto& item : list_of(v, key)) {
      out.push_back(value_of(m_r.integer(item, std::string(key) + " item"), 0));
      if (m_error) break;
    }
    return out;
  }

  std::vector<std::string> strings(const YAML::Node& n, const char* key, bool required = false) {
    YAML::Node v = field(n, key, required);
    if (absent(v)) return {};
    return value_of(m_r.string_list(v, key, /*accept_single=*/false), std::vector<std::string>{});
  }

  /// A list of text under KEY, or std::nullopt when KEY is absent or null (an empty list is a recorded value).
  std::optional<std::vector<std::string>> opt_strings(const YAML::Node& n, const char* key) {
    YAML::Node v = field(n, key, false);
    if (absent(v)) return std::nullopt;
    return value_of(m_r.string_list(v, key, /*accept_single=*/false), std::vector<std::string>{});
  }

  std::vector<Version> versions(const YAML::Node& n, const char* key) {
    std::vector<Version> out;
    for (const auto& s : strings(n, key, true)) {
      auto v = Version::parse(s);
      if (!v) {
        fail(n[key], v.error().message);
        return out;
      }
      out.push_back(*v);
    }
    return out;
  }

  std::vector<SourceRef> sources(const YAML::Node& n) {
    std::vector<SourceRef> out;
    YAML::Node v = field(n, "sources");
    if (m_error) return out;
    if (!v.IsSequence() || v.size() == 0) {
      fail(v, "'sources' must be a non-empty list");
      return out;
    }
    for (const auto& s : v) {
      SourceRef ref{str(s, "title", false), str(s, "url", false), str(s, "repo", false), str(s, "path", false),
                    str(s, "note", false)};
      if (!m_error && ref.url.empty() && (ref.repo.empty() || ref.path.empty())) {
        fail(s, "a source needs a url, or a repo and a path");
      }
      out.push_back(std::move(ref));
    }
    return out;
  }

  YAML::Node list(const YAML::Node& n, const char* key) {
    YAML::Node v = field(n, key);
    if (m_error) return {};
    return list_of(v, key);
  }

 private:
  void keep(Error e) {
    if (!m_error) m_error = std::move(e);
  }
  /// R's value, or FALLBACK with R's error kept.
  template <class T>
  T value_of(Result<T> r, T fallback) {
    if (r) return std::move(*r);
    keep(std::move(r).error());
    return fallback;
  }
  /// True after a failure, or when V (an optional field) is absent or null.
  bool absent(const YAML::Node& v) const { return m_error || !v.IsDefined() || v.IsNull(); }
  YAML::Node list_of(const YAML::Node& v, const char* key) {
    return value_of(m_r.list(v, key), YAML::Node{});
  }

  YamlReader m_r;
  std::optional<Error> m_error;
};

/// NVML's spelling compared without case, spaces or dashes, but with its prefix ("NVIDIA H100" is not "H100").
std::string nvml_key(std::string_view n) {
  std::string s;
  for (char c : n)
    if (std::isalnum(static_cast<unsigned char>(c))) s += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string normalize_gpu_name(std::string_view name) {
  std::string s = nvml_key(name);  // and then without the vendor and brand prefixes
  for (const char* prefix : {"nvidia", "geforce", "tesla"}) {
    const std::string p(prefix);
    if (s.rfind(p, 0) == 0) s.erase(0, p.size());
  }
  for (const char* prefix : {"geforce", "tesla"}) {
    const std::string p(prefix);
    if (s.rfind(p, 0) == 0) s.erase(0, p.size());
  }
  return s;
}

void load_cuda(Reader& r, const YAML::Node& root, Catalog& c) {
  for (const auto& m : r.list(root, "majors")) {
    CudaMajor major;
    major.major = r.integer(m, "major");
    major.minor_compat_driver_min = r.version(m, "minor_compat_driver_min");
    major.sources = r.sources(m);
    c.majors.push_back(std::move(major));
  }
  for (const auto& t : r.list(root, "toolkits")) {
    CudaToolkit tk;
    tk.version = r.version(t, "version");
    tk.driver_min = r.version(t, "driver_min");
    tk.sm = r.ints(t, "sm");
    tk.gcc_max = r.opt_version(t, "gcc_max");
    tk.sources = r.sources(t);
    c.toolkits.push_back(std::move(tk));
  }
}

void load_compat(Reader& r, const YAML::Node& root, Catalog& c) {
  c.compat_datacenter_only = r.boolean(root, "datacenter_only", true);
  for (const auto& p : r.list(root, "packages")) {
    CompatPackage pkg;
    pkg.cuda = r.version(p, "cuda");
    pkg.driver_branches = r.strings(p, "driver_branches", true);
    pkg.sources = r.sources(p);
    c.compat.push_back(std::move(pkg));
  }
}

void load_cudnn(Reader& r, const YAML::Node& root, Catalog& c) {
  for (const auto& rel : r.list(root, "releases")) {
    CudnnRelease release;
    release.version = r.version(rel, "version");
    for (const auto& b : r.list(rel, "builds")) {
      CudnnBuild build;
      build.cuda_major = r.integer(b, "cuda_major");
      build.cuda_min = r.version(b, "cuda_min");
      build.cuda_max = r.version(b, "cuda_max");
      build.driver_min = r.version(b, "driver_min");
      build.sm = r.ints(b, "sm");
      release.builds.push_back(std::move(build));
    }
    release.sources = r.sources(rel);
    c.cudnn.push_back(std::move(release));
  }
}

void load_framework(Reader& r, const YAML::Node& root, Catalog& c) {
  const std::string name = r.str(root, "framework");
  auto& releases = c.frameworks[name];
  for (const auto& rel : r.list(root, "releases")) {
    FrameworkRelease fr;
    fr.framework = name;
    fr.version = r.version(rel, "version");
    YAML::Node py = r.field(rel, "python");
    fr.python_min = r.version(py, "min");
    fr.python_max = r.version(py, "max");
    fr.default_variant = r.str(rel, "default_variant");
    fr.glibc_min = r.opt_version(rel, "glibc_min");
    for (const auto& v : r.list(rel, "variants")) {
      FrameworkVariant fv;
      fv.name = r.str(v, "name");
      fv.cuda = r.version(v, "cuda");
      fv.cudnn = r.opt_version(v, "cudnn");
      fv.sm = r.ints(v, "sm", false);
      fv.ptx = r.ints(v, "ptx", false);
      fv.driver_min = r.opt_version(v, "driver_min");
      fv.aarch64_sm = r.ints(v, "aarch64_sm", false);
      fv.aarch64_ptx = r.ints(v, "aarch64_ptx", false);
      fr.variants.push_back(std::move(fv));
    }
    fr.aarch64_cuda = r.opt_strings(rel, "aarch64_cuda");
    fr.torch = r.opt_version(rel, "torch");
    fr.pins = r.strings(rel, "pins");
    fr.pins_without_wheel = r.strings(rel, "pins_without_wheel");
    fr.sources = r.sources(rel);
    releases.push_back(std::move(fr));
  }
}

void load_gpus(Reader& r, const YAML::Node& root, Catalog& c) {
  for (const auto& g : r.list(root, "gpus")) {
    GpuModel m;
    m.name = r.str(g, "name");
    m.aliases = r.strings(g, "aliases");
    m.nvml_names = r.strings(g, "nvml_names");  // required: checked with the catalog (check_catalog)
    m.former_nvml_names = r.strings(g, "former_nvml_names");
    m.sm = r.integer(g, "sm");
    m.pci_device_ids = r.strings(g, "pci_device_ids");
    for (auto& id : m.pci_device_ids)
      std::transform(id.begin(), id.end(), id.begin(), [](unsigned char ch) { return std::tolower(ch); });
    m.driver_min = r.opt_version(g, "driver_min");
    m.datacenter = r.boolean(g, "datacenter", false);
    m.confidential = r.boolean(g, "confidential", false);
    m.confidential_driver_min = r.opt_version(g, "confidential_driver_min");
    m.sources = r.sources(g);
    m.host_arch = r.str(g, "host_arch", false);
    c.gpus.push_back(std::move(m));
  }
}

void load_distros(Reader& r, const YAML::Node& root, Catalog& c) {
  for (const auto& d : r.list(root, "distros")) {
    Distro distro;
    distro.name = r.str(d, "name");
    distro.release = r.str(d, "release");
    distro.codename = r.str(d, "codename", false);
    distro.python = r.versions(d, "python");
    distro.glibc = r.opt_version(d, "glibc");
    if (auto gcc = r.str(d, "gcc", false); !gcc.empty()) distro.gcc = gcc;
    distro.sources = r.sources(d);
    c.distros.push_back(std::move(distro));
  }
}

template <class T, class Key>
void check_sorted(const std::vector<T>& items, Key key, const std::string& what, std::vector<std::string>& problems) {
  for (std::size_t i = 1; i < items.size(); ++i) {
    if (!(key(items[i - 1]) < key(items[i]))) {
      problems.push_back(what + ": not sorted or duplicated at item " + std::to_string(i + 1));
    }
  }
}

template <class T>
void check_sources(const std::vector<T>& items, const std::string& what, std::vector<std::string>& problems) {
  for (std::size_t i = 0; i < items.size(); ++i)
    if (items[i].sources.empty()) problems.push_back(what + " item " + std::to_string(i + 1) + " has no source");
}

/// "name==version" with a name of letters, digits, '-', '_', '.' and a version without spaces.
bool catalog_pin_well_formed(const std::string& pin) {
  const auto eq = pin.find("==");
  if (eq == std::string::npos || eq == 0 || eq + 2 >= pin.size()) return false;
  const auto name_ok = [](char ch) { return std::isalnum(static_cast<unsigned char>(ch)) || ch == '-' || ch == '_' || ch == '.'; };
  const auto version_ok = [](char ch) { return std::isalnum(static_cast<unsigned char>(ch)) || ch == '.' || ch == '+' || ch == '!'; };
  return std::all_of(pin.begin(), pin.begin() + static_cast<std::ptrdiff_t>(eq), name_ok) &&
         std::all_of(pin.begin() + static_cast<std::ptrdiff_t>(eq) + 2, pin.end(), version_ok);
}

/// A release that pins torch (vLLM, SGLang): the torch release is recorded, each variant has torch's variant of the same
/// name and CUDA, and its pins are well formed (pins_without_wheel among them).
void check_torch_pin(const Catalog& c, const FrameworkRelease& r, const std::string& id, std::vector<std::string>& problems) {
  for (const auto& p : r.pins)
    if (!catalog_pin_well_formed(p)) problems.push_back(id + ": pin '" + p + "' is not name==version");
  for (const auto& p : r.pins_without_wheel)
    if (std::find(r.pins.begin(), r.pins.end(), p) == r.pins.end()) problems.push_back(id + ": pins_without_wheel names '" + p + "', which pins does not list");
  if (!r.torch) return;
  if (r.framework == "torch") {
    problems.push_back(id + ": torch cannot pin torch");
    return;
  }
  const FrameworkRelease* torch = nullptr;
  if (auto it = c.frameworks.find("torch"); it != c.frameworks.end())
    for (const auto& t : it->second)
      if (t.version == *r.torch) torch = &t;
  if (!torch) {
    problems.push_back(id + ": it pins torch " + r.torch->str() + ", which torch.yaml does not record");
    return;
  }
  for (const auto& v : r.variants) {
    const FrameworkVariant* tv = torch->variant(v.name);
    if (!tv) problems.push_back(id + " " + v.name + ": torch " + r.torch->str() + " has no variant " + v.name);
    else if (tv->cuda != v.cuda) problems.push_back(id + " " + v.name + ": CUDA " + v.cuda.str() + ", torch " + r.torch->str() + "+" + v.name + " has " + tv->cuda.str());
  }
}

}  // namespace

const FrameworkVariant* FrameworkRelease::variant(std::string_view n) const {
  for (const auto& v : variants)
    if (v.name == n) return &v;
  return nullptr;
}

std::optional<bool> FrameworkRelease::cuda_on_aarch64(std::string_view n) const {
  if (!aarch64_cuda) return std::nullopt;
  return std::find(aarch64_cuda->begin(), aarch64_cuda->end(), n) != aarch64_cuda->end();
}

const CudaMajor* Catalog::major(int m) const {
  for (const auto& x : majors)
    if (x.major == m) return &x;
  return nullptr;
}

const GpuModel* Catalog::gpu(std::string_view name) const {
  const std::string want = normalize_gpu_name(name);
  if (want.empty()) return nullptr;
  for (const auto& g : gpus) {
    if (normalize_gpu_name(g.name) == want) return &g;
    for (const auto* list : {&g.aliases, &g.nvml_names, &g.former_nvml_names})
      for (const auto& a : *list)
        if (normalize_gpu_name(a) == want) return &g;
  }
  return nullptr;
}

namespace {

std::set<std::string> name_words(std::string_view name) {
  std::set<std::string> out;
  std::string w;
  for (char c : std::string(name) + ' ') {
    if (std::isalnum(static_cast<unsigned char>(c))) {
      w += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    } else if (!w.empty()) {
      out.insert(w);
      w.clear();
    }
  }
  return out;
}

}  // namespace

GpuProducts gpu_products(const Catalog& catalog, std::string_view name) {
  GpuProducts out;
  out.model = catalog.gpu(name);
  if (!out.model) {
    out.products = {std::string(name)};
    return out;
  }
  const GpuModel& m = *out.model;
  // NVML's own spelling, with its prefix ("NVIDIA H100" is one product; "H100" is the model, all four).
  const std::string want = nvml_key(name);
  for (const auto& n : m.nvml_names)
    if (nvml_key(n) == want) out.products = {n};
  for (const auto& n : m.former_nvml_names)
    if (out.products.empty() && nvml_key(n) == want) out.products = {n};
  if (out.products.empty()) {
    // The model's name or an alias: its products, narrowed by the words the alias adds ("PCIe", "NVL", "Max-Q").
    std::set<std::string> extra = name_words(name);
    for (const auto& w : name_words(m.name)) extra.erase(w);
    extra.erase("nvidia");
    for (const auto& n : m.nvml_names) {
      const auto words = name_words(n);
      if (std::all_of(extra.begin(), extra.end(), [&](const std::string& w) { return words.count(w) > 0; })) out.products.push_back(n);
    }
    if (out.products.empty()) out.products = m.nvml_names;
  }
  if (out.products.size() == 1) {
    // One product: the other names drivers gave it. With one current name, every former name is that product's;
    // otherwise only a name that reads the same (a prefix dropped or added).
    const std::string one = normalize_gpu_name(out.products.front());
    for (const auto* list : {&m.nvml_names, &m.former_nvml_names})
      for (const auto& n : *list)
        if (n != out.products.front() && (normalize_gpu_name(n) == one || (m.nvml_names.size() == 1 && list == &m.former_nvml_names)))
          out.spellings.push_back(n);
  }
  return out;
}

const GpuModel* Catalog::gpu_by_pci_id(std::string_view id) const {
  std::string want(id);
  std::transform(want.begin(), want.end(), want.begin(), [](unsigned char ch) { return std::tolower(ch); });
  if (want.rfind("0x", 0) != 0) want = "0x" + want;
  for (const auto& g : gpus)
    for (const auto& p : g.pci_device_ids)
      if (p == want) return &g;
  return nullptr;
}

const Distro* Catalog::distro(std::string_view name, std::string_view release) const {
  for (const auto& d : distros)
    if (d.name == name && (d.release == release || d.codename == release)) return &d;
  return nullptr;
}

std::vector<const CudaToolkit*> Catalog::toolkits_of(const Version& major_minor) const {
  std::vector<const CudaToolkit*> out;
  const Version prefix = major_minor.truncated(2);
  for (const auto& t : toolkits)
    if (t.version.has_prefix(prefix)) out.push_back(&t);
  return out;
}

const CudaToolkit* Catalog::newest_native(const Version& driver) const {
  const CudaToolkit* best = nullptr;
  for (const auto& t : toolkits)
    if (t.driver_min <= driver && (!best || t.version > best->version)) best = &t;
  return best;
}

const CudnnRelease* Catalog::cudnn_release(const Version& v) const {
  for (const auto& r : cudnn)
    if (r.version == v) return &r;
  return nullptr;
}

namespace {
const CudnnBuild* build_for(const CudnnRelease& r, int cuda_major) {
  for (const auto& b : r.builds)
    if (b.cuda_major == cuda_major) return &b;
  return nullptr;
}
}  // namespace

CudnnFacts Catalog::cudnn_facts(const Version& v, int cuda_major) const {
  CudnnFacts f;
  if (const CudnnRelease* r = cudnn_release(v)) {
    f.recorded = true;
    const CudnnBuild* b = build_for(*r, cuda_major);
    f.has_build = b != nullptr;
    if (b) f.cuda_min = b->cuda_min, f.cuda_max = b->cuda_max, f.driver_min = b->driver_min, f.sm = b->sm;
    return f;
  }
  const CudnnRelease* lo = nullptr;
  const CudnnRelease* hi = nullptr;
  for (const auto& r : cudnn) {
    if (r.version.major() != v.major()) continue;
    if (r.version < v) lo = &r;
    if (v < r.version && !hi) hi = &r;
  }
  if (!lo || !hi) {
    f.unknown = {"CUDA range", "driver floor", "architectures"};
    if (lo) f.below = lo->version;
    if (hi) f.above = hi->version;
    return f;
  }
  f.below = lo->version;
  f.above = hi->version;
  const CudnnBuild* a = build_for(*lo, cuda_major);
  const CudnnBuild* b = build_for(*hi, cuda_major);
  if ((a == nullptr) != (b == nullptr)) {
    f.unknown = {"a build for CUDA " + std::to_string(cuda_major)};
    return f;
  }
  f.has_build = a != nullptr;
  if (!a) return f;
  auto agree = [&](const auto& x, const auto& y, auto& out, const char* what) {
    if (x == y) out = x;
    else f.unknown.push_back(what);
  };
  agree(a->cuda_min, b->cuda_min, f.cuda_min, "oldest CUDA");
  agree(a->cuda_max, b->cuda_max, f.cuda_max, "newest CUDA");
  agree(a->driver_min, b->driver_min, f.driver_min, "driver floor");
  agree(a->sm, b->sm, f.sm, "architectures");
  return f;
}

Result<Catalog> load_catalog(const std::vector<CatalogFile>& files) {
  Catalog catalog;
  for (const auto& f : files) {
    if (auto st = check_yaml_bytes(f.text, f.path, 64u << 20, 256); !st) {
      Error e = std::move(st).error();
      e.kind = ErrorKind::internal;
      return e;
    }
    GPUENV_TRY(root, load_yaml(f.text, f.path, ErrorKind::internal, "catalog.yaml_syntax", ""));
    Reader r(f.path);
    const std::string schema = r.str(root, "schema");
    const std::string kind = r.str(root, "kind");
    if (!r.failed() && schema != k_catalog_schema) r.fail(root, "unsupported catalog schema '" + schema + "'");
    if (!r.failed()) {
      if (kind == "cuda") load_cuda(r, root, catalog);
      else if (kind == "cuda_compat") load_compat(r, root, catalog);
      else if (kind == "cudnn") load_cudnn(r, root, catalog);
      else if (kind == "framework") load_framework(r, root, catalog);
      else if (kind == "gpus") load_gpus(r, root, catalog);
      else if (kind == "distros") load_distros(r, root, catalog);
      else r.fail(root, "unknown catalog kind '" + kind + "'");
    }
    if (r.failed()) return r.take_error();
  }
  return catalog;
}

std::vector<std::string> check_catalog(const Catalog& c) {
  std::vector<std::string> problems;
  auto by_version = [](const auto& x) { return x.version; };
  check_sorted(c.majors, [](const CudaMajor& m) { return m.major; }, "cuda majors", problems);
  check_sorted(c.toolkits, by_version, "cuda toolkits", problems);
  check_sorted(c.compat, [](const CompatPackage& p) { return p.cuda; }, "cuda_compat packages", problems);
  check_sorted(c.cudnn, by_version, "cudnn releases", problems);
  check_sorted(c.gpus, [](const GpuModel& g) { return std::make_pair(g.sm, g.name); }, "gpus", problems);
  check_sorted(c.distros, [](const Distro& d) { return std::make_pair(d.name, Version::parse(d.release).ok() ? *Version::parse(d.release) : Version{}); }, "distros", problems);
  check_sources(c.majors, "cuda majors", problems);
  check_sources(c.toolkits, "cuda toolkits", problems);
  check_sources(c.compat, "cuda_compat packages", problems);
  check_sources(c.cudnn, "cudnn releases", problems);
  check_sources(c.gpus, "gpus", problems);
  check_sources(c.distros, "distros", problems);

  auto toolkit_known = [&](const Version& v) { return !c.toolkits_of(v).empty(); };
  auto sorted_unique = [](const std::vector<int>& v) { return std::adjacent_find(v.begin(), v.end(), std::greater_equal<>()) == v.end(); };
  for (const auto& t : c.toolkits) {
    if (!c.major(static_cast<int>(t.version.major())))
      problems.push_back("cuda " + t.version.str() + ": no minor-version compatibility entry for its major");
    if (t.sm.empty() || !sorted_unique(t.sm)) problems.push_back("cuda " + t.version.str() + ": sm list empty or unsorted");
  }
  for (const auto& p : c.compat)
    if (!toolkit_known(p.cuda)) problems.push_back("cuda_compat " + p.cuda.str() + ": no such CUDA toolkit in cuda.yaml");
  for (const auto& r : c.cudnn) {
    if (r.builds.empty()) problems.push_back("cudnn " + r.version.str() + ": no builds");
    for (const auto& b : r.builds) {
      if (!c.major(b.cuda_major)) problems.push_back("cudnn " + r.version.str() + ": unknown CUDA major " + std::to_string(b.cuda_major));
      if (b.cuda_min > b.cuda_max) problems.push_back("cudnn " + r.version.str() + ": cuda_min above cuda_max");
      if (b.cuda_min.major() != static_cast<std::uint32_t>(b.cuda_major) || b.cuda_max.major() != static_cast<std::uint32_t>(b.cuda_major))
        problems.push_back("cudnn " + r.version.str() + ": build range outside CUDA " + std::to_string(b.cuda_major));
      if (b.sm.empty() || !sorted_unique(b.sm)) problems.push_back("cudnn " + r.version.str() + ": sm list empty or unsorted");
    }
  }
  for (const auto& [name, releases] : c.frameworks) {
    check_sorted(releases, by_version, name + " releases", problems);
    check_sources(releases, name + " releases", problems);
    for (const auto& r : releases) {
      const std::string id = name + " " + r.version.str();
      if (r.python_min > r.python_max) problems.push_back(id + ": python min above max");
      if (r.variants.empty()) problems.push_back(id + ": no variants");
      if (!r.variant(r.default_variant)) problems.push_back(id + ": default_variant '" + r.default_variant + "' is not one of its variants");
      std::set<std::string> names;
      for (const auto& v : r.variants) {
        if (!names.insert(v.name).second) problems.push_back(id + ": variant " + v.name + " twice");
        if (!toolkit_known(v.cuda)) problems.push_back(id + " " + v.name + ": CUDA " + v.cuda.str() + " is not in cuda.yaml");
        if (!sorted_unique(v.sm) || !sorted_unique(v.ptx)) problems.push_back(id + " " + v.name + ": sm/ptx unsorted");
        if (!sorted_unique(v.aarch64_sm) || !sorted_unique(v.aarch64_ptx)) problems.push_back(id + " " + v.name + ": aarch64_sm/aarch64_ptx unsorted");
        if ((!v.aarch64_sm.empty() || !v.aarch64_ptx.empty()) && r.cuda_on_aarch64(v.name) != true)
          problems.push_back(id + " " + v.name + ": aarch64_sm/aarch64_ptx recorded, but aarch64_cuda does not list the variant");
      }
      check_torch_pin(c, r, id, problems);
      if (r.aarch64_cuda) {
        std::set<std::string> listed;
        for (const auto& n : *r.aarch64_cuda) {
          if (!r.variant(n)) problems.push_back(id + ": aarch64_cuda names '" + n + "', which is not one of its variants");
          if (!listed.insert(n).second) problems.push_back(id + ": aarch64_cuda names '" + n + "' twice");
        }
      }
    }
  }
  std::set<std::string> gpu_names, nvml_seen;
  for (const auto& g : c.gpus) {
    if (!gpu_names.insert(normalize_gpu_name(g.name)).second) problems.push_back("gpu " + g.name + " listed twice");
    if (g.nvml_names.empty()) problems.push_back("gpu " + g.name + ": no nvml_names");
    if (!g.host_arch.empty() && !platform_of_debian_arch(g.host_arch))
      problems.push_back("gpu " + g.name + ": host_arch '" + g.host_arch + "' is not a Debian architecture gpuenv builds (amd64, arm64)");
    for (const auto* list : {&g.nvml_names, &g.former_nvml_names})
      for (const auto& n : *list) {
        const GpuModel* owner = c.gpu(n);
        if (owner && owner != &g) problems.push_back("gpu " + g.name + ": its NVML name '" + n + "' names " + owner->name + " too");
        if (!nvml_seen.insert(nvml_key(n)).second) problems.push_back("gpu " + g.name + ": NVML name '" + n + "' listed twice");
      }
    bool covered = false;
    for (const auto& t : c.toolkits)
      for (int s : t.sm) covered = covered || (s / 10 == g.sm / 10 && s % 10 <= g.sm % 10);
    if (!covered) problems.push_back("gpu " + g.name + ": sm_" + std::to_string(g.sm) + " is covered by no CUDA toolkit");
  }
  return problems;
}

std::string catalog_digest(const std::vector<CatalogFile>& files) {
  std::string input;
  for (const auto& f : files) {
    const auto slash = f.path.rfind('/');
    input += slash == std::string::npos ? f.path : f.path.substr(slash + 1);
    input += '\0';
    input += f.text;
    input += '\0';
  }
  return sha256_hex(input);
}

}  // namespace gpuenv::resolver
