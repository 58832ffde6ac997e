#include "base/error.hpp"

namespace gpuenv {

std::string Error::to_string() const {
  std::string out = "error: ";
  if (!where.empty()) out += where + ": ";
  out += message;
  if (!id.empty()) out += " [" + id + "]";
  for (const auto& c : context) out += "\n  while " + c;
  if (!hint.empty()) out += "\n  hint: " + hint;
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
