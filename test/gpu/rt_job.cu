// A small CUDA-runtime program for the GPU check: known cudaMalloc sizes
// and a known number of kernel launches, then it waits so that `gmt
// status` can be compared with what it holds.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <iostream>

#include <cuda_runtime.h>

#define CHECK(call)                                                            \
  do {                                                                         \
    cudaError_t e_ = (call);                                                   \
    if (e_ != cudaSuccess) {                                                   \
      std::fprintf(stderr, "rt_job: %s failed: %s\n", #call, cudaGetErrorString(e_)); \
      std::exit(1);                                                            \
    }                                                                          \
  } while (0)

__global__ void scale(float *x, size_t n, float a)
{
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (i < n)
    x[i] *= a;
}

int main()
{
  const size_t sizes[] = {64u << 20, 3u << 20, (1u << 20) + 7};
  void *bufs[3];
  size_t total = 0;
  const int launches = 100;

  for (int i = 0; i < 3; i++) {
    CHECK(cudaMalloc(&bufs[i], sizes[i]));
    total += sizes[i];
  }
  size_t n = sizes[0] / sizeof(float);
  for (int i = 0; i < launches; i++) {
    scale<<<(unsigned)((n + 255) / 256), 256>>>((float *)bufs[0], n, 1.0f);
    CHECK(cudaGetLastError());
  }
  CHECK(cudaDeviceSynchronize());
  std::printf("READY bytes=%zu launches=%d\n", total, launches);
  std::fflush(stdout);
  std::string line;
  std::getline(std::cin, line);
  for (int i = 0; i < 3; i++)
    CHECK(cudaFree(bufs[i]));
  return 0;
}
