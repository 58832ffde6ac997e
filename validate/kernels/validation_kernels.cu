// The validation kernels, compiled by nvcc into a fatbin (kernels.cmake), embedded in gpuenv and loaded with
// cuModuleLoadData by validate/adapters/cuda_session.cpp. extern "C" so the session finds them by plain name;
// every value they compute comes from reference.hpp, which the host uses to check them.
//
// Launch conventions (the session follows them): one-dimensional grids with grid-stride loops, so any grid size
// is correct; sizes are counts of elements, not bytes; spin_wait runs as one thread.
#include <cstdint>

#include "reference.hpp"

namespace ref = gpuenv::validate::reference;

namespace {

__device__ __forceinline__ unsigned long long global_ns() {
  unsigned long long t = 0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__device__ __forceinline__ unsigned long long thread_index() {
  return static_cast<unsigned long long>(blockIdx.x) * blockDim.x + threadIdx.x;
}

__device__ __forceinline__ unsigned long long grid_stride() {
  return static_cast<unsigned long long>(gridDim.x) * blockDim.x;
}

}  // namespace

/// Holds its stream until the host writes non-zero to flag[0] (mapped pinned memory), so the work queued behind
/// it starts together and launch overhead stays out of the timing (as nvbandwidth does). Gives up after
/// timeout_ns and then writes 1 to flag[1], so a host that never releases it cannot hang the GPU.
extern "C" __global__ void spin_wait(volatile int* flag, unsigned long long timeout_ns) {
  if (thread_index() != 0) return;
  const unsigned long long start = global_ns();
  while (flag[0] == 0) {
    if (global_ns() - start > timeout_ns) {
      flag[1] = 1;
      return;
    }
  }
}

/// out[i] = int_element(seed, i) for i < n.
extern "C" __global__ void compute_int(unsigned long long* out, unsigned long long n, unsigned long long seed) {
  for (unsigned long long i = thread_index(); i < n; i += grid_stride()) out[i] = ref::int_element(seed, i);
}

/// out[i] = float_element(seed, i) for i < n.
extern "C" __global__ void compute_float(float* out, unsigned long long n, unsigned long long seed) {
  for (unsigned long long i = thread_index(); i < n; i += grid_stride()) out[i] = ref::float_element(seed, i);
}

/// Fills n elements of GEMM input in `format` (reference::Fill) from `seed`.
extern "C" __global__ void fill_values(void* out, unsigned long long n, unsigned long long seed, int format) {
  const auto fill = static_cast<ref::Fill>(format);
  for (unsigned long long i = thread_index(); i < n; i += grid_stride()) {
    switch (fill) {
      case ref::Fill::random_f32:
        static_cast<float*>(out)[i] = ref::random_float(seed, i);
        break;
      case ref::Fill::random_bf16:
        static_cast<std::uint16_t*>(out)[i] = ref::bf16_truncate(ref::random_float(seed, i));
        break;
      case ref::Fill::grid_f32:
        static_cast<float*>(out)[i] = static_cast<float>(ref::grid_value(seed, i));
        break;
      case ref::Fill::grid_bf16:
        static_cast<std::uint16_t*>(out)[i] = ref::grid_bf16(seed, i);
        break;
      case ref::Fill::grid_f16:
        static_cast<std::uint16_t*>(out)[i] = ref::grid_f16(seed, i);
        break;
      case ref::Fill::grid_f64:
        static_cast<double*>(out)[i] = ref::grid_value(seed, i);
        break;
    }
  }
}

/// Writes `pattern` (reference::Pattern) over n 64-bit words at base.
extern "C" __global__ void memtest_write(unsigned long long* base, unsigned long long n, int pattern,
                                         unsigned long long seed) {
  const auto p = static_cast<ref::Pattern>(pattern);
  for (unsigned long long i = thread_index(); i < n; i += grid_stride()) {
    base[i] = ref::pattern_word(p, i, reinterpret_cast<unsigned long long>(base + i), seed);
  }
}

/// Reads n words at base and compares them with `pattern`; counts mismatches in `errors` and records the first
/// one found (first in time, not the lowest address). When next_pattern >= 0 each word is then overwritten with
/// next_pattern (the inversion pass of moving inversions).
extern "C" __global__ void memtest_check(unsigned long long* base, unsigned long long n, int pattern,
                                         unsigned long long seed, int next_pattern, ref::MemtestErrors* errors) {
  const auto p = static_cast<ref::Pattern>(pattern);
  const auto next = static_cast<ref::Pattern>(next_pattern);
  unsigned long long bad = 0;
  for (unsigned long long i = thread_index(); i < n; i += grid_stride()) {
    const auto address = reinterpret_cast<unsigned long long>(base + i);
    const unsigned long long expected = ref::pattern_word(p, i, address, seed);
    const unsigned long long actual = *static_cast<volatile unsigned long long*>(base + i);
    if (actual != expected) {
      ++bad;
      if (atomicCAS(&errors->claimed, 0ull, 1ull) == 0ull) {
        errors->first_index = i;
        errors->expected = expected;
        errors->actual = actual;
      }
    }
    if (next_pattern >= 0) base[i] = ref::pattern_word(next, i, address, seed);
  }
  if (bad != 0) atomicAdd(&errors->count, bad);
}

/// STREAM copy: dst[i] = src[i] for n 16-byte vectors, four loads in flight per thread. Moves 32 * n bytes
/// (read plus written).
extern "C" __global__ void stream_copy(const uint4* __restrict__ src, uint4* __restrict__ dst, unsigned long long n) {
  const unsigned long long stride = grid_stride();
  unsigned long long i = thread_index();
  for (; i + 3 * stride < n; i += 4 * stride) {
    const uint4 a = src[i];
    const uint4 b = src[i + stride];
    const uint4 c = src[i + 2 * stride];
    const uint4 d = src[i + 3 * stride];
    dst[i] = a;
    dst[i + stride] = b;
    dst[i + 2 * stride] = c;
    dst[i + 3 * stride] = d;
  }
  for (; i < n; i += stride) dst[i] = src[i];
}

namespace {
constexpr int k_tile = 32;      // tile edge
constexpr int k_tile_rows = 8;  // blockDim.y; each thread computes k_tile / k_tile_rows outputs
}  // namespace

/// C = A * B in fp32, column-major like BLAS (A is m x k with leading dimension m, B k x n, C m x n). Launch with
/// blocks of (32, 8) threads and a grid of (ceil(m / 32), ceil(n / 32)). Every output is summed in the same order
/// on every run, so repeated runs give identical bits; used by gemm_consistency when cuBLAS is absent.
extern "C" __global__ void gemm_simple(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ c,
                                       int m, int n, int k) {
  __shared__ float a_tile[k_tile][k_tile + 1];  // [row][kk], padded against bank conflicts
  __shared__ float b_tile[k_tile][k_tile + 1];  // [kk][col]
  constexpr int per_thread = k_tile / k_tile_rows;
  const int tx = static_cast<int>(threadIdx.x);
  const int ty = static_cast<int>(threadIdx.y);
  const int row = static_cast<int>(blockIdx.x) * k_tile + tx;
  const int col0 = static_cast<int>(blockIdx.y) * k_tile;
  float acc[per_thread] = {};
  for (int t = 0; t < k; t += k_tile) {
    for (int r = 0; r < per_thread; ++r) {
      const int local = ty + k_tile_rows * r;
      const int kk = t + local;
      a_tile[tx][local] = (row < m && kk < k) ? a[row + static_cast<long long>(kk) * m] : 0.0f;
      const int kb = t + tx;
      const int col = col0 + local;
      b_tile[tx][local] = (kb < k && col < n) ? b[kb + static_cast<long long>(col) * k] : 0.0f;
    }
    __syncthreads();
    for (int kk = 0; kk < k_tile; ++kk) {
      const float av = a_tile[tx][kk];
      for (int r = 0; r < per_thread; ++r) acc[r] = __fmaf_rn(av, b_tile[kk][ty + k_tile_rows * r], acc[r]);
    }
    __syncthreads();
  }
  for (int r = 0; r < per_thread; ++r) {
    const int col = col0 + ty + k_tile_rows * r;
    if (row < m && col < n) c[row + static_cast<long long>(col) * m] = acc[r];
  }
}

/// Adds digest_term(words[i], i) for i < n to *out (which the host zeroes first): reference::digest_words.
extern "C" __global__ void digest_u64(const unsigned long long* __restrict__ words, unsigned long long n,
                                      unsigned long long* out) {
  unsigned long long sum = 0;
  for (unsigned long long i = thread_index(); i < n; i += grid_stride()) sum += ref::digest_term(words[i], i);
  for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_down_sync(0xFFFFFFFFu, sum, offset);
  if ((threadIdx.x & 31u) == 0) atomicAdd(out, sum);
}
