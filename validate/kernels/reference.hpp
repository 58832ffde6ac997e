#pragma once
// Reference logic shared by the validation kernels (validation_kernels.cu) and the host: memory test patterns,
// the per-element functions of the compute kernels, fill values for GEMM inputs and the result digest. Plain
// C++ with no library calls apart from fma, so the host computes exactly what the GPU must produce and the CPU
// unit tests (tests/validate/kernel_reference_test.cpp) pin it down.
//
// Floating point: every float operation here is an explicit fused multiply-add (__fmaf_rn on the device,
// std::fma on the host). Both are IEEE 754 fusedMultiplyAdd with one rounding to nearest even, so the results
// agree bit for bit. A separate multiply and add would not: nvcc contracts a*b+c into an FMA by default
// (--fmad=true) while the host compiler may not, and the two roundings of a*b+c differ from the single one of an
// FMA. Values stay inside [0.01, 1) so denormals (flushed under -ftz) and infinities never occur.
#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define GPUENV_HD __host__ __device__
#else
#define GPUENV_HD
#endif

namespace gpuenv::validate::reference {

/// The splitmix64 increment (2^64 / golden ratio).
inline constexpr std::uint64_t k_golden = 0x9E3779B97F4A7C15ull;

/// The splitmix64 output function: a bijective 64-bit mix (Stafford's variant 13).
GPUENV_HD constexpr std::uint64_t mix64(std::uint64_t x) {
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

/// Counter-based random word: the `index`-th output of a splitmix64 stream started from mix64(seed), computable
/// for any index without the ones before it.
GPUENV_HD constexpr std::uint64_t random_word(std::uint64_t seed, std::uint64_t index) {
  return mix64(mix64(seed) + (index + 1) * k_golden);
}

/// Memory test patterns, in the order memtest runs them. The values are stable: kernels receive them as ints.
enum class Pattern : int {
  walking_ones = 0,                  ///< one bit set, its position moving with the word index
  walking_zeros = 1,                 ///< one bit clear, its position moving with the word index
  own_address = 2,                   ///< each word holds its own device address (finds address-line faults)
  moving_inversions = 3,             ///< 0x5555... everywhere, then checked and inverted in place
  moving_inversions_complement = 4,  ///< 0xAAAA...: the complement written by the inversion pass
  random = 5,                        ///< random_word(seed, index)
};

/// Number of patterns in Pattern.
inline constexpr int k_pattern_count = 6;

/// The stable name of a pattern as reports list it ("walking_ones", ...); "unknown" for a value out of range.
GPUENV_HD constexpr const char* pattern_name(Pattern pattern) {
  switch (pattern) {
    case Pattern::walking_ones:
      return "walking_ones";
    case Pattern::walking_zeros:
      return "walking_zeros";
    case Pattern::own_address:
      return "own_address";
    case Pattern::moving_inversions:
      return "moving_inversions";
    case Pattern::moving_inversions_complement:
      return "moving_inversions_complement";
    case Pattern::random:
      return "random";
  }
  return "unknown";
}

/// The moving-inversions base value: alternate bits, so neighbouring bit cells hold opposite values.
inline constexpr std::uint64_t k_inversion_base = 0x5555555555555555ull;

/// The 64-bit word `pattern` puts at word `index` of a region; `address` is the word's device address (used by
/// own_address only) and `seed` rotates the walking bit and seeds `random`.
GPUENV_HD constexpr std::uint64_t pattern_word(Pattern pattern, std::uint64_t index, std::uint64_t address,
                                               std::uint64_t seed) {
  switch (pattern) {
    case Pattern::walking_ones:
      return std::uint64_t{1} << ((index + seed) & 63u);
    case Pattern::walking_zeros:
      return ~(std::uint64_t{1} << ((index + seed) & 63u));
    case Pattern::own_address:
      return address;
    case Pattern::moving_inversions:
      return k_inversion_base;
    case Pattern::moving_inversions_complement:
      return ~k_inversion_base;
    case Pattern::random:
      return random_word(seed, index);
  }
  return 0;
}

/// Rotates a 32-bit word left by `r` (0 < r < 32).
GPUENV_HD constexpr std::uint32_t rotl32(std::uint32_t x, unsigned r) { return (x << r) | (x >> (32u - r)); }

/// Rounds of the integer compute kernel.
inline constexpr int k_int_rounds = 16;

/// The integer compute kernel's element `index`: k_int_rounds rounds of 32-bit multiply-add, rotate and xor and
/// 64-bit multiply and shift, so the integer multipliers, shifters and logic units of every SM are exercised.
GPUENV_HD constexpr std::uint64_t int_element(std::uint64_t seed, std::uint64_t index) {
  std::uint64_t x = random_word(seed, index);
  for (int round = 0; round < k_int_rounds; ++round) {
    std::uint32_t lo = static_cast<std::uint32_t>(x);
    std::uint32_t hi = static_cast<std::uint32_t>(x >> 32);
    lo = lo * 0x9E3779B9u + hi;
    hi ^= rotl32(lo, 13u) + static_cast<std::uint32_t>(round);
    x = ((static_cast<std::uint64_t>(hi) << 32) | lo) * 0xD6E8FEB86659FD93ull;
    x ^= x >> 29;
  }
  return x;
}

/// Fused multiply-add with a single rounding, identical on host and device.
GPUENV_HD inline float fma_rn(float a, float b, float c) {
#if defined(__CUDA_ARCH__)
  return __fmaf_rn(a, b, c);
#else
  return std::fma(a, b, c);
#endif
}

/// Rounds of the floating-point compute kernel.
inline constexpr int k_float_rounds = 32;

/// The floating-point compute kernel's element `index`: a start value in [0.01, 0.26) with 24 random bits
/// (exact in float), then k_float_rounds steps of x <- 3.9 * (x - x*x) + 0.01, a chaotic map, so a wrong bit in
/// any step spreads to the result. Each step is two FMAs; see the note at the top of this file.
GPUENV_HD inline float float_element(std::uint64_t seed, std::uint64_t index) {
  const auto bits = static_cast<std::uint32_t>(random_word(seed, index) >> 40);  // 24 bits: exact as a float
  float x = fma_rn(static_cast<float>(bits), 0x1p-26f, 0.01f);                   // in [0.01, 0.26)
  for (int round = 0; round < k_float_rounds; ++round) {
    const float y = fma_rn(-x, x, x);  // x - x*x in [0, 0.25]
    x = fma_rn(y, 3.9f, 0.01f);        // in [0.01, 0.985]
  }
  return x;
}

/// The bits of a float.
GPUENV_HD inline std::uint32_t float_bits(float value) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(value);
#else
  std::uint32_t bits = 0;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
#endif
}

/// Random GEMM input in [-1, 1) with a full 24-bit mantissa range (as gpu-burn uses): element `index`.
GPUENV_HD inline float random_float(std::uint64_t seed, std::uint64_t index) {
  const auto bits = static_cast<std::uint32_t>(random_word(seed, index) >> 40);
  return fma_rn(static_cast<float>(bits), 0x1p-23f, -1.0f);
}

/// The top 16 bits of a float: bfloat16 by truncation (used for random bf16 inputs, where rounding is moot).
GPUENV_HD inline std::uint16_t bf16_truncate(float value) {
  return static_cast<std::uint16_t>(float_bits(value) >> 16);
}

/// Grid GEMM input k/16 with k in [-16, 16]: exact in fp16, bf16, tf32, fp32 and fp64, and every product lies on
/// the 2^-8 grid, so any dot product of up to 2^15 terms is exact in fp32 whatever the summation order. The host
/// reference of a GEMM on these inputs is therefore exact.
GPUENV_HD constexpr int grid_numerator(std::uint64_t seed, std::uint64_t index) {
  return static_cast<int>(random_word(seed, index) % 33u) - 16;
}

/// grid_numerator as a double.
GPUENV_HD constexpr double grid_value(std::uint64_t seed, std::uint64_t index) {
  return grid_numerator(seed, index) / 16.0;
}

/// bfloat16 bits of grid_value (exact: at most 5 significant bits).
GPUENV_HD inline std::uint16_t grid_bf16(std::uint64_t seed, std::uint64_t index) {
  return bf16_truncate(fma_rn(static_cast<float>(grid_numerator(seed, index)), 0.0625f, 0.0f));
}

/// IEEE binary16 bits of grid_value (exact: normal numbers of at most 5 significant bits, or zero).
GPUENV_HD constexpr std::uint16_t grid_f16(std::uint64_t seed, std::uint64_t index) {
  const int k = grid_numerator(seed, index);
  if (k == 0) return 0;
  const std::uint16_t sign = k < 0 ? 0x8000u : 0u;
  unsigned magnitude = static_cast<unsigned>(k < 0 ? -k : k);  // 1..16; value = magnitude * 2^-4
  int exponent = 0;                                            // floor(log2(magnitude))
  while ((magnitude >> (exponent + 1)) != 0) ++exponent;
  const unsigned mantissa = (magnitude << (10 - exponent)) & 0x3FFu;
  const unsigned biased = static_cast<unsigned>(exponent - 4 + 15);
  return static_cast<std::uint16_t>(sign | (biased << 10) | mantissa);
}

/// Input formats the fill kernel writes (values stable: kernels receive them as ints).
enum class Fill : int {
  random_f32 = 0,   ///< random_float
  random_bf16 = 1,  ///< bf16_truncate(random_float)
  grid_f32 = 2,     ///< grid_value as float
  grid_bf16 = 3,    ///< grid_bf16
  grid_f16 = 4,     ///< grid_f16
  grid_f64 = 5,     ///< grid_value as double
};

/// Where memtest_check counts bad words: the layout the kernel writes and the host reads back (five 64-bit
/// words; unsigned long long because that is the type CUDA's atomics take).
struct MemtestErrors {
  unsigned long long count;        ///< words that read back differently
  unsigned long long claimed;      ///< 0 until a thread records the first bad word below
  unsigned long long first_index;  ///< the word index (within the launch's region) of the first bad word found
  unsigned long long expected;
  unsigned long long actual;
};

/// One digest term: element `index` holding `value`. A sum of terms is the digest.
GPUENV_HD constexpr std::uint64_t digest_term(std::uint64_t value, std::uint64_t index) {
  return mix64(value ^ mix64(index + k_golden));
}

/// Digest of 64-bit words: the sum mod 2^64 of digest_term(word, index). Order independent, so a GPU can add the
/// terms in any order (atomics across blocks) and still match; a single changed word always changes it (value ^ c
/// and mix64 are bijections, so the word's term changes and no other does); a moved word changes it except with
/// a chance of about 2^-64.
GPUENV_HD constexpr std::uint64_t digest_words(const std::uint64_t* words, std::uint64_t count,
                                               std::uint64_t first_index = 0) {
  std::uint64_t sum = 0;
  for (std::uint64_t i = 0; i < count; ++i) sum += digest_term(words[i], first_index + i);
  return sum;
}

}  // namespace gpuenv::validate::reference
