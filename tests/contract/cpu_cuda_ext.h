#pragma once
// Extension entry points of the CPU CUDA driver test double (tests/contract/cpu_cuda.cpp), for the other test doubles
// that run work on its streams: the CPU cuBLAS/cuBLASLt (cpu_cublas.cpp) and the CPU NCCL (cpu_nccl.cpp). They link
// against libcpu_cuda.so, so they share its one instance with the adapter that dlopens the same file.
//
// In the CPU driver, device memory is host memory: a CUdeviceptr is the address of the bytes, and every device
// allocation lives in the process, so work queued on a stream reads and writes it directly.

#ifdef __cplusplus
extern "C" {
#endif

/// Queues fn(arg) on `stream` (a CUstream of the CPU driver): it runs on the stream's worker thread after everything
/// queued before it, and the stream is busy until it returns. A null stream runs fn(arg) at once on the caller's
/// thread. Returns 0, or 400 (CUDA_ERROR_INVALID_HANDLE) when `stream` is not a live stream (fn is then not called).
int cpucuda_enqueue(void* stream, void (*fn)(void*), void* arg);

/// Whether [ptr, ptr + bytes) lies inside one live device allocation (1) or not (0).
int cpucuda_is_device_memory(unsigned long long ptr, unsigned long long bytes);

/// The ordinal of the device whose context is current on the calling thread, or -1 when none is.
int cpucuda_current_device(void);

/// The number of devices the CPU driver shows (CPU_CUDA_DEVICES).
int cpucuda_device_count(void);

/// The lazy variant (CPU_CUDA_LAZY): how many first launches of a kernel found a spin kernel holding their device,
/// and so waited until it gave up (always 0 in the other variant).
unsigned long long cpucuda_lazy_stalls(void);

#ifdef __cplusplus
}
#endif
