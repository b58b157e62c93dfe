// Row softmax y[r][:] = exp(x[r][:] - max) / sum(exp(x[r][:] - max)) of a row-major float32 matrix,
// one block of BLOCK threads per row: a block max, a block sum, then the normalised write.

#ifndef BLOCK
#define BLOCK 256
#endif

static_assert(BLOCK % 32 == 0 && BLOCK >= 32 && BLOCK <= 1024, "BLOCK must be a multiple of 32 in [32, 1024]");

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
    return v;
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
    return v;
}

// Max of v over the block, returned to every thread. Contains two __syncthreads().
__device__ float block_max(float v) {
    __shared__ float warp_vals[BLOCK / 32];
    __shared__ float result;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    v = warp_max(v);
    if (lane == 0) warp_vals[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = warp_max(lane < BLOCK / 32 ? warp_vals[lane] : __int_as_float(0xff800000));
        if (lane == 0) result = v;
    }
    __syncthreads();
    return result;
}

// Sum of v over the block, returned to every thread. Contains two __syncthreads().
__device__ float block_sum(float v) {
    __shared__ float warp_vals[BLOCK / 32];
    __shared__ float result;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    v = warp_sum(v);
    if (lane == 0) warp_vals[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = warp_sum(lane < BLOCK / 32 ? warp_vals[lane] : 0.0f);
        if (lane == 0) result = v;
    }
    __syncthreads();
    return result;
}

extern "C" __global__ void __launch_bounds__(BLOCK)
softmax_rows(const float* __restrict__ x, float* __restrict__ y, int rows, int cols) {
    const int row = blockIdx.x;
    if (row >= rows) return;  // uniform per block: the block reductions below stay safe
    const float* xr = x + (size_t)row * cols;
    float* yr = y + (size_t)row * cols;
    float m = __int_as_float(0xff800000);  // -inf
    for (int j = threadIdx.x; j < cols; j += BLOCK) m = fmaxf(m, xr[j]);
    m = block_max(m);
    float s = 0.0f;
    for (int j = threadIdx.x; j < cols; j += BLOCK) s += expf(xr[j] - m);
    const float inv = 1.0f / block_sum(s);
    for (int j = threadIdx.x; j < cols; j += BLOCK) yr[j] = expf(xr[j] - m) * inv;
}
