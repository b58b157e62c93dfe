"""A kernel spec's launch arguments are checked against the kernel's parameters (its PTX) before a GPU run."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from compileiq_lab.exceptions import ConfigurationError
from compileiq_lab.kernels import KernelRun, load_kernel
from compileiq_lab.kernels.signature import launch_problem, launch_types
from compileiq_lab.measure.entries import ptx_param_types
from compileiq_lab.measure.scalars import buffer_problem, launch_scalars, scalar_problem, typed_scalar
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
def test_size_t_and_float_scalars_are_passed_with_their_parameters_types(tmp_path):
    folder = _folder(tmp_path, "const float* x, float* y, size_t n, float alpha, double beta, short s, char c",
                     '["x", "y", "n", "alpha", "beta", "s", "c"]')
    toml = folder / "kernel.toml"
    toml.write_text(toml.read_text().replace("n = 1024", "n = 1024\nalpha = 1.5\nbeta = 2\ns = -3\nc = 200"))
    kernel = load_kernel(folder)
    problem, types = launch_types(kernel, "sm_90", tmp_path / "w", 60.0)
    assert problem == "" and types == ("u64", "u64", "u64", "f32", "f64", "u16", "u8")
    # what the GPU worker hands CuPy: buffers as they are, each scalar with its parameter's width and kind
    bufs = {"x": "X", "y": "Y"}
    values = launch_scalars(kernel.args or (), kernel.params, types, bufs)
    assert values[:2] == ["X", "Y"]
    assert [(type(v), v) for v in values[2:]] == [(np.int64, 1024), (np.float32, np.float32(1.5)),
                                                  (np.float64, 2.0), (np.int16, -3), (np.uint8, 200)]
    assert launch_scalars(kernel.args or (), kernel.params, (), bufs)[2:4] == [np.int32(1024), np.float32(1.5)]


@needs_nvcc
def test_a_value_its_parameter_cannot_hold_is_refused_before_a_gpu_run(tmp_path):
    folder = _folder(tmp_path, "const float* x, float* y, int n, char c", '["x", "y", "n", "c"]')
    toml = folder / "kernel.toml"
    toml.write_text(toml.read_text().replace("n = 1024", "n = 1024\nc = 1.5"))
    problem = launch_problem(load_kernel(folder), "sm_90", tmp_path / "w", 60.0)
    assert "[params] c = 1.5 goes to parameter 4 (.u8), which needs an int for an 8-bit integer (char, bool) (.u8)" \
        in problem
    with pytest.raises(ConfigurationError, match=r"parameter 4 \(.u8\), which needs an int"):  # before a GPU is asked
        KernelRun(str(folder), "ptxas", ["runtime"], workdir=tmp_path / "run")
    # a workload's value is checked too: 300 does not fit the char c
    toml.write_text(toml.read_text().replace("c = 1.5", "c = 7") + "\n[[workloads]]\nname = \"big\"\n"
                    "params = { c = 300 }\n")
    problem = launch_problem(load_kernel(folder), "sm_90", tmp_path / "w", 60.0)
    assert "workload 'big': [launch] args" in problem and "[params] c = 300" in problem
    assert "-128 to 255" in problem


@needs_nvcc
def test_a_struct_by_value_is_refused_naming_what_is_supported(tmp_path):
    folder = _folder(tmp_path, "const float* x, float* y, int n, int2 p", '["x", "y", "n", "n"]')
    problem = launch_problem(load_kernel(folder), "sm_90", tmp_path / "w", 60.0)
    assert "parameter 4 (.b8[8]), which needs a parameter compileiq-lab can pass: ints and floats (this one is a " \
        "struct" in problem and "wrapper kernel" in problem


def test_typed_scalars_keep_the_bits_of_signed_and_unsigned_values():
    assert typed_scalar(-1, "u32") == np.int32(-1) and type(typed_scalar(-1, "u32")) is np.int32
    assert type(typed_scalar(4294967295, "u32")) is np.uint32  # (nvcc writes .u32 for int and unsigned alike)
    assert scalar_problem(4294967296, "u32").startswith("an int that fits a 32-bit integer")
    assert scalar_problem(True, "u8").startswith("an int") and scalar_problem(1e39, "f32").startswith("a number")
    assert scalar_problem(float("inf"), "f64").startswith("a finite number")
    # with the C++ type known: its signedness, and a pointer is no place for a number
    assert scalar_problem(-1, "u64", "unsigned long") == "an int that fits unsigned long: 0 to 18446744073709551615"
    assert scalar_problem(-1, "u64") == ""  # (a long, as far as PTX tells)
    assert scalar_problem(2, "u8", "bool").endswith("0 to 1")
    assert scalar_problem(1, "u64", "float*").startswith("a buffer")
    assert scalar_problem(1, "b8[8]", "int2").endswith("(this one is int2, passed by value)")
    assert buffer_problem("float32", "u64", "float4*") == ""  # a vector or struct element type is not checked
    assert buffer_problem("int32", "u64", "unsigned int const*") == "a buffer of uint32: it is unsigned int const*"
    with pytest.raises(ValueError, match=r"cannot pass 1.5 as .u64: it needs an int"):
        typed_scalar(1.5, "u64")


@needs_nvcc
def test_arguments_in_the_wrong_number_or_order_are_named(tmp_path):
    swapped = _folder(tmp_path, "const float* x, float* y, int n", '["n", "x", "y"]')
    problem = launch_problem(load_kernel(swapped), "sm_90", tmp_path / "w", 60.0)
    assert "[params] n = 1024 goes to parameter 0, which needs a parameter compileiq-lab can pass" not in problem
    assert "buffer y (float32) goes to parameter 3 (.u32), which needs a pointer, but it is .u32" in problem
    (swapped / "kernel.toml").write_text(_TOML.replace("{args}", '["x", "y"]'))
    assert "names 2 (x, y) and the kernel takes 3" in launch_problem(load_kernel(swapped), "sm_90", tmp_path / "w",
                                                                      60.0)
    (swapped / "kernel.toml").write_text(_TOML.replace("{args}", '["x", "y", "n"]'))
    assert launch_problem(load_kernel(swapped), "sm_90", tmp_path / "w", 60.0) == ""  # int n: as it is passed


@needs_nvcc
def test_a_template_instantiation_is_named_in_kernel_toml_by_its_demangled_signature(tmp_path):
    """The message of an entry that names several instantiations lists their signatures: kernel.toml takes one."""
    folder = _folder(tmp_path, "const float* x, float* y, int n", '["x", "y", "n"]')
    (folder / "scale.cu").write_text(
        "template <typename T> __global__ void scale(const T* x, T* y, int n) {\n"
        "  int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = 2 * x[i]; }\n"
        "template __global__ void scale<float>(const float*, float*, int);\n"
        "template __global__ void scale<double>(const double*, double*, int);\n")
    toml = folder / "kernel.toml"
    signature = "void scale<float>(float const*, float*, int)"
    toml.write_text(toml.read_text().replace('entry = "scale"', f'entry = "{signature}"'))
    run = KernelRun(str(folder), "ptxas", ["registers"], workdir=tmp_path / "run")
    assert run({}).ok
    assert launch_types(load_kernel(folder), "sm_90", tmp_path / "w", 60.0) == ("", ("u64", "u64", "u32"))
    toml.write_text(toml.read_text().replace(signature, "scale"))
    both = KernelRun(str(folder), "ptxas", ["registers"], workdir=tmp_path / "run2")({})
    assert both.status == "compile_error" and "which names 2" in both.error  # it lists the signatures to name
    assert "void scale<double>(double const*, double*, int)" in both.error


@needs_nvcc
def test_a_cpp_kernels_mangled_name_tells_pointers_sizes_signedness_and_element_types_apart(tmp_path):
    """nvcc's PTX declares a pointer, a size_t and a long alike (.u64), an int and an unsigned alike (.u32); a C++
    kernel's mangled name does not, so its launch arguments are checked against those types."""
    folder = _folder(tmp_path, "const float* x, float* y, int n", '["x", "y", "n"]')
    source = folder / "scale.cu"
    source.write_text("__global__ void scale(const __half* x, float* y, size_t n, int k) { y[0] = n + k; }\n")
    source.write_text("#include <cuda_fp16.h>\n" + source.read_text())
    toml = folder / "kernel.toml"
    text = toml.read_text().replace("n = 1024", "n = 1024\nk = 3")
    toml.write_text(text.replace('args = ["x", "y", "n"]', 'args = ["n", "k", "x", "y"]'))  # sizes first
    problem = launch_problem(load_kernel(folder), "sm_90", tmp_path / "w", 60.0)
    assert "[params] n = 1024 goes to parameter 1 (__half const*), which needs a buffer: it is a pointer" in problem
    assert "buffer x (float32) goes to parameter 3 (unsigned long), which needs a pointer, but it is unsigned long" \
        in problem
    toml.write_text(text.replace('args = ["x", "y", "n"]', 'args = ["x", "y", "n", "k"]'))
    problem = launch_problem(load_kernel(folder), "sm_90", tmp_path / "w", 60.0)
    assert problem.startswith("kernel 'scale': [launch] args must fit the parameters of scale(__half const*, float*, "
                              "unsigned long, int)")
    assert "buffer x (float32) goes to parameter 1 (__half const*), which needs a buffer of float16" in problem
    toml.write_text(text.replace('args = ["x", "y", "n"]', 'args = ["x", "y", "n", "k"]').replace('"float32"',
                                                                                              '"float16"', 1))
    assert launch_problem(load_kernel(folder), "sm_90", tmp_path / "w", 60.0) == ""
    fixed = toml.read_text()
    toml.write_text(fixed.replace("k = 3", "k = 3000000000"))  # fits a .u32, not an int
    assert "[params] k = 3000000000 goes to parameter 4 (int), which needs an int that fits int: -2147483648 to " \
        "2147483647" in launch_problem(load_kernel(folder), "sm_90", tmp_path / "w", 60.0)


def test_an_entrys_threads_per_block_directives_are_read_from_its_ptx():
    ptx = """.visible .entry k(
        .param .u64 k_param_0
    )
    .maxntid 128, 1, 1   // __launch_bounds__(128)
    .minnctapersm 2
    { ret; }
    .visible .entry r .reqntid 16, 16 { ret; }
    // .entry c .maxntid 64 { ret; }
    .visible .entry plain(.param .u32 n) { ret; }"""
    from compileiq_lab.measure.entries import ptx_entry_threads

    assert ptx_entry_threads(ptx, "k") == {"maxntid": (128, 1, 1)}
    assert ptx_entry_threads(ptx, "r") == {"reqntid": (16, 16, 1)}
    assert ptx_entry_threads(ptx, "plain") == {} == ptx_entry_threads(ptx, "c")
    assert ptx_param_types(ptx, "r") == [] and ptx_param_types(ptx, "plain") == ["u32"]


@needs_nvcc
def test_a_block_over_the_kernels_launch_bounds_is_refused_before_a_gpu_run(tmp_path):
    folder = _folder(tmp_path, "const float* x, float* y, int n", '["x", "y", "n"]')
    source = folder / "scale.cu"
    source.write_text(source.read_text().replace("__global__ void", "__global__ void __launch_bounds__(128)"))
    problem = launch_problem(load_kernel(folder), "sm_90", tmp_path / "w", 60.0)
    assert "[launch] block must have at most the threads per block scale allows (128: .maxntid 128, 1, 1" in problem
    assert "but it has 256 (256x1x1)" in problem and "launch at most 128 threads per block" in problem
    with pytest.raises(ConfigurationError, match=r"at most the threads per block scale allows"):  # before a GPU
        KernelRun(str(folder), "ptxas", ["runtime"], workdir=tmp_path / "run")
    toml = folder / "kernel.toml"  # within the bound: launchable; a workload's block over it is named
    toml.write_text(toml.read_text().replace("n = 1024", "n = 1024\nthreads = 128")
                    .replace("block = [256, 1, 1]", 'block = ["threads", 1, 1]')
                    + '\n[[workloads]]\nname = "wide"\nparams = { threads = 512 }\n')
    problem = launch_problem(load_kernel(folder), "sm_90", tmp_path / "w2", 60.0)
    assert problem.startswith("kernel 'scale': workload 'wide': [launch] block must have at most") and "512" in problem
    toml.write_text(toml.read_text().split("\n[[workloads]]")[0])
    assert launch_problem(load_kernel(folder), "sm_90", tmp_path / "w3", 60.0) == ""


def test_a_block_other_than_the_required_one_is_refused(tmp_path):
    from compileiq_lab.kernels.signature import block_problem

    kernel = load_kernel(_folder(tmp_path, "const float* x, float* y, int n", '["x", "y", "n"]'))
    problem = block_problem(kernel, "scale", {"reqntid": (128, 1, 1)})
    assert problem == ("kernel 'scale': [launch] block must be the block scale requires (.reqntid 128, 1, 1), but "
                       "it is 256x1x1; a launch with any other block fails: launch it with that block, or drop the "
                       ".reqntid directive")
    assert block_problem(kernel, "scale", {"reqntid": (256, 1, 1), "maxntid": (512, 1, 1)}) == ""
    assert block_problem(kernel, "scale", {}) == ""
