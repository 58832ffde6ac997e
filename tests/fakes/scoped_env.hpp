#pragma once
// Sets an environment variable for a scope: the test doubles of the NVIDIA libraries (tests/contract/) read their
// fault lists and answers from the environment.
#include <cstdlib>
#include <string>

namespace gpuenv::testing {

/// Sets `name` to `value` for the guard's lifetime, then removes it.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : m_name(name) { ::setenv(name, value.c_str(), 1); }
  ~ScopedEnv() { ::unsetenv(m_name); }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* m_name;
};

}  // namespace gpuenv::testing
