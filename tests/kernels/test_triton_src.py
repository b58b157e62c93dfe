"""Triton kernels to PTX without a GPU (kernels.triton_src): references, signatures and the recorded PTX of
tests/data/triton everywhere; real compiles where Triton is installed, assembled with the installed ptxas."""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from compileiq_lab.exceptions import OptionalDependencyError
from compileiq_lab.kernels.triton_src import TritonPtx, installed_triton_version, triton_arch, triton_ptx
from compileiq_lab.measure.entries import ptx_entries, ptx_header
from compileiq_lab.testing import tool_available
from compileiq_lab.toolchain.tools import find_tool

DATA = Path(__file__).resolve().parents[1] / "data" / "triton"
ADD = DATA / "vector_add.py"
MATMUL = DATA / "matmul.py"
ADD_SIG = "*fp32,*fp32,*fp32,i32"
MATMUL_SIG = "*fp16,*fp16,*fp16" + ",i32" * 9
MATMUL_CONST = {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "GROUP_M": 8}
needs_ptxas = pytest.mark.skipif(not tool_available("ptxas"), reason="needs ptxas")


def _generate() -> ModuleType:
    """tests/data/triton/generate.py, which says how each recorded file is made."""
    spec = importlib.util.spec_from_file_location("_triton_generate", DATA / "generate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its NamedTuple looks the module up while the class is made
    try:
        spec.loader.exec_module(module)
    finally:
        sys.modules.pop(spec.name, None)
    return module


GENERATE = _generate()


def _assemble(ptx: Path, arch: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([find_tool("ptxas"), f"-arch={arch}", str(ptx), "-o", str(tmp_path / "out.cubin")],
                          capture_output=True, text=True, timeout=300)


def _entry_params(ptx_text: str, entry: str) -> list[str]:
    block = re.search(rf"\.entry\s+{entry}\s*\(([^)]*)\)", ptx_text)
    assert block is not None
    return re.findall(r"\.param\s[^,]*?(\w+)\s*(?:,|$)", block.group(1).strip())


@pytest.fixture
def triton() -> ModuleType:
    return pytest.importorskip("triton")


# --- everywhere: references, signatures, options, the recorded PTX ----------------------------------------------


@pytest.mark.parametrize(("gpu", "arch"), [(None, "sm_90a"), ("sm_90", "sm_90a"), ("sm_100", "sm_100a"),
                                            ("sm_80", "sm_80"), ("sm_89", "sm_89"), ("sm_90a", "sm_90a")])
def test_the_default_target_is_the_gpus_own_as_triton_picks_it(gpu, arch):
    assert triton_arch(gpu) == arch


@pytest.mark.parametrize(("kwargs", "said"), [
    ({"arch": "sm90"}, "the target looks like 'sm_90' or 'sm_90a'"),
    ({"arch": "sm_80a"}, "only sm_90 and later have an arch-specific ('a') target"),
    ({"arch": "sm_90a", "ptx_version": "9"}, "the PTX ISA version looks like '9.0'"),
    ({"arch": "sm_90a", "ptx_version": "7.8"}, "at least 8.0, the first that has .target sm_90a"),
    ({"arch": "sm_100a", "ptx_version": "8.5"}, "at least 8.6, the first that has .target sm_100a"),
    ({"arch": "sm_90a", "num_warps": 3}, "num_warps is a power of 2 from 1 to 32"),
    ({"arch": "sm_90a", "num_stages": 0}, "num_stages is an int >= 1"),
])
def test_options_are_checked_before_triton_is_needed(tmp_path, kwargs, said, one_line_error):
    assert said in one_line_error(triton_ptx, ADD, "add_kernel", ADD_SIG, {"BLOCK_SIZE": 256}, out_dir=tmp_path,
                                  **kwargs)


def test_without_triton_the_error_says_what_to_install(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "triton", None)  # what `import triton` meets where it is not installed
    assert installed_triton_version() is None
    with pytest.raises(OptionalDependencyError, match=re.escape("pip install 'compileiq-lab[triton]'")):
        triton_ptx(ADD, "add_kernel", ADD_SIG, {"BLOCK_SIZE": 256}, "sm_90a", tmp_path)


@pytest.mark.parametrize("rec", GENERATE.RECORDED, ids=lambda r: r.name)
def test_recorded_ptx_has_the_target_and_version_generate_py_gives(rec):
    text = (DATA / rec.name).read_text(encoding="utf-8")
    assert tuple(ptx_header(text)) == (rec.ptx_version, rec.arch)
    manifest = json.loads((DATA / GENERATE.MANIFEST).read_text())[rec.name]
    assert manifest["triton_version"] == GENERATE.TRITON_VERSION
    assert (manifest["target"], manifest["ptx_version"], manifest["num_warps"]) == (rec.arch, rec.ptx_version,
                                                                                   rec.num_warps)
    assert ptx_entries(text) == [manifest["entry"]] == [rec.function]
    # the .param list: the runtime parameters in order, then Triton's own pointers
    params = _entry_params(text, rec.function)
    assert len(params) == len(manifest["params"]) == len(manifest["signature"]) + 2
    assert manifest["params"][-2:] == ["global_scratch", "profile_scratch"]
    assert f".reqntid {32 * rec.num_warps}" in text
    assert "/" not in "".join(re.findall(r'"[^"\n]*"', text))  # no path (line info is off)


@needs_ptxas
@pytest.mark.parametrize("rec", GENERATE.RECORDED, ids=lambda r: r.name)
def test_recorded_ptx_assembles_with_the_installed_ptxas(rec, tmp_path):
    res = _assemble(DATA / rec.name, rec.arch, tmp_path)
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "out.cubin").stat().st_size > 0


@needs_ptxas
def test_recorded_sm_90a_matmul_needs_the_arch_specific_target(tmp_path):
    """Its wgmma is sm_90a's only: the plain sm_90 file is a different program (mma.sync), not a relabelling."""
    text = (DATA / "matmul.sm_90a.ptx").read_text()
    assert "wgmma.mma_async" in text
    assert "wgmma" not in (DATA / "matmul.sm_90.ptx").read_text()
    (tmp_path / "relabelled.ptx").write_text(text.replace(".target sm_90a", ".target sm_90"))
    res = _assemble(tmp_path / "relabelled.ptx", "sm_90", tmp_path)
    assert res.returncode != 0 and "wgmma" in res.stderr


# --- with Triton -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("arch", ["sm_90a", "sm_90"])
def test_vector_add_compiles_without_a_gpu_and_assembles(triton, tmp_path, arch):
    got = triton_ptx(ADD, "add_kernel", ADD_SIG, {"BLOCK_SIZE": 256}, arch, tmp_path / "out")
    assert isinstance(got, TritonPtx) and got.path.parent == tmp_path / "out"
    text = got.path.read_text()
    assert (got.ptx_version, got.target) == tuple(ptx_header(text)) and got.target == arch
    assert ptx_entries(text) == [got.entry] == ["add_kernel"]
    assert got.triton_version == triton.__version__
    assert got.signature == {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32", "n_elements": "i32"}
    assert got.constexprs == {"BLOCK_SIZE": 256}
    assert (got.num_warps, got.num_stages, got.shared_bytes, got.global_scratch_bytes) == (4, 3, 0, 0)
    assert got.params[:4] == ("x_ptr", "y_ptr", "out_ptr", "n_elements")
    assert len(_entry_params(text, "add_kernel")) == len(got.params)
    if tool_available("ptxas"):  # Triton's own PTX ISA version, read by the installed ptxas
        res = _assemble(got.path, arch, tmp_path)
        assert res.returncode == 0, res.stderr


@needs_ptxas
def test_matmul_uses_wgmma_for_sm_90a_only_and_both_assemble(triton, tmp_path):
    specific = triton_ptx(MATMUL, "matmul_kernel", MATMUL_SIG, MATMUL_CONST, "sm_90a", tmp_path)
    plain = triton_ptx(MATMUL, "matmul_kernel", MATMUL_SIG, MATMUL_CONST, "sm_90", tmp_path)
    assert "wgmma.mma_async" in specific.path.read_text()
    assert "wgmma" not in plain.path.read_text() and "mma.sync" in plain.path.read_text()
    for got in (specific, plain):
        assert got.shared_bytes > 0 and got.params[:3] == ("a_ptr", "b_ptr", "c_ptr")
        res = _assemble(got.path, got.target, tmp_path)
        assert res.returncode == 0, res.stderr


@pytest.mark.parametrize("version", ["9.0", "8.0"])
def test_ptx_version_sets_the_isa_triton_writes(triton, tmp_path, version):
    got = triton_ptx(MATMUL, "matmul_kernel", MATMUL_SIG, MATMUL_CONST, "sm_90a", tmp_path, ptx_version=version)
    assert got.ptx_version == version == ptx_header(got.path.read_text()).version
    if tool_available("ptxas"):  # 13.0 reads up to 9.0
        res = _assemble(got.path, "sm_90a", tmp_path)
        assert res.returncode == 0, res.stderr


def test_alignment_hints_and_constants_change_the_ptx_as_triton_jit_would(triton, tmp_path):
    plain = triton_ptx(ADD, "add_kernel", ADD_SIG, {"BLOCK_SIZE": 1024}, "sm_90a", tmp_path)
    hinted = triton_ptx(ADD, "add_kernel", "*fp32:16,*fp32:16,*fp32:16,i32:16", {"BLOCK_SIZE": 1024}, "sm_90a",
                        tmp_path)
    assert "ld.global.v4" not in plain.path.read_text() and "ld.global.v4" in hinted.path.read_text()
    assert hinted.signature["x_ptr"] == "*fp32:16"
    # a runtime parameter given a value is a constant: it leaves the PTX's parameter list
    fixed = triton_ptx(MATMUL, "matmul_kernel", "*fp16,*fp16,*fp16" + ",i32" * 6,
                       {**MATMUL_CONST, "stride_ak": 1, "stride_bn": 1, "stride_cn": 1}, "sm_90a", tmp_path)
    assert "stride_ak" not in fixed.signature and "stride_ak" not in fixed.params
    assert fixed.constexprs["stride_ak"] == 1
    assert fixed.params[:9] == ("a_ptr", "b_ptr", "c_ptr", "M", "N", "K", "stride_am", "stride_bk", "stride_cm")
    assert len(_entry_params(fixed.path.read_text(), "matmul_kernel")) == len(fixed.params)


def test_results_are_reused_until_the_file_or_an_option_changes(triton, tmp_path):
    src = tmp_path / "k.py"
    shutil.copy(ADD, src)
    out = tmp_path / "out"
    first = triton_ptx(src, "add_kernel", ADD_SIG, {"BLOCK_SIZE": 256}, "sm_90a", out)
    stamp = first.path.stat().st_mtime_ns
    again = triton_ptx(src, "add_kernel", "x_ptr=*fp32,y_ptr=*fp32,out_ptr=*fp32,n_elements=i32",
                       {"BLOCK_SIZE": 256}, "sm_90a", out)
    assert again == first and first.path.stat().st_mtime_ns == stamp
    assert triton_ptx(src, "add_kernel", ADD_SIG, {"BLOCK_SIZE": 256}, "sm_90a", out, num_warps=8).path != first.path
    src.write_text(src.read_text().replace("x + y", "y + x"))
    edited = triton_ptx(src, "add_kernel", ADD_SIG, {"BLOCK_SIZE": 256}, "sm_90a", out)
    assert edited.path != first.path and first.path.is_file()


def test_generate_py_reproduces_the_recorded_files(triton, tmp_path, monkeypatch):
    if triton.__version__ != GENERATE.TRITON_VERSION:
        pytest.skip(f"the files are Triton {GENERATE.TRITON_VERSION}'s; {triton.__version__} is installed")
    monkeypatch.setenv("TRITON_DISABLE_LINE_INFO", "1")  # what generate sets, restored after the test
    GENERATE.generate(tmp_path)
    for name in [rec.name for rec in GENERATE.RECORDED] + [GENERATE.MANIFEST]:
        assert (tmp_path / name).read_bytes() == (DATA / name).read_bytes(), name


@pytest.mark.parametrize(("source", "said"), [
    ("import sys\nsys.exit(2)\n", "importing it raised SystemExit: exit code 2 (line 2)"),
    ("X = 1\nraise RuntimeError('boom')\n", "importing it raised RuntimeError: boom (line 2)"),
    ("def add_kernel(:\n", "importing it raised SyntaxError: invalid syntax (line 1)"),
    ("def add_kernel(x):\n    return x\n", "`add_kernel is a @triton.jit function` must hold, but got 'function'"),
    ("import triton\n\n@triton.jit\ndef other(x):\n    pass\n", "Its @triton.jit functions are ['other']"),
])
def test_errors_of_the_users_file_are_one_line(triton, tmp_path, source, said, one_line_error):
    (tmp_path / "user.py").write_text(source)
    text = one_line_error(triton_ptx, tmp_path / "user.py", "add_kernel", "i32", {}, "sm_90a", tmp_path)
    assert said in text and "Triton kernel triton:" in text


def test_keyboard_interrupt_in_the_users_file_propagates(triton, tmp_path):
    (tmp_path / "user.py").write_text("raise KeyboardInterrupt\n")
    with pytest.raises(KeyboardInterrupt):
        triton_ptx(tmp_path / "user.py", "f", "", {}, "sm_90a", tmp_path)


def test_a_kernel_triton_cannot_compile_is_one_line_with_its_line_and_target(triton, tmp_path, one_line_error):
    text = one_line_error(triton_ptx, ADD, "add_kernel", ADD_SIG, {"BLOCK_SIZE": 1000}, "sm_90a", tmp_path)
    line = 1 + next(i for i, s in enumerate(ADD.read_text().splitlines()) if "tl.arange" in s)
    assert "`it compiles for sm_90a` must hold" in text and "power of 2" in text
    assert f"CompilationError (line {line})" in text and f"Triton {triton.__version__}" in text
    fp8 = tmp_path / "fp8.py"
    fp8.write_text("import triton\nimport triton.language as tl\n\n\n@triton.jit\ndef cast(x_ptr, y_ptr):\n"
                   "    offs = tl.arange(0, 16)\n    tl.store(y_ptr + offs, tl.load(x_ptr + offs).to(tl.float32))\n")
    assert "fp8e4nv not supported" in one_line_error(triton_ptx, fp8, "cast", "*fp8e4nv,*fp32", {}, "sm_80", tmp_path)


@pytest.mark.parametrize(("constexprs", "said"), [
    ({}, "`every tl.constexpr parameter without a default has a value` must hold, but got ['BLOCK_SIZE']"),
    ({"BLOCK_SIZE": 256, "BLOCK": 1}, "every constant names a parameter of the function (x_ptr, y_ptr"),
    ({"BLOCK_SIZE": [256]}, "the value of BLOCK_SIZE is an int, float, bool or str"),
])
def test_constants_are_checked_against_the_function(triton, tmp_path, constexprs, said, one_line_error):
    assert said in one_line_error(triton_ptx, ADD, "add_kernel", ADD_SIG, constexprs, "sm_90a", tmp_path)


def test_a_signature_for_the_wrong_parameters_names_the_runtime_ones(triton, tmp_path, one_line_error):
    text = one_line_error(triton_ptx, ADD, "add_kernel", "*fp32,*fp32,*fp32,i32,i32", {"BLOCK_SIZE": 256}, "sm_90a",
                  tmp_path)
    assert "(x_ptr, y_ptr, out_ptr, n_elements)" in text
    text = one_line_error(triton_ptx, ADD, "add_kernel", {"x_ptr": "*fp32", "BLOCK_SIZE": "i32"}, {"BLOCK_SIZE": 256},
                  "sm_90a", tmp_path)
    assert "a tl.constexpr parameter takes a value" in text


def test_helpers_beside_the_file_import_and_wrappers_are_unwrapped(triton, tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "helpers.py").write_text(
        "import triton\nimport triton.language as tl\n\n\n@triton.jit\ndef twice(x):\n    return x + x\n")
    (tmp_path / "pkg" / "kern.py").write_text(
        "import triton\nimport triton.language as tl\nfrom helpers import twice\n\n\n"
        "@triton.autotune(configs=[triton.Config({'BLOCK': 128})], key=['n'])\n@triton.jit\n"
        "def scale(x_ptr, n, BLOCK: tl.constexpr, ODD: tl.constexpr = 3):\n"
        "    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n"
        "    tl.store(x_ptr + offs, twice(tl.load(x_ptr + offs, mask=offs < n)) * ODD, mask=offs < n)\n")
    before = list(sys.path)
    got = triton_ptx(tmp_path / "pkg" / "kern.py", "scale", "*fp32,i32", {"BLOCK": 64}, "sm_90a", tmp_path)
    assert sys.path == before
    assert got.entry == "scale" and got.constexprs == {"BLOCK": 64, "ODD": 3}  # the default filled in


def test_a_constexpr_whose_default_is_a_module_constant_takes_its_value(triton, tmp_path):
    """Liger-Kernel's kl_div: ``reduction: tl.constexpr = _REDUCTION_MODE_BATCHMEAN``, a ``tl.constexpr(3)``."""
    (tmp_path / "kern.py").write_text(
        "import triton\nimport triton.language as tl\n\n_MODE_SUM = tl.constexpr(2)\n\n\n@triton.jit\n"
        "def k(x_ptr, n, BLOCK: tl.constexpr, MODE: tl.constexpr = _MODE_SUM):\n"
        "    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n"
        "    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * MODE, mask=offs < n)\n")
    got = triton_ptx(tmp_path / "kern.py", "k", "*fp32,i32", {"BLOCK": 64}, "sm_90a", tmp_path / "out")
    assert got.constexprs == {"BLOCK": 64, "MODE": 2}
