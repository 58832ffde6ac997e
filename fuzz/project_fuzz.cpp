// libFuzzer target: any bytes as a project file (packages/wheels/project_file.hpp). The first byte picks the format
// (0 requirements, 1 pylock.toml, 2 uv.lock, 3 pyproject.toml, 4 environment.yml, by value modulo 5) and, by its high
// bit, asks for the extra "cuda" and the group "dev"; the rest is the file. What reads is then evaluated for a Linux
// x86_64 CPython 3.12 target and asked for a torch pin. Must never crash, hang or use unbounded memory.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "packages/wheels/project_file.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace gpuenv::packages;
  if (size == 0) return 0;
  const ProjectFormat formats[] = {ProjectFormat::requirements, ProjectFormat::pylock, ProjectFormat::uv_lock, ProjectFormat::pyproject,
                                   ProjectFormat::conda_environment};
  const ProjectFormat format = formats[(data[0] & 0x7f) % 5];
  ProjectSelection selection;
  if ((data[0] & 0x80) != 0) selection = {{"cuda"}, {"dev"}};
  ProjectLimits limits;
  limits.max_bytes = 1u << 20;
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  auto file = parse_project_text(text, format, "fuzz", selection, limits);
  if (!file.ok()) return 0;
  const Environment env = cpython_linux_environment("x86_64", "3.12");
  (void)project_requirements(*file, env);
  (void)project_pin(*file, "torch");
  return 0;
}
