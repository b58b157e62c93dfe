"""Bundled kernels: specs load, C kernels match their references, CUDA kernels compile, the loader validates."""

from __future__ import annotations

import hashlib
import logging
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from compileiq_lab.exceptions import CompileIQLabError, ConfigurationError
from compileiq_lab.kernels import KernelSpec, eval_expr, kernels_root, list_kernels, load_kernel
from compileiq_lab.testing import tool_available
from compileiq_lab.toolchain.tools import find_tool

CUDA_KERNELS = ["attention", "reduction", "sgemm", "softmax", "stencil"]
C_KERNELS = ["dot", "matmul_c", "stencil_c"]
ALL_KERNELS = sorted(CUDA_KERNELS + C_KERNELS)
CC = shutil.which("gcc") or shutil.which("cc")
needs_cc = pytest.mark.skipif(CC is None, reason="no C compiler (gcc or cc) on PATH")
needs_nvcc = pytest.mark.skipif(not tool_available("nvcc"), reason="nvcc is not on PATH")
C_TYPES = {"float32": "float", "float64": "double", "int32": "int"}


def _knob_variants(names: list[str]) -> list[tuple[str, dict[str, Any]]]:
    """Defaults of each kernel, then every other knob value one at a time."""
    cases: list[tuple[str, dict[str, Any]]] = []
    for name in names:
        spec = load_kernel(name)
        cases.append((name, {}))
        cases += [(name, {knob: v}) for knob, values in spec.defines.items() for v in values[1:]]
    return cases


@pytest.fixture(autouse=True)
def _bundled_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COMPILEIQ_KERNELS", raising=False)


# -- bundled kernels ----------------------------------------------------------------------------


def test_list_kernels_has_all_eight_sorted() -> None:
    assert list_kernels() == ALL_KERNELS


@pytest.mark.parametrize("name", ALL_KERNELS)
def test_bundled_kernel_loads_with_consistent_buffers(name: str) -> None:
    spec = load_kernel(name)
    assert spec.name == name and spec.folder == kernels_root() / name
    assert spec.language == ("cuda" if name in CUDA_KERNELS else "c")
    assert spec.source_path.is_file() and spec.source_path.suffix == (".cu" if spec.language == "cuda" else ".c")
    assert not spec.static_only and spec.reference == "reference" and spec.description
    inputs = spec.make_inputs()
    assert list(inputs) == [b.name for b in spec.inputs]
    for buf in spec.inputs:
        arr = inputs[buf.name]
        assert arr.shape == spec.shape_of(buf) and arr.dtype == np.dtype(buf.dtype) and arr.flags.c_contiguous
    expected = spec.reference_outputs(inputs)
    assert {k: v.shape for k, v in expected.items()} == {b.name: spec.shape_of(b) for b in spec.outputs}
    assert all(np.isfinite(v).all() for v in expected.values())


@pytest.mark.parametrize("name", CUDA_KERNELS)
def test_cuda_launch_covers_the_problem_and_fits_a_block(name: str) -> None:
    spec = load_kernel(name)
    for knob, values in spec.defines.items():
        for value in values:
            grid, block, shared = spec.launch_dims({knob: value})
            assert len(grid) == len(block) == 3 and min(grid + block) >= 1
            assert block[0] * block[1] * block[2] <= 1024 and 0 <= shared <= 48 * 1024
    assert set(spec.args) <= set(spec.params) | {b.name for b in spec.inputs + spec.outputs}


def test_sgemm_launch_dims_follow_the_tile_knob() -> None:
    spec = load_kernel("sgemm")
    assert spec.launch_dims() == ((512 // 16, 512 // 16, 1), (16, 16, 1), 0)
    assert spec.launch_dims({"TILE": 32}) == ((16, 16, 1), (32, 32, 1), 0)
    assert load_kernel("attention").launch_dims()[2] == (1024 + 64) * 4


# -- C kernels: compile with a harness, run, compare -----------------------------------------------


def _harness(spec: KernelSpec) -> str:
    """A C main that freads the inputs, poisons the outputs, calls cil_kernel twice and fwrites the outputs."""
    bufs = spec.inputs + spec.outputs
    lines = ["#include <stdio.h>", "#include <stdlib.h>", "#include <string.h>",
             "void cil_kernel(void **bufs, const long *params);", "int main(void) {",
             f"    static const long params[] = {{{', '.join(str(v) for v in spec.params.values()) or '0'}}};",
             f"    void *bufs[{len(bufs)}];", "    FILE *f;"]
    for i, buf in enumerate(bufs):
        count, ctype = int(np.prod(spec.shape_of(buf))), C_TYPES[buf.dtype]
        lines += [f"    bufs[{i}] = malloc({count} * sizeof({ctype}));", f"    if (!bufs[{i}]) return 2;"]
        if i < len(spec.inputs):
            lines += [f'    f = fopen("{buf.name}.bin", "rb");',
                      f"    if (!f || fread(bufs[{i}], sizeof({ctype}), {count}, f) != {count}) return 3;",
                      "    fclose(f);"]
        else:  # 0x7f bytes: huge floats / ints, so a kernel that accumulates into its output fails
            lines.append(f"    memset(bufs[{i}], 0x7f, {count} * sizeof({ctype}));")
    lines += ["    cil_kernel(bufs, params);", "    cil_kernel(bufs, params);"]
    for i, buf in enumerate(spec.outputs, start=len(spec.inputs)):
        count, ctype = int(np.prod(spec.shape_of(buf))), C_TYPES[buf.dtype]
        lines += [f'    f = fopen("{buf.name}.out", "wb");',
                  f"    if (!f || fwrite(bufs[{i}], sizeof({ctype}), {count}, f) != {count}) return 4;",
                  "    fclose(f);"]
    return "\n".join(lines + ["    return 0;", "}", ""])


def _run_c_kernel(spec: KernelSpec, workdir: Path, defines: dict[str, Any],
                  inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    for name, arr in inputs.items():
        arr.tofile(workdir / f"{name}.bin")
    (workdir / "harness.c").write_text(_harness(spec))
    exe = workdir / "kernel_run"
    cmd = [CC, "-O2", "-std=c11", *spec.define_args(defines), str(workdir / "harness.c"), str(spec.source_path),
           "-o", str(exe), "-lm"]
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    done = subprocess.run([str(exe)], cwd=workdir, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, f"harness exited {done.returncode}: {done.stderr}"
    return {b.name: np.fromfile(workdir / f"{b.name}.out", dtype=b.dtype).reshape(spec.shape_of(b))
            for b in spec.outputs}


@needs_cc
@pytest.mark.parametrize(("name", "defines"), _knob_variants(C_KERNELS))
def test_c_kernel_matches_reference(name: str, defines: dict[str, Any], tmp_path: Path) -> None:
    spec = load_kernel(name)
    inputs = spec.make_inputs()
    outputs = _run_c_kernel(spec, tmp_path, defines, inputs)
    ok, message = spec.check(outputs, spec.reference_outputs(inputs))
    assert ok, message


@needs_cc
@pytest.mark.parametrize("name", C_KERNELS)
def test_c_kernel_compiles_without_warnings(name: str, tmp_path: Path) -> None:
    spec = load_kernel(name)
    cmd = [CC, "-O2", "-std=c11", "-Wall", "-Wextra", "-pedantic", *spec.define_args(), "-c",
           str(spec.source_path), "-o", str(tmp_path / "k.o")]
    done = subprocess.run(cmd, capture_output=True, text=True)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert spec.entry == "cil_kernel"


# -- CUDA kernels: compile to PTX -------------------------------------------------------------------


@needs_nvcc
@pytest.mark.parametrize(("name", "defines"), _knob_variants(CUDA_KERNELS))
def test_cuda_kernel_compiles_to_ptx(name: str, defines: dict[str, Any], tmp_path: Path) -> None:
    spec = load_kernel(name)
    ptx = tmp_path / f"{name}.ptx"
    cmd = [find_tool("nvcc"), "-arch=sm_90", "-ptx", *spec.define_args(defines), str(spec.source_path), "-o", str(ptx)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "warning" not in done.stderr.lower(), done.stderr
    assert f".entry {spec.entry}(" in ptx.read_text()


# -- check, inputs, references ----------------------------------------------------------------------


def test_inputs_are_deterministic_by_seed() -> None:
    spec = load_kernel("attention")
    a, b, c = spec.make_inputs(seed=3), spec.make_inputs(seed=3), spec.make_inputs(seed=4)
    assert all(np.array_equal(a[k], b[k]) for k in a)
    assert not any(np.array_equal(a[k], c[k]) for k in a)
    assert all(np.array_equal(x, y) for x, y in zip(spec.make_inputs().values(), spec.make_inputs(0).values()))
    assert -1.0 <= a["Q"].min() and a["Q"].max() < 1.0


def test_inits_zeros_arange_and_int_uniform(tmp_path: Path) -> None:
    spec = load_kernel("reduction")
    inputs = spec.make_inputs()
    assert not inputs["partials"].any() and inputs["counter"].dtype == np.int32 and inputs["counter"][0] == 0
    folder = _copy_kernel("dot", tmp_path)
    _edit(folder, 'init = "uniform"', 'init = "arange"', count=1)
    _edit(folder, 'dtype = "float32"\nshape = ["n"]\ninit = "uniform"', 'dtype = "int32"\nshape = ["n"]')
    inputs = load_kernel(folder).make_inputs()
    assert np.array_equal(inputs["x"], np.arange(1 << 20, dtype=np.float32))
    assert inputs["y"].dtype == np.int32 and -100 <= inputs["y"].min() and inputs["y"].max() < 100


def test_check_passes_equal_and_names_the_worst_element() -> None:
    spec = load_kernel("matmul_c")
    expected = spec.reference_outputs(spec.make_inputs())
    ok, message = spec.check({"C": expected["C"].astype(np.float32)}, expected)
    assert ok, message
    bad = expected["C"].astype(np.float32)
    bad[3, 7] += 0.5
    bad[10, 2] += 0.01
    ok, message = spec.check({"C": bad}, expected)
    assert not ok and "C[3, 7]" in message and "abs error 0.5" in message
    ok, message = spec.check({}, expected)
    assert not ok and "missing" in message
    nan = expected["C"].copy()
    nan[1, 1] = np.nan
    ok, message = spec.check({"C": nan}, expected)
    assert not ok and "C[1, 1]" in message


def test_reference_runs_on_copies_and_leaves_sys_modules_alone() -> None:
    spec = load_kernel("stencil_c")
    inputs = spec.make_inputs()
    before, snapshot = set(sys.modules), inputs["u"].copy()
    out = spec.reference_outputs(inputs)["out"]
    assert set(sys.modules) == before and np.array_equal(inputs["u"], snapshot)
    assert np.array_equal(out[0], inputs["u"][0]) and not np.allclose(out[1:-1, 1:-1], inputs["u"][1:-1, 1:-1])


def test_define_args_use_defaults_and_reject_unknown_knobs() -> None:
    spec = load_kernel("stencil")
    assert spec.define_args() == ["-DBLOCK_X=32", "-DBLOCK_Y=8"]
    assert spec.define_args({"BLOCK_Y": 16}) == ["-DBLOCK_X=32", "-DBLOCK_Y=16"]
    with pytest.raises(ConfigurationError, match=r"BLOCK_Z.*Drop"):
        spec.define_args({"BLOCK_Z": 2})
    assert load_kernel("stencil_c").define_args() == []


def test_source_sha256_is_the_file_digest() -> None:
    spec = load_kernel("dot")
    assert spec.source_sha256() == hashlib.sha256(spec.source_path.read_bytes()).hexdigest()


# -- eval_expr -------------------------------------------------------------------------------------


@pytest.mark.parametrize(("expr", "value"), [
    ("n // (2 * BLOCK)", 2048), ("(n + BLOCK - 1) // BLOCK", 4096), ("n % 1000", 576), ("2 ** 10 - -3", 1027),
    ("+BLOCK * 4", 1024), (" n * n ", 1 << 40), (7, 7),
])
def test_eval_expr_accepts_integer_arithmetic(expr: Any, value: int) -> None:
    assert eval_expr(expr, {"n": 1 << 20, "BLOCK": 256}) == value


@pytest.mark.parametrize(("expr", "fragment"), [
    ("abs(n)", "Call"), ("n.bit_length()", "Call"), ("n.real", "Attribute"), ("m + 1", "names in ['n']"),
    ("n / 2", "Use // for division"), ("n * 1.5", "Constant"), ("'a' * n", "Constant"), ("True + n", "Constant"),
    ("(lambda: 1)()", "Call"), ("[n][0]", "Subscript"), ("n if n else 1", "IfExp"), ("n // 0", "non-zero"),
    ("2 ** 1000", "exponents"), ("n +", "syntax"), ("__import__('os')", "Call"), (None, "int or a str"),
])
def test_eval_expr_rejects_everything_else(expr: Any, fragment: str) -> None:
    with pytest.raises(ConfigurationError, match="must hold, but got") as info:
        eval_expr(expr, {"n": 8})
    assert fragment in str(info.value)


# -- validation of broken specs -------------------------------------------------------------------


def _copy_kernel(name: str, tmp_path: Path) -> Path:
    folder = tmp_path / name
    shutil.copytree(kernels_root() / name, folder)
    return folder


def _edit(folder: Path, old: str, new: str, count: int = -1) -> None:
    toml = folder / "kernel.toml"
    text = toml.read_text()
    assert old in text, old
    toml.write_text(text.replace(old, new, count))


def test_bad_language_message_states_rule_value_and_fix(tmp_path: Path) -> None:
    folder = _copy_kernel("dot", tmp_path)
    _edit(folder, 'language = "c"', 'language = "fortran"')
    with pytest.raises(ConfigurationError) as info:
        load_kernel(folder)
    assert str(info.value) == ("kernel.toml of 'dot': `language in ['cuda', 'c', 'ptx']` must hold, but got "
                               "'fortran'. Set language = \"cuda\", \"ptx\" or \"c\".")
    assert isinstance(info.value, CompileIQLabError)


@pytest.mark.parametrize(("kernel", "old", "new", "fragments"), [
    ("dot", 'name = "dot"', 'name = "dot"\nflavour = "mint"', ["top-level keys", "['flavour']", "Remove"]),
    ("dot", 'source = "dot.c"\n', "", ["the keys", "['source']", "Add the missing"]),
    ("dot", 'source = "dot.c"', 'source = "gone.c"', ["source names a file", "'gone.c'", "Fix source"]),
    ("dot", 'name = "dot"', 'name = "dotty"', ["name == folder name", "'dotty'", "rename the folder"]),
    ("dot", 'entry = "cil_kernel"', 'entry = "main"', ['entry == "cil_kernel"', "'main'", "Set entry"]),
    ("dot", 'dtype = "float64"', 'dtype = "complex64"', ["dtype of out in", "'complex64'", "Pick one"]),
    ("dot", 'init = "uniform"', 'init = "gaussian"', ["init of x in", "'gaussian'", "Pick one"]),
    ("dot", 'shape = ["n"]', 'shape = ["n * m"]', ["names in ['n']", "'m'", "Rewrite"]),
    ("dot", "rtol = 1e-9", "rtol = -1.0", ["rtol is a number >= 0", "-1.0", "Write rtol"]),
    ("dot", "atol = 1e-9", "atol = 1e-9\nslack = 2", ["check keys are in", "['slack']", "Remove"]),
    ("dot", "repeats = 10", "repeats = 0", ["repeats is an int >= 1", "0", "Write repeats"]),
    ("dot", "ACCUMULATORS = [4, 1, 2, 8]", "ACCUMULATORS = []", ["non-empty list", "[]", "Write ACCUMULATORS"]),
    ("dot", "n = 1048576", "n = 1.5", ["a C kernel's params are ints", "['n']", "Write them as ints"]),
    ("dot", "n = 1048576", "n = true", ["param n is an int, a float or an int expression", "True", "Write n"]),
    ("sgemm", 'entry = "sgemm"', 'entry = "sgemm\\n(int)"', ["entry is a kernel's name (plain or mangled), its",
                                                           "Write entry"]),
    ("sgemm", "M = 512", "M = 512.0", ["names in ['K', 'N']", "M = 512.0 is a float param", "write M = 512"]),
    ("sgemm", 'dtype = "float32"', 'dtype = "half"', ["dtype of A in", "'half'", 'Write dtype = "float16"']),
    ("sgemm", 'dtype = "float32"', 'dtype = "bfloat16"', ["dtype of A in", "bfloat16 and fp8 buffers are not"]),
    ("sgemm", "M = 512", "M = 512\nalpha = inf", ["param alpha is a finite float", "inf", "Write alpha"]),
    ("sgemm", "K = 512\n", "K = 512\n[[workloads]]\nname = 'w'\nparams = { M = 2.0 }\n",
     ["workload w param M is an int, as the param is", "2.0", "Write M = <int>"]),
    ("dot", "n = 1048576", "n = 1048576\nx = 3", ["distinct", "['x']", "Rename"]),
    ("dot", "[run]", '[launch]\ngrid = [1]\nblock = [1]\nargs = []\n[run]',
     ["whose entry is cil_kernel has no [launch]", "['args',", "Remove"]),
    ("sgemm", '"A", "B", "C", "M"', '"A", "B", "D", "M"', ["args are names in", "['D']", "Name only"]),
    ("sgemm", 'block = ["TILE", "TILE", 1]\n', "", ["grid, block and args", "['args',", "Add the missing"]),
    ("sgemm", '"(M + TILE - 1) // TILE"', '"M / TILE"', ["kernel.toml of 'sgemm'", "Use // for division"]),
    ("sgemm", "M = 512", "M = 0", ["every buffer dim is >= 1", "(0, 512)", "Fix the shapes"]),
])
def test_broken_spec_fails_at_load_with_rule_value_and_fix(tmp_path: Path, kernel: str, old: str, new: str,
                                                           fragments: list[str]) -> None:
    folder = _copy_kernel(kernel, tmp_path)
    _edit(folder, old, new)
    with pytest.raises(ConfigurationError, match="must hold, but got") as info:
        load_kernel(folder)
    for fragment in fragments:
        assert fragment in str(info.value), str(info.value)


def test_missing_reference_file_and_bad_toml_fail_at_load(tmp_path: Path) -> None:
    folder = _copy_kernel("dot", tmp_path)
    (folder / "reference.py").unlink()
    with pytest.raises(ConfigurationError, match=r"reference\.py is next to kernel\.toml.*Add reference\.py"):
        load_kernel(folder)
    (folder / "kernel.toml").write_text("name = [")
    with pytest.raises(ConfigurationError, match="valid TOML"):
        load_kernel(folder / "kernel.toml")


def test_reference_that_returns_the_wrong_shape_is_reported(tmp_path: Path) -> None:
    folder = _copy_kernel("dot", tmp_path)
    (folder / "reference.py").write_text("def reference(inputs, params):\n    return {'out': [1.0, 2.0]}\n")
    spec = load_kernel(folder)
    with pytest.raises(ConfigurationError, match=r"reference's out has shape \(1,\).*\(2,\)"):
        spec.reference_outputs(spec.make_inputs())


# -- bare files, paths, the kernels root ----------------------------------------------------------


def test_bare_cuda_file_loads_as_static_only(tmp_path: Path) -> None:
    src = tmp_path / "saxpy.cu"
    src.write_text('extern "C" __global__ void saxpy(float a, float* x) { x[threadIdx.x] *= a; }\n')
    spec = load_kernel(src)
    assert (spec.name, spec.language, spec.entry, spec.static_only) == ("saxpy", "cuda", None, True)
    assert spec.inputs == () and spec.outputs == () and spec.reference is None and spec.source_path == src
    assert spec.source_sha256() == hashlib.sha256(src.read_bytes()).hexdigest()
    with pytest.raises(ConfigurationError, match="names a reference"):
        spec.reference_outputs({})
    (tmp_path / "k.c").write_text("int f(void) { return 1; }\n")
    assert load_kernel(str(tmp_path / "k.c")).language == "c"


def test_unknown_names_and_suffixes_are_rejected(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match=r"bundled name.*'nope'.*Use one of \['attention'"):
        load_kernel("nope")
    (tmp_path / "k6.ptx").write_text("//\n")  # a source file named by a path that misses: what is missing is said
    with pytest.raises(ConfigurationError, match=r"kernel file exists.*has no k6\.cu\.ptx \(did you mean 'k6\.ptx'"):
        load_kernel(tmp_path / "k6.cu.ptx")
    with pytest.raises(ConfigurationError, match=r"the folder .*gone does not exist"):
        load_kernel(tmp_path / "gone" / "k.cu")
    (tmp_path / "k.f90").write_text("end\n")
    with pytest.raises(ConfigurationError, match="must hold"):
        load_kernel(tmp_path / "k.f90")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigurationError, match=r"kernel\.toml exists.*no such file"):
        load_kernel(tmp_path / "empty")


def test_kernels_root_follows_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert kernels_root() == Path(__file__).resolve().parents[2] / "kernels"
    _copy_kernel("sgemm", tmp_path)
    monkeypatch.setenv("COMPILEIQ_KERNELS", str(tmp_path))
    assert kernels_root() == tmp_path.resolve() and list_kernels() == ["sgemm"]
    assert load_kernel("sgemm").folder == (tmp_path / "sgemm").resolve()


def test_a_local_folder_named_as_a_bundled_kernel_is_said_to_be_passed_over(tmp_path, monkeypatch, caplog) -> None:
    (tmp_path / "softmax").mkdir()  # a user's own softmax folder, in the folder they work in
    monkeypatch.chdir(tmp_path)
    with caplog.at_level(logging.WARNING, logger="compileiq_lab.kernels.load"):
        spec = load_kernel("softmax")
    assert spec.folder == (kernels_root() / "softmax").resolve()  # the bundled name wins, as documented
    assert "the folder 'softmax' here is not (pass ./softmax for it)" in caplog.text
    caplog.clear()
    monkeypatch.chdir(kernels_root())  # the bundled folder itself: nothing to say
    with caplog.at_level(logging.WARNING, logger="compileiq_lab.kernels.load"):
        load_kernel("softmax")
    assert "pass ./softmax" not in caplog.text


def test_a_param_given_as_an_int_expression_follows_each_workload(tmp_path: Path) -> None:
    """A param that depends on others (flash attention's Tc = ceil(N / Bc)) is written once as an expression: each
    workload that changes N gets its own value, where a number would go stale and fail every output check."""
    folder = _copy_kernel("sgemm", tmp_path)
    _edit(folder, "K = 512\n", 'K = 512\ntiles = "(M + 31) // 32"\nscale = 0.5\nhalf_tiles = "tiles // 2"\n')
    _edit(folder, "name = \"tall\"\nparams = { M = 2048,", "name = \"tall\"\nparams = { half_tiles = 7, M = 2048,")
    spec = load_kernel(folder)
    assert spec.params == {"M": 512, "N": 512, "K": 512, "tiles": 16, "scale": 0.5, "half_tiles": 8}
    assert spec.with_workload("large").params["tiles"] == 32 and spec.with_workload("large").params["half_tiles"] == 16
    tall = spec.with_workload("tall").params
    assert tall["tiles"] == 64 and tall["half_tiles"] == 7  # a workload's own value wins over the expression
    assert spec.reference_outputs(spec.make_inputs())["C"].shape == (512, 512)


@pytest.mark.parametrize(("new", "fragments"), [
    ('K = 512\ntiles = "(M + 31) // X"\n', ["param tiles = '(M + 31) // X'", "names in ['K', 'M', 'N']",
                                           "uses the int params declared before it"]),
    ('K = 512\ntiles = "later * 2"\nlater = 3\n', ["param tiles = 'later * 2'", "declared before it"]),
    ('K = 512\nscale = 0.5\ntiles = "scale * 2"\n', ["param tiles = 'scale * 2'", "names in ['K', 'M', 'N']"]),
    ('K = 512\ntiles = ""\n', ["param tiles is an int expression", "Write tiles ="]),
])
def test_a_broken_param_expression_is_named_at_load(tmp_path: Path, new: str, fragments: list[str]) -> None:
    folder = _copy_kernel("sgemm", tmp_path)
    _edit(folder, "K = 512\n", new)
    with pytest.raises(ConfigurationError) as info:
        load_kernel(folder)
    for fragment in fragments:
        assert fragment in str(info.value), str(info.value)
