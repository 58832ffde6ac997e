// The reference logic the validation kernels share with the host: patterns are what they claim, the compute
// functions are pinned to known values, and the digest is order independent and sensitive to one flipped bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <type_traits>
#include <vector>

#include "validate/kernels/reference.hpp"

namespace ref = gpuenv::validate::reference;
using ref::Pattern;

namespace {

std::uint64_t pattern(Pattern p, std::uint64_t index, std::uint64_t seed = 0, std::uint64_t address = 0) {
  return ref::pattern_word(p, index, address, seed);
}

// Decodes IEEE binary16 normal numbers and zero (all the grid values are such).
double half_to_double(std::uint16_t bits) {
  const int exponent = (bits >> 10) & 0x1F;
  const int mantissa = bits & 0x3FF;
  const double sign = (bits & 0x8000) ? -1.0 : 1.0;
  if (exponent == 0 && mantissa == 0) return sign * 0.0;
  return sign * std::ldexp(1.0 + mantissa / 1024.0, exponent - 15);
}

double bf16_to_double(std::uint16_t bits) { return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16); }

std::vector<std::uint64_t> sample_words(std::size_t count) {
  std::vector<std::uint64_t> words(count);
  for (std::size_t i = 0; i < count; ++i) words[i] = ref::random_word(7, i);
  return words;
}

TEST(KernelReference, Mix64MatchesTheSplitmix64ReferenceStream) {
  // splitmix64 seeded with 0: state += golden, output = mix64(state).
  EXPECT_EQ(ref::mix64(ref::k_golden), 0xE220A8397B1DCDAFull);
  EXPECT_EQ(ref::mix64(2 * ref::k_golden), 0x6E789E6AA1B965F4ull);
  EXPECT_EQ(ref::mix64(3 * ref::k_golden), 0x06C45D188009454Full);
  EXPECT_EQ(ref::mix64(0), 0u);
}

TEST(KernelReference, RandomWordIsTheIndexedOutputOfASequentialStream) {
  for (std::uint64_t seed : {0ull, 1ull, 0xDEADBEEFull}) {
    std::uint64_t state = ref::mix64(seed);
    for (std::uint64_t i = 0; i < 100; ++i) {
      state += ref::k_golden;
      EXPECT_EQ(ref::random_word(seed, i), ref::mix64(state)) << seed << " " << i;
    }
  }
  EXPECT_EQ(ref::random_word(0, 0), 0xE220A8397B1DCDAFull);
}

TEST(KernelReference, WalkingOnesHasExactlyOneBitSetAndVisitsEveryPosition) {
  for (std::uint64_t seed : {0ull, 5ull, 63ull, 1000ull}) {
    std::set<int> positions;
    for (std::uint64_t i = 0; i < 64; ++i) {
      const std::uint64_t w = pattern(Pattern::walking_ones, i, seed);
      ASSERT_EQ(std::popcount(w), 1) << i;
      positions.insert(std::countr_zero(w));
    }
    EXPECT_EQ(positions.size(), 64u);
  }
  EXPECT_EQ(pattern(Pattern::walking_ones, 0), 1u);
  EXPECT_EQ(pattern(Pattern::walking_ones, 63), 0x8000000000000000ull);
  EXPECT_EQ(pattern(Pattern::walking_ones, 64), 1u);
  EXPECT_EQ(pattern(Pattern::walking_ones, 0, 3), 8u);
}

TEST(KernelReference, WalkingZerosHasExactlyOneBitClearAndComplementsWalkingOnes) {
  for (std::uint64_t i = 0; i < 200; ++i) {
    const std::uint64_t w = pattern(Pattern::walking_zeros, i, 9);
    EXPECT_EQ(std::popcount(w), 63) << i;
    EXPECT_EQ(w, ~pattern(Pattern::walking_ones, i, 9));
  }
}

TEST(KernelReference, OwnAddressHoldsTheWordsAddress) {
  EXPECT_EQ(ref::pattern_word(Pattern::own_address, 3, 0x7F0000001018ull, 42), 0x7F0000001018ull);
  EXPECT_EQ(ref::pattern_word(Pattern::own_address, 0, 0, 0), 0u);
}

TEST(KernelReference, MovingInversionsAlternateBitsAndTheComplementInvertsEveryBit) {
  for (std::uint64_t i = 0; i < 100; ++i) {
    const std::uint64_t w = pattern(Pattern::moving_inversions, i, i);
    EXPECT_EQ(w, 0x5555555555555555ull);
    EXPECT_EQ(pattern(Pattern::moving_inversions_complement, i, i), ~w);
    EXPECT_EQ(w & (w >> 1), 0u);  // no two neighbouring bits equal to 1
  }
}

TEST(KernelReference, RandomPatternIsSeededBalancedAndNotRepeating) {
  std::set<std::uint64_t> seen;
  std::uint64_t ones = 0;
  constexpr std::uint64_t k_words = 4096;
  for (std::uint64_t i = 0; i < k_words; ++i) {
    const std::uint64_t w = pattern(Pattern::random, i, 11);
    EXPECT_EQ(w, ref::random_word(11, i));
    seen.insert(w);
    ones += static_cast<std::uint64_t>(std::popcount(w));
  }
  EXPECT_EQ(seen.size(), k_words);
  const double mean = static_cast<double>(ones) / k_words;
  EXPECT_NEAR(mean, 32.0, 0.5);
  EXPECT_NE(pattern(Pattern::random, 0, 11), pattern(Pattern::random, 0, 12));
}

TEST(KernelReference, PatternNamesAreStable) {
  const char* expected[] = {
      "walking_ones", "walking_zeros", "own_address", "moving_inversions", "moving_inversions_complement", "random"};
  for (int i = 0; i < ref::k_pattern_count; ++i) {
    EXPECT_EQ(std::string(ref::pattern_name(static_cast<Pattern>(i))), expected[i]);
  }
  EXPECT_EQ(std::string(ref::pattern_name(static_cast<Pattern>(99))), "unknown");
}

TEST(KernelReference, IntElementIsPinnedAndSpreadsOverIndices) {
  // Pinned: the GPU is compared with these functions, and recorded results must stay comparable.
  EXPECT_EQ(ref::int_element(0, 0), 0x97623DA1DBEA83AFull);
  EXPECT_EQ(ref::int_element(1, 12345), 0x10C1C1B37625622Dull);
  std::set<std::uint64_t> seen;
  for (std::uint64_t i = 0; i < 1000; ++i) seen.insert(ref::int_element(3, i));
  EXPECT_EQ(seen.size(), 1000u);
}

TEST(KernelReference, FmaRoundsOnce) {
  // (1 + 2^-12)^2 = 1 + 2^-11 + 2^-24: a separate multiply rounds the 2^-24 away (a tie to even), an FMA keeps it.
  const float a = 1.0f + 0x1p-12f;
  EXPECT_EQ(ref::fma_rn(a, a, -(1.0f + 0x1p-11f)), 0x1p-24f);
}

TEST(KernelReference, FloatElementStaysNormalInsideItsRangeAndIsPinned) {
  for (std::uint64_t i = 0; i < 5000; ++i) {
    const float x = ref::float_element(2, i);
    ASSERT_TRUE(std::isnormal(x)) << i;
    ASSERT_GE(x, 0.01f);
    ASSERT_LE(x, 0.985f);
  }
  EXPECT_EQ(ref::float_bits(ref::float_element(0, 0)), 0x3F7C19C4u);
  EXPECT_EQ(ref::float_bits(ref::float_element(1, 777)), 0x3F633554u);
}

TEST(KernelReference, RandomFloatInputsCoverMinusOneToOne) {
  float lo = 1, hi = -1;
  for (std::uint64_t i = 0; i < 10000; ++i) {
    const float x = ref::random_float(4, i);
    ASSERT_GE(x, -1.0f);
    ASSERT_LT(x, 1.0f);
    lo = std::min(lo, x);
    hi = std::max(hi, x);
  }
  EXPECT_LT(lo, -0.99f);
  EXPECT_GT(hi, 0.99f);
  EXPECT_EQ(ref::bf16_truncate(-1.0f), 0xBF80u);
}

TEST(KernelReference, GridInputsAreExactInEveryFormat) {
  std::set<int> numerators;
  for (std::uint64_t i = 0; i < 5000; ++i) {
    const int k = ref::grid_numerator(8, i);
    ASSERT_GE(k, -16);
    ASSERT_LE(k, 16);
    numerators.insert(k);
    const double v = ref::grid_value(8, i);
    EXPECT_EQ(v, k / 16.0);
    EXPECT_EQ(half_to_double(ref::grid_f16(8, i)), v) << k;
    EXPECT_EQ(bf16_to_double(ref::grid_bf16(8, i)), v) << k;
  }
  EXPECT_EQ(numerators.size(), 33u);
}

TEST(KernelReference, GridDotProductsAreExactInFloatWhateverTheOrder) {
  constexpr std::uint64_t k_terms = 4096;
  std::vector<float> products(k_terms);
  double exact = 0;
  for (std::uint64_t i = 0; i < k_terms; ++i) {
    const double p = ref::grid_value(1, i) * ref::grid_value(2, i);
    products[i] = static_cast<float>(p);
    exact += p;
  }
  float forward = 0, backward = 0;
  for (float p : products) forward += p;
  for (auto it = products.rbegin(); it != products.rend(); ++it) backward += *it;
  EXPECT_EQ(static_cast<double>(forward), exact);
  EXPECT_EQ(static_cast<double>(backward), exact);
}

TEST(KernelReference, DigestIsOrderIndependent) {
  const auto words = sample_words(1000);
  const std::uint64_t digest = ref::digest_words(words.data(), words.size());
  std::vector<std::size_t> order(words.size());
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), std::mt19937_64(99));
  std::uint64_t shuffled = 0;
  for (std::size_t i : order) shuffled += ref::digest_term(words[i], i);
  EXPECT_EQ(shuffled, digest);
  // Split into two ranges and added, as blocks of a GPU grid would.
  const std::uint64_t halves = ref::digest_words(words.data(), 400) + ref::digest_words(words.data() + 400, 600, 400);
  EXPECT_EQ(halves, digest);
}

TEST(KernelReference, DigestChangesWithAnySingleBitFlip) {
  auto words = sample_words(64);
  const std::uint64_t digest = ref::digest_words(words.data(), words.size());
  for (std::size_t w : {0u, 31u, 63u}) {
    for (int bit = 0; bit < 64; ++bit) {
      words[w] ^= std::uint64_t{1} << bit;
      EXPECT_NE(ref::digest_words(words.data(), words.size()), digest) << w << " " << bit;
      words[w] ^= std::uint64_t{1} << bit;
    }
  }
  EXPECT_EQ(ref::digest_words(words.data(), words.size()), digest);
}

TEST(KernelReference, DigestNoticesSwappedWordsAndDependsOnPosition) {
  auto words = sample_words(16);
  const std::uint64_t digest = ref::digest_words(words.data(), words.size());
  std::swap(words[2], words[9]);
  EXPECT_NE(ref::digest_words(words.data(), words.size()), digest);
  const std::vector<std::uint64_t> zeros(16, 0);
  EXPECT_NE(ref::digest_words(zeros.data(), zeros.size()), 0u);  // all-zero data still has a digest
  EXPECT_EQ(ref::digest_words(zeros.data(), 0), 0u);
}

TEST(KernelReference, MemtestErrorsIsFiveWordsAsTheKernelWritesIt) {
  static_assert(std::is_standard_layout_v<ref::MemtestErrors>);
  EXPECT_EQ(sizeof(ref::MemtestErrors), 40u);
}

}  // namespace
