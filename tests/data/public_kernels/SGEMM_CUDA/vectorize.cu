// Instantiates the verbatim vectorised SGEMM kernel of siboehm/SGEMM_CUDA with the sizes its runner uses for
// large matrices (src/runner.cu: BM = BN = 128, BK = 8, TM = TN = 8); it has no __launch_bounds__.
#include "src/kernels/6_kernel_vectorize.cuh"

template __global__ void sgemmVectorize<128, 128, 8, 8, 8>(int M, int N, int K, float alpha, float *A, float *B,
                                                          float beta, float *C);
