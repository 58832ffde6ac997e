/* Prints the CUDA runtime's and cuDNN's versions as the libraries report them: "cudart 12090 cudnn 91700".
   Compiled by the tests against the CUDA headers and linked against the libraries inside an image; needs no
   GPU (both calls are answered by the libraries alone). */
#include <cuda_runtime_api.h>
#include <stdio.h>
#ifdef WITH_CUDNN
#include <cudnn.h>
#endif

int main(void) {
  int runtime = 0;
  if (cudaRuntimeGetVersion(&runtime) != cudaSuccess) {
    fprintf(stderr, "cudaRuntimeGetVersion failed\n");
    return 1;
  }
  printf("cudart %d", runtime);
#ifdef WITH_CUDNN
  printf(" cudnn %zu", (size_t)cudnnGetVersion());
#endif
  printf("\n");
  return 0;
}
