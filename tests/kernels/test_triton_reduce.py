"""A Triton kernel's file as users have it: only its @triton.jit functions and what they use run, line for line."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from compileiq_lab.exceptions import ConfigurationError
from compileiq_lab.kernels.triton_reduce import blank_lines, jit_only
from compileiq_lab.kernels.triton_src import triton_ptx

TUTORIAL = Path(__file__).resolve().parents[1] / "data" / "public_kernels" / "triton" / "python" / "tutorials" / \
    "01-vector-add.py"

# A file in the shape of Triton's matmul tutorial: host imports, a device query and an autotune config that asks the
# driver at import, a JIT helper defined after the kernel, module constants the kernel reads, and a benchmark.
SHAPED = '''"""A user's kernel file."""
import torch_that_is_not_installed as torch

import triton
import triton.language as tl

DEVICE = triton.runtime.driver.active.get_active_torch_device()
SCALE = tl.constexpr(2.0)
OFFSET = SCALE * 0 + 1.0
x = torch.rand(16)


def get_autotune_config():
    return [triton.Config({"BLOCK": 64})] if triton.runtime.driver.active.get_current_target() else []


@triton.autotune(
    configs=get_autotune_config(),
    key=["n"],
)
@triton.jit
def scale_kernel(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    tl.store(x_ptr + offs, relu(x) * SCALE, mask=offs < n)


@triton.jit
def relu(x):
    return tl.where(x > 0, x, 0.0)


print(scale_kernel[(1,)](x, 16))
'''


def test_jit_only_keeps_the_kernels_what_they_name_and_every_line_where_it_was():
    reduced, imports, needed = jit_only(SHAPED)
    assert len(reduced.splitlines()) == len(SHAPED.splitlines())
    kept = {line for line in reduced.splitlines() if line.strip()}
    assert "SCALE = tl.constexpr(2.0)" in kept and "def relu(x):" in kept and "@triton.jit" in kept
    for gone in ("DEVICE = ", "x = torch.rand(16)", "OFFSET", "print(", "@triton.autotune(", 'key=["n"],',
                 "def get_autotune_config"):
        assert not any(line.startswith(gone) for line in kept), gone
    # the kernel's own x (x = tl.load(...)) does not keep the module's x, nor what that needs
    assert "    x = tl.load(x_ptr + offs, mask=offs < n)" in kept
    for i, line in enumerate(reduced.splitlines()):
        assert line in ("", SHAPED.splitlines()[i])  # each line as it was, or empty
    assert imports == [(2, 2), (4, 4), (5, 5)]
    assert {"tl", "triton", "relu", "SCALE"} <= needed and "DEVICE" not in needed
    assert jit_only("def f(:\n") is None and jit_only("import triton\nX = 1\n") is None
    assert blank_lines("a\nb\nc\n", [(2, 2)]) == "a\n\nc\n"


def test_a_file_with_host_code_that_fails_at_import_compiles_its_kernel(tmp_path):
    pytest.importorskip("triton")
    (tmp_path / "user.py").write_text(SHAPED)
    before = set(sys.modules)
    got = triton_ptx(tmp_path / "user.py", "scale_kernel", "*fp32,i32", {"BLOCK": 64}, "sm_90a", tmp_path / "out")
    assert got.entry == "scale_kernel" and ".entry scale_kernel" in got.path.read_text()
    assert not {m for m in set(sys.modules) - before if m.startswith("_compileiq_triton")}


def test_the_triton_tutorial_compiles_as_published(tmp_path):
    """Triton's 01-vector-add.py, verbatim: it imports torch and asks the driver for a device at import, then runs a
    test and a benchmark; its kernel compiles to PTX here without torch and without a GPU."""
    pytest.importorskip("triton")
    got = triton_ptx(TUTORIAL, "add_kernel", "*fp32:16,*fp32:16,*fp32:16,i32", {"BLOCK_SIZE": 1024}, "sm_90",
                     tmp_path)
    assert got.entry == "add_kernel" and got.params[:4] == ("x_ptr", "y_ptr", "output_ptr", "n_elements")


# Real files choose an import in a try or an if (Liger-Kernel's libdevice fallback), wrap a kernel by a call
# (unsloth's `f = triton.jit(f)`) and import helpers from their package (`from .utils import ...`).
CHOSEN = """import os
import triton
import triton.language as tl

try:
    from triton.language.extra.libdevice import tanh
except ModuleNotFoundError:
    from triton.language.extra.cuda.libdevice import tanh

if os.environ.get("NO_SUCH_SWITCH_HERE"):
    SCALE = tl.constexpr(3.0)
else:
    SCALE = tl.constexpr(2.0)

import torch_that_is_not_installed as torch  # host code only

x = torch.rand(3)


def unused():
    return 1


def soft(x_ptr, n, BLOCK: tl.constexpr = 64):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    tl.store(x_ptr + offs, tanh(x) * SCALE, mask=offs < n)


soft = triton.jit(soft)
"""


def test_jit_only_keeps_an_import_chosen_in_a_try_or_an_if_and_a_kernel_wrapped_by_a_call():
    reduced, imports, needed = jit_only(CHOSEN)
    kept = {line.strip() for line in reduced.splitlines() if line.strip()}
    assert {"from triton.language.extra.libdevice import tanh", "SCALE = tl.constexpr(2.0)",
            "soft = triton.jit(soft)", "def soft(x_ptr, n, BLOCK: tl.constexpr = 64):"} <= kept
    assert "def unused():" not in kept and "x = torch.rand(3)" not in kept
    assert imports == [(1, 1), (2, 2), (3, 3), (5, 8), (15, 15)]  # the imports and the kept try that holds one
    assert {"tanh", "SCALE", "soft"} <= needed


def test_a_chosen_import_and_a_kernel_wrapped_by_a_call_compile(tmp_path):
    pytest.importorskip("triton")
    (tmp_path / "chosen.py").write_text(CHOSEN)
    got = triton_ptx(tmp_path / "chosen.py", "soft", "*fp32,i32", {}, "sm_90a", tmp_path / "out")
    assert got.entry == "soft" and got.constexprs == {"BLOCK": 64}


def test_relative_and_package_imports_work_without_running_the_packages_init(tmp_path):
    """A kernel module inside a package imports its helper relatively or by the package's name; the package's
    __init__ imports a framework that is not installed here and is never run; nothing stays in sys.modules."""
    pytest.importorskip("triton")
    pkg = tmp_path / "mykernels" / "ops"
    pkg.mkdir(parents=True)
    for folder in (pkg.parent, pkg):
        (folder / "__init__.py").write_text("import torch_that_is_not_installed\n")
    (pkg / "helpers.py").write_text("import triton\n\n\n@triton.jit\ndef twice(x):\n    return x + x\n")
    body = ("import triton\nimport triton.language as tl\n{imp}\n\n\n@triton.jit\n"
            "def k(x_ptr, n, BLOCK: tl.constexpr):\n"
            "    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n"
            "    tl.store(x_ptr + offs, twice(tl.load(x_ptr + offs, mask=offs < n)), mask=offs < n)\n")
    named_triton = pkg / "triton"  # a subpackage named as the installed Triton is: relative imports still work
    named_triton.mkdir()
    (named_triton / "__init__.py").write_text("")
    (named_triton / "helpers.py").write_text((pkg / "helpers.py").read_text())
    before_modules, before_path = set(sys.modules), list(sys.path)
    # (whole: the reduced file leaves `twice` undefined, so the whole file is imported, as part of its package)
    for folder, name, imp in ((pkg, "rel", "from .helpers import twice"),
                              (pkg, "abs", "from mykernels.ops.helpers import twice"),
                              (pkg, "whole", "from . import helpers\nglobals()['twice'] = helpers.twice"),
                              (named_triton, "clash", "from .helpers import twice")):
        (folder / f"{name}.py").write_text(body.format(imp=imp))
        got = triton_ptx(folder / f"{name}.py", "k", "*fp32,i32", {"BLOCK": 64}, "sm_90a", tmp_path / "out")
        assert got.entry == "k"
    assert not {m for m in set(sys.modules) - before_modules if m.startswith(("mykernels", "_compileiq"))}
    assert sys.path == before_path and sys.modules["triton"].__file__ != str(named_triton / "__init__.py")


def test_a_name_whose_import_failed_here_is_said_with_the_import_and_why(tmp_path):
    pytest.importorskip("triton")
    (tmp_path / "needs.py").write_text(
        "import triton\nimport triton.language as tl\nfrom a_module_not_installed_here import helper\n\n\n"
        "@triton.jit\ndef k(x_ptr, n, BLOCK: tl.constexpr):\n"
        "    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n"
        "    tl.store(x_ptr + offs, helper(tl.load(x_ptr + offs)))\n")
    with pytest.raises(ConfigurationError) as err:
        triton_ptx(tmp_path / "needs.py", "k", "*fp32,i32", {"BLOCK": 64}, "sm_90a", tmp_path / "out")
    said = str(err.value)
    assert "helper is not defined here: it comes from line 3 (`from a_module_not_installed_here import helper`)" \
        in said and "No module named 'a_module_not_installed_here'" in said and "Make that import work" in said


def test_names_a_comprehension_a_lambda_or_a_class_binds_are_not_read_from_the_module():
    """Scoped as Python scopes them: otherwise ``s`` and ``RELU`` look undefined and the whole file is run."""
    text = ("import triton\nimport triton.language as tl\n\nSIZES = [s * 2 for s in (16, 32)]\n"
            "BLOCK = tl.constexpr(SIZES[0])\n\n\nclass Act:\n    RELU = tl.constexpr(0)\n"
            "    GELU = tl.constexpr(RELU.value + 1)\n\n    def pick(self, x):\n        return self.RELU + x\n\n\n"
            "SCALE = (lambda v: v * 2)(3)\n\n\n@triton.jit\ndef k(x_ptr):\n"
            "    offs = tl.arange(0, BLOCK)\n    tl.store(x_ptr + offs, tl.load(x_ptr + offs) * SCALE * Act.GELU)\n")
    _, _, needed = jit_only(text)
    assert {"tl", "BLOCK", "SIZES", "SCALE", "Act", "triton"} <= needed
    assert not {"s", "RELU", "self", "v", "x", "offs"} & needed
