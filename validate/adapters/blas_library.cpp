// cuBLAS and cuBLASLt by dlopen (blas_library.hpp). Libraries stay loaded once opened: dlclose of CUDA libraries
// under other sessions or atexit handlers is not safe.
#include "validate/adapters/blas_library.hpp"

#include <dlfcn.h>

#include <utility>

#include "base/text.hpp"

namespace gpuenv::validate::blas {
namespace {

std::string status_text(const char* name, cublasStatus status) {
  return (name ? std::string(name) : std::string("CUBLAS_STATUS")) + " (" + std::to_string(status) + ")";
}

}  // namespace

std::string CublasApi::name_of(cublasStatus status) const {
  return status_text(status_name ? status_name(status) : nullptr, status);
}

std::string CublasLtApi::name_of(cublasStatus status) const {
  return status_text(status_name ? status_name(status) : nullptr, status);
}

CublasLtMatmul& CublasLtMatmul::operator=(CublasLtMatmul&& other) noexcept {
  if (this != &other) {
    release();
    api = other.api;
    desc = std::exchange(other.desc, nullptr);
    layout_a = std::exchange(other.layout_a, nullptr);
    layout_b = std::exchange(other.layout_b, nullptr);
    layout_c = std::exchange(other.layout_c, nullptr);
    pref = std::exchange(other.pref, nullptr);
    algo = other.algo;
    size = other.size;
    workspace = other.workspace;
    workspace_bytes = other.workspace_bytes;
  }
  return *this;
}

cublasStatus CublasLtMatmul::run(const void* alpha, cuda::CUdeviceptr a, cuda::CUdeviceptr b, const void* beta,
                                 cuda::CUdeviceptr d, cuda::CUstream stream) const {
  return api->matmul(api->handle, desc, alpha, reinterpret_cast<const void*>(a), layout_a,
                     reinterpret_cast<const void*>(b), layout_b, beta, reinterpret_cast<const void*>(d), layout_c,
                     reinterpret_cast<void*>(d), layout_c, &algo, reinterpret_cast<void*>(workspace), workspace_bytes,
                     stream);
}

void CublasLtMatmul::release() {
  if (!api) return;
  if (pref) api->pref_destroy(pref);
  if (layout_c) api->layout_destroy(layout_c);
  if (layout_b) api->layout_destroy(layout_b);
  if (layout_a) api->layout_destroy(layout_a);
  if (desc) api->desc_destroy(desc);
  pref = layout_a = layout_b = layout_c = desc = nullptr;
}

LtPlan plan_matmul(const CublasLtApi& lt, const gemm::GemmTypes& types, int size, cuda::CUdeviceptr workspace,
                   std::size_t workspace_bytes) {
  LtPlan out(&lt);
  CublasLtMatmul& plan = out.matmul;
  plan.size = size;
  plan.workspace = workspace;
  plan.workspace_bytes = workspace_bytes;
  auto failed = [&](const char* call, cublasStatus st) {
    out.failed_call = call;
    out.status = st;
    return std::move(out);
  };
  if (cublasStatus st = lt.desc_create(&plan.desc, types.compute_type, types.scale_type); st != 0) {
    plan.desc = nullptr;
    return failed("cublasLtMatmulDescCreate", st);
  }
  const int op_n = k_cublas_op_n;
  for (int attribute : {k_cublaslt_matmul_desc_transa, k_cublaslt_matmul_desc_transb}) {
    if (cublasStatus st = lt.desc_set_attribute(plan.desc, attribute, &op_n, sizeof op_n); st != 0)
      return failed("cublasLtMatmulDescSetAttribute", st);
  }
  const auto rows = static_cast<std::uint64_t>(size);
  const auto ld = static_cast<std::int64_t>(size);
  const std::pair<cublasLtMatrixLayout*, int> layouts[] = {
      {&plan.layout_a, types.input_type}, {&plan.layout_b, types.input_type}, {&plan.layout_c, types.output_type}};
  for (const auto& [layout, data_type] : layouts) {
    if (cublasStatus st = lt.layout_create(layout, data_type, rows, rows, ld); st != 0) {
      *layout = nullptr;
      return failed("cublasLtMatrixLayoutCreate", st);
    }
  }
  if (cublasStatus st = lt.pref_create(&plan.pref); st != 0) {
    plan.pref = nullptr;
    return failed("cublasLtMatmulPreferenceCreate", st);
  }
  const std::uint64_t max_workspace = plan.workspace_bytes;
  if (cublasStatus st =
          lt.pref_set_attribute(plan.pref, k_cublaslt_pref_max_workspace, &max_workspace, sizeof max_workspace);
      st != 0) {
    return failed("cublasLtMatmulPreferenceSetAttribute", st);
  }
  CublasLtHeuristicResult heuristic{};
  int found = 0;
  const cublasStatus st = lt.get_heuristic(lt.handle, plan.desc, plan.layout_a, plan.layout_b, plan.layout_c,
                                           plan.layout_c, plan.pref, 1, &heuristic, &found);
  if (unsupported(st)) return out;
  if (st != 0) return failed("cublasLtMatmulAlgoGetHeuristic", st);
  if (found < 1 || heuristic.state != 0) return out;
  plan.algo = heuristic.algo;
  out.found = true;
  return out;
}

cublasStatus square_gemm(const CublasApi& blas, int size, const void* alpha, cuda::CUdeviceptr a, cuda::CUdeviceptr b,
                         int input_type, const void* beta, cuda::CUdeviceptr c, int output_type, int compute_type) {
  return blas.gemm_ex(blas.handle, k_cublas_op_n, k_cublas_op_n, size, size, size, alpha,
                      reinterpret_cast<const void*>(a), input_type, size, reinterpret_cast<const void*>(b), input_type,
                      size, beta, reinterpret_cast<void*>(c), output_type, size, compute_type, k_cublas_gemm_default);
}

LoadedLibrary<CublasApi> load_cublas(const std::vector<std::string>& libraries, cuda::CUstream stream) {
  LoadedLibrary<CublasApi> loaded;
  for (const std::string& name : libraries) {
    void* lib = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!lib) continue;
    auto api = std::make_unique<CublasApi>();
    api->library = name;
    std::vector<std::string> missing;
    cuda::resolve(lib, api->create, "cublasCreate_v2", missing);
    cuda::resolve(lib, api->destroy, "cublasDestroy_v2", missing);
    cuda::resolve(lib, api->set_stream, "cublasSetStream_v2", missing);
    cuda::resolve(lib, api->gemm_ex, "cublasGemmEx", missing);
    api->status_name = reinterpret_cast<decltype(api->status_name)>(dlsym(lib, "cublasGetStatusName"));
    if (!missing.empty()) {  // not a usable cuBLAS; stays loaded (dlclose of CUDA libraries is unsafe)
      loaded.rejected.push_back(name + " lacks " + join(missing, ", "));
      continue;
    }
    if (const cublasStatus st = api->create(&api->handle); st != 0) {  // e.g. a cuBLAS newer than the driver
      loaded.rejected.push_back(name + ": cublasCreate_v2 failed with " + api->name_of(st));
      continue;
    }
    if (const cublasStatus st = api->set_stream(api->handle, stream); st != 0) {
      loaded.rejected.push_back(name + ": cublasSetStream_v2 failed with " + api->name_of(st));
      api->destroy(api->handle);
      continue;
    }
    loaded.api = std::move(api);
    break;
  }
  return loaded;
}

LoadedLibrary<CublasLtApi> load_cublaslt(const std::vector<std::string>& libraries) {
  LoadedLibrary<CublasLtApi> loaded;
  for (const std::string& name : libraries) {
    void* lib = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!lib) continue;
    auto api = std::make_unique<CublasLtApi>();
    api->library = name;
    std::vector<std::string> missing;
    cuda::resolve(lib, api->get_version, "cublasLtGetVersion", missing);
    cuda::resolve(lib, api->create, "cublasLtCreate", missing);
    cuda::resolve(lib, api->destroy, "cublasLtDestroy", missing);
    cuda::resolve(lib, api->desc_create, "cublasLtMatmulDescCreate", missing);
    cuda::resolve(lib, api->desc_destroy, "cublasLtMatmulDescDestroy", missing);
    cuda::resolve(lib, api->desc_set_attribute, "cublasLtMatmulDescSetAttribute", missing);
    cuda::resolve(lib, api->layout_create, "cublasLtMatrixLayoutCreate", missing);
    cuda::resolve(lib, api->layout_destroy, "cublasLtMatrixLayoutDestroy", missing);
    cuda::resolve(lib, api->pref_create, "cublasLtMatmulPreferenceCreate", missing);
    cuda::resolve(lib, api->pref_destroy, "cublasLtMatmulPreferenceDestroy", missing);
    cuda::resolve(lib, api->pref_set_attribute, "cublasLtMatmulPreferenceSetAttribute", missing);
    cuda::resolve(lib, api->get_heuristic, "cublasLtMatmulAlgoGetHeuristic", missing);
    cuda::resolve(lib, api->matmul, "cublasLtMatmul", missing);
    api->status_name = reinterpret_cast<decltype(api->status_name)>(dlsym(lib, "cublasLtGetStatusName"));
    if (!missing.empty()) {  // not a usable cuBLASLt; stays loaded (dlclose of CUDA libraries is unsafe)
      loaded.rejected.push_back(name + " lacks " + join(missing, ", "));
      continue;
    }
    if (const std::size_t major = cublas_major(api->get_version()); major < 11) {
      // cuBLASLt 10 takes a cudaDataType compute type
      loaded.rejected.push_back(name + " is cuBLASLt " + std::to_string(major) + " (11 or newer is needed)");
      continue;
    }
    if (const cublasStatus st = api->create(&api->handle); st != 0) {  // e.g. a cuBLASLt newer than the driver
      loaded.rejected.push_back(name + ": cublasLtCreate failed with " + api->name_of(st));
      continue;
    }
    loaded.api = std::move(api);
    break;
  }
  return loaded;
}

}  // namespace gpuenv::validate::blas
