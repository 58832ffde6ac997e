// A stand-in for libcuda.so.1: one sm_89 GPU, CUDA 12.4; or, with FAKE_CUDA_HANG, a cuInit that never returns.
#include <unistd.h>

#include <cstdio>

extern "C" {
int cuInit(unsigned) {
#ifdef FAKE_CUDA_HANG
  for (;;) pause();
#endif
  return 0;
}
int cuDriverGetVersion(int* v) { *v = 12040; return 0; }
int cuDeviceGetCount(int* n) { *n = 1; return 0; }
int cuDeviceGet(int* d, int i) { *d = i; return 0; }
int cuDeviceGetName(char* out, int len, int) { std::snprintf(out, static_cast<std::size_t>(len), "%s", "NVIDIA L4"); return 0; }
int cuDeviceGetAttribute(int* v, int attr, int) { *v = attr == 75 ? 8 : attr == 76 ? 9 : 0; return 0; }
int cuDeviceTotalMem_v2(std::size_t* b, int) { *b = 23580639232ull; return 0; }
}
