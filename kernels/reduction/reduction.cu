// Sum of a float32 vector in one launch (threadfence reduction): every block sums a grid-stride
// share of x into partials[blockIdx.x]; the last block to finish adds the partials into out[0].
// counter must be 0 before the first launch; atomicInc wraps it back to 0, so launches repeat.

#ifndef BLOCK
#define BLOCK 256
#endif

static_assert(BLOCK % 32 == 0 && BLOCK >= 32 && BLOCK <= 1024, "BLOCK must be a multiple of 32 in [32, 1024]");

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
    return v;
}

// Sum of v over the block, returned to every thread. Contains two __syncthreads().
__device__ float block_sum(float v) {
    __shared__ float warp_totals[BLOCK / 32];
    __shared__ float total;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    v = warp_sum(v);
    if (lane == 0) warp_totals[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = warp_sum(lane < BLOCK / 32 ? warp_totals[lane] : 0.0f);
        if (lane == 0) total = v;
    }
    __syncthreads();
    return total;
}

extern "C" __global__ void __launch_bounds__(BLOCK)
reduce_sum(const float* __restrict__ x, float* __restrict__ partials, unsigned int* __restrict__ counter,
           float* __restrict__ out, int n) {
    __shared__ bool is_last;
    const long stride = 2L * BLOCK * gridDim.x;
    float acc = 0.0f;
    for (long i = 2L * BLOCK * blockIdx.x + threadIdx.x; i < n; i += stride) {
        acc += x[i];
        if (i + BLOCK < n) acc += x[i + BLOCK];
    }
    acc = block_sum(acc);
    if (threadIdx.x == 0) {
        partials[blockIdx.x] = acc;
        __threadfence();  // make the partial visible before counting this block as done
        is_last = atomicInc(counter, gridDim.x - 1) == gridDim.x - 1;
    }
    __syncthreads();
    if (!is_last) return;
    float total = 0.0f;
    for (unsigned int b = threadIdx.x; b < gridDim.x; b += BLOCK) total += __ldcg(&partials[b]);
    total = block_sum(total);
    if (threadIdx.x == 0) out[0] = total;
}
