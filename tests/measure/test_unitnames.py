"""The same kernel compiled twice reads as the same: nvcc's per-compile parts of its symbol are fixed for the
machine-code hash, the entry lookup and the ACF."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from compileiq_lab.acf.export import _recorded_entry
from compileiq_lab.measure.binary import inspect_elf
from compileiq_lab.measure.entries import cubin_entries, resolve_entry
from compileiq_lab.measure.unitnames import stable_symbol
from compileiq_lab.testing import tool_available
from compileiq_lab.toolchain.tools import find_tool, run_tool

needs_nvcc = pytest.mark.skipif(not tool_available("nvcc"), reason="nvcc not found (PATH or the CUDA wheels)")

#: Symbols nvcc 13.0 wrote (sm_90): an anonymous namespace's kernel, a template kernel instantiated with a type of
#: one (its namespace name ends in a number that changes on every compile), and -rdc=true's prefix of a static kernel.
ANON = "_ZN36_GLOBAL__N__e2ddefa3_4_n_cu_d589cb604anonEPf"
ANON_ELSEWHERE = "_ZN36_GLOBAL__N__64499d0d_4_n_cu_d589cb604anonEPf"
TEMPLATE = "_Z4kernIN42_GLOBAL__N__65c53f3d_4_u_cu_d73804bd_170441PEEvPT_"
TEMPLATE_AGAIN = "_Z4kernIN42_GLOBAL__N__65c53f3d_4_u_cu_d73804bd_170571PEEvPT_"
RDC = "__nv_static_25__e2ddefa3_4_n_cu_d589cb60__ZN36_GLOBAL__N__e2ddefa3_4_n_cu_d589cb604anonEPf"
#: A static __device__ function compiled with -G (a function of its own): nvcc's internal-linkage namespace.
INTERNAL = "_ZN34_INTERNAL_9fd5a029_4_g_cu_0b947eae6helperEf"


def test_stable_symbol_fixes_the_per_compile_parts_and_nothing_else():
    assert stable_symbol(ANON) == stable_symbol(ANON_ELSEWHERE) == "_ZN12_GLOBAL__N_14anonEPf"
    assert stable_symbol(TEMPLATE) == stable_symbol(TEMPLATE_AGAIN) == "_Z4kernIN12_GLOBAL__N_11PEEvPT_"
    assert stable_symbol(RDC) == "__nv_static_0__ZN12_GLOBAL__N_14anonEPf"
    assert stable_symbol(INTERNAL) == "_ZN10_INTERNAL_6helperEf"
    for plain in ("_Z5plainPf", "c_kernel", "_ZN2ns4kernEPfi", "_Z7reduce6IfLj256ELb1EEvPT_PKS0_i"):
        assert stable_symbol(plain) == plain
    # an identifier ending in a digit just before the namespace's length: the length is the one that spans the name
    assert stable_symbol("_ZN4ver236_GLOBAL__N__e2ddefa3_4_n_cu_d589cb604anonEPf") == "_ZN4ver212_GLOBAL__N_14anonEPf"
    # text that only looks like one (no hashes after it) is left alone
    assert stable_symbol("_ZN11_GLOBAL__N_14anonEPf") == "_ZN11_GLOBAL__N_14anonEPf"


def test_a_symbol_of_another_compile_resolves_to_this_ones_kernel():
    assert resolve_entry(TEMPLATE, [TEMPLATE_AGAIN, "_Z5plainPf"]) == TEMPLATE_AGAIN
    assert resolve_entry(stable_symbol(ANON), [ANON_ELSEWHERE, "_Z5plainPf"]) == ANON_ELSEWHERE


def test_an_acf_records_the_symbol_without_its_per_compile_parts():
    # a regex entry an ACF cannot hold (^) is recorded as the symbol found, which must name the kernel elsewhere too
    assert _recorded_entry("regex:^anon", ANON) == "_ZN12_GLOBAL__N_14anonEPf"
    assert _recorded_entry("anon", ANON) == "anon"  # the user's own entry is kept as written


SOURCE = """
namespace {
struct Pair { float a, b; };
template <typename T>
__global__ void scale(T* x, float s, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) { x[i].a *= s; x[i].b += s * x[i].a; }
}
}  // namespace
void launch(Pair* x, float s, int n) { scale<<<(n + 255) / 256, 256>>>(x, s, n); }
"""


def _compile(folder: Path, *flags: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    src = folder / "scale.cu"
    src.write_text(SOURCE)
    cubin = folder / "scale.cubin"
    res = run_tool([find_tool("nvcc"), "-arch=sm_90", "-cubin", *flags, str(src), "-o", str(cubin)], 300)
    assert res.returncode == 0, res.tail()
    return cubin


@needs_nvcc
def test_the_same_code_compiled_twice_from_two_folders_hashes_the_same(tmp_path):
    first, second = _compile(tmp_path / "a"), _compile(tmp_path / "b")
    (k1,), (k2,) = cubin_entries(first), cubin_entries(second)
    assert k1 != k2  # nvcc named the kernel differently (the folder's hash, a number per compile)...
    assert stable_symbol(k1) == stable_symbol(k2)  # ...in the parts stable_symbol fixes only
    assert first.read_bytes() != second.read_bytes()
    assert inspect_elf(first).code_hash == inspect_elf(second).code_hash
    assert inspect_elf(first, entry=k1).code_hash == inspect_elf(second, entry=k2).code_hash
    assert resolve_entry(k1, [k2]) == k2
    other = _compile(tmp_path / "c", "-Xptxas", "-O0")  # other code still hashes otherwise
    assert inspect_elf(other).code_hash != inspect_elf(first).code_hash
    if shutil.which("cu++filt") or shutil.which("c++filt"):
        assert resolve_entry("scale", [k2]) == k2
