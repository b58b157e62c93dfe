/* Cache-aware float32 matmul C[M][N] = A[M][K] * B[K][N], row-major.
 * bufs = {A, B, C}, params = {M, N, K}. The k and j loops are blocked by TILE; inside a block the
 * ikj order streams rows of B and C, so the inner loop is unit-stride and vectorisable. */

#include <string.h>

#ifndef TILE
#define TILE 64
#endif

#if TILE < 1
#error "TILE must be at least 1"
#endif

void cil_kernel(void **bufs, const long *params);

void cil_kernel(void **bufs, const long *params) {
    const float *restrict A = (const float *)bufs[0];
    const float *restrict B = (const float *)bufs[1];
    float *restrict C = (float *)bufs[2];
    const long M = params[0], N = params[1], K = params[2];
    memset(C, 0, (size_t)M * (size_t)N * sizeof(float));
    for (long kk = 0; kk < K; kk += TILE) {
        const long k_end = kk + TILE < K ? kk + TILE : K;
        for (long jj = 0; jj < N; jj += TILE) {
            const long j_end = jj + TILE < N ? jj + TILE : N;
            for (long i = 0; i < M; ++i) {
                float *restrict c_row = C + i * N;
                for (long k = kk; k < k_end; ++k) {
                    const float a = A[i * K + k];
                    const float *restrict b_row = B + k * N;
                    for (long j = jj; j < j_end; ++j) c_row[j] += a * b_row[j];
                }
            }
        }
    }
}
