"""Which CUDA library a header is of, and what the messages about one say."""

from __future__ import annotations

import pytest

from compileiq_lab.kernels.cudalibs import cuda_version, library_header_note, library_of, missing_library_note


@pytest.mark.parametrize(("header", "library"), [
    ("cublas_v2.h", "cuBLAS"), ("/usr/local/cuda/include/cublasLt.h", "cuBLAS"), ("cudnn.h", "cuDNN"),
    ("cudnn_frontend.h", "cuDNN"), ("nccl.h", "NCCL"), ("curand_kernel.h", "cuRAND"), ("cufftXt.h", "cuFFT"),
    ("cusparse.h", "cuSPARSE"), ("cusolverDn.h", "cuSOLVER"), ("nvshmemx.h", "NVSHMEM"), ("cutensor.h", "cuTENSOR"),
    ("nvtx3/nvToolsExt.h", "NVTX"), ("cuda_profiler_api.h", "the CUDA profiler API"), ("mpi.h", "MPI"),
    ("cuda_runtime.h", None), ("my_cublas_wrapper.h", None), ("cublas_v2.hpp", None), ("helper_cuda.h", None),
])
def test_a_header_is_named_by_its_library_and_others_by_none(header, library):
    found = library_of(header)
    assert (found.name if found else None) == library


def test_the_nvcc_release_is_read_from_the_toolchain():
    assert cuda_version({"nvcc": "Build cuda_13.0.r13.0/compiler.36424714_0"}) == "13.0"
    assert cuda_version({"nvcc": "Cuda compilation tools, release 12.8, V12.8.93"}) == "12.8"
    assert cuda_version({"gcc": "gcc (Debian 14.2.0-19) 14.2.0"}) is None


@pytest.mark.parametrize("message", [
    "/src/common.h:4:10: fatal error: cublas_v2.h: No such file or directory",  # nvcc's host compiler (gcc)
    'bench.cu(3): catastrophic error: cannot open source file "cublas_v2.h"',  # cicc
    "bench.cu:3:10: fatal error: 'cublas_v2.h' file not found",  # clang as the host compiler
])
def test_every_compiler_form_of_a_missing_header_names_the_library(message):
    note = missing_library_note(message, "13.0")
    assert note is not None and note.startswith("it is cuBLAS's header") and "for CUDA 13.0" in note
    assert "pip install the nvidia-cublas release that came with CUDA 13.0" in note


def test_a_library_without_a_wheel_and_an_unknown_release_are_said_plainly():
    mpi = missing_library_note("x.cu:18:10: fatal error: mpi.h: No such file or directory", "13.0")
    assert mpi is not None and "MPI's development files" in mpi and "pip" not in mpi
    note = missing_library_note("x.cu:1:10: fatal error: nccl.h: No such file or directory", None)
    assert note is not None and "the nvcc's CUDA release (nvcc --version)" in note and "nvidia-nccl-cu13" in note
    assert missing_library_note("x.cu:1:10: fatal error: helper_cuda.h: No such file or directory", "13.0") is None


def test_a_front_end_error_is_blamed_on_a_library_header_only_when_it_is_in_one():
    inside = ('/venv/nvidia/cu13/bin/..//include/cublas_api.h(285): error: identifier '
              '"cudaEmulationSpecialValuesSupport" is undefined\n1 error detected')
    assert "the error is in cuBLAS's header cublas_api.h" in library_header_note(inside, "13.0")
    assert library_header_note('k.cu(3): error: identifier "x" is undefined', "13.0") == ""
