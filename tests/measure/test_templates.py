"""Template __global__ kernels of a source, and the explicit instantiation a message tells the user to add."""

from __future__ import annotations

import pytest

from compileiq_lab.exceptions import ConfigurationError
from compileiq_lab.measure.entries import ptx_entries, resolve_entry
from compileiq_lab.measure.templates import instantiation_hint, template_kernels
from compileiq_lab.testing import tool_available
from compileiq_lab.toolchain.tools import find_tool, run_tool

needs_nvcc = pytest.mark.skipif(not tool_available("nvcc"), reason="nvcc not found (PATH or the CUDA wheels)")

# The shapes public kernel files use: every template parameter defaulted (one with a shift and a division in its
# default), a kernel with none defaulted, __launch_bounds__ between the template and the name, a function parameter
# with a default argument, and what is not a template kernel (a device function template, a commented-out kernel,
# a plain kernel, a kernel name inside a string).
SOURCE = """
#include <cstdint>
#define WARP 32
template <const int kWarpSize = WARP>
__device__ __forceinline__ float warp_sum(float v) { return v; }

template <const int NUM_THREADS = (1 << 8) / 4, typename T = float>
__global__ void softmax_kernel(T *x, T *y, int N) { if (threadIdx.x < NUM_THREADS) y[0] = x[0] + N; }

template <typename T, int BLOCK>
__global__ void __launch_bounds__(BLOCK) scale(T *__restrict__ out, const T *in, T alpha, int n = 0) {
  out[threadIdx.x] = alpha * in[threadIdx.x] + n;
}

template <int A = 4, int B = A * 2>
__global__ void dependent(float (*x)[B]) { x[0][0] = A; }
template <> __global__ void scale<int, 32>(int *__restrict__ out, const int *in, int alpha, int n) { out[0] = n; }

// template <int N = 4> __global__ void commented_out(float *x) {}
/* template <int N = 4>
__global__ void block_commented(float *x) {} */
__global__ void plain(float *x) { x[0] = 1.0f; }
const char *s = "template <int N = 4> __global__ void in_a_string(float *x) {}";
"""


def test_template_kernels_are_found_with_their_parameters():
    kernels = template_kernels(SOURCE)
    assert [k.name for k in kernels] == ["softmax_kernel", "scale", "dependent"]  # not the specialisation
    softmax, scale, dependent = kernels
    assert dependent.instantiation() == "template __global__ void dependent<>(float (*x)[4 * 2]);"
    assert softmax.defaulted and not scale.defaulted
    assert softmax.instantiation() == "template __global__ void softmax_kernel<>(float *x, float *y, int N);"
    # the placeholders are the template parameters' names; a default argument is left out (not allowed there)
    assert scale.instantiation() == ("template __global__ void scale<T, BLOCK>(T *__restrict__ out, const T *in, "
                                     "T alpha, int n);")


def test_the_hint_names_the_entrys_template_or_every_one(tmp_path):
    src = tmp_path / "k.cu"
    src.write_text(SOURCE)
    every = instantiation_hint(src)
    assert "k.cu declares template kernels" in every and "softmax_kernel<>" in every and "scale<T, BLOCK>" in every
    assert "each template parameter's name replaced by its value" in every
    one = instantiation_hint(src, "softmax_kernel<128, float>")
    assert "softmax_kernel<>" in one and "scale" not in one and "replaced" not in one
    assert instantiation_hint(src, "layernorm", strict=True) == ""
    assert instantiation_hint(src, "layernorm") == every
    assert instantiation_hint(None) == instantiation_hint(tmp_path / "missing.cu") == ""
    plain = tmp_path / "plain.cu"
    plain.write_text("__global__ void k(float *x) {}\n")
    assert instantiation_hint(plain) == ""


def test_an_entry_that_names_an_uninstantiated_template_is_told_the_line(tmp_path):
    src = tmp_path / "k.cu"
    src.write_text(SOURCE)
    with pytest.raises(ConfigurationError) as none:  # a module of no kernel: the named template's line
        resolve_entry("softmax_kernel", [], "k.cu", src)
    assert "holds no kernel" in str(none.value) and "`template __global__ void softmax_kernel<>(" in str(none.value)
    with pytest.raises(ConfigurationError) as other:  # the module has kernels, not this one
        resolve_entry("scale", ["plain"], "k.cu", src)
    text = str(other.value)
    assert "the kernels are: plain" in text and "or, for the template:" in text and "scale<T, BLOCK>" in text
    with pytest.raises(ConfigurationError) as unknown:  # a name that is no template of the file: no line
        resolve_entry("layernorm", ["plain"], "k.cu", src)
    assert "for the template" not in str(unknown.value)


@needs_nvcc
def test_the_suggested_lines_give_the_kernels_code(tmp_path):
    """The lines the message gives, added at the end of the file, compile and make one kernel each (the placeholders
    written as values, as the message says)."""
    src = tmp_path / "k.cu"
    lines = [k.instantiation() for k in template_kernels(SOURCE)]
    lines[1] = lines[1].replace("<T, BLOCK>", "<float, 128>").replace("T ", "float ")
    src.write_text(SOURCE + "\n".join(lines) + "\n")
    out = tmp_path / "k.ptx"
    done = run_tool([find_tool("nvcc"), "-arch=sm_90", "-ptx", str(src), "-o", str(out)], timeout_s=120)
    assert done.returncode == 0, done.stderr
    names = ptx_entries(out.read_text())
    assert len(names) == 5 and sum("softmax_kernel" in n for n in names) == 1
    assert sum("dependent" in n for n in names) == 1
    assert sum("scale" in n for n in names) == 2  # the specialisation and the instantiation
