/* Several 2-D 5-point Jacobi sweeps on a row-major float32 grid u[ny][nx] with a fixed boundary:
 * out = J^sweeps(u), where J(a)[i][j] = (a[i-1][j] + a[i+1][j] + a[i][j-1] + a[i][j+1]) / 4 inside.
 * bufs = {u, out}, params = {ny, nx, sweeps}. u is only read; the sweeps ping-pong between out and a
 * scratch grid, ordered so that the last one lands in out. If the scratch cannot be allocated, out is NaN. */

#include <math.h>
#include <stdlib.h>
#include <string.h>

void cil_kernel(void **bufs, const long *params);

static void sweep(const float *restrict src, float *restrict dst, long ny, long nx) {
    for (long i = 1; i < ny - 1; ++i) {
        const float *up = src + (i - 1) * nx, *mid = src + i * nx, *down = src + (i + 1) * nx;
        float *row = dst + i * nx;
        for (long j = 1; j < nx - 1; ++j) row[j] = 0.25f * ((up[j] + down[j]) + (mid[j - 1] + mid[j + 1]));
    }
}

void cil_kernel(void **bufs, const long *params) {
    const float *u = (const float *)bufs[0];
    float *out = (float *)bufs[1];
    const long ny = params[0], nx = params[1], sweeps = params[2];
    const size_t bytes = (size_t)ny * (size_t)nx * sizeof(float);
    memcpy(out, u, bytes);  /* boundary (and the result when sweeps == 0) */
    if (sweeps <= 0) return;
    float *tmp = sweeps > 1 ? (float *)malloc(bytes) : NULL;
    if (sweeps > 1 && tmp == NULL) {
        for (long k = 0; k < ny * nx; ++k) out[k] = NAN;
        return;
    }
    if (tmp != NULL) memcpy(tmp, u, bytes);
    /* sweep s writes out when (sweeps - s) is even, so sweep `sweeps` writes out */
    const float *src = u;
    for (long s = 1; s <= sweeps; ++s) {
        float *dst = (sweeps - s) % 2 == 0 ? out : tmp;
        sweep(src, dst, ny, nx);
        src = dst;
    }
    free(tmp);
}
