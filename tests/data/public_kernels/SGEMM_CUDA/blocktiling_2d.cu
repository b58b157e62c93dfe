// Instantiates the verbatim 2-D block-tiling SGEMM kernel of siboehm/SGEMM_CUDA with the sizes its runner uses
// for large matrices (src/runner.cu: BM = BN = 128, BK = 8, TM = TN = 8; 256 threads, 64 outputs per thread).
#include "src/kernels/5_kernel_2D_blocktiling.cuh"

template __global__ void sgemm2DBlocktiling<128, 128, 8, 8, 8>(int M, int N, int K, float alpha, const float *A,
                                                              const float *B, float beta, float *C);
