#include "resolver/platform.hpp"

#include "base/text.hpp"

namespace gpuenv::resolver {

std::optional<Platform> platform_of(std::string_view os, std::string_view architecture, std::string_view variant) {
  if (os != "linux") return std::nullopt;
  if (architecture == "amd64" && variant.empty()) return Platform::amd64();
  if (architecture == "arm64" && (variant.empty() || variant == "v8")) return Platform::arm64();
  return std::nullopt;
}

std::optional<Platform> platform_of_debian_arch(std::string_view debian_arch) {
  for (const Platform p : {Platform::amd64(), Platform::arm64()})
    if (p.debian_arch() == debian_arch) return p;
  return std::nullopt;
}

Result<Platform> parse_platform(std::string_view text) {
  std::string_view os = "linux", arch = text, variant;
  if (const auto slash = text.find('/'); slash != std::string_view::npos) {
    os = text.substr(0, slash);
    arch = text.substr(slash + 1);
    if (const auto second = arch.find('/'); second != std::string_view::npos) {
      variant = arch.substr(second + 1);
      arch = arch.substr(0, second);
    }
  }
  if (arch == "x86_64") arch = "amd64";
  if (arch == "aarch64") arch = "arm64";
  if (auto p = platform_of(os, arch, variant)) return *p;
  std::vector<std::string> names;
  for (const Platform p : {Platform::amd64(), Platform::arm64()}) names.push_back(p.str());
  const auto near = did_you_mean(std::string(text), names);
  return make_error(ErrorKind::spec, "spec.bad_platform", "'" + std::string(text) + "' is not a platform gpuenv builds", "",
                    near ? "did you mean " + *near + "? gpuenv builds " + known_platforms()
                         : "name one of " + known_platforms() + " (os/architecture, as OCI indexes and docker --platform spell them)");
}

Platform native_platform() {
#if defined(__aarch64__)
  return Platform::arm64();
#else
  return Platform::amd64();
#endif
}

std::string platform_list(const std::vector<Platform>& platforms) {
  std::vector<std::string> names;
  for (const auto& p : platforms) names.push_back(p.str());
  return join(names, ", ");
}

std::string known_platforms() { return platform_list({Platform::amd64(), Platform::arm64()}); }

}  // namespace gpuenv::resolver
