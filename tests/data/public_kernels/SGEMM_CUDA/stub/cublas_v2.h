// Empty stand-in: the SGEMM_CUDA kernel headers include <cublas_v2.h> but use nothing from it, and cuBLAS is
// not needed to compile them (nor installed with the pinned CUDA wheels).
#pragma once
