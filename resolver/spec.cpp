#include "resolver/spec.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <regex>

#include "base/byte_rate.hpp"
#include "base/text.hpp"
#include "base/yaml_guard.hpp"
#include "base/yaml_reader.hpp"

namespace gpuenv::resolver {
namespace {

const std::vector<std::string> k_top_keys = {"schema", "name",   "base",     "python", "cuda",    "cudnn",
                                             "frameworks", "gpu", "packages", "image", "validate", "sources", "vm"};
const std::vector<std::string> k_sources_keys = {"apt", "pip"};
const std::vector<std::string> k_apt_source_keys = {"uri", "suite", "components", "architectures", "signed_by", "trusted"};
const std::vector<std::string> k_pip_source_keys = {"index_url", "extra_index_urls"};
const std::vector<std::string> k_frameworks = {"torch", "tensorflow", "jax", "vllm", "sglang"};
const std::vector<std::string> k_gpu_keys = {"models", "archs", "driver", "confidential"};
const std::vector<std::string> k_package_keys = {"apt", "pip", "python_project"};
const std::vector<std::string> k_python_project_keys = {"file", "extras", "groups"};
const std::vector<std::string> k_image_keys = {"format", "tag", "platforms"};
const std::vector<std::string> k_vm_keys = {"kernel", "disk_size", "cloud_init", "cmdline", "driver"};
constexpr std::size_t k_max_user_cmdline = 1024;  // of the kernel's 2,048 (see vm.cmdline below)
const std::vector<std::string> k_vm_driver_keys = {"module", "packages"};
const std::vector<std::string> k_validate_keys = {"level", "thresholds", "data_read_min"};
const std::vector<std::string> k_levels = {"quick", "standard", "long"};

/// The spec's (and the user configuration's) accessors: ids "spec.*", exit 2.
YamlReader spec_reader(const std::string& path) {
  return YamlReader({path, ErrorKind::spec, "spec", "see docs/spec.md"});
}

/// Line and column of N, for the positions a Spec keeps.
SourcePos pos(const YAML::Node& n) {
  const auto m = n.Mark();
  return m.line < 0 ? SourcePos{} : SourcePos{m.line + 1, m.column + 1};
}

/// A version constraint (spec.contradictory when no version can meet it).
Result<Constraint> constraint(const YamlReader& w, const YAML::Node& n, const std::string& what) {
  GPUENV_TRY(s, w.scalar(n, what));
  auto c = Constraint::parse(s);
  if (!c) {
    Error e = std::move(c).error();
    e.where = w.where(n);
    e.message = "'" + what + "': " + e.message;
    return e;
  }
  if (c->is_empty()) {
    return w.error(n, "contradictory", "'" + what + "' constraint '" + s + "' allows no version at all",
                   "check the bounds: the lower bound is above the upper one");
  }
  return std::move(*c);
}

bool url_ok(const std::string& u) {
  return u.rfind("http://", 0) == 0 || u.rfind("https://", 0) == 0 || u.rfind("file://", 0) == 0;
}

Result<SourcesRequest> parse_sources(const YamlReader& w, const YAML::Node& node) {
  SourcesRequest out;
  GPUENV_TRY(top, w.map(node, "sources", k_sources_keys));
  for (const auto& [key, value] : top) {
    if (key.Scalar() == "apt") {
      out.apt_given = true;
      if (!value.IsSequence()) return w.error(value, "wrong_type", "'sources.apt' must be a list of repositories");
      for (const auto& item : value) {
        GPUENV_TRY(fields, w.map(item, "sources.apt item", k_apt_source_keys));
        AptSourceRequest a;
        a.pos = pos(item);
        for (const auto& [fk, fv] : fields) {
          const std::string k = fk.Scalar();
          if (k == "uri") {
            GPUENV_TRY(uri, w.scalar(fv, "sources.apt.uri"));
            if (!url_ok(uri)) return w.error(fv, "bad_url", "'" + uri + "' is not an http://, https:// or file:// URL", "");
            a.uri = uri.back() == '/' ? uri : uri + "/";
          } else if (k == "suite") {
            GPUENV_TRY(suite, w.scalar(fv, "sources.apt.suite"));
            a.suite = suite;
          } else if (k == "components" || k == "architectures") {
            GPUENV_TRY(list, w.string_list(fv, "sources.apt." + k, true));
            (k == "components" ? a.components : a.architectures) = std::move(list);
          } else if (k == "signed_by") {
            GPUENV_TRY(path, w.scalar(fv, "sources.apt.signed_by"));
            a.signed_by = path;
          } else {
            GPUENV_TRY(trusted, w.boolean(fv, "sources.apt.trusted"));
            a.trusted = trusted;
          }
        }
        if (a.uri.empty() || a.suite.empty()) {
          return w.error(item, "missing_field", "a sources.apt entry needs uri and suite", "e.g. {uri: https://mirror.example/debian, suite: bookworm, components: [main]}");
        }
        const bool flat = a.suite.back() == '/';
        if (flat && !a.components.empty())
          return w.error(item, "contradictory", "flat repository '" + a.suite + "' cannot have components", "drop components, or name a suite");
        if (!flat && a.components.empty())
          return w.error(item, "missing_field", "suite '" + a.suite + "' needs components", "e.g. components: [main]");
        out.apt.push_back(std::move(a));
      }
    } else {
      out.pip_given = true;
      out.pip_pos = pos(value);
      GPUENV_TRY(pip, w.map(value, "sources.pip", k_pip_source_keys));
      for (const auto& [pk, pv] : pip) {
        if (pk.Scalar() == "index_url") {
          GPUENV_TRY(u, w.scalar(pv, "sources.pip.index_url"));
          if (!url_ok(u)) return w.error(pv, "bad_url", "'" + u + "' is not an http://, https:// or file:// URL", "");
          out.pip_index_url = u;
        } else {
          GPUENV_TRY(list, w.string_list(pv, "sources.pip.extra_index_urls", true));
          for (const auto& u : list)
            if (!url_ok(u)) return w.error(pv, "bad_url", "'" + u + "' is not an http://, https:// or file:// URL", "");
          out.pip_extra_index_urls = std::move(list);
        }
      }
    }
  }
  return out;
}

}  // namespace

Result<SourcesRequest> parse_user_config(std::string_view text, const std::string& path) {
  if (auto st = check_yaml_bytes(text, path, k_spec_max_bytes, k_spec_max_depth); !st) return std::move(st).error();
  GPUENV_TRY(root, load_yaml(text, path, ErrorKind::spec, "spec.yaml_syntax", ""));
  if (root.IsNull()) return SourcesRequest{};
  const YamlReader w = spec_reader(path);
  GPUENV_TRY(top, w.map(root, "config", {"sources"}));
  for (const auto& [key, value] : top) return parse_sources(w, value);
  return SourcesRequest{};
}

Result<int> parse_arch(std::string_view text) {
  std::string s(text);
  static const std::regex sm_re(R"(^(sm_|compute_)?([0-9]{2,3})([af]?)$)");
  static const std::regex dotted_re(R"(^([0-9]{1,2})\.([0-9])$)");
  std::smatch m;
  if (std::regex_match(s, m, sm_re)) return std::stoi(m[2].str());
  if (std::regex_match(s, m, dotted_re)) return std::stoi(m[1].str()) * 10 + std::stoi(m[2].str());
  return make_error(ErrorKind::spec, "spec.bad_arch", "'" + s + "' is not a GPU architecture", {},
                    "write compute capabilities as sm_90, sm_120 or 9.0");
}

std::string arch_name(int sm) { return "sm_" + std::to_string(sm); }

std::string Spec::where(const std::string& key) const {
  auto it = positions.find(key);
  if (it == positions.end() || it->second.line == 0) return path;
  return path + ":" + std::to_string(it->second.line) + ":" + std::to_string(it->second.column);
}

namespace {

Result<YAML::Node> load_spec_yaml(std::string_view text, const std::string& path) {
  if (auto st = check_yaml_bytes(text, path, k_spec_max_bytes, k_spec_max_depth); !st) return std::move(st).error();
  if (text.find_first_not_of(" \t\r\n") == std::string_view::npos) {
    return make_error(ErrorKind::spec, "spec.empty", "spec is empty", path,
                      "start from an example in recipes/examples/ (e.g. torch-h100.yaml)");
  }
  GPUENV_TRY(root, load_yaml(text, path, ErrorKind::spec, "spec.yaml_syntax", "check indentation, quotes and colons around this position"));
  if (root.IsNull()) {
    return make_error(ErrorKind::spec, "spec.empty", "spec has no content (only comments or null)", path,
                      "start from an example in recipes/examples/");
  }
  return root;
}

Status read_schema(const YamlReader& w, [[maybe_unused]] const std::string& k, const YAML::Node& value, [[maybe_unused]] Spec& spec) {
  GPUENV_TRY(s, w.scalar(value, "schema"));
  if (s != k_spec_schema) {
    return w.error(value, "schema", "unsupported schema '" + s + "'",
                   "this gpuenv reads '" + std::string(k_spec_schema) + "'");
  }
  return ok_status();
}

Status read_name(const YamlReader& w, [[maybe_unused]] const std::string& k, const YAML::Node& value, Spec& spec) {
  GPUENV_TRY(s, w.scalar(value, "name"));
  if (!is_valid_image_name(s)) {
    return w.error(value, "bad_name", "name '" + s + "' is not a valid image name",
                   "use lower-case letters, digits, '.', '_' and '-', starting with a letter or digit");
  }
  spec.name = s;
  return ok_status();
}

Status read_base_name(const YamlReader& w, const YAML::Node& value, const std::string& s, Spec& spec) {
  if (s.rfind("docker://", 0) == 0 || s.rfind("oci:", 0) == 0) {
    const std::string rest = s.substr(s.rfind("docker://", 0) == 0 ? 9 : (s.rfind("oci://", 0) == 0 ? 6 : 4));
    if (rest.empty() || rest.find_first_of(" \t\n") != std::string::npos) {
      return w.error(value, "bad_base", "base image '" + s + "' names no image",
                     "write docker://registry.example.com/repo:tag (or @sha256:...) or oci:/path/to/layout[:ref]");
    }
    spec.base_image = s;
    spec.base_distro.clear();
    spec.base_release.clear();
    return ok_status();
  }
  const auto colon = s.find(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == s.size() || s.find(':', colon + 1) != std::string::npos) {
    return w.error(value, "bad_base", "base '" + s + "' is not distro:release",
                   "write it as debian:12 or ubuntu:22.04, or name an image: docker://REF or oci:PATH[:REF]");
  }
  spec.base_distro = s.substr(0, colon);
  spec.base_release = s.substr(colon + 1);
  return ok_status();
}

// `base: debian:12`, `base: docker://...`, or `base: {distro: debian:12, variant: slim}`.
Status read_base(const YamlReader& w, [[maybe_unused]] const std::string& k, const YAML::Node& value, Spec& spec) {
  if (!value.IsMap()) {
    GPUENV_TRY(s, w.scalar(value, "base"));
    return read_base_name(w, value, s, spec);
  }
  static const std::vector<std::string> keys = {"distro", "variant"};
  GPUENV_TRY(bm, w.map(value, "base", keys));
  bool has_distro = false;
  for (const auto& [bkey, bval] : bm) {
    if (bkey.Scalar() == "distro") {
      GPUENV_TRY(s, w.scalar(bval, "base.distro"));
      if (s.rfind("docker://", 0) == 0 || s.rfind("oci:", 0) == 0)
        return w.error(bval, "bad_base", "base.distro '" + s + "' is an image; a variant chooses the packages of a root built from packages",
                       "write base: " + s + " without a variant, or base: {distro: debian:12, variant: slim}");
      GPUENV_CHECK(read_base_name(w, bval, s, spec));
      has_distro = true;
    } else {
      GPUENV_TRY(s, w.scalar(bval, "base.variant"));
      if (std::find(k_base_variants.begin(), k_base_variants.end(), s) == k_base_variants.end())
        return w.error(bval, "bad_base", "base.variant '" + s + "' is not one of " + join(k_base_variants, ", "),
                       "write variant: slim for a root without apt, dpkg and perl, or leave it out for the required set");
      spec.base_variant = s;
    }
  }
  if (!has_distro)
    return w.error(value, "bad_base", "base names a variant but no distro", "write base: {distro: debian:12, variant: slim}");
  return ok_status();
}

Status read_cuda_mapping(const YamlReader& w, [[maybe_unused]] const std::string& k, const YAML::Node& value, Spec& spec) {
  static const std::vector<std::string> keys = {"version", "components"};
  GPUENV_TRY(cm, w.map(value, "cuda", keys));
  for (const auto& [ckey, cval] : cm) {
    if (ckey.Scalar() == "version") {
      GPUENV_TRY(c, constraint(w, cval, "cuda.version"));
      spec.cuda = std::move(c);
      spec.cuda_given = true;
    } else {
      GPUENV_TRY(list, w.string_list(cval, "cuda.components", true));
      for (const auto& name : list) {
        if (std::find(k_cuda_components.begin(), k_cuda_components.end(), name) == k_cuda_components.end()) {
          std::string hint = "use any of " + join(k_cuda_components, ", ") + (name == "cudnn" ? "; cuDNN is asked for with the top-level 'cudnn' key" : "");
          if (auto g = did_you_mean(name, k_cuda_components)) hint = "did you mean '" + *g + "'? " + hint;
          return w.error(cval, "bad_enum", "cuda.components: '" + name + "' is not a CUDA component gpuenv knows", hint);
        }
        if (std::find(spec.cuda_components.begin(), spec.cuda_components.end(), name) == spec.cuda_components.end())
          spec.cuda_components.push_back(name);
      }
      if (spec.cuda_components.empty())
        return w.error(cval, "empty_list", "cuda.components is empty", "leave the key out for the default (cudart, cublas)");
    }
  }
  return ok_status();
}

Status read_version_key(const YamlReader& w, [[maybe_unused]] const std::string& k, const YAML::Node& value, Spec& spec) {
  GPUENV_TRY(c, constraint(w, value, k));
  (k == "python" ? spec.python : k == "cuda" ? spec.cuda : spec.cudnn) = std::move(c);
  (k == "python" ? spec.python_given : k == "cuda" ? spec.cuda_given : spec.cudnn_given) = true;
  return ok_status();
}

Status read_frameworks(const YamlReader& w, [[maybe_unused]] const std::string& k, const YAML::Node& value, Spec& spec) {
  if (value.IsNull()) return ok_status();
  GPUENV_TRY(fws, w.map(value, "frameworks", k_frameworks));
  for (const auto& [fkey, fval] : fws) {
    FrameworkRequest req;
    req.name = fkey.Scalar();
    req.pos = pos(fval);
    if (fval.IsNull()) {
      req.version = Constraint{};
    } else {
      GPUENV_TRY(c, constraint(w, fval, "frameworks." + req.name));
      req.version = std::move(c);
    }
    spec.frameworks.push_back(std::move(req));
  }
  std::sort(spec.frameworks.begin(), spec.frameworks.end(), [](const auto& a, const auto& b) {
    auto rank = [](const std::string& n) { return std::find(k_frameworks.begin(), k_frameworks.end(), n) - k_frameworks.begin(); };
    return rank(a.name) < rank(b.name);
  });
  return ok_status();
}

Status read_gpu(const YamlReader& w, [[maybe_unused]] const std::string& k, const YAML::Node& value, Spec& spec) {
  GPUENV_TRY(g, w.map(value, "gpu", k_gpu_keys));
  for (const auto& [gkey, gval] : g) {
    const std::string gk = gkey.Scalar();
    if (gk == "models") {
      GPUENV_TRY(models, w.string_list(gval, "gpu.models", true));
      spec.gpu.models = std::move(models);
      spec.gpu.models_pos = pos(gval);
    } else if (gk == "archs") {
      GPUENV_TRY(archs, w.string_list(gval, "gpu.archs", true));
      for (const auto& a : archs) {
        auto sm = parse_arch(a);
        if (!sm) {
          Error e = std::move(sm).error();
          e.where = w.where(gval);
          return e;
        }
        spec.gpu.archs.push_back(*sm);
      }
      spec.gpu.archs_pos = pos(gval);
    } else if (gk == "driver") {
      GPUENV_TRY(c, constraint(w, gval, "gpu.driver"));
      if (!c.lower_bound()) {
        return w.error(gval, "driver_unbounded", "gpu.driver '" + c.str() + "' has no lower bound",
                       "give the fleet's driver (550.54.15) or a range with a lower bound (>=550)");
      }
      spec.gpu.driver = std::move(c);
      spec.gpu.driver_pos = pos(gval);
    } else if (gk == "confidential") {
      // YAML 1.1 readers turn `off` into false; accept both spellings.
      GPUENV_TRY(s, w.scalar(gval, "gpu.confidential"));
      if (s == "off" || s == "false" || s == "no") spec.gpu.confidential = Confidential::off;
      else if (s == "allowed") spec.gpu.confidential = Confidential::allowed;
      else if (s == "required" || s == "on" || s == "true") spec.gpu.confidential = Confidential::required;
      else {
        return w.error(gval, "bad_enum", "gpu.confidential '" + s + "' is not off, allowed or required", "");
      }
    }
  }
  if (!spec.gpu.models.empty() && !spec.gpu.archs.empty()) {
    return w.error(value, "contradictory", "gpu gives both 'models' and 'archs'",
                   "give the models (gpuenv knows their architectures) or, for GPUs it does not know, the archs");
  }
  return ok_status();
}

/// A Debian package as a spec names it: "name" or "name=version".
bool is_apt_request(const std::string& s) {
  static const std::regex apt_re(R"(^[a-z0-9][a-z0-9+.-]+(:[a-z0-9]+)?(=[A-Za-z0-9.+~:-]+)?$)");
  return std::regex_match(s, apt_re);
}

/// `python_project: FILE` or `python_project: {file: FILE, extras: [...], groups: [...]}`.
Status read_python_project(const YamlReader& w, const YAML::Node& value, Spec& spec) {
  PythonProjectRequest r;
  r.pos = {value.Mark().line + 1, value.Mark().column + 1};
  if (value.IsScalar()) {
    GPUENV_TRY(file, w.scalar(value, "packages.python_project"));
    r.file = std::move(file);
  } else {
    GPUENV_TRY(entries, w.map(value, "packages.python_project", k_python_project_keys));
    for (const auto& [key, val] : entries) {
      if (key.Scalar() == "file") {
        GPUENV_TRY(file, w.scalar(val, "packages.python_project.file"));
        r.file = std::move(file);
      } else {
        GPUENV_TRY(list, w.string_list(val, "packages.python_project." + key.Scalar(), true));
        (key.Scalar() == "extras" ? r.extras : r.groups) = std::move(list);
      }
    }
    if (r.file.empty()) return w.error(value, "missing", "packages.python_project has no file", "write python_project: {file: requirements.txt}");
  }
  if (r.file.find('\0') != std::string::npos || r.file.find("://") != std::string::npos)
    return w.error(value, "bad_value", "packages.python_project must be a file's path, not '" + r.file + "'", "name a file beside the spec, e.g. requirements.txt");
  spec.python_project = std::move(r);
  return ok_status();
}

Status read_packages(const YamlReader& w, [[maybe_unused]] const std::string& k, const YAML::Node& value, Spec& spec) {
  GPUENV_TRY(p, w.map(value, "packages", k_package_keys));
  for (const auto& [pkey, pval] : p) {
    if (pkey.Scalar() == "python_project") {
      GPUENV_CHECK(read_python_project(w, pval, spec));
      continue;
    }
    GPUENV_TRY(list, w.string_list(pval, "packages." + pkey.Scalar(), true));
    if (pkey.Scalar() == "apt") {
      for (const auto& name : list)
        if (!is_apt_request(name))
          return w.error(pval, "bad_package", "'" + name + "' is not a Debian package name",
                         "write name or name=version, e.g. curl or libgomp1=12.2.0-14");
      spec.apt_packages = std::move(list);
    } else {
      spec.pip_packages = std::move(list);
    }
  }
  return ok_status();
}

/// `image.platforms: [linux/amd64, linux/arm64]`: each once, kept in k_platform_facts' order (the order of an index).
Status read_platforms(const YamlReader& w, const YAML::Node& value, Spec& spec) {
  GPUENV_TRY(list, w.string_list(value, "image.platforms", true));
  if (list.empty()) return w.error(value, "bad_value", "image.platforms is empty", "name one or more of " + known_platforms() + ", or remove the key (default: the GPUs' hosts, else this machine's)");
  std::vector<Platform> out;
  for (std::size_t i = 0; i < list.size(); ++i) {
    auto p = parse_platform(list[i]);
    const YAML::Node item = value.IsSequence() ? value[i] : value;
    if (!p) return w.error(item, "bad_platform", p.error().message, p.error().hint);
    if (std::find(out.begin(), out.end(), *p) != out.end())
      return w.error(item, "duplicate", "image.platforms names " + p->str() + " twice", "name each platform once");
    out.push_back(*p);
  }
  std::sort(out.begin(), out.end());
  spec.platforms = std::move(out);
  return ok_status();
}

Status read_image(const YamlReader& w, [[maybe_unused]] const std::string& k, const YAML::Node& value, Spec& spec) {
  GPUENV_TRY(im, w.map(value, "image", k_image_keys));
  for (const auto& [ikey, ival] : im) {
    if (ikey.Scalar() == "platforms") {
      GPUENV_CHECK(read_platforms(w, ival, spec));
      continue;
    }
    GPUENV_TRY(s, w.scalar(ival, "image." + ikey.Scalar()));
    if (ikey.Scalar() == "format") {
      const auto format = parse_image_format(s);
      if (!format) {
        std::string hint = "use one of " + join(k_image_formats, ", ");
        if (auto g = did_you_mean(s, k_image_formats)) hint = "did you mean '" + *g + "'? " + hint;
        return w.error(ival, "bad_enum", "image.format '" + s + "' is not known", hint);
      }
      spec.image_format = *format;
    } else {
      spec.image_tag = s;
    }
  }
  return ok_status();
}

/// "8G", "512M", "8GiB", "1T" (binary units) or a number of bytes; std::nullopt for anything else.
std::optional<std::uint64_t> parse_size(const std::string& text) {
  std::size_t used = 0;
  unsigned long long n = 0;
  try {
    if (text.empty() || !std::isdigit(static_cast<unsigned char>(text[0]))) return std::nullopt;
    n = std::stoull(text, &used);
  } catch (const std::exception&) {
    return std::nullopt;
  }
  std::string unit = text.substr(used);
  if (unit.size() == 3 && unit.substr(1) == "iB") unit = unit.substr(0, 1);
  int shift = 0;
  if (unit == "K") shift = 10;
  else if (unit == "M") shift = 20;
  else if (unit == "G") shift = 30;
  else if (unit == "T") shift = 40;
  else if (!unit.empty()) return std::nullopt;
  if (shift && n > (~0ULL >> shift)) return std::nullopt;
  return static_cast<std::uint64_t>(n) << shift;
}

/// `vm.driver`: `distro` (Debian's packaged driver), or `{module: PACKAGE, packages: [...]}`, a pinned set.
Result<VmDriver> read_vm_driver(const YamlReader& w, const YAML::Node& value) {
  VmDriver d;
  if (value.IsScalar()) {
    if (value.Scalar() != "distro")
      return w.error(value, "bad_value", "vm.driver '" + value.Scalar() + "' is neither distro nor a mapping",
                     "write driver: distro (Debian's packaged driver) or driver: {module: nvidia-tesla-535-kernel-dkms, packages: [...]}");
    d.module = k_distro_driver_module;
    d.packages = k_distro_driver_packages;
    return d;
  }
  GPUENV_TRY(m, w.map(value, "vm.driver", k_vm_driver_keys));
  d.request = "packages";
  d.module.clear();
  for (const auto& [dkey, dval] : m) {
    if (dkey.Scalar() == "module") {
      GPUENV_TRY(s, w.scalar(dval, "vm.driver.module"));
      if (!is_apt_request(s)) return w.error(dval, "bad_package", "vm.driver.module '" + s + "' is not a Debian package name", "e.g. nvidia-tesla-535-kernel-dkms");
      d.module = s;
    } else {
      GPUENV_TRY(list, w.string_list(dval, "vm.driver.packages", true));
      for (const auto& name : list)
        if (!is_apt_request(name)) return w.error(dval, "bad_package", "'" + name + "' is not a Debian package name", "write name or name=version");
      d.packages = std::move(list);
    }
  }
  if (d.module.empty())
    return w.error(value, "missing", "vm.driver names no module", "add module: the DKMS source package of the kernel module, e.g. nvidia-kernel-dkms");
  return d;
}

Status read_vm(const YamlReader& w, [[maybe_unused]] const std::string& k, const YAML::Node& value, Spec& spec) {
  GPUENV_TRY(vm, w.map(value, "vm", k_vm_keys));
  VmRequest out;
  for (const auto& [vkey, vval] : vm) {
    const std::string key = vkey.Scalar();
    if (key == "driver") {
      GPUENV_TRY(d, read_vm_driver(w, vval));
      out.driver = std::move(d);
      continue;
    }
    GPUENV_TRY(s, w.scalar(vval, "vm." + key));
    if (key == "kernel") {
      static const std::regex name_re(R"(^[a-z0-9][a-z0-9+.-]+$)");
      if (!std::regex_match(s, name_re)) return w.error(vval, "bad_package", "vm.kernel '" + s + "' is not a Debian package name", "e.g. linux-image-cloud-amd64");
      out.kernel = s;
    } else if (key == "disk_size") {
      const auto size = parse_size(s);
      constexpr std::uint64_t mib = 1u << 20;
      if (!size || *size % mib != 0 || *size < (64u << 20) || *size > (std::uint64_t{16} << 40))
        return w.error(vval, "bad_size", "vm.disk_size '" + s + "' is not a size of whole MiB between 64M and 16T", "write e.g. 8G or 512M");
      out.disk_size = *size;
    } else if (key == "cloud_init") {
      if (s != "true" && s != "false") return w.error(vval, "wrong_type", "vm.cloud_init must be true or false, found '" + s + "'", "");
      out.cloud_init = s == "true";
    } else {
      if (s.find_first_of("\n\r") != std::string::npos) return w.error(vval, "bad_value", "vm.cmdline holds a line break", "write the kernel command line on one line");
      // The kernel keeps 2,048 bytes of its command line (COMMAND_LINE_SIZE on x86 and arm64) and cuts the rest
      // silently; gpuenv's own part (root=PARTUUID=..., the consoles) and the boot loader's initrd= take about 200.
      if (s.size() > k_max_user_cmdline)
        return w.error(vval, "bad_value", "vm.cmdline is " + std::to_string(s.size()) + " bytes; at most " + std::to_string(k_max_user_cmdline) + " fit beside gpuenv's own",
                       "the kernel would cut it silently: move settings into the image (modprobe.d, sysctl.d)");
      if (!std::all_of(s.begin(), s.end(), [](char c) { return c >= 0x20 && c < 0x7F; }))
        return w.error(vval, "bad_value", "vm.cmdline holds a character that is not printable ASCII", "a kernel command line is words of printable ASCII");
      out.cmdline = s;
    }
  }
  spec.vm = out;
  return ok_status();
}

/// A VM disk's rules across sections: `vm:` goes with image.format raw or qcow2 (the default then: raw), and a
/// VM's root is built from packages.
Status check_vm(const YamlReader& w, const YAML::Node& root, Spec& spec) {
  const YAML::Node image = root["image"];  // a missing key: an undefined node, which only IsDefined may ask
  const bool format_given = image.IsDefined() && image.IsMap() && image["format"].IsDefined();
  if (spec.vm && format_given && !is_vm_format(spec.image_format))
    return w.error(root["vm"], "contradictory", "a vm: section, but image.format is " + std::string(to_string(spec.image_format)),
                   "set image.format to raw or qcow2 for a VM disk, or remove vm:");
  if (spec.vm && !format_given) spec.image_format = ImageFormat::raw;
  if (is_vm_format(spec.image_format) && !spec.vm) spec.vm = VmRequest{};
  if (spec.vm && spec.vm->driver && spec.gpu.driver)
    return w.error(root["gpu"], "contradictory", "gpu.driver and vm.driver both given: a VM image's driver is the one vm.driver builds into it",
                   "remove gpu.driver; the lock takes the driver version from vm.driver's module package");
  if (spec.vm && spec.platforms.size() > 1)
    return w.error(image["platforms"], "contradictory", "a VM disk is for one platform, and image.platforms names " + platform_list(spec.platforms),
                   "name one platform for a VM disk (build one disk per platform from two specs)");
  // The kernel follows the platform; without image.platforms, app::resolve sets it once the platform is chosen.
  if (spec.vm && spec.vm->kernel.empty() && spec.platforms.size() == 1) spec.vm->kernel = default_vm_kernel(spec.platforms.front());
  if (spec.image_format == ImageFormat::docker_archive && spec.platforms.size() > 1)
    return w.error(image["platforms"], "contradictory", "docker-archive holds one image, and image.platforms names " + platform_list(spec.platforms),
                   "use image.format oci-dir or oci-archive for a multi-platform image (an OCI index), or name one platform");
  if (spec.vm && !spec.base_image.empty())
    return w.error(root["base"], "contradictory", "a VM disk is built from packages, not from the base image " + spec.base_image,
                   "write base: debian:12 (the VM's kernel, systemd and boot loader come from its packages)");
  return ok_status();
}

Status read_sources_key(const YamlReader& w, [[maybe_unused]] const std::string& k, const YAML::Node& value, Spec& spec) {
  GPUENV_TRY(src, parse_sources(w, value));
  spec.sources = std::move(src);
  return ok_status();
}

Status read_validate(const YamlReader& w, [[maybe_unused]] const std::string& k, const YAML::Node& value, Spec& spec) {
  GPUENV_TRY(v, w.map(value, "validate", k_validate_keys));
  for (const auto& [vkey, vval] : v) {
    if (vkey.Scalar() == "level") {
      GPUENV_TRY(s, w.scalar(vval, "validate.level"));
      if (std::find(k_levels.begin(), k_levels.end(), s) == k_levels.end()) {
        std::string hint = "use quick, standard or long";
        if (auto g = did_you_mean(s, k_levels)) hint = "did you mean '" + *g + "'? " + hint;
        return w.error(vval, "bad_enum", "validate.level '" + s + "' is not known", hint);
      }
      spec.validate_level = s;
    } else if (vkey.Scalar() == "data_read_min") {
      GPUENV_TRY(s, w.scalar(vval, "validate.data_read_min"));
      auto rate = parse_byte_rate(s, "validate.data_read_min");
      if (!rate) return w.error(vval, "bad_rate", "validate.data_read_min: " + rate.error().message, rate.error().hint);
      spec.validate_data_read_min = *rate;
    } else {
      GPUENV_TRY(th, w.map(vval, "validate.thresholds", {}));
      for (const auto& [tkey, tval] : th) {
        GPUENV_TRY(s, w.scalar(tval, "validate.thresholds." + tkey.Scalar()));
        try {
          std::size_t used = 0;
          const double d = std::stod(s, &used);
          if (used != s.size() || !(d >= 0)) throw std::invalid_argument(s);
          spec.validate_thresholds[tkey.Scalar()] = d;
        } catch (const std::exception&) {
          return w.error(tval, "wrong_type", "validate.thresholds." + tkey.Scalar() + " must be a non-negative number, found '" + s + "'", "");
        }
      }
    }
  }
  return ok_status();
}

}  // namespace

std::string default_vm_kernel(const Platform& platform) { return "linux-image-cloud-" + std::string(platform.debian_arch()); }

bool is_valid_image_name(std::string_view name) {
  static const std::regex name_re("^[a-z0-9][a-z0-9._-]{0,127}$");
  return std::regex_match(name.begin(), name.end(), name_re);
}

std::string_view to_string(ImageFormat format) { return k_image_formats.at(static_cast<std::size_t>(format)); }

std::optional<ImageFormat> parse_image_format(std::string_view name) {
  for (std::size_t i = 0; i < k_image_formats.size(); ++i)
    if (k_image_formats[i] == name) return static_cast<ImageFormat>(i);
  return std::nullopt;
}

Result<Spec> parse_spec(std::string_view text, const std::string& path) {
  GPUENV_TRY(root, load_spec_yaml(text, path));
  const YamlReader w = spec_reader(path);
  Spec spec;
  spec.path = path;
  GPUENV_TRY(top, w.map(root, "spec", k_top_keys));
  for (const auto& [key, value] : top) {
    const std::string k = key.Scalar();
    spec.positions[k] = pos(value);
    Status st = ok_status();
    if (k == "schema") st = read_schema(w, k, value, spec);
    else if (k == "name") st = read_name(w, k, value, spec);
    else if (k == "base") st = read_base(w, k, value, spec);
    else if (k == "cuda" && value.IsMap()) st = read_cuda_mapping(w, k, value, spec);
    else if (k == "python" || k == "cuda" || k == "cudnn") st = read_version_key(w, k, value, spec);
    else if (k == "frameworks") st = read_frameworks(w, k, value, spec);
    else if (k == "gpu") st = read_gpu(w, k, value, spec);
    else if (k == "packages") st = read_packages(w, k, value, spec);
    else if (k == "image") st = read_image(w, k, value, spec);
    else if (k == "sources") st = read_sources_key(w, k, value, spec);
    else if (k == "validate") st = read_validate(w, k, value, spec);
    else if (k == "vm") st = read_vm(w, k, value, spec);
    if (!st) return std::move(st).error();
  }
  GPUENV_CHECK(check_vm(w, root, spec));
  return spec;
}

}  // namespace gpuenv::resolver
