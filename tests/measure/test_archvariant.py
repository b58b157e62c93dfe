"""Arch-specific code: a source whose PTX for sm_90 differs from its PTX for sm_90a is named, others are not."""

from __future__ import annotations

from pathlib import Path

import pytest

from compileiq_lab.measure.archvariant import feature_test, variant_problem
from compileiq_lab.measure.nvcc import CudaCompiler
from compileiq_lab.testing import tool_available
from compileiq_lab.toolchain.context import BuildContext

needs_nvcc = pytest.mark.skipif(not (tool_available("nvcc") and tool_available("ptxas")),
                                reason="nvcc/ptxas not found (PATH or the CUDA wheels)")

# A header in the shape of CuTe's mma_sm90_gmma.hpp: the arch-specific instruction under the feature macro, a trap
# in its place elsewhere.
FENCE_H = r"""
#pragma once
__device__ __forceinline__ void fence_or_trap() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#else
  asm volatile("trap;");
#endif
}
__device__ __forceinline__ int unused_feature() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  return 1;
#else
  return 0;
#endif
}
"""
USES = '#include "fence.h"\n__global__ void k(float* x) { fence_or_trap(); x[threadIdx.x] = 1.0f; }\n'
INCLUDES_ONLY = '#include "fence.h"\n__global__ void k(float* x) { x[threadIdx.x] = 2.0f; }\n'


def _kernel(tmp_path: Path, body: str) -> Path:
    (tmp_path / "include").mkdir(exist_ok=True)
    (tmp_path / "include" / "fence.h").write_text(FENCE_H)
    src = tmp_path / "k.cu"
    src.write_text(body)
    return src


def test_feature_test_names_the_macro_and_the_file(tmp_path):
    src = _kernel(tmp_path, USES)
    header = tmp_path / "include" / "fence.h"
    assert feature_test([src, header]) == ("__CUDA_ARCH_FEAT_SM90_ALL", header)
    assert feature_test([src, tmp_path / "missing.h"]) is None
    (tmp_path / "f.cu").write_text("#if __CUDA_ARCH_SPECIFIC__ >= 1000\n#endif\n")
    assert feature_test([tmp_path / "f.cu"]) == ("__CUDA_ARCH_SPECIFIC__", tmp_path / "f.cu")


@needs_nvcc
def test_code_only_the_arch_specific_target_builds_is_named_with_the_fix(tmp_path):
    src = _kernel(tmp_path, USES)
    context = BuildContext.make([tmp_path / "include"])
    text = variant_problem(CudaCompiler("sm_90", tmp_path / "w", 300, context), src, [])
    assert "k.cu compiles to other code for sm_90a than for sm_90" in text
    assert "__CUDA_ARCH_FEAT_SM90_ALL (in fence.h, which it includes)" in text and "--arch sm_90a" in text
    # built for the variant already, or for a target without variants: nothing to say
    assert variant_problem(CudaCompiler("sm_90a", tmp_path / "w", 300, context), src, []) == ""
    assert variant_problem(CudaCompiler("sm_80", tmp_path / "w", 300, context), src, []) == ""


@needs_nvcc
def test_a_source_that_includes_the_feature_code_and_uses_none_is_not_named(tmp_path):
    src = _kernel(tmp_path, INCLUDES_ONLY)
    context = BuildContext.make([tmp_path / "include"])
    assert variant_problem(CudaCompiler("sm_90", tmp_path / "w", 300, context), src, []) == ""
