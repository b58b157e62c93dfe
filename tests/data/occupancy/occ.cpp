#include <cstdio>
#include <cstdlib>
#include "cuda_occupancy.h"
// args: major minor maxWarps(threads/32) maxBlocks smemPerSM reservedSmem then lines of "regs threads smem" on stdin
int main(int argc, char** argv) {
    cudaOccDeviceProp p;
    p.computeMajor = atoi(argv[1]); p.computeMinor = atoi(argv[2]);
    p.maxThreadsPerBlock = 1024; p.maxThreadsPerMultiprocessor = atoi(argv[3]) * 32;
    p.regsPerBlock = 65536; p.regsPerMultiprocessor = 65536; p.warpSize = 32;
    p.sharedMemPerBlock = 48 * 1024; p.sharedMemPerMultiprocessor = atoi(argv[5]);
    p.numSms = 132; p.sharedMemPerBlockOptin = atoi(argv[5]) - atoi(argv[6]);
    p.reservedSharedMemPerBlock = atoi(argv[6]);
    int regs, threads, smem;
    while (scanf("%d %d %d", &regs, &threads, &smem) == 3) {
        cudaOccFuncAttributes a; a.maxThreadsPerBlock = 1024; a.numRegs = regs; a.sharedSizeBytes = smem;
        a.partitionedGCConfig = PARTITIONED_GC_OFF; a.shmemLimitConfig = FUNC_SHMEM_LIMIT_OPTIN;
        a.maxDynamicSharedSizeBytes = 0;
        cudaOccDeviceState s; s.carveoutConfig = SHAREDMEM_CARVEOUT_MAX_SHARED;
        cudaOccResult r;
        cudaOccError e = cudaOccMaxActiveBlocksPerMultiprocessor(&r, &p, &a, &s, threads, 0);
        printf("%d %d\n", (int)e, r.activeBlocksPerMultiprocessor);
    }
}
