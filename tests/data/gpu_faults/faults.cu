// Test kernel for GPU failure handling: y = 2 x (MODE 0), a wrong answer (1), an illegal address (2), a hang (3).
#ifndef MODE
#define MODE 0
#endif

extern "C" __global__ void scale(const float* __restrict__ x, float* __restrict__ y, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
#if MODE == 3
    volatile const float* vx = x;  // re-read every time: the loop cannot be removed
    while (vx[0] < 1e30f) {
    }
#endif
    if (i < n) {
#if MODE == 1
        y[i] = 3.0f * x[i];
#elif MODE == 2
        *((volatile float*)(8 + 4 * (long long)i)) = 2.0f * x[i];  // near address 0: never mapped
#else
        y[i] = 2.0f * x[i];
#endif
    }
}
