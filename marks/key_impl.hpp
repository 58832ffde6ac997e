#pragma once
// The OpenSSL side of marks::Key, for keys.cpp and dsse.cpp only.
#include <openssl/evp.h>

#include "marks/keys.hpp"

namespace gpuenv::marks {

struct Key::Impl {
  EVP_PKEY* pkey = nullptr;
  bool is_private = false;
  Impl() = default;
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;
  ~Impl() { EVP_PKEY_free(pkey); }
};

}  // namespace gpuenv::marks
