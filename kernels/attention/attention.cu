// Fused single-head attention for one head: O = softmax(Q K^T / sqrt(head_dim)) V, row-major float32
// Q, K, V, O of shape [seq_len][head_dim]. One block per query row; dynamic shared memory holds the
// query row and the row of scores: (seq_len + head_dim) * sizeof(float) bytes.

#ifndef BLOCK
#define BLOCK 128
#endif

static_assert(BLOCK % 32 == 0 && BLOCK >= 32 && BLOCK <= 1024, "BLOCK must be a multiple of 32 in [32, 1024]");

#define NEG_INF __int_as_float(0xff800000)

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
        v = warp_max(lane < BLOCK / 32 ? warp_vals[lane] : NEG_INF);
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
attention_row(const float* __restrict__ Q, const float* __restrict__ K, const float* __restrict__ V,
              float* __restrict__ O, int seq_len, int head_dim) {
    extern __shared__ float smem[];
    float* q = smem;             // [head_dim]: this block's query row
    float* p = smem + head_dim;  // [seq_len]: scores, then unnormalised probabilities
    const int row = blockIdx.x, lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (row >= seq_len) return;  // uniform per block
    for (int c = threadIdx.x; c < head_dim; c += BLOCK) q[c] = Q[(size_t)row * head_dim + c];
    __syncthreads();

    // scores: one warp per key, lanes split the head dimension (coalesced reads of K)
    const float scale = rsqrtf((float)head_dim);
    for (int j = warp; j < seq_len; j += BLOCK / 32) {
        const float* kj = K + (size_t)j * head_dim;
        float s = 0.0f;
        for (int c = lane; c < head_dim; c += 32) s += q[c] * kj[c];
        s = warp_sum(s);
        if (lane == 0) p[j] = s * scale;
    }
    __syncthreads();

    float m = NEG_INF;
    for (int j = threadIdx.x; j < seq_len; j += BLOCK) m = fmaxf(m, p[j]);
    m = block_max(m);
    float l = 0.0f;
    for (int j = threadIdx.x; j < seq_len; j += BLOCK) {
        const float e = expf(p[j] - m);
        p[j] = e;
        l += e;
    }
    const float inv = 1.0f / block_sum(l);  // its __syncthreads() also publishes p

    // output: threads split the head dimension, reading V rows coalesced
    for (int c = threadIdx.x; c < head_dim; c += BLOCK) {
        float acc = 0.0f;
        for (int j = 0; j < seq_len; ++j) acc += p[j] * V[(size_t)j * head_dim + c];
        O[(size_t)row * head_dim + c] = acc * inv;
    }
}
