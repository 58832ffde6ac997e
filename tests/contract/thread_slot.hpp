#pragma once
// What the CPU doubles keep per thread, in a pthread key rather than a thread_local: clang 14's sanitizer runtime
// misread the dynamic TLS blocks of thread_local data in these dlopened libraries, and LeakSanitizer's tracer then
// crashed at exit (cpu_cuda.cpp, "No thread_local"). Header only: each double is a library of its own.
#include <pthread.h>

#include <cstdlib>

namespace gpuenv::testing {

/// A new process-wide pthread key, without destructor; aborts when the process is out of keys (nothing could run).
/// Callers keep it in a function-local static, so each slot is made once.
inline pthread_key_t new_thread_slot() {
  pthread_key_t key{};
  if (pthread_key_create(&key, nullptr) != 0) std::abort();
  return key;
}

}  // namespace gpuenv::testing
