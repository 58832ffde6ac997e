#pragma once
// Running shell commands in tests, and reading the dynamic linker's trace (`LD_TRACE_LOADED_OBJECTS=1 ld.so`).
#include <sys/wait.h>

#include <cstdio>
#include <map>
#include <sstream>
#include <string>

namespace gpuenv::testing {

/// Standard output of `cmd` run by /bin/sh; `status`, when given, gets its exit status (-1 when killed).
inline std::string capture(const std::string& cmd, int* status = nullptr) {
  std::string out;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return out;
  char buf[8192];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  const int rc = ::pclose(p);
  if (status) *status = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  return out;
}

/// One "name => path (0x...)" or "name => not found" line of the linker's trace: false for other lines (the
/// linker itself, the vDSO, headers). `path` is empty for "not found".
inline bool parse_trace_line(const std::string& line, std::string& name, std::string& path) {
  const auto arrow = line.find(" => ");
  if (arrow == std::string::npos) return false;
  name = line.substr(0, arrow);
  name.erase(0, name.find_first_not_of(" \t"));
  const std::string rest = line.substr(arrow + 4);
  path = rest.rfind("not found", 0) == 0 ? "" : rest.substr(0, rest.find(" ("));
  return true;
}

/// name -> path ("" when not found) of one object's trace.
inline std::map<std::string, std::string> parse_trace(const std::string& text) {
  std::map<std::string, std::string> out;
  std::istringstream in(text);
  std::string line, name, path;
  while (std::getline(in, line))
    if (parse_trace_line(line, name, path)) out[name] = path;
  return out;
}

}  // namespace gpuenv::testing
