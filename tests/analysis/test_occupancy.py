"""Theoretical occupancy: hand-checked cases, and agreement with CUDA's own calculator (cuda_occupancy.h) on a grid."""

from __future__ import annotations

import itertools
import shutil
import subprocess
from pathlib import Path

import pytest

from compileiq_lab.analysis.occupancy import ARCHS, occupancy, register_steps
from compileiq_lab.exceptions import ConfigurationError
from compileiq_lab.toolchain.tools import cuda_include_dirs

DRIVER = Path(__file__).resolve().parents[1] / "data" / "occupancy" / "occ.cpp"


def test_registers_round_up_to_eight_per_thread() -> None:
    """31 and 28 registers both allocate 32: the same 8 blocks of 256 threads; 33 allocates 40: 6 blocks."""
    for regs in (28, 31, 32):
        o = occupancy(regs, 256)
        assert (o.registers_allocated, o.blocks_per_sm, o.occupancy) == (32, 8, 1.0)
    o = occupancy(33, 256)
    assert (o.registers_allocated, o.blocks_per_sm, o.warps_per_sm, o.limited_by) == (40, 6, 48, "registers")
    assert occupancy(255, 256).blocks_per_sm == 1


def test_other_limits() -> None:
    assert occupancy(32, 256, 48 * 1024).limits["shared memory"] == 4  # (48 KiB + 1 KiB reserved) into 228 KiB
    assert occupancy(16, 32).limited_by == "blocks"  # 32 blocks of one warp: the block limit, not the warps
    ga102 = occupancy(32, 256, arch="sm_86")
    assert (ga102.blocks_per_sm, ga102.max_warps, ga102.limited_by) == (6, 48, "warps")


def test_register_steps_are_where_occupancy_changes() -> None:
    steps = register_steps(256)
    assert steps[:3] == [(32, 8), (40, 6), (48, 5)] and steps[-1] == (255, 1)
    for (most, blocks), (nxt, _) in itertools.pairwise(steps):
        assert occupancy(most, 256).blocks_per_sm == blocks and occupancy(most + 1, 256).blocks_per_sm < blocks
        assert nxt > most


def test_bad_launches_say_what_to_change() -> None:
    with pytest.raises(ConfigurationError, match="sm_99.*is not one of"):
        occupancy(32, 256, arch="sm_99")
    with pytest.raises(ConfigurationError, match="1 to 1024, got 2048"):
        occupancy(32, 2048)
    with pytest.raises(ConfigurationError, match="does not fit.*shared memory"):
        occupancy(32, 256, 300 * 1024)


#: Per compute capability, from the CUDA C++ Programming Guide's "Technical Specifications per Compute Capability"
#: (written out here, not read from the module, so a wrong entry there fails): resident warps per SM, shared
#: memory per SM (KiB, the largest carveout), shared memory the driver reserves per block (KiB).
GUIDE = {"sm_70": (64, 96, 0), "sm_75": (32, 64, 0), "sm_80": (64, 164, 1), "sm_86": (48, 100, 1),
         "sm_87": (48, 164, 1), "sm_89": (48, 100, 1), "sm_90": (64, 228, 1), "sm_100": (64, 228, 1),
         "sm_103": (64, 228, 1), "sm_120": (48, 100, 1), "sm_121": (48, 100, 1)}


def test_sm_limits_are_the_programming_guides() -> None:
    assert set(ARCHS) == set(GUIDE)
    for arch, (warps, smem_kib, reserved_kib) in GUIDE.items():
        sm = ARCHS[arch]
        expected = (warps, smem_kib * 1024, reserved_kib * 1024)
        assert (sm.max_warps, sm.shared_bytes, sm.reserved_shared) == expected, arch


def test_counts_as_ptxas_reports_them() -> None:
    assert occupancy(40.0, 256.0).blocks_per_sm == 6  # ptxas metrics arrive as floats
    for bad in (True, 40.5, "40"):
        with pytest.raises(ConfigurationError, match="must be a whole number"):
            occupancy(bad, 256)  # type: ignore[arg-type]
    assert occupancy(0, 256).limited_by == "warps"  # no registers: nothing to limit by them


def _calculator() -> Path | None:
    headers = [Path(d) / "cuda_occupancy.h" for d in cuda_include_dirs()]
    found = [h for h in headers if h.is_file()]
    return found[0].parent if found and shutil.which("g++") else None


@pytest.mark.parametrize("arch", sorted(ARCHS))
def test_agrees_with_cuda_occupancy_h(arch: str, tmp_path: Path) -> None:
    """CUDA's header-only occupancy calculator, compiled with g++, on 1,000 launches per architecture."""
    include = _calculator()
    if include is None:
        pytest.skip("needs g++ and CUDA's cuda_occupancy.h (the toolkit, or the nvidia-cuda-runtime wheel)")
    exe = tmp_path / "occ"
    subprocess.run(["g++", "-std=c++11", "-I", str(include), str(DRIVER), "-o", str(exe)], check=True)
    sm = ARCHS[arch]
    major, minor = arch[3:-1], arch[-1]
    cases = [(r, t, s) for r in range(8, 256, 7) for t in (32, 64, 96, 128, 256, 384, 512, 1024)
             for s in (0, 4096, 20000, 49152)]
    warps, smem_kib, reserved_kib = GUIDE[arch]  # the device the calculator sees: the guide's, not the module's
    out = subprocess.run([str(exe), major, minor, str(warps), str(sm.max_blocks), str(smem_kib * 1024),
                          str(reserved_kib * 1024)], input="".join(f"{r} {t} {s}\n" for r, t, s in cases),
                         capture_output=True, text=True, check=True).stdout.split("\n")
    for (regs, threads, smem), line in zip(cases, out):
        err, theirs = map(int, line.split())
        assert err == 0, (arch, regs, threads, smem)
        try:
            ours = occupancy(regs, threads, smem, arch).blocks_per_sm
        except ConfigurationError:
            ours = 0
        assert ours == theirs, (arch, regs, threads, smem, ours, theirs)
