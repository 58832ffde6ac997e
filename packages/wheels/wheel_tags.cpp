#include "packages/wheels/wheel_tags.hpp"

#include <algorithm>
#include <array>
#include <utility>

#include "packages/wheels/markers.hpp"

namespace gpuenv::packages {
namespace {

constexpr std::string_view k_wheel_hint =
    "wheel files are named name-version(-build)?-pythontag-abitag-platformtag.whl (PEP 427)";

bool tag_is_digit(char c) { return c >= '0' && c <= '9'; }
bool tag_is_alnum(char c) { return tag_is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
// packaging checks the name with Python's Unicode \w; a byte of a multi-byte UTF-8 sequence stands for a letter.
bool is_name_char(char c) { return tag_is_alnum(c) || c == '_' || c == '.' || static_cast<unsigned char>(c) >= 0x80; }
char tag_to_lower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }

std::string tag_lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = tag_to_lower(c);
  return out;
}

bool ends_with_ci(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && tag_lower(s.substr(s.size() - suffix.size())) == suffix;
}

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  std::size_t start = 0;
  for (;;) {
    const std::size_t at = s.find(sep, start);
    out.push_back(s.substr(start, at == std::string_view::npos ? std::string_view::npos : at - start));
    if (at == std::string_view::npos) return out;
    start = at + 1;
  }
}

Error bad_name(std::string_view filename, const std::string& why) {
  return make_error(ErrorKind::environment, "wheel.filename",
                    "'" + std::string(filename) + "' is not a valid wheel filename: " + why, std::string(filename),
                    std::string(k_wheel_hint));
}

std::string nodot(int major, int minor) { return std::to_string(major) + std::to_string(minor); }

bool abi3_applies(const TargetPlatform& t) {
  return t.python_major > 3 || (t.python_major == 3 && t.python_minor >= 2);
}

bool version_below(const TargetPlatform& t, int major, int minor) {
  return t.python_major < major || (t.python_major == major && t.python_minor < minor);
}

// packaging's _py_interpreter_range: pyXY, pyX, then every earlier minor of X down to pyX0.
std::vector<std::string> py_interpreter_range(const TargetPlatform& t) {
  std::vector<std::string> out{"py" + nodot(t.python_major, t.python_minor), "py" + std::to_string(t.python_major)};
  for (int minor = t.python_minor - 1; minor >= 0; --minor) out.push_back("py" + nodot(t.python_major, minor));
  return out;
}

void add_all(std::vector<std::string>& out, const std::string& interpreter, const std::string& abi,
             const std::vector<std::string>& platforms) {
  for (const auto& platform : platforms) out.push_back(interpreter + "-" + abi + "-" + platform);
}

}  // namespace

bool is_sdist_filename(std::string_view filename) {
  static constexpr std::array<std::string_view, 9> k_suffixes = {
      ".tar.gz", ".zip", ".tgz", ".tar.bz2", ".tbz", ".tar.xz", ".txz", ".tar", ".tar.lzma"};
  return std::any_of(k_suffixes.begin(), k_suffixes.end(),
                     [&](std::string_view suffix) { return ends_with_ci(filename, suffix); });
}

Result<WheelName> parse_wheel_filename(std::string_view filename) {
  if (filename.size() < 4 || filename.substr(filename.size() - 4) != ".whl") {
    if (is_sdist_filename(filename)) {
      return make_error(ErrorKind::environment, "wheel.sdist",
                        "'" + std::string(filename) + "' is a source distribution; gpuenv installs wheels only and "
                        "never runs a package's build scripts",
                        std::string(filename),
                        "pick a version or platform for which the index has a wheel, or build the wheel yourself "
                        "and serve it from a local index (--extra-index-url)");
    }
    return bad_name(filename, "the extension must be '.whl'");
  }
  const std::string_view stem = filename.substr(0, filename.size() - 4);
  const auto dashes = static_cast<std::size_t>(std::count(stem.begin(), stem.end(), '-'));
  if (dashes != 4 && dashes != 5) {
    return bad_name(filename, "it has " + std::to_string(dashes + 1) + " dash-separated parts instead of 5 or 6");
  }
  const auto parts = split(stem, '-');
  const std::string_view name_part = parts[0];
  if (name_part.empty()) return bad_name(filename, "the project name is empty");
  if (name_part.find("__") != std::string_view::npos ||
      !std::all_of(name_part.begin(), name_part.end(), is_name_char)) {
    return bad_name(filename, "the project name '" + std::string(name_part) +
                                  "' must be escaped to letters, digits, '.' and single '_'");
  }
  WheelName out;
  out.name = canonicalize_name(name_part);
  auto version = Pep440Version::parse(parts[1]);
  if (!version.ok()) {
    return bad_name(filename, "'" + std::string(parts[1]) + "' is not a PEP 440 version");
  }
  out.version = std::move(version).value();
  if (dashes == 5) {
    const std::string_view build = parts[2];
    std::size_t digits = 0;
    while (digits < build.size() && tag_is_digit(build[digits])) ++digits;
    if (digits == 0) {
      return bad_name(filename, "the build tag '" + std::string(build) + "' must start with a digit");
    }
    std::size_t first = build.find_first_not_of('0');
    if (first == std::string_view::npos || first >= digits) first = digits - 1;
    out.has_build = true;
    out.build_number = std::string(build.substr(first, digits - first));
    out.build_suffix = std::string(build.substr(digits));
  }
  const std::size_t tag_start = dashes == 5 ? 3 : 2;
  const auto interpreters = split(parts[tag_start], '.');
  const auto abis = split(parts[tag_start + 1], '.');
  const auto platforms = split(parts[tag_start + 2], '.');
  for (const auto* set : {&interpreters, &abis, &platforms}) {
    for (const auto& tag : *set) {
      if (tag.empty()) return bad_name(filename, "a compatibility tag is empty");
    }
  }
  for (const auto& interpreter : interpreters) {
    for (const auto& abi : abis) {
      for (const auto& platform : platforms) {
        out.tags.push_back(tag_lower(interpreter) + "-" + tag_lower(abi) + "-" + tag_lower(platform));
      }
    }
  }
  std::sort(out.tags.begin(), out.tags.end());
  out.tags.erase(std::unique(out.tags.begin(), out.tags.end()), out.tags.end());
  return out;
}

std::vector<std::string> linux_platform_tags(const TargetPlatform& target) {
  // Mirrors packaging._manylinux.platform_tags with the target's glibc in place of the running one's.
  std::pair<int, int> too_old{2, 16};
  if (target.arch == "x86_64" || target.arch == "i686") too_old = {2, 4};
  constexpr int k_last_glibc_minor = 50;  // packaging's _LAST_GLIBC_MINOR default for earlier majors
  std::vector<std::pair<int, int>> maxima{{target.glibc_major, target.glibc_minor}};
  for (int major = target.glibc_major - 1; major > 1; --major) maxima.emplace_back(major, k_last_glibc_minor);
  std::vector<std::string> out;
  for (const auto& [major, max_minor] : maxima) {
    const int min_minor = major == too_old.first ? too_old.second : -1;
    for (int minor = max_minor; minor > min_minor; --minor) {
      out.push_back("manylinux_" + std::to_string(major) + "_" + std::to_string(minor) + "_" + target.arch);
      if (major == 2 && minor == 17) out.push_back("manylinux2014_" + target.arch);
      if (major == 2 && minor == 12) out.push_back("manylinux2010_" + target.arch);
      if (major == 2 && minor == 5) out.push_back("manylinux1_" + target.arch);
    }
  }
  out.push_back("linux_" + target.arch);
  return out;
}

std::vector<std::string> supported_tags(const TargetPlatform& target) {
  const std::vector<std::string> platforms = linux_platform_tags(target);
  const std::string version = nodot(target.python_major, target.python_minor);
  const std::string interpreter = target.implementation + version;
  std::vector<std::string> out;
  std::string compatible_interpreter;
  if (target.implementation == "cp") {
    // packaging's _cpython_abis for a release build: pymalloc's "m" before 3.8, UCS-4's "u" before 3.3.
    std::string abi = "cp" + version;
    if (version_below(target, 3, 8)) abi += "m";
    if (version_below(target, 3, 3)) abi += "u";
    add_all(out, interpreter, abi, platforms);
    if (abi3_applies(target)) add_all(out, interpreter, "abi3", platforms);
    add_all(out, interpreter, "none", platforms);
    if (abi3_applies(target)) {
      for (int minor = target.python_minor - 1; minor > 1; --minor) {
        add_all(out, "cp" + nodot(target.python_major, minor), "abi3", platforms);
      }
    }
    compatible_interpreter = interpreter;
  } else {
    // generic_tags: the implementation's own ABI cannot be known without running it, so only "none".
    add_all(out, interpreter, "none", platforms);
    if (target.implementation == "pp") compatible_interpreter = "pp3";
  }
  const auto range = py_interpreter_range(target);
  for (const auto& py : range) add_all(out, py, "none", platforms);
  if (!compatible_interpreter.empty()) out.push_back(compatible_interpreter + "-none-any");
  for (const auto& py : range) out.push_back(py + "-none-any");
  return out;
}

std::optional<std::size_t> tag_rank(const WheelName& wheel, const std::vector<std::string>& supported) {
  std::optional<std::size_t> best;
  for (const auto& tag : wheel.tags) {
    const auto it = std::find(supported.begin(), supported.end(), tag);
    if (it == supported.end()) continue;
    const auto rank = static_cast<std::size_t>(it - supported.begin());
    if (!best || rank < *best) best = rank;
  }
  return best;
}

}  // namespace gpuenv::packages
