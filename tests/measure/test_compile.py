"""Compiler calls: two-stage CUDA compile, PTX cache, timeouts, -v parsing and machine-code identity."""

from __future__ import annotations

import shutil
import sys
import time
from pathlib import Path

import pytest

from compileiq_lab.exceptions import ConfigurationError
from compileiq_lab.measure.binary import inspect_elf
from compileiq_lab.measure.nvcc import CudaCompiler, parse_ptxas_verbose
from compileiq_lab.toolchain import run_tool

needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None or shutil.which("ptxas") is None,
                                reason="nvcc/ptxas not on PATH")

KERNEL = r"""
extern "C" __global__ void scale(float* __restrict__ y, const float* __restrict__ x, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  for (; i < n; i += gridDim.x * blockDim.x) y[i] = a * x[i] + y[i] * y[i];
}
"""


@pytest.fixture
def source(tmp_path: Path) -> Path:
    p = tmp_path / "scale.cu"
    p.write_text(KERNEL)
    return p


def test_run_tool_kills_the_whole_process_group_on_timeout(tmp_path):
    pidfile = tmp_path / "grandchild.pid"
    script = ("import subprocess,time; p = subprocess.Popen(['sleep', '30']); "
              f"open({str(pidfile)!r}, 'w').write(str(p.pid)); time.sleep(30)")
    t0 = time.monotonic()
    res = run_tool([sys.executable, "-c", script], timeout_s=1.0)
    assert res.timed_out and time.monotonic() - t0 < 10
    pid = int(pidfile.read_text())
    deadline = time.monotonic() + 5
    while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
        stat = Path(f"/proc/{pid}/stat").read_text().split() if Path(f"/proc/{pid}/stat").exists() else []
        if stat and stat[2] == "Z":
            break
        time.sleep(0.05)
    stat = Path(f"/proc/{pid}/stat").read_text().split() if Path(f"/proc/{pid}/stat").exists() else ["", "", "Z"]
    assert stat[2] == "Z"  # the grandchild was killed with its group (a zombie until its parent is reaped)


def test_parse_ptxas_verbose_per_entry_and_max():
    text = """ptxas info    : Compiling entry function 'a' for 'sm_90'
    8 bytes stack frame, 4 bytes spill stores, 12 bytes spill loads
ptxas info    : Used 40 registers, used 1 barriers, 512 bytes smem, 380 bytes cmem[0]
ptxas info    : Compiling entry function 'b' for 'sm_90'
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 72 registers, 380 bytes cmem[0]
ptxas info    : Compile time = 3.5 ms
"""
    a = parse_ptxas_verbose(text, "a")
    assert a["registers"] == 40 and a["spill_bytes"] == 16 and a["smem_bytes"] == 512 and a["barriers"] == 1
    both = parse_ptxas_verbose(text)
    assert both["registers"] == 72 and both["ptxas_time_ms"] == 3.5


def test_bad_arch_is_refused_with_the_fix(tmp_path):
    with pytest.raises(ConfigurationError, match="sm_90"):
        CudaCompiler("hopper", tmp_path)


@needs_nvcc
def test_two_stage_equals_full_nvcc_and_caches_ptx(source, tmp_path):
    cc = CudaCompiler("sm_90", tmp_path / "w")
    ptx = cc.ptx(source, [])
    again = cc.ptx(source, [])
    assert ptx.ok and again.path == ptx.path and (cc.ptx_misses, cc.ptx_hits) == (1, 1)
    two = cc.cubin(ptx.path, ["-O3"], "scale")
    full = cc.full(source, [], ["-O3"], "scale")
    assert two.ok and full.ok
    assert inspect_elf(two.path).code_hash == inspect_elf(full.path).code_hash
    assert two.metrics["registers"] > 0 and "spill_bytes" in two.metrics


@needs_nvcc
def test_code_hash_ignores_the_embedded_command_line(source, tmp_path):
    cc = CudaCompiler("sm_90", tmp_path / "w")
    ptx = cc.ptx(source, [])
    default, o3 = cc.cubin(ptx.path, [], "scale"), cc.cubin(ptx.path, ["-O3"], "scale")
    o0 = cc.cubin(ptx.path, ["-O0"], "scale")
    a, b, c = (inspect_elf(x.path) for x in (default, o3, o0))
    assert default.path.read_bytes() != o3.path.read_bytes()   # the files differ ...
    assert a.code_hash == b.code_hash                            # ... the machine code does not
    assert c.code_hash != a.code_hash and c.sass_instructions > a.sass_instructions
    # the count leaves out the alignment padding (trailing NOPs and the final self-branch)
    assert 0 < a.padding_instructions < 32 and (a.sass_instructions + a.padding_instructions) * 16 == a.text_bytes


@needs_nvcc
def test_compile_errors_and_conflicts_are_outcomes(source, tmp_path):
    cc = CudaCompiler("sm_90", tmp_path / "w")
    ptx = cc.ptx(source, [])
    bad = cc.cubin(ptx.path, ["-O3", "--Ofast-compile=min"], "scale")
    assert bad.status == "compile_error" and "Conflicting options" in bad.error
    broken = source.with_name("broken.cu")
    broken.write_text("__global__ void k( { }")
    out = cc.ptx(broken, [])
    assert out.status == "compile_error" and "error" in out.error


def test_inspect_elf_rejects_non_elf(tmp_path):
    p = tmp_path / "x.bin"
    p.write_bytes(b"MZ" + b"\0" * 100)
    with pytest.raises(ValueError, match="not an ELF"):
        inspect_elf(p)


def test_inspect_elf_on_a_host_object(tmp_path):
    if shutil.which("gcc") is None:
        pytest.skip("gcc not on PATH")
    src = tmp_path / "f.c"
    src.write_text("int f(int x) { return x * 3 + 1; }\nconst int table[4] = {1, 2, 3, 4};\n")
    for flags, name in ((["-O2"], "a.o"), (["-O2"], "b.o"), (["-O0"], "c.o")):
        assert run_tool(["gcc", "-c", *flags, str(src), "-o", str(tmp_path / name)], 60).returncode == 0
    a, b, c = (inspect_elf(tmp_path / n, kind="host") for n in ("a.o", "b.o", "c.o"))
    assert a.code_hash == b.code_hash != c.code_hash
    assert ".rodata" in a.sections and a.text_bytes > 0
    # data the code reads is part of its identity: same code, other initialised values -> other hash
    src.write_text("float coef[2] = {5.0f, 1.0f};\nfloat f(int i) { return coef[i]; }\n")
    run_tool(["gcc", "-c", "-O2", str(src), "-o", str(tmp_path / "d.o")], 60)
    src.write_text("float coef[2] = {1.0f, 1.0f};\nfloat f(int i) { return coef[i]; }\n")
    run_tool(["gcc", "-c", "-O2", str(src), "-o", str(tmp_path / "e.o")], 60)
    assert inspect_elf(tmp_path / "d.o", kind="host").code_hash != inspect_elf(tmp_path / "e.o", kind="host").code_hash


def test_parse_ptxas_verbose_adds_callee_spills():
    text = """ptxas info    : Compiling entry function 'k' for 'sm_90'
ptxas info    : Function properties for k
    16 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Function properties for _Z6helperPKfi
    224 bytes stack frame, 216 bytes spill stores, 240 bytes spill loads
ptxas info    : Used 24 registers, 380 bytes cmem[0]
"""
    m = parse_ptxas_verbose(text, "k")
    assert m["spill_bytes"] == 456 and m["stack_bytes"] == 224 and m["registers"] == 24
