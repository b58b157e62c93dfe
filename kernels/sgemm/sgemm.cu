// Tiled shared-memory SGEMM: C[M][N] = A[M][K] * B[K][N], row-major float32.
// Each TILE x TILE block computes one output tile, staging TILE-wide slabs of A and B in shared memory.

#ifndef TILE
#define TILE 16
#endif

static_assert(TILE >= 1 && TILE * TILE <= 1024, "TILE * TILE must be at most 1024 threads");

extern "C" __global__ void __launch_bounds__(TILE * TILE)
sgemm(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C, int M, int N, int K) {
    __shared__ float As[TILE][TILE];
    __shared__ float Bs[TILE][TILE];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row = blockIdx.y * TILE + ty, col = blockIdx.x * TILE + tx;
    float acc = 0.0f;
    for (int t = 0; t < K; t += TILE) {
        As[ty][tx] = (row < M && t + tx < K) ? A[(size_t)row * K + t + tx] : 0.0f;
        Bs[ty][tx] = (t + ty < K && col < N) ? B[(size_t)(t + ty) * N + col] : 0.0f;
        __syncthreads();
#pragma unroll
        for (int k = 0; k < TILE; ++k) acc += As[ty][k] * Bs[k][tx];
        __syncthreads();
    }
    if (row < M && col < N) C[(size_t)row * N + col] = acc;
}
