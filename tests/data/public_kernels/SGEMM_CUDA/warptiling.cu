// Instantiates the verbatim warp-tiling SGEMM kernel of siboehm/SGEMM_CUDA with its runner's A6000 settings
// (src/runner.cu: 128 threads, BM = BN = 128, BK = 16, WM = WN = 64, WNITER = 4, TM = 8, TN = 4).
#include "src/kernels/10_kernel_warptiling.cuh"

template __global__ void sgemmWarptiling<128, 128, 16, 64, 64, 4, 8, 4, 128>(int M, int N, int K, float alpha,
                                                                           float *A, float *B, float beta,
                                                                           float *C);
