// One 2-D 5-point Jacobi step on a row-major float32 grid u[ny][nx]:
// v[i][j] = (u[i-1][j] + u[i+1][j] + u[i][j-1] + u[i][j+1]) / 4 inside, v = u on the boundary.

#ifndef BLOCK_X
#define BLOCK_X 32
#endif
#ifndef BLOCK_Y
#define BLOCK_Y 8
#endif

static_assert(BLOCK_X >= 1 && BLOCK_Y >= 1 && BLOCK_X * BLOCK_Y <= 1024, "BLOCK_X * BLOCK_Y must be at most 1024");

extern "C" __global__ void __launch_bounds__(BLOCK_X * BLOCK_Y)
jacobi_step(const float* __restrict__ u, float* __restrict__ v, int ny, int nx) {
    const int j = blockIdx.x * BLOCK_X + threadIdx.x;
    const int i = blockIdx.y * BLOCK_Y + threadIdx.y;
    if (i >= ny || j >= nx) return;
    const size_t idx = (size_t)i * nx + j;
    if (i == 0 || j == 0 || i == ny - 1 || j == nx - 1) {
        v[idx] = u[idx];
        return;
    }
    v[idx] = 0.25f * ((u[idx - nx] + u[idx + nx]) + (u[idx - 1] + u[idx + 1]));
}
