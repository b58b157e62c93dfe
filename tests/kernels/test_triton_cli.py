"""A @triton.jit kernel tuned from the command line: compiled to PTX without a GPU, tuned with ptxas, exported,
verified, and continued with the same command; its origin (function, signature, constants, versions) is recorded."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from compileiq_lab.acf import load_acf
from compileiq_lab.cli.main import main
from compileiq_lab.store import load_results
from compileiq_lab.testing import tool_available

pytest.importorskip("triton")
pytestmark = pytest.mark.skipif(not tool_available("ptxas"), reason="needs ptxas")

DATA = Path(__file__).resolve().parents[1] / "data" / "triton"
SIGNATURE = "*fp16:16,*fp16:16,*fp16:16," + ",".join(["i32:16"] * 9)
TUNE = ["tune", "triton:matmul.py:matmul_kernel", "--signature", SIGNATURE, "--define", "BLOCK_M=128", "--define",
        "BLOCK_N=128", "--define", "BLOCK_K=64", "--define", "GROUP_M=8", "--num-warps", "8", "--arch", "sm_90a",
        "--pool-size", "6", "--warm-start", "none", "--store", "t.db"]


def _threads(value: object) -> int:
    total = 1
    for part in str(value).split(","):
        total *= int(part)
    return total


def test_triton_kernel_tunes_exports_verifies_and_continues(tmp_path, monkeypatch):
    shutil.copy(DATA / "matmul.py", tmp_path / "matmul.py")
    monkeypatch.chdir(tmp_path)
    assert main([*TUNE, "--generations", "2", "--export", "t.acf"]) == 0
    res = load_results("t.db")
    meta = res.header.kernel
    assert meta.kernel == "matmul_kernel" and meta.language == "ptx" and meta.arch == "sm_90a"
    triton = meta.extra["origin"]["triton"]
    assert triton["function"] == "matmul_kernel" and triton["constexprs"]["BLOCK_M"] == 128
    assert triton["num_warps"] == 8 and meta.extra["block"] == [256]  # no --maxntid below Triton's 256 threads
    offered = res.header.space["maxntid"]["values"]  # 256, or "16,16"-style 2-D and 3-D blocks
    assert offered and all(_threads(v) >= 256 for v in offered)
    acf = load_acf("t.acf")
    assert acf.build["source"].startswith("triton/matmul_kernel.sm_90a.") and acf.build["entry"] == "matmul_kernel"
    assert main(["verify", "t.acf"]) == 0
    before = len(res)
    assert main([*TUNE, "--generations", "3"]) == 0  # the same command continues the run
    assert len(load_results("t.db")) > before


@pytest.mark.parametrize(("gpu", "arch"), [("sm_80", "sm_80"), ("sm_90", "sm_90a")])
def test_without_arch_a_triton_kernel_targets_the_gpu_here(tmp_path, monkeypatch, gpu, arch):
    import compileiq_lab.kernels.choices as choices

    shutil.copy(DATA / "matmul.py", tmp_path / "matmul.py")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(choices, "gpu_arch", lambda: gpu)  # the GPU here, as probed (static objectives: no run)
    tune = [a for a in TUNE if a not in ("--arch", "sm_90a")]
    assert main([*tune, "--objectives", "registers", "--generations", "1"]) == 0
    assert load_results("t.db").header.kernel.arch == arch


def test_a_triton_function_that_does_not_compile_is_one_line(tmp_path, monkeypatch, capsys):
    (tmp_path / "bad.py").write_text("import triton\nimport triton.language as tl\n\n@triton.jit\n"
                                     "def k(x_ptr, n):\n    tl.store(x_ptr + tl.arange(0, 100), 1.0)\n")
    monkeypatch.chdir(tmp_path)
    code = main(["tune", "triton:bad.py:k", "--signature", "*fp32,i32", "--generations", "1", "--store", "b.db"])
    err = capsys.readouterr().err
    assert code == 1 and err.count("compileiq-lab: error:") == 1 and "Traceback" not in err
    assert "sm_90a" in err
