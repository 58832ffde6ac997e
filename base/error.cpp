#include "base/error.hpp"

#include "base/safe_text.hpp"

#include <cstring>

namespace gpuenv {

Error io_error(const IoArea& area, const std::string& what, const std::string& where, int err) {
  return make_error(ErrorKind::environment, area.id, what + ": " + std::strerror(err), where, area.hint);
}

std::string Error::to_string() const {
  // Messages carry what was read (a registry's answer, a file's name, a package's field): each part is made safe
  // here, the one place every error reaches a terminal through, so that none can write escapes or forge a line.
  std::string out = "error: ";
  if (!where.empty()) out += safe_text(where, 1000) + ": ";
  out += safe_lines(message);
  if (!id.empty()) out += " [" + safe_text(id, 200) + "]";
  for (const auto& c : context) out += "\n  while " + safe_text(c, 1000);
  if (!hint.empty()) out += "\n  hint: " + safe_lines(hint);
  return out;
}

int exit_code(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::usage:
    case ErrorKind::spec: return k_exit_usage;
    case ErrorKind::unsatisfiable: return k_exit_unsatisfiable;
    case ErrorKind::environment: return k_exit_environment;
    case ErrorKind::internal: return k_exit_internal;
  }
  return k_exit_internal;
}

}  // namespace gpuenv
