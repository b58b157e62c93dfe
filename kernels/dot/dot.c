/* Dot product of two float32 vectors accumulated in double: out[0] = sum_i x[i] * y[i].
 * bufs = {x, y, out}, params = {n}. ACCUMULATORS independent partial sums break the add chain. */

#ifndef ACCUMULATORS
#define ACCUMULATORS 4
#endif

#if ACCUMULATORS < 1
#error "ACCUMULATORS must be at least 1"
#endif

void cil_kernel(void **bufs, const long *params);

void cil_kernel(void **bufs, const long *params) {
    const float *restrict x = (const float *)bufs[0];
    const float *restrict y = (const float *)bufs[1];
    double *restrict out = (double *)bufs[2];
    const long n = params[0];
    double acc[ACCUMULATORS] = {0.0};
    long i = 0;
    for (; i + ACCUMULATORS <= n; i += ACCUMULATORS) {
        for (int k = 0; k < ACCUMULATORS; ++k) acc[k] += (double)x[i + k] * (double)y[i + k];
    }
    for (; i < n; ++i) acc[0] += (double)x[i] * (double)y[i];
    double total = 0.0;
    for (int k = 0; k < ACCUMULATORS; ++k) total += acc[k];
    out[0] = total;
}
