"""Theoretical occupancy: how many blocks of a kernel fit on one SM, and which resource limits it."""

from __future__ import annotations

from dataclasses import dataclass

from compileiq_lab.exceptions import ConfigurationError

__all__ = ["ARCHS", "Occupancy", "SmLimits", "occupancy", "register_steps"]

#: Threads per warp, on every NVIDIA GPU.
WARP = 32
#: Registers are allocated to a warp in units of this many (cuda_occupancy.h: 256 on sm_30 to sm_120), i.e. a
#: thread's count is rounded up to a multiple of 8.
REG_UNIT = 256
#: An SM's register file is split between this many sub-partitions (schedulers); a warp's registers come from one.
SUB_PARTITIONS = 4


@dataclass(frozen=True)
class SmLimits:
    """What one SM of an architecture holds (CUDA C++ Programming Guide, "Technical Specifications per Compute
    Capability"; allocation units from cuda_occupancy.h).

    Attributes:
        max_warps: Resident warps. max_blocks: Resident blocks. registers: 32-bit registers in the register file.
        max_registers_per_thread: The most ptxas gives one thread (255 usable). shared_bytes: Shared memory an SM
        can give its blocks (the largest carveout). shared_unit: Shared memory allocation unit.
        reserved_shared: Shared memory the driver reserves per block (sm_80 and later).
    """

    max_warps: int
    max_blocks: int
    registers: int = 65536
    max_registers_per_thread: int = 255
    shared_bytes: int = 228 * 1024
    shared_unit: int = 128
    reserved_shared: int = 1024


#: Per architecture, the SM limits that decide occupancy.
ARCHS: dict[str, SmLimits] = {
    "sm_70": SmLimits(64, 32, shared_bytes=96 * 1024, shared_unit=256, reserved_shared=0),
    "sm_75": SmLimits(32, 16, shared_bytes=64 * 1024, shared_unit=256, reserved_shared=0),
    "sm_80": SmLimits(64, 32, shared_bytes=164 * 1024),
    "sm_86": SmLimits(48, 16, shared_bytes=100 * 1024),
    "sm_87": SmLimits(48, 16, shared_bytes=164 * 1024),
    "sm_89": SmLimits(48, 24, shared_bytes=100 * 1024),
    "sm_90": SmLimits(64, 32),
    "sm_100": SmLimits(64, 32),
    "sm_103": SmLimits(64, 32),
    "sm_120": SmLimits(48, 24, shared_bytes=100 * 1024),
    "sm_121": SmLimits(48, 24, shared_bytes=100 * 1024),
}


@dataclass(frozen=True)
class Occupancy:
    """The theoretical occupancy of one launch shape.

    Attributes:
        arch: The architecture. registers: Registers per thread (``ptxas -v``). registers_allocated: Per thread,
            after rounding the warp's share up to the allocation unit. threads_per_block, shared_bytes: The launch.
        limits: Blocks per SM each resource allows ("registers", "warps", "blocks", "shared memory").
        blocks_per_sm: The smallest of the limits. warps_per_sm: Resident warps. max_warps: The SM's maximum.
        limited_by: The resource(s) that set ``blocks_per_sm`` ("registers", or "warps+blocks", ...).
    """

    arch: str
    registers: int
    registers_allocated: int
    threads_per_block: int
    shared_bytes: int
    limits: dict[str, int]
    blocks_per_sm: int
    warps_per_sm: int
    max_warps: int
    limited_by: str

    @property
    def occupancy(self) -> float:
        """Resident warps over the SM's maximum (0 to 1)."""
        return self.warps_per_sm / self.max_warps


def _limits(arch: str) -> SmLimits:
    base = arch.replace("compute_", "sm_").rstrip("af")
    if base not in ARCHS:
        raise ConfigurationError(f"occupancy needs an architecture's SM limits, but {arch!r} is not one of "
                                 f"{', '.join(ARCHS)}; pass one of those")
    return ARCHS[base]


def _count(value: float, name: str) -> int:
    """A whole number as ptxas reports it (its metrics are floats: 40.0 is 40); anything else is refused."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != int(value):
        raise ConfigurationError(f"{name} must be a whole number, got {value!r}")
    return int(value)


def occupancy(registers: int, threads_per_block: int, shared_bytes: int = 0, arch: str = "sm_90") -> Occupancy:
    """Blocks of ``threads_per_block`` threads using ``registers`` per thread and ``shared_bytes`` of shared memory
    per block that fit on one SM of ``arch``: the calculation of CUDA's occupancy calculator (cuda_occupancy.h)
    with the largest shared-memory carveout. On a GPU, ``cudaOccupancyMaxActiveBlocksPerMultiprocessor`` is the
    authority; this is what it computes, without one.

    Raises:
        ConfigurationError: An unknown architecture, or a launch no SM can hold (the message says which limit).
    """
    sm = _limits(arch)
    registers, threads_per_block, shared_bytes = (_count(registers, "registers"),
                                                  _count(threads_per_block, "threads_per_block"),
                                                  _count(shared_bytes, "shared_bytes"))
    if not 1 <= threads_per_block <= 1024:
        raise ConfigurationError(f"threads per block must be 1 to 1024, got {threads_per_block}")
    if not 0 <= registers <= sm.max_registers_per_thread or shared_bytes < 0:
        raise ConfigurationError(f"registers per thread must be 0 to {sm.max_registers_per_thread} and shared "
                                 f"memory >= 0, got {registers} and {shared_bytes}")
    warps = -(-threads_per_block // WARP)
    per_warp = -(-registers * WARP // REG_UNIT) * REG_UNIT
    warps_by_registers = (sm.registers // SUB_PARTITIONS // per_warp) * SUB_PARTITIONS if per_warp else sm.max_warps
    smem = -(-(shared_bytes + sm.reserved_shared) // sm.shared_unit) * sm.shared_unit
    limits = {"registers": warps_by_registers // warps if per_warp else sm.max_blocks,
              "warps": sm.max_warps // warps, "blocks": sm.max_blocks,
              "shared memory": sm.shared_bytes // smem if smem else sm.max_blocks}
    blocks = min(limits.values())
    if blocks == 0:
        short = [k for k, v in limits.items() if v == 0]
        raise ConfigurationError(f"a block of {threads_per_block} threads with {registers} registers each and "
                                 f"{shared_bytes} bytes of shared memory does not fit on an {arch} SM "
                                 f"({' and '.join(short)}); use smaller blocks or fewer registers")
    return Occupancy(arch, registers, per_warp // WARP, threads_per_block, shared_bytes, limits, blocks,
                     blocks * warps, sm.max_warps, "+".join(k for k, v in limits.items() if v == blocks))


def register_steps(threads_per_block: int, shared_bytes: int = 0, arch: str = "sm_90") -> list[tuple[int, int]]:
    """The register counts at which occupancy changes for this launch: ``[(most registers, blocks per SM), ...]``
    from the fewest registers up, e.g. ``[(32, 8), (40, 6), ...]`` for 256 threads on sm_90: up to 32 registers
    8 blocks fit, 33 to 40 give 6. A register saving matters only where it crosses one of these steps."""
    sm = _limits(arch)
    steps: list[tuple[int, int]] = []
    for regs in range(1, sm.max_registers_per_thread + 1):
        try:
            blocks = occupancy(regs, threads_per_block, shared_bytes, arch).blocks_per_sm
        except ConfigurationError:
            break
        if steps and steps[-1][1] == blocks:
            steps[-1] = (regs, blocks)
        else:
            steps.append((regs, blocks))
    return steps
