"""SASS instruction mix from nvdisasm: classes of opcodes, per kernel, agreeing with the cubin's instruction count."""

from __future__ import annotations

from pathlib import Path

import pytest

from compileiq_lab.exceptions import ConfigurationError
from compileiq_lab.measure.sass import OPCODE_CLASSES, disassembler_reason, instruction_mix, opcode_class, opcodes
from compileiq_lab.testing import tool_available

needs_tools = pytest.mark.skipif(not tool_available("nvcc") or disassembler_reason() is not None,
                                 reason="needs nvcc and nvdisasm (pip install -e '.[sass]')")

TWO_KERNELS = r"""
extern "C" __global__ void axpy(float a, const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
extern "C" __global__ void to_int(const float* x, int* y, int n) {
    __shared__ float s[128];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    s[threadIdx.x] = i < n ? x[i] : 0.f;
    __syncthreads();
    if (i < n) y[i] = __float2int_rn(s[127 - threadIdx.x]);
}
"""


CLASSES = {
    "memory": ("LDG.E.128", "STS", "LDL", "STL", "ULDC.64", "ATOMG.E.ADD", "RED.E.ADD", "LDGSTS.E", "TEX", "UBLKCP"),
    "fma/alu": ("FFMA", "IMAD.WIDE", "HMMA.16816", "LOP3.LUT", "PLOP3.LUT", "ISETP.GE", "MOV", "HGMMA.64x128x16"),
    "control": ("BRA", "EXIT", "BSSY", "BSYNC", "CALL.REL", "RET.REL", "WARPSYNC"),
    "conversion": ("F2I.TRUNC", "I2F", "I2FP.F32.S32", "F2FP.BF16.F32.PACK_AB", "FRND"),
    "barrier": ("BAR.SYNC", "MEMBAR.GPU", "DEPBAR.LE", "LDGDEPBAR", "SYNCS.ARRIVE.TRANS64"),
    "other": ("S2R", "CS2R", "SHFL.BFLY", "VOTE.ANY", "MATCH.ANY", "REDUX.SUM", "ELECT"),
}


def test_opcode_classes() -> None:
    for name, ops in CLASSES.items():
        assert {op: opcode_class(op) for op in ops} == dict.fromkeys(ops, name)


@pytest.fixture(scope="module")
def cubin(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import subprocess

    from compileiq_lab.toolchain.tools import find_tool

    folder = tmp_path_factory.mktemp("sass")
    (folder / "k.cu").write_text(TWO_KERNELS)
    subprocess.run([find_tool("nvcc"), "-cubin", "-arch=sm_90", "-o", str(folder / "k.cubin"), str(folder / "k.cu")],
                   check=True, capture_output=True)
    return folder / "k.cubin"


@needs_tools
def test_mix_per_kernel_adds_up_to_the_instruction_count(cubin: Path) -> None:
    from compileiq_lab.measure.binary import inspect_elf

    for kernel in ("axpy", "to_int"):
        mix = instruction_mix(cubin, kernel)
        assert list(mix) == list(OPCODE_CLASSES)
        assert sum(mix.values()) == inspect_elf(cubin, entry=kernel).sass_instructions  # padding left out alike
    axpy, to_int = opcodes(cubin, "axpy"), opcodes(cubin, "to_int")
    assert axpy["FFMA"] >= 1 and "F2I" not in axpy and "BAR" not in axpy
    assert to_int["F2I"] >= 1 and to_int["BAR"] >= 1 and to_int["STS"] >= 1 and "FFMA" not in to_int
    assert sum(instruction_mix(cubin).values()) == sum(axpy.values()) + sum(to_int.values())
    full = opcodes(cubin, "to_int", modifiers=True)  # LDG.E, F2I.NTZ...: the same instructions, finer kinds
    assert sum(full.values()) == sum(to_int.values()) and any(op.startswith("F2I.") for op in full)


@needs_tools
def test_missing_kernel_and_bad_file(cubin: Path, tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="'nope' is not in k.cubin; it holds axpy, to_int|to_int, axpy"):
        opcodes(cubin, "nope")
    bad = tmp_path / "bad.cubin"
    bad.write_bytes(b"not an elf")
    with pytest.raises(ConfigurationError, match="nvdisasm could not read bad.cubin"):
        opcodes(bad)


def test_without_nvdisasm_the_reason_names_the_extra(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import compileiq_lab.toolchain.tools as tools

    monkeypatch.setattr(tools.shutil, "which", lambda name: None)
    monkeypatch.setattr(tools, "_wheel_tool", lambda name: None)
    assert "compileiq-lab[sass]" in (disassembler_reason() or "")
    with pytest.raises(ConfigurationError, match=r"reading SASS needs nvdisasm.*\[sass\]"):
        opcodes(tmp_path / "x.cubin")
