"""Compiler calls: two-stage CUDA compile, PTX cache, timeouts, -v parsing, code identity (of a file or a kernel)."""

from __future__ import annotations

import hashlib
import re
import shutil
import struct
import sys
import time
from pathlib import Path

import pytest

from compileiq_lab.exceptions import ConfigurationError
from compileiq_lab.measure.binary import _sections, inspect_elf
from compileiq_lab.measure.entries import cubin_entries
from compileiq_lab.measure.nvcc import CudaCompiler, parse_ptxas_verbose
from compileiq_lab.testing import tool_available
from compileiq_lab.toolchain import run_tool
from compileiq_lab.toolchain.tools import find_tool

needs_nvcc = pytest.mark.skipif(not (tool_available("nvcc") and tool_available("ptxas")),
                                reason="nvcc/ptxas not found (PATH or the CUDA wheels)")

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


@needs_nvcc
def test_a_ptx_error_names_the_sources_ptx_not_a_scratch_file(tmp_path):
    """nvcc -ptx checks its PTX with ptxas, whose errors name the output file by line: a scratch file, gone when the
    message is read. The message names it as the source's PTX instead."""
    source = tmp_path / "asm.cu"
    source.write_text('extern "C" __global__ void k(float* x) {\n  float y;\n'
                      '  asm("bogus.instr.f32 %0, %1;" : "=f"(y) : "f"(x[0]));\n  x[0] = y;\n}\n')
    cc = CudaCompiler("sm_90", tmp_path / "w")
    out = cc.ptx(source, [])
    assert out.status == "compile_error" and "ptxas asm.ptx (nvcc -ptx of asm.cu), line" in out.error, out.error
    assert str(tmp_path / "w") not in out.error
    # a PTX file in the work folder that ptxas rejects is named as the source's PTX too
    made = tmp_path / "w" / "made.ptx"
    made.write_text(".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry k()\n{\n  bogus.instr;\n}\n")
    bad = cc.cubin(made, [], "k", source=source)
    assert bad.status == "compile_error" and "asm.ptx (nvcc -ptx of asm.cu), line 6" in bad.error, bad.error
    assert str(made) not in bad.error


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


# ---- one kernel of a multi-kernel cubin -------------------------------------------------------------------------

TWO_KERNELS = r"""
#ifndef B_SCALE
#define B_SCALE 1
#endif
__constant__ float coef[4] = {1.f, 2.f, 3.f, 4.f};
__device__ __noinline__ float helper(float x) { return x * coef[1] + sqrtf(x); }

extern "C" __global__ void kernel_a(float* y, const float* x, int n) {
  __shared__ float tile[128];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  tile[threadIdx.x] = i < n ? x[i] : 0.f;
  __syncthreads();
  if (i < n) y[i] = helper(tile[threadIdx.x]) * coef[0];
}

extern "C" __global__ void kernel_b(float* y, int n) {
  __shared__ float acc[64];
  int t = threadIdx.x % 64;
  acc[t] = 0.f;
  for (int k = 0; k < n; ++k) acc[t] += coef[k & 3] * k * B_SCALE;
#ifdef B_CALLS_HELPER
  acc[t] = helper(acc[t]);
#endif
  y[threadIdx.x] = acc[t];
}
"""

_CUBIN_IDENTITY = (".text.", ".nv.info.", ".nv.constant", ".nv.global.init", ".nv.shared.", ".rela.text.")


def _whole_hash_before_entries(path: Path) -> str:
    """The whole-cubin code hash exactly as inspect_elf computed it before it could inspect one kernel."""
    data = path.read_bytes()
    h = hashlib.sha256()
    for name, typ, off, size, _ in sorted(_sections(data)):
        if name.startswith(_CUBIN_IDENTITY):
            body = data[off:off + size] if typ != 8 else b""
            h.update(name.encode() + b"\0" + struct.pack("<QQ", size, len(body)) + body)
    return h.hexdigest()


def _cubin(tmp_path: Path, name: str, *flags: str) -> Path:
    src = tmp_path / "two.cu"
    src.write_text(TWO_KERNELS)
    out = tmp_path / f"{name}.cubin"
    res = run_tool([find_tool("nvcc"), "-arch=sm_90", "-cubin", *flags, str(src), "-o", str(out)], 300)
    assert res.returncode == 0, res.tail()
    return out


@needs_nvcc
@pytest.mark.parametrize("rdc", [[], ["-rdc=true"]], ids=["whole-program", "rdc"])
@pytest.mark.parametrize("change", [["-DB_SCALE=3"], ["-DB_CALLS_HELPER"]], ids=["b-constant", "b-calls-helper"])
def test_per_entry_hash_follows_only_its_own_kernel(tmp_path, rdc, change):
    # b-calls-helper gives kernel_b a clone of helper: new symbols renumber the table kernel_a's info refers to
    base, other = _cubin(tmp_path, "base", *rdc), _cubin(tmp_path, "other", *rdc, *change)
    assert inspect_elf(base).code_hash != inspect_elf(other).code_hash
    assert inspect_elf(base, entry="kernel_a").code_hash == inspect_elf(other, entry="kernel_a").code_hash
    assert inspect_elf(base, entry="kernel_b").code_hash != inspect_elf(other, entry="kernel_b").code_hash


@needs_nvcc
def test_per_entry_sections_and_counts(tmp_path):
    path = _cubin(tmp_path, "base")
    whole, a, b = inspect_elf(path), inspect_elf(path, entry="kernel_a"), inspect_elf(path, entry="kernel_b")
    for info, me, other in ((a, "kernel_a", "kernel_b"), (b, "kernel_b", "kernel_a")):
        assert {f".text.{me}", f".nv.info.{me}", f".nv.shared.{me}", f".nv.constant0.{me}"} <= set(info.sections)
        assert not [s for s in info.sections if s.endswith(other)]
        assert ".nv.info" in info.sections  # the file-wide info (registers ...), less the other kernel's records
        assert any(re.fullmatch(r"\.nv\.constant\d+", s) for s in info.sections)  # the bank holding `coef`
        assert info.text_bytes == info.sections[f".text.{me}"] and info.file_bytes == whole.file_bytes
    # without -rdc, helper is cloned into each kernel's own .text: the kernels' counts add up to the whole
    assert 0 < a.sass_instructions < whole.sass_instructions
    assert a.sass_instructions + b.sass_instructions == whole.sass_instructions
    assert a.padding_instructions + b.padding_instructions == whole.padding_instructions


@needs_nvcc
def test_per_entry_takes_in_device_functions_compiled_on_their_own(tmp_path):
    path = _cubin(tmp_path, "rdc", "-rdc=true")
    whole, a, b = inspect_elf(path), inspect_elf(path, entry="kernel_a"), inspect_elf(path, entry="kernel_b")
    shared = [s for s in whole.sections if s.startswith(".text.") and s not in (".text.kernel_a", ".text.kernel_b")]
    assert ".text._Z6helperf" in shared  # the __noinline__ function, a section of its own with -rdc
    assert all(s in a.sections and s in b.sections for s in shared)
    assert a.sass_instructions <= whole.sass_instructions and b.sass_instructions <= whole.sass_instructions
    assert a.text_bytes + b.text_bytes - sum(whole.sections[s] for s in shared) == whole.text_bytes


@needs_nvcc
def test_whole_cubin_hash_is_as_before_per_entry_inspection(tmp_path):
    for path in (_cubin(tmp_path, "base"), _cubin(tmp_path, "rdc", "-rdc=true")):
        assert inspect_elf(path).code_hash == _whole_hash_before_entries(path)
        assert inspect_elf(path, kind="cubin", entry=None) == inspect_elf(path)


# a hand-made ELF64 "cubin": the per-entry rules without nvcc

_STO_ENTRY, _FUNC_GLOBAL, _FUNC_LOCAL = 0x10, 0x12, 0x02


def _regcount(sym: int, regs: int) -> bytes:
    return struct.pack("<BBHII", 4, 0x2F, 8, sym, regs)  # EIFMT_SVAL, EIATTR_REGCOUNT, (symbol, value)


def _tiny_cubin(path: Path, b_code: bytes = b"\x22", b_regs: int = 20, a_regs: int = 10,
                extra_local: bool = False) -> Path:
    """.text/.nv.info of kernels A and B and of a device function `helper`, a global .nv.info keyed by symbol."""
    symbols = [("", 0, 0, "")]  # name, st_info, st_other, section
    if extra_local:  # a clone inside B's code, listed before A: every later symbol index moves
        symbols.append(("$B$helper", _FUNC_LOCAL, 0, ".text.B"))
    symbols += [("A", _FUNC_GLOBAL, _STO_ENTRY, ".text.A"), ("B", _FUNC_GLOBAL, _STO_ENTRY, ".text.B"),
                ("helper", _FUNC_GLOBAL, 0, ".text.helper")]
    index = {s[0]: i for i, s in enumerate(symbols)}
    user = [(".text.A", 1, b"\x11" * 32), (".text.B", 1, b_code * 48), (".text.helper", 1, b"\x33" * 16),
            (".nv.info.A", 0x70000000, b""), (".nv.info.B", 0x70000000, b""),
            (".nv.info", 0x70000000, _regcount(index["A"], a_regs) + _regcount(index["B"], b_regs))]
    names = ["", ".shstrtab", ".strtab", ".symtab"] + [u[0] for u in user]
    shstr = b"\0".join(n.encode() for n in names) + b"\0"
    name_off = {n: shstr.index(n.encode() + b"\0") if n else 0 for n in names}
    strtab = b"\0" + b"".join(s[0].encode() + b"\0" for s in symbols[1:])
    sec_index = {n: i for i, n in enumerate(names)}
    symtab = b"".join(struct.pack("<IBBHQQ", strtab.index(s[0].encode() + b"\0") if s[0] else 0, s[1], s[2],
                                  sec_index.get(s[3], 0), 0, 0) for s in symbols)
    bodies = [(".shstrtab", 3, shstr, 0, 0), (".strtab", 3, strtab, 0, 0), (".symtab", 2, symtab, 2, 24)]
    bodies += [(n, t, body, 0, 0) for n, t, body in user]
    out, headers = bytearray(64), [bytes(64)]
    for name, typ, body, link, entsize in bodies:
        while len(out) % 16:
            out.append(0)
        headers.append(struct.pack("<IIQQQQIIQQ", name_off[name], typ, 0, 0, len(out), len(body), link, 0, 1,
                                   entsize))
        out += body
    shoff = len(out)
    out += b"".join(headers)
    out[:64] = (b"\x7fELF" + bytes([2, 1, 1]) + bytes(9) + struct.pack("<HHIQQQIHHHHHH", 2, 190, 1, 0, 0, shoff, 0,
                                                                       64, 0, 0, 64, len(headers), 1))
    path.write_bytes(bytes(out))
    return path


def test_per_entry_hash_on_a_hand_made_cubin(tmp_path):
    base = _tiny_cubin(tmp_path / "base.cubin")
    assert cubin_entries(base) == ["A", "B"]  # helper: a FUNC without the entry bit
    a = inspect_elf(base, entry="A")
    assert set(a.sections) == {".text.A", ".text.helper", ".nv.info.A", ".nv.info"}
    assert a.text_bytes == 48 and a.sass_instructions == 3 and inspect_elf(base).text_bytes == 96
    # B's code and registers, and the symbol numbering, change: A's hash stays
    b_only = _tiny_cubin(tmp_path / "b.cubin", b_code=b"\x44", b_regs=40, extra_local=True)
    assert inspect_elf(b_only, entry="A").code_hash == a.code_hash
    assert inspect_elf(b_only, entry="B").code_hash != inspect_elf(base, entry="B").code_hash
    # A's own register count is part of A's identity
    assert inspect_elf(_tiny_cubin(tmp_path / "a.cubin", a_regs=12), entry="A").code_hash != a.code_hash


def test_per_entry_errors_state_the_rule_and_the_kernels(tmp_path):
    path = _tiny_cubin(tmp_path / "t.cubin")
    with pytest.raises(ConfigurationError, match=r"mangled name of a kernel.*'helper'.*\['A', 'B'\].*resolve_entry"):
        inspect_elf(path, entry="helper")
    with pytest.raises(ConfigurationError, match="kind='cubin'"):
        inspect_elf(path, kind="host", entry="A")


@needs_nvcc
def test_a_ptx_module_the_arch_cannot_take_gets_the_fix_for_its_case():
    from compileiq_lab.measure.nvcc import ptx_problem

    ptxas = find_tool("ptxas")
    high = ptx_problem(ptxas, "8.0", "sm_90", "sm_80")  # the module targets a newer GPU than asked
    assert "Pass --arch sm_90 (the module's own target)" in high and "nvcc -ptx -arch=sm_80" in high
    assert "newer CUDA toolkit" not in high and high.endswith(".")
    new = ptx_problem(ptxas, "99.9", "sm_80", "sm_80")  # an ISA this ptxas does not read yet
    assert "Regenerate the PTX for an ISA this ptxas reads" in new and new.endswith(".")
    assert ptx_problem(ptxas, "8.0", "sm_80", "sm_90") == ""


@needs_nvcc
def test_a_kernel_that_includes_cub_compiles_with_no_include_dir(tmp_path):
    """CCCL comes with the toolchain: a toolkit's nvcc finds it, and so does the PyPI nvcc of the cuda extra, which
    pins its CCCL wheel (without it: cub/block/block_reduce.cuh: No such file or directory)."""
    src = tmp_path / "block_sum.cu"
    src.write_text("#include <cub/block/block_reduce.cuh>\n"
                   'extern "C" __global__ void block_sum(const float* x, float* out, int n) {\n'
                   "  using BlockReduce = cub::BlockReduce<float, 256>;\n"
                   "  __shared__ typename BlockReduce::TempStorage tmp;\n"
                   "  int i = blockIdx.x * 256 + threadIdx.x;\n"
                   "  float s = BlockReduce(tmp).Sum(i < n ? x[i] : 0.0f);\n"
                   "  if (threadIdx.x == 0) out[blockIdx.x] = s;\n}\n")
    out = CudaCompiler("sm_90", tmp_path / "w", 300).full(src, [], [])
    assert out.ok, out.error
    assert out.metrics["registers"] > 0


@needs_nvcc
def test_a_cuh_file_of_kernels_compiles_as_cuda(tmp_path):
    from compileiq_lab.kernels import load_kernel

    src = tmp_path / "kernels.cuh"
    src.write_text('#pragma once\n#include "scale.h"\n__global__ void k(float* x) { x[threadIdx.x] = scale(1.0f); }\n')
    (tmp_path / "scale.h").write_text("#pragma once\n__device__ inline float scale(float v) { return 2 * v; }\n")
    spec = load_kernel(str(src))
    assert spec.language == "cuda" and spec.source_path == src
    cc = CudaCompiler("sm_90", tmp_path / "w", 300)
    ptx = cc.ptx(src, [])
    assert ptx.ok, ptx.error
    assert ".entry _Z1kPf" in (ptx.path.read_text() if ptx.path else "")
    assert cc.headers(src, []) == (tmp_path / "scale.h",)
    assert cc.full(src, [], []).ok
