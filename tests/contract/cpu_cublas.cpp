// A CPU stand-in for libcublas.so and libcublasLt.so (built as libcpu_cublas.so): just the entry points gpuenv's
// CUDA adapter (validate/adapters/cuda_session.cpp) opens with dlopen, computing column-major GEMMs
// D = alpha * op(A) * op(B) + beta * C on the streams of the CPU CUDA driver (cpu_cuda.cpp, whose device memory is
// host memory), so the contract tests run the adapter's cuBLASLt and cuBLAS paths without a GPU.
//
// Modelled: no transposes (op N only; a transpose answers CUBLAS_STATUS_NOT_SUPPORTED), host-pointer alpha and beta,
// and these types (anything else answers CUBLAS_STATUS_NOT_SUPPORTED):
//   A, B   C, D        compute                      scale
//   16BF   16BF, 32F   COMPUTE_32F                  32F
//   16F    16F         COMPUTE_32F                  32F
//   32F    32F         COMPUTE_32F, 32F_FAST_TF32   32F   (FAST_TF32 rounds the inputs to tf32 first)
//   64F    64F         COMPUTE_64F                  64F
// Products accumulate in float (double for 64F) in one fixed order, so repeated GEMMs give identical bits.
//
// Error codes: a null handle is CUBLAS_STATUS_NOT_INITIALIZED (1); a null or foreign descriptor, layout or
// preference, inconsistent shapes, a leading dimension below the rows, and an A, B, C, D or workspace that is not
// device memory of the size the shapes need are CUBLAS_STATUS_INVALID_VALUE (7) at the call, before anything is
// queued (real cuBLAS would fault in the kernel instead; failing early keeps the tests' memory safe); a stream the
// CPU driver does not know is CUBLAS_STATUS_EXECUTION_FAILED (13).
//
// Environment (read by this test double only, at each call):
//   CPU_CUBLAS_FAULTS   comma-separated faults:
//     lt_create               cublasLtCreate answers CUBLAS_STATUS_ALLOC_FAILED
//     create                  cublasCreate_v2 answers CUBLAS_STATUS_ALLOC_FAILED
//     lt_no_bf16              cublasLtMatmulAlgoGetHeuristic answers NOT_SUPPORTED for 16BF inputs
//     lt_no_algo              cublasLtMatmulAlgoGetHeuristic succeeds with no algorithm (*returned = 0)
//     lt_matmul_unsupported   cublasLtMatmul answers NOT_SUPPORTED
//     gemmex_no_bf16          cublasGemmEx answers NOT_SUPPORTED for 16BF inputs
//     drift                   every second GEMM the process computes flips the lowest bit of output element 17
//     wrong                   every GEMM adds 1.0 to output element 0
//
// Counters for the tests (GEMMs computed, counted when they run on the stream):
//   cpucublas_gemm_count()        all GEMMs, through either library
//   cpucublas_lt_matmul_count()   those queued by cublasLtMatmul
//   cpucublas_gemmex_count()      those queued by cublasGemmEx
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>
#include <optional>
#include <string_view>
#include <vector>

#include "tests/contract/cpu_cuda_ext.h"
#include "validate/adapters/gemm_types.hpp"

namespace {

namespace gemm = gpuenv::validate::gemm;

// cublasStatus_t values (cublas_api.h).
constexpr int k_success = 0;
constexpr int k_not_initialized = 1;
constexpr int k_alloc_failed = 3;
constexpr int k_invalid_value = 7;
constexpr int k_arch_mismatch = 8;
constexpr int k_mapping_error = 11;
constexpr int k_execution_failed = 13;
constexpr int k_internal_error = 14;
constexpr int k_not_supported = 15;
constexpr int k_license_error = 16;

constexpr int k_op_n = 0;  // CUBLAS_OP_N

// cublasLtMatmulDescAttributes_t values (cublasLt.h) this double understands.
constexpr int k_desc_compute_type = 0;
constexpr int k_desc_scale_type = 1;
constexpr int k_desc_pointer_mode = 2;
constexpr int k_desc_transa = 3;
constexpr int k_desc_transb = 4;
constexpr int k_desc_transc = 5;
constexpr int k_desc_epilogue = 7;
constexpr int k_epilogue_default = 1;  // CUBLASLT_EPILOGUE_DEFAULT
constexpr int k_pref_max_workspace = 1;  // CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES

constexpr std::size_t k_heuristic_workspace = 4u << 20;  // what the heuristic asks for at most, so the check bites
constexpr std::uint64_t k_algo_id = 0x4750555F43505531ull;  // "1UPC_UPG": marks an algorithm this double chose

// Each object starts with its own magic word, so an object passed where another kind belongs (swapped arguments)
// is refused instead of misread.
constexpr std::uint32_t k_lt_handle_magic = 0x4C54484Eu;
constexpr std::uint32_t k_desc_magic = 0x44455343u;
constexpr std::uint32_t k_layout_magic = 0x4C41594Fu;
constexpr std::uint32_t k_pref_magic = 0x50524546u;
constexpr std::uint32_t k_blas_handle_magic = 0x424C4153u;

struct LtHandle {
  std::uint32_t magic = k_lt_handle_magic;
};

struct MatmulDesc {
  std::uint32_t magic = k_desc_magic;
  int compute_type = 0, scale_type = 0;
  int pointer_mode = 0;  // CUBLASLT_POINTER_MODE_HOST
  int transa = k_op_n, transb = k_op_n, transc = k_op_n;
  int epilogue = k_epilogue_default;
};

struct Layout {
  std::uint32_t magic = k_layout_magic;
  int type = 0;
  std::uint64_t rows = 0, cols = 0;
  std::int64_t ld = 0;
};

struct Preference {
  std::uint32_t magic = k_pref_magic;
  std::uint64_t max_workspace = 0;  // cuBLASLt's default: no workspace
};

struct BlasHandle {
  std::uint32_t magic = k_blas_handle_magic;
  void* stream = nullptr;  // the legacy default stream until cublasSetStream_v2
};

// cublasLtMatmulAlgo_t and cublasLtMatmulHeuristicResult_t (cublasLt.h). This double's algorithms carry k_algo_id
// in data[0], the workspace they need in data[1] and the GEMM kind in data[2].
struct MatmulAlgo {
  std::uint64_t data[8];
};

struct HeuristicResult {
  MatmulAlgo algo;
  std::size_t workspace_size;
  int state;
  float waves_count;
  int reserved[4];
};
static_assert(sizeof(HeuristicResult) == 96, "cublasLtMatmulHeuristicResult_t is 96 bytes");

template <typename T>
T* object(void* p, std::uint32_t magic) {
  auto* o = static_cast<T*>(p);
  return o && o->magic == magic ? o : nullptr;
}

std::atomic<unsigned long long> g_gemms{0};
std::atomic<unsigned long long> g_lt_matmuls{0};
std::atomic<unsigned long long> g_gemmexes{0};

bool fault(std::string_view name) {
  const char* v = std::getenv("CPU_CUBLAS_FAULTS");
  if (!v) return false;
  std::string_view rest(v);
  while (!rest.empty()) {
    const std::size_t comma = rest.find(',');
    std::string_view item = rest.substr(0, comma);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    if (item == name) return true;
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  return false;
}

// ---- element conversions ----------------------------------------------------------------------------------------

std::uint32_t bits_of(float f) {
  std::uint32_t x = 0;
  std::memcpy(&x, &f, 4);
  return x;
}

float float_of(std::uint32_t x) {
  float f = 0;
  std::memcpy(&f, &x, 4);
  return f;
}

float bf16_to_float(std::uint16_t h) { return float_of(static_cast<std::uint32_t>(h) << 16); }

// Round to nearest even, as cuBLAS's epilogues convert; NaN stays a (quiet) NaN.
std::uint16_t float_to_bf16(float f) {
  std::uint32_t x = bits_of(f);
  if ((x & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<std::uint16_t>((x >> 16) | 0x40u);
  x += 0x7FFFu + ((x >> 16) & 1u);
  return static_cast<std::uint16_t>(x >> 16);
}

float half_to_float(std::uint16_t h) {
  const int exponent = (h >> 10) & 0x1F;
  const int mantissa = h & 0x3FF;
  const float sign = (h & 0x8000u) ? -1.0f : 1.0f;
  if (exponent == 0) return sign * std::ldexp(static_cast<float>(mantissa), -24);
  if (exponent == 31) return mantissa ? std::numeric_limits<float>::quiet_NaN() : sign * HUGE_VALF;
  return sign * std::ldexp(static_cast<float>(1024 + mantissa), exponent - 25);
}

// Round to nearest even, with subnormals, and overflow to infinity from 65520 up (the first value that rounds past
// 65504, the largest half).
std::uint16_t float_to_half(float f) {
  const std::uint32_t x = bits_of(f);
  const auto sign = static_cast<std::uint16_t>((x >> 16) & 0x8000u);
  const std::uint32_t ax = x & 0x7FFFFFFFu;
  if (ax > 0x7F800000u) return static_cast<std::uint16_t>(sign | 0x7E00u);
  if (ax >= 0x477FF000u) return static_cast<std::uint16_t>(sign | 0x7C00u);
  if (ax < 0x33000000u) return sign;  // below 2^-25 (2^-25 itself ties to the even zero below)
  if (ax < 0x38800000u) {             // a half subnormal: units of 2^-24
    const int shift = 126 - static_cast<int>(ax >> 23);  // 14..24
    const std::uint32_t m = (ax & 0x7FFFFFu) | 0x800000u;
    std::uint32_t q = m >> shift;
    const std::uint32_t rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (q & 1u))) ++q;  // q == 0x400 is the smallest normal: still right
    return static_cast<std::uint16_t>(sign | q);
  }
  std::uint32_t h = (ax >> 13) - (112u << 10);  // rebias the exponent from 127 to 15
  const std::uint32_t rem = ax & 0x1FFFu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;  // a carry into the exponent is still right
  return static_cast<std::uint16_t>(sign | h);
}

// Keeps 10 mantissa bits, rounding to nearest with ties away from zero as the tensor cores' cvt.rna.tf32.f32 does.
float to_tf32(float f) {
  std::uint32_t x = bits_of(f);
  if ((x & 0x7F800000u) == 0x7F800000u) return f;  // infinities and NaNs pass unchanged
  x += 0x1000u;
  x &= ~0x1FFFu;
  return float_of(x);
}

std::size_t element_bytes(int type) {
  switch (type) {
    case gemm::k_cuda_r_16bf:
    case gemm::k_cuda_r_16f:
      return 2;
    case gemm::k_cuda_r_32f:
      return 4;
    case gemm::k_cuda_r_64f:
      return 8;
    default:
      return 0;
  }
}

// ---- GEMMs ------------------------------------------------------------------------------------------------------

// The supported type combinations.
enum class Kind : std::uint64_t { bf16_bf16 = 1, bf16_f32, f16_f16, f32_f32, tf32_f32, f64_f64 };

std::optional<Kind> kind_of(int input_type, int output_type, int compute_type, int scale_type) {
  if (compute_type == gemm::k_cublas_compute_32f && scale_type == gemm::k_cuda_r_32f) {
    if (input_type == gemm::k_cuda_r_16bf && output_type == gemm::k_cuda_r_16bf) return Kind::bf16_bf16;
    if (input_type == gemm::k_cuda_r_16bf && output_type == gemm::k_cuda_r_32f) return Kind::bf16_f32;
    if (input_type == gemm::k_cuda_r_16f && output_type == gemm::k_cuda_r_16f) return Kind::f16_f16;
    if (input_type == gemm::k_cuda_r_32f && output_type == gemm::k_cuda_r_32f) return Kind::f32_f32;
  }
  if (compute_type == gemm::k_cublas_compute_32f_tf32 && scale_type == gemm::k_cuda_r_32f &&
      input_type == gemm::k_cuda_r_32f && output_type == gemm::k_cuda_r_32f) {
    return Kind::tf32_f32;
  }
  if (compute_type == gemm::k_cublas_compute_64f && scale_type == gemm::k_cuda_r_64f &&
      input_type == gemm::k_cuda_r_64f && output_type == gemm::k_cuda_r_64f) {
    return Kind::f64_f64;
  }
  return std::nullopt;
}

// One queued GEMM: everything it needs, copied at the call (alpha and beta included), so the caller may reuse its
// scalars and descriptors at once.
struct Job {
  Kind kind{};
  int input_type = 0, output_type = 0;
  std::uint64_t m = 0, n = 0, k = 0;
  std::uint64_t lda = 0, ldb = 0, ldc = 0, ldd = 0;
  const unsigned char* a = nullptr;
  const unsigned char* b = nullptr;
  const unsigned char* c = nullptr;
  unsigned char* d = nullptr;
  double alpha = 0, beta = 0;  // exact copies of the float or double scalars
  bool lt = false;
  bool drift = false, wrong = false;
};

template <typename Acc>
Acc load(int type, const unsigned char* base, std::uint64_t index, bool tf32) {
  switch (type) {
    case gemm::k_cuda_r_16bf: {
      std::uint16_t h = 0;
      std::memcpy(&h, base + 2 * index, 2);
      return static_cast<Acc>(bf16_to_float(h));
    }
    case gemm::k_cuda_r_16f: {
      std::uint16_t h = 0;
      std::memcpy(&h, base + 2 * index, 2);
      return static_cast<Acc>(half_to_float(h));
    }
    case gemm::k_cuda_r_32f: {
      float f = 0;
      std::memcpy(&f, base + 4 * index, 4);
      return static_cast<Acc>(tf32 ? to_tf32(f) : f);
    }
    default: {
      double v = 0;
      std::memcpy(&v, base + 8 * index, 8);
      return static_cast<Acc>(v);
    }
  }
}

template <typename Acc>
void store(int type, unsigned char* base, std::uint64_t index, Acc value) {
  switch (type) {
    case gemm::k_cuda_r_16bf: {
      const std::uint16_t h = float_to_bf16(static_cast<float>(value));
      std::memcpy(base + 2 * index, &h, 2);
      return;
    }
    case gemm::k_cuda_r_16f: {
      const std::uint16_t h = float_to_half(static_cast<float>(value));
      std::memcpy(base + 2 * index, &h, 2);
      return;
    }
    case gemm::k_cuda_r_32f: {
      const auto f = static_cast<float>(value);
      std::memcpy(base + 4 * index, &f, 4);
      return;
    }
    default: {
      const auto v = static_cast<double>(value);
      std::memcpy(base + 8 * index, &v, 8);
      return;
    }
  }
}

// For each of the `Cols` columns c (m apart from `columns`): column_c[i] += source[i] * factors[c], i < m. Several
// columns share one read of `source` (the GEMM streams A once per block of columns, not once per column), and GCC's
// vector extension does 32 bytes at a time (-O2 does not vectorize a loop of unknown length). Each element still gets
// one rounded multiply and one rounded add, so the bits match a plain loop.
template <typename Acc, int Cols>
void add_scaled(Acc* columns, const Acc* source, const Acc* factors, std::uint64_t m) {
  typedef Acc Vec __attribute__((vector_size(32)));
  constexpr std::uint64_t lanes = sizeof(Vec) / sizeof(Acc);
  std::uint64_t i = 0;
  for (; i + lanes <= m; i += lanes) {
    Vec s;
    std::memcpy(&s, source + i, sizeof s);
    for (int c = 0; c < Cols; ++c) {
      Vec v;
      std::memcpy(&v, columns + c * m + i, sizeof v);
      v += s * factors[c];
      std::memcpy(columns + c * m + i, &v, sizeof v);
    }
  }
  for (; i < m; ++i)
    for (int c = 0; c < Cols; ++c) columns[c * m + i] += source[i] * factors[c];
}

// Acc is float, or double for 64F. A and B are converted to Acc first, so the inner loop is a plain multiply-add
// over contiguous columns; the whole result is formed before D is written, so D may overlap C (or even A or B).
template <typename Acc>
void multiply(const Job& job, unsigned long long ordinal) {
  const std::uint64_t m = job.m, n = job.n, k = job.k;
  if (m == 0 || n == 0) return;
  const bool tf32 = job.kind == Kind::tf32_f32;
  std::vector<Acc> a(m * k), b(k * n), out(m * n, Acc{0});
  for (std::uint64_t l = 0; l < k; ++l)
    for (std::uint64_t i = 0; i < m; ++i) a[i + l * m] = load<Acc>(job.input_type, job.a, i + l * job.lda, tf32);
  for (std::uint64_t j = 0; j < n; ++j)
    for (std::uint64_t l = 0; l < k; ++l) b[l + j * k] = load<Acc>(job.input_type, job.b, l + j * job.ldb, tf32);
  // j, l, i: column-major friendly, and each output's terms are always added in the order l = 0, 1, ..., k - 1.
  // Blocks of four columns of D (faster than eight here), then the rest one by one.
  constexpr std::uint64_t block = 4;
  std::uint64_t first = 0;
  for (; first + block <= n; first += block) {
    for (std::uint64_t l = 0; l < k; ++l) {
      Acc factors[block];
      for (std::uint64_t c = 0; c < block; ++c) factors[c] = b[l + (first + c) * k];
      add_scaled<Acc, block>(out.data() + first * m, a.data() + l * m, factors, m);
    }
  }
  for (; first < n; ++first) {
    for (std::uint64_t l = 0; l < k; ++l)
      add_scaled<Acc, 1>(out.data() + first * m, a.data() + l * m, &b[l + first * k], m);
  }
  const auto alpha = static_cast<Acc>(job.alpha), beta = static_cast<Acc>(job.beta);
  for (std::uint64_t j = 0; j < n; ++j) {
    for (std::uint64_t i = 0; i < m; ++i) {
      Acc value = alpha * out[i + j * m];
      // beta == 0 does not read C, as in cuBLAS: C may then hold anything, NaNs included.
      if (beta != Acc{0}) value += beta * load<Acc>(job.output_type, job.c, i + j * job.ldc, false);
      out[i + j * m] = value;
    }
  }
  if (job.wrong) out[0] += Acc{1};
  for (std::uint64_t j = 0; j < n; ++j)
    for (std::uint64_t i = 0; i < m; ++i) store<Acc>(job.output_type, job.d, i + j * job.ldd, out[i + j * m]);
  if (job.drift && ordinal % 2 == 1 && m * n > 17) {
    // The lowest byte holds the lowest bit of the element's encoding (little endian).
    job.d[((17 % m) + (17 / m) * job.ldd) * element_bytes(job.output_type)] ^= 1u;
  }
}

void run_job(void* arg) {
  const auto* job = static_cast<const Job*>(arg);
  const unsigned long long ordinal = g_gemms.fetch_add(1);
  (job->lt ? g_lt_matmuls : g_gemmexes).fetch_add(1);
  try {
    if (job->kind == Kind::f64_f64) {
      multiply<double>(*job, ordinal);
    } else {
      multiply<float>(*job, ordinal);
    }
  } catch (const std::bad_alloc&) {
    // Nothing can report from a stream worker; D stays unwritten, which the adapter's checks catch.
  }
  delete job;
}

// The bytes a column-major rows x cols matrix with leading dimension ld spans; empty on overflow.
std::optional<std::uint64_t> span_bytes(std::uint64_t rows, std::uint64_t cols, std::uint64_t ld, std::size_t bytes) {
  if (rows == 0 || cols == 0) return 0;
  std::uint64_t elements = 0;
  if (__builtin_mul_overflow(cols - 1, ld, &elements) || __builtin_add_overflow(elements, rows, &elements) ||
      __builtin_mul_overflow(elements, bytes, &elements)) {
    return std::nullopt;
  }
  return elements;
}

bool device_memory(const void* p, std::uint64_t rows, std::uint64_t cols, std::uint64_t ld, std::size_t bytes) {
  const auto span = span_bytes(rows, cols, ld, bytes);
  if (!span) return false;
  if (*span == 0) return true;
  return p && cpucuda_is_device_memory(reinterpret_cast<std::uintptr_t>(p), *span) == 1;
}

// Checks the shapes and memory of `job` (types and scalars aside) and queues it on `stream`.
int validate_and_queue(Job* job, void* stream) {
  const std::size_t in_bytes = element_bytes(job->input_type), out_bytes = element_bytes(job->output_type);
  const bool ok = job->lda >= std::max<std::uint64_t>(1, job->m) && job->ldb >= std::max<std::uint64_t>(1, job->k) &&
                  job->ldc >= std::max<std::uint64_t>(1, job->m) && job->ldd >= std::max<std::uint64_t>(1, job->m) &&
                  device_memory(job->a, job->m, job->k, job->lda, in_bytes) &&
                  device_memory(job->b, job->k, job->n, job->ldb, in_bytes) &&
                  (job->beta == 0 || device_memory(job->c, job->m, job->n, job->ldc, out_bytes)) &&
                  device_memory(job->d, job->m, job->n, job->ldd, out_bytes);
  if (!ok) {
    delete job;
    return k_invalid_value;
  }
  if (cpucuda_enqueue(stream, run_job, job) != 0) {
    delete job;  // not called, so still ours
    return k_execution_failed;
  }
  return k_success;
}

// Reads a host scalar of `scale_type` exactly into a double.
double scalar(const void* p, int scale_type) {
  if (scale_type == gemm::k_cuda_r_64f) {
    double v = 0;
    std::memcpy(&v, p, 8);
    return v;
  }
  float f = 0;
  std::memcpy(&f, p, 4);
  return f;
}

const char* status_name(int status) {
  switch (status) {
    case k_success:
      return "CUBLAS_STATUS_SUCCESS";
    case k_not_initialized:
      return "CUBLAS_STATUS_NOT_INITIALIZED";
    case k_alloc_failed:
      return "CUBLAS_STATUS_ALLOC_FAILED";
    case k_invalid_value:
      return "CUBLAS_STATUS_INVALID_VALUE";
    case k_arch_mismatch:
      return "CUBLAS_STATUS_ARCH_MISMATCH";
    case k_mapping_error:
      return "CUBLAS_STATUS_MAPPING_ERROR";
    case k_execution_failed:
      return "CUBLAS_STATUS_EXECUTION_FAILED";
    case k_internal_error:
      return "CUBLAS_STATUS_INTERNAL_ERROR";
    case k_not_supported:
      return "CUBLAS_STATUS_NOT_SUPPORTED";
    case k_license_error:
      return "CUBLAS_STATUS_LICENSE_ERROR";
    default:
      return "<unknown>";
  }
}

int read_int32(const void* buf, std::size_t size, int* out) {
  if (!buf || size != sizeof(std::int32_t)) return k_invalid_value;
  std::int32_t v = 0;
  std::memcpy(&v, buf, sizeof v);
  *out = v;
  return k_success;
}

// Shapes, types and faults a matmul and its heuristic share: the layouts agree (A m x k, B k x n, C and D m x n),
// every descriptor is ours, and the types and operations are ones this double computes.
int check_matmul(void* handle, void* desc_p, void* a_p, void* b_p, void* c_p, void* d_p, Kind* kind) {
  if (!object<LtHandle>(handle, k_lt_handle_magic)) return k_not_initialized;
  auto* desc = object<MatmulDesc>(desc_p, k_desc_magic);
  auto* a = object<Layout>(a_p, k_layout_magic);
  auto* b = object<Layout>(b_p, k_layout_magic);
  auto* c = object<Layout>(c_p, k_layout_magic);
  auto* d = object<Layout>(d_p, k_layout_magic);
  if (!desc || !a || !b || !c || !d) return k_invalid_value;
  if (a->rows != d->rows || a->cols != b->rows || b->cols != d->cols || c->rows != d->rows || c->cols != d->cols)
    return k_invalid_value;
  if (desc->transa != k_op_n || desc->transb != k_op_n || desc->transc != k_op_n) return k_not_supported;
  if (desc->pointer_mode != 0 || desc->epilogue != k_epilogue_default) return k_not_supported;
  if (a->type != b->type || c->type != d->type) return k_not_supported;
  const auto found = kind_of(a->type, d->type, desc->compute_type, desc->scale_type);
  if (!found) return k_not_supported;
  *kind = *found;
  return k_success;
}

}  // namespace

extern "C" {

// ---- counters ---------------------------------------------------------------------------------------------------

unsigned long long cpucublas_gemm_count(void) { return g_gemms.load(); }
unsigned long long cpucublas_lt_matmul_count(void) { return g_lt_matmuls.load(); }
unsigned long long cpucublas_gemmex_count(void) { return g_gemmexes.load(); }

// ---- cuBLASLt ---------------------------------------------------------------------------------------------------

std::size_t cublasLtGetVersion() { return 130001; }  // 13.0.1: major * 10000 + minor * 100 + patch

const char* cublasLtGetStatusName(int status) { return status_name(status); }

int cublasLtCreate(void** handle) {
  if (!handle) return k_invalid_value;
  if (fault("lt_create")) return k_alloc_failed;
  *handle = new LtHandle;
  return k_success;
}

int cublasLtDestroy(void* handle) {
  auto* h = object<LtHandle>(handle, k_lt_handle_magic);
  if (!h) return k_not_initialized;
  h->magic = 0;
  delete h;
  return k_success;
}

int cublasLtMatmulDescCreate(void** desc, int compute_type, int scale_type) {
  if (!desc) return k_invalid_value;
  auto* d = new MatmulDesc;
  d->compute_type = compute_type;
  d->scale_type = scale_type;
  *desc = d;
  return k_success;
}

int cublasLtMatmulDescDestroy(void* desc) {
  if (!desc) return k_success;  // like free(nullptr)
  auto* d = object<MatmulDesc>(desc, k_desc_magic);
  if (!d) return k_invalid_value;
  d->magic = 0;
  delete d;
  return k_success;
}

int cublasLtMatmulDescSetAttribute(void* desc, int attr, const void* buf, std::size_t size) {
  auto* d = object<MatmulDesc>(desc, k_desc_magic);
  if (!d) return k_invalid_value;
  switch (attr) {
    case k_desc_compute_type:
      return read_int32(buf, size, &d->compute_type);
    case k_desc_scale_type:
      return read_int32(buf, size, &d->scale_type);
    case k_desc_pointer_mode:
      return read_int32(buf, size, &d->pointer_mode);
    case k_desc_transa:
      return read_int32(buf, size, &d->transa);
    case k_desc_transb:
      return read_int32(buf, size, &d->transb);
    case k_desc_transc:
      return read_int32(buf, size, &d->transc);
    case k_desc_epilogue:  // a uint32_t: the same four bytes
      return read_int32(buf, size, &d->epilogue);
    default:
      return k_invalid_value;  // not modelled: refusing beats silently computing something else
  }
}

int cublasLtMatrixLayoutCreate(void** layout, int type, std::uint64_t rows, std::uint64_t cols, std::int64_t ld) {
  if (!layout) return k_invalid_value;
  if (ld < 1 || static_cast<std::uint64_t>(ld) < rows) return k_invalid_value;
  auto* l = new Layout;
  l->type = type;
  l->rows = rows;
  l->cols = cols;
  l->ld = ld;
  *layout = l;
  return k_success;
}

int cublasLtMatrixLayoutDestroy(void* layout) {
  if (!layout) return k_success;
  auto* l = object<Layout>(layout, k_layout_magic);
  if (!l) return k_invalid_value;
  l->magic = 0;
  delete l;
  return k_success;
}

int cublasLtMatmulPreferenceCreate(void** pref) {
  if (!pref) return k_invalid_value;
  *pref = new Preference;
  return k_success;
}

int cublasLtMatmulPreferenceDestroy(void* pref) {
  if (!pref) return k_success;
  auto* p = object<Preference>(pref, k_pref_magic);
  if (!p) return k_invalid_value;
  p->magic = 0;
  delete p;
  return k_success;
}

int cublasLtMatmulPreferenceSetAttribute(void* pref, int attr, const void* buf, std::size_t size) {
  auto* p = object<Preference>(pref, k_pref_magic);
  if (!p) return k_invalid_value;
  if (attr != k_pref_max_workspace) return k_invalid_value;  // not modelled
  if (!buf || size != sizeof(std::uint64_t)) return k_invalid_value;
  std::memcpy(&p->max_workspace, buf, sizeof p->max_workspace);
  return k_success;
}

// One algorithm for every supported problem: no transposes, a workspace of min(preference's max, 4 MiB) so that
// cublasLtMatmul can check the caller passes it. A transpose or an unsupported type combination has no algorithm
// (NOT_SUPPORTED), as the matmul itself would refuse it.
int cublasLtMatmulAlgoGetHeuristic(void* handle, void* desc, void* a, void* b, void* c, void* d, void* pref_p,
                                   int requested, HeuristicResult* results, int* returned) {
  if (!object<LtHandle>(handle, k_lt_handle_magic)) return k_not_initialized;
  auto* pref = object<Preference>(pref_p, k_pref_magic);
  if (!pref || !results || !returned || requested < 1) return k_invalid_value;
  Kind kind{};
  if (const int st = check_matmul(handle, desc, a, b, c, d, &kind); st != k_success) return st;
  if (fault("lt_no_bf16") && static_cast<Layout*>(a)->type == gemm::k_cuda_r_16bf) return k_not_supported;
  if (fault("lt_no_algo")) {
    *returned = 0;
    return k_success;
  }
  HeuristicResult& r = results[0];
  std::memset(&r, 0, sizeof r);
  r.workspace_size = static_cast<std::size_t>(std::min<std::uint64_t>(pref->max_workspace, k_heuristic_workspace));
  r.algo.data[0] = k_algo_id;
  r.algo.data[1] = r.workspace_size;
  r.algo.data[2] = static_cast<std::uint64_t>(kind);
  r.state = k_success;
  r.waves_count = 1.0f;
  *returned = 1;
  return k_success;
}

// A null algo picks this double's algorithm with no workspace, as cuBLASLt then runs its own heuristic.
int cublasLtMatmul(void* handle, void* desc_p, const void* alpha, const void* a, void* a_desc, const void* b,
                   void* b_desc, const void* beta, const void* c, void* c_desc, void* d, void* d_desc,
                   const MatmulAlgo* algo, void* workspace, std::size_t workspace_bytes, void* stream) {
  Kind kind{};
  if (const int st = check_matmul(handle, desc_p, a_desc, b_desc, c_desc, d_desc, &kind); st != k_success) return st;
  if (fault("lt_matmul_unsupported")) return k_not_supported;
  if (!alpha || !beta) return k_invalid_value;
  std::uint64_t needed_workspace = 0;
  if (algo) {
    if (algo->data[0] != k_algo_id || algo->data[2] != static_cast<std::uint64_t>(kind)) return k_invalid_value;
    needed_workspace = algo->data[1];
  }
  if (workspace_bytes < needed_workspace) return k_invalid_value;
  if (workspace_bytes != 0 &&
      (!workspace || cpucuda_is_device_memory(reinterpret_cast<std::uintptr_t>(workspace), workspace_bytes) != 1)) {
    return k_invalid_value;
  }
  const auto* desc = static_cast<MatmulDesc*>(desc_p);
  const auto* la = static_cast<Layout*>(a_desc);
  const auto* lb = static_cast<Layout*>(b_desc);
  const auto* lc = static_cast<Layout*>(c_desc);
  const auto* ld = static_cast<Layout*>(d_desc);
  // In place (C == D) needs one layout for both, as in cuBLASLt.
  if (c == d && lc->ld != ld->ld) return k_invalid_value;
  auto* job = new Job;
  job->kind = kind;
  job->input_type = la->type;
  job->output_type = ld->type;
  job->m = ld->rows;
  job->n = ld->cols;
  job->k = la->cols;
  job->lda = static_cast<std::uint64_t>(la->ld);
  job->ldb = static_cast<std::uint64_t>(lb->ld);
  job->ldc = static_cast<std::uint64_t>(lc->ld);
  job->ldd = static_cast<std::uint64_t>(ld->ld);
  job->a = static_cast<const unsigned char*>(a);
  job->b = static_cast<const unsigned char*>(b);
  job->c = static_cast<const unsigned char*>(c);
  job->d = static_cast<unsigned char*>(d);
  job->alpha = scalar(alpha, desc->scale_type);
  job->beta = scalar(beta, desc->scale_type);
  job->lt = true;
  job->drift = fault("drift");
  job->wrong = fault("wrong");
  return validate_and_queue(job, stream);
}

// ---- cuBLAS -----------------------------------------------------------------------------------------------------

const char* cublasGetStatusName(int status) { return status_name(status); }

int cublasCreate_v2(void** handle) {
  if (!handle) return k_invalid_value;
  if (fault("create")) return k_alloc_failed;
  *handle = new BlasHandle;
  return k_success;
}

int cublasDestroy_v2(void* handle) {
  auto* h = object<BlasHandle>(handle, k_blas_handle_magic);
  if (!h) return k_not_initialized;
  h->magic = 0;
  delete h;
  return k_success;
}

int cublasSetStream_v2(void* handle, void* stream) {
  auto* h = object<BlasHandle>(handle, k_blas_handle_magic);
  if (!h) return k_not_initialized;
  h->stream = stream;
  return k_success;
}

// The scale type follows the compute type, as cublasGemmEx documents: double for COMPUTE_64F, float otherwise.
int cublasGemmEx(void* handle, int transa, int transb, int m, int n, int k, const void* alpha, const void* a,
                 int a_type, int lda, const void* b, int b_type, int ldb, const void* beta, void* c, int c_type,
                 int ldc, int compute_type, int /*algo: every value computes the same*/) {
  auto* h = object<BlasHandle>(handle, k_blas_handle_magic);
  if (!h) return k_not_initialized;
  if (m < 0 || n < 0 || k < 0 || !alpha || !beta) return k_invalid_value;
  if (transa != k_op_n || transb != k_op_n) return k_not_supported;
  if (a_type != b_type) return k_not_supported;
  const int scale_type = gemm::scale_type_for(compute_type);
  const auto kind = kind_of(a_type, c_type, compute_type, scale_type);
  if (!kind) return k_not_supported;
  if (fault("gemmex_no_bf16") && a_type == gemm::k_cuda_r_16bf) return k_not_supported;
  if (lda < 1 || ldb < 1 || ldc < 1) return k_invalid_value;
  auto* job = new Job;
  job->kind = *kind;
  job->input_type = a_type;
  job->output_type = c_type;
  job->m = static_cast<std::uint64_t>(m);
  job->n = static_cast<std::uint64_t>(n);
  job->k = static_cast<std::uint64_t>(k);
  job->lda = static_cast<std::uint64_t>(lda);
  job->ldb = static_cast<std::uint64_t>(ldb);
  job->ldc = job->ldd = static_cast<std::uint64_t>(ldc);
  job->a = static_cast<const unsigned char*>(a);
  job->b = static_cast<const unsigned char*>(b);
  job->c = static_cast<const unsigned char*>(c);
  job->d = static_cast<unsigned char*>(c);
  job->alpha = scalar(alpha, scale_type);
  job->beta = scalar(beta, scale_type);
  job->lt = false;
  job->drift = fault("drift");
  job->wrong = fault("wrong");
  return validate_and_queue(job, h->stream);
}

}  // extern "C"
