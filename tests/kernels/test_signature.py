"""A kernel spec's launch arguments are checked against the kernel's parameters (its PTX) before a GPU run."""

from __future__ import annotations

from pathlib import Path

import pytest

from compileiq_lab.exceptions import ConfigurationError
from compileiq_lab.kernels import KernelRun, load_kernel
from compileiq_lab.kernels.signature import launch_problem
from compileiq_lab.measure.entries import ptx_param_types
from compileiq_lab.testing import tool_available

needs_nvcc = pytest.mark.skipif(not tool_available("nvcc"), reason="nvcc is not on PATH")

_TOML = """name = "scale"
language = "cuda"
source = "scale.cu"
entry = "scale"

[params]
n = 1024

[[inputs]]
name = "x"
dtype = "float32"
shape = ["n"]

[[outputs]]
name = "y"
dtype = "float32"
shape = ["n"]

[check]
reference = "reference"

[launch]
grid = [4, 1, 1]
block = [256, 1, 1]
args = {args}
"""


def _folder(tmp_path: Path, signature: str, args: str) -> Path:
    folder = tmp_path / "scale"
    folder.mkdir()
    body = "  int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = 2.0f * x[i]; }\n"
    (folder / "scale.cu").write_text(f'extern "C" __global__ void scale({signature}) {{\n{body}')
    (folder / "kernel.toml").write_text(_TOML.replace("{args}", args))
    (folder / "reference.py").write_text("def reference(inputs, params):\n    return {'y': 2 * inputs['x']}\n")
    return folder


def test_ptx_parameter_types_in_their_forms():
    ptx = """.visible .entry k(
        .param .u64 .ptr .global .align 4 k_param_0,   // a pointer, newer PTX's spelling
        .param .align 4 .b8 k_param_1[12],
        .param .f32 k_param_2
    )
    { ret; }
    .visible .entry empty()
    { ret; }"""
    assert ptx_param_types(ptx, "k") == ["u64", "b8[12]", "f32"]
    assert ptx_param_types(ptx, "empty") == [] and ptx_param_types(ptx, "other") is None


@needs_nvcc
def test_a_64_bit_or_float_scalar_is_refused_before_a_gpu_run(tmp_path):
    folder = _folder(tmp_path, "const float* x, float* y, size_t n", '["x", "y", "n"]')
    problem = launch_problem(load_kernel(folder), "sm_90", tmp_path / "w", 60.0)
    assert "n is a [params] value, passed as a 32-bit int, where parameter 2 is a 64-bit integer" in problem
    assert "declare the parameter int" in problem
    with pytest.raises(ConfigurationError, match="parameter 2 is a 64-bit integer"):  # before any GPU is asked for
        KernelRun(str(folder), "ptxas", ["runtime"], workdir=tmp_path / "run")


@needs_nvcc
def test_arguments_in_the_wrong_number_or_order_are_named(tmp_path):
    swapped = _folder(tmp_path, "const float* x, float* y, int n", '["n", "x", "y"]')
    problem = launch_problem(load_kernel(swapped), "sm_90", tmp_path / "w", 60.0)
    assert "n is a [params] value" in problem and "y is a buffer, passed as a pointer, where parameter 2 is .u32" \
        in problem
    (swapped / "kernel.toml").write_text(_TOML.replace("{args}", '["x", "y"]'))
    assert "names 2 (x, y) and the kernel takes 3" in launch_problem(load_kernel(swapped), "sm_90", tmp_path / "w",
                                                                      60.0)
    (swapped / "kernel.toml").write_text(_TOML.replace("{args}", '["x", "y", "n"]'))
    assert launch_problem(load_kernel(swapped), "sm_90", tmp_path / "w", 60.0) == ""  # int n: as it is passed
