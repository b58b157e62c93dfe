"""A PyTorch extension's .cu file as published: its binding left out, its kernels compiled, lines where they were."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from compileiq_lab.measure.binary import inspect_elf
from compileiq_lab.measure.binding import device_part
from compileiq_lab.measure.entries import cubin_entries
from compileiq_lab.measure.nvcc import CudaCompiler
from compileiq_lab.testing import tool_available

needs_nvcc = pytest.mark.skipif(not (tool_available("nvcc") and tool_available("ptxas")),
                                reason="nvcc/ptxas not found (PATH or the CUDA wheels)")
FLASH = Path(__file__).resolve().parents[1] / "data" / "public_kernels" / "flash-attention-minimal"

# The shapes of binding code in public extension files (LeetCUDA's, flash-attention-minimal's): binding macros with
# continuation lines, their calls without a semicolon, a host wrapper per kernel, PYBIND11_MODULE, a namespace
# holding kernels and a wrapper, and the words in comments and strings, which are not code.
EXTENSION = r'''#include <cuda_runtime.h>
#include <torch/extension.h>
#include "helpers.cuh"  // torch is mentioned here, in a comment only
#define WARP 32
#define CHECK_T(x) TORCH_CHECK(x.is_cuda(), "need a CUDA tensor")
#define BIND(name) m.def(#name, &name, #name);
#define LAUNCH_WRAPPER(tag, type)                       \
  void scale_##tag(torch::Tensor x) {                   \
    CHECK_T(x);                                         \
    scale<type><<<1, WARP>>>((type*)x.data_ptr(), 2);   \
  }

template <typename T>
__global__ void scale(T* x, int n) { if (threadIdx.x < n) x[threadIdx.x] *= T(2); }
template __global__ void scale<float>(float*, int);

struct Params { int n; const char* note = "{ not a brace torch:: }"; };

namespace ops {
__device__ float twice(float v) { return 2.0f * v; }
__global__ void twice_all(float* x, Params p) { if (threadIdx.x < p.n) x[threadIdx.x] = twice(x[threadIdx.x]); }
torch::Tensor twice_all_host(torch::Tensor x) {
  twice_all<<<1, WARP>>>(x.data_ptr<float>(), Params{(int)x.numel()});
  return x;
}
}  // namespace ops

extern "C" __global__ void plain(float* x) { x[threadIdx.x] = 1.0f; }

void launch_plain(float* x, cudaStream_t s) { plain<<<1, WARP, 0, s>>>(x); }

LAUNCH_WRAPPER(f32, float)
LAUNCH_WRAPPER(f64, double)

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  BIND(scale_f32)
  m.def("twice", &ops::twice_all_host);
}
'''


def _kept(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip()]


def test_the_binding_is_left_out_and_every_kept_character_stays_where_it_was():
    part = device_part(EXTENSION)
    assert part is not None and len(part.text) == len(EXTENSION)
    for got, was in zip(part.text.splitlines(), EXTENSION.splitlines()):
        assert got.strip() == "" or got == was  # a line is kept whole or left out (these lines hold one piece each)
    kept = "\n".join(_kept(part.text))
    for gone in ("torch/extension.h", "CHECK_T", "LAUNCH_WRAPPER", "twice_all_host", "PYBIND11_MODULE",
                 'm.def("twice'):
        assert gone not in kept, gone
    assert "#define BIND(name)" in kept  # a macro that names no framework stays (unused, harmless)
    for stays in ('#include "helpers.cuh"', "#define WARP 32", "__global__ void scale(T* x", "template __global__",
                  "struct Params", "namespace ops {", "__device__ float twice", "__global__ void twice_all(",
                  "}  // namespace ops", 'extern "C" __global__ void plain', "void launch_plain("):
        assert stays in kept, stays
    lines = EXTENSION.splitlines()
    assert all(lines[a - 1].strip() and lines[b - 1].strip() for a, b in part.lines)
    assert part.lines[0] == (2, 2) and lines[part.lines[-1][1] - 1] == "}"  # the include ... PYBIND11_MODULE's end
    assert device_part("#include <cuda_runtime.h>\n__global__ void k() {}\n") is None  # no binding: nothing to do


@needs_nvcc
def test_the_extension_compiles_to_its_kernels(tmp_path, caplog):
    src = tmp_path / "ext.cu"
    src.write_text(EXTENSION)
    (tmp_path / "helpers.cuh").write_text("#pragma once\n__device__ inline __half halve(__half v) { return v; }\n")
    cc = CudaCompiler("sm_90", tmp_path / "w", 300)
    with caplog.at_level(logging.WARNING, logger="compileiq_lab.measure.nvcc"):
        ptx = cc.ptx(src, [])
    assert ptx.ok, ptx.error  # helpers.cuh found beside the source, __half known without torch's headers
    assert "ext.cu is a PyTorch extension's file: its binding (lines 2, 5, 7-11, 22-25, 32-33, 35-38)" in caplog.text
    text = ptx.path.read_text() if ptx.path else ""
    assert "_Z5scaleIfEvPT_i" in text and "_ZN3ops9twice_allEPf6Params" in text and ".entry plain" in text
    assert sorted(cc.headers(src, [])) == [tmp_path / "helpers.cuh"]  # the device part's headers, scanned
    broken = tmp_path / "broken.cu"
    broken.write_text(EXTENSION.replace("x[threadIdx.x] = 1.0f;", "x[threadIdx.x] = undefined_name;"))
    bad = cc.ptx(broken, [])
    line = 1 + EXTENSION.splitlines().index('extern "C" __global__ void plain(float* x) { x[threadIdx.x] = 1.0f; }')
    assert not bad.ok and f"broken.cu({line})" in bad.error and "undefined_name" in bad.error  # the user's file, line


@needs_nvcc
def test_flash_attention_minimal_as_published_builds_the_code_of_its_hand_cut_kernel(tmp_path):
    cc = CudaCompiler("sm_90", tmp_path / "w", 300)
    published = cc.full(FLASH / "flash.cu", ["-O3"], [])
    assert published.ok, published.error
    by_hand = cc.full(FLASH / "flash_kernel.cu", ["-O3"], [])
    assert by_hand.ok, by_hand.error
    kernel = "_Z14forward_kernelPKfS0_S0_iiiiiifPfS1_S1_"
    assert cubin_entries(published.path) == cubin_entries(by_hand.path) == [kernel]
    assert inspect_elf(published.path).code_hash == inspect_elf(by_hand.path).code_hash


@needs_nvcc
def test_a_runs_identity_counts_the_headers_of_the_device_part(tmp_path):
    from compileiq_lab.kernels import load_kernel
    from compileiq_lab.kernels.headers import headers_sha256

    (tmp_path / "ext.cu").write_text(EXTENSION)
    helper = tmp_path / "helpers.cuh"
    helper.write_text("#pragma once\n")
    spec = load_kernel(str(tmp_path / "ext.cu"))
    first = headers_sha256(spec, "sm_90", "nvcc")
    assert first is not None
    helper.write_text("#pragma once\n__device__ inline int one() { return 1; }\n")
    second = headers_sha256(spec, "sm_90", "nvcc")
    assert second not in (None, first)  # the header the device part reads
    (tmp_path / "unrelated.cuh").write_text("// not included\n")
    assert headers_sha256(spec, "sm_90", "nvcc") == second  # scanned, not every header beside the file
