"""Curated optimisation controls of gcc (12+) and clang (14+) for CPU kernels written in C."""

from __future__ import annotations

import logging
import platform
from collections.abc import Iterable

from compileiq_lab import space as ss
from compileiq_lab.space.catalogs.base import Catalog, Control

__all__ = ["CLANG", "GCC", "cpu_flags", "march_levels"]

log = logging.getLogger(__name__)

#: x86-64 micro-architecture levels and the /proc/cpuinfo flags each adds to the one before
#: (psABI x86-64 levels; "abm" is how Linux spells LZCNT).
_X86_LEVELS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("x86-64", ()),
    ("x86-64-v2", ("cx16", "lahf_lm", "popcnt", "sse4_1", "sse4_2", "ssse3")),
    ("x86-64-v3", ("avx", "avx2", "bmi1", "bmi2", "f16c", "fma", "abm", "movbe", "xsave")),
    ("x86-64-v4", ("avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl")),
)


def cpu_flags(path: str = "/proc/cpuinfo") -> frozenset[str]:
    """The instruction-set flags of the running CPU, as Linux lists them.

    Args:
        path: The cpuinfo file to read.

    Returns:
        The flags of the first processor; empty when the file is missing or has no flags line.
    """
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            for line in fh:
                key, _, value = line.partition(":")
                if key.strip() == "flags":
                    return frozenset(value.split())
    except OSError as exc:
        log.debug("cannot read %s (%s): assuming no optional CPU features", path, exc)
    return frozenset()


def march_levels(flags: Iterable[str] | None = None, machine: str | None = None) -> list[str]:
    """The ``-march`` levels whose code runs on this CPU (each level needs all lower ones).

    x86-64-v4 (AVX-512) is offered only where the CPU has avx512f and friends; note that
    valgrind cannot run AVX-512 code, so v4 binaries cannot be measured under cachegrind.

    Args:
        flags: CPU flags (default: read from /proc/cpuinfo).
        machine: ``platform.machine()`` value (default: this machine's).

    Returns:
        The levels in increasing order; empty on a non-x86-64 machine.
    """
    machine = platform.machine() if machine is None else machine
    if machine.lower() not in ("x86_64", "amd64"):
        return []
    have = cpu_flags() if flags is None else frozenset(flags)
    levels: list[str] = []
    for level, needed in _X86_LEVELS:
        if not set(needed) <= have:
            break
        levels.append(level)
    return levels


def _opt_level() -> Control:
    # always present: the compilers' default, -O0, is never worth a measurement; the baseline is the
    # release build every C build starts from (-O2, the catalog's base argument)
    return Control("opt_level", "-O", ss.choice([1, 2, 3, "s"], default=2), "-O{value}", "c", "code_generation",
                   "optimisation level (-Ofast is the separate, unsafe `ofast` control)")


def _ofast() -> Control:
    return Control("ofast", "-Ofast", ss.flag("-Ofast", 0.8), "{value}", "c", "code_generation",
                   "-O3 plus -ffast-math; overrides opt_level", tier="advanced", unsafe_math=True)


def _march(since: str) -> tuple[Control, ...]:
    levels = march_levels()
    if len(levels) < 2:
        log.info("no -march control: this CPU offers the x86-64 levels %s", levels)
        return ()
    return (Control("march", "-march=", ss.choice(levels, knockout_prob=0.3), "-march={value}", "c",
                    "code_generation", "target ISA level; only levels this CPU runs are offered "
                    "(x86-64-v4 = AVX-512, which valgrind cannot run)", since=since),)


def _switch(name: str, option: str, category: str, doc: str, tier: str = "common",
            knockout_prob: float = 0.5, unsafe_math: bool = False, since: str | None = None) -> Control:
    """A control choosing between ``-fX`` and ``-fno-X`` (knocked out: the compiler's default)."""
    off = option.replace("-f", "-fno-", 1)
    return Control(name, option, ss.choice([option, off], knockout_prob=knockout_prob), "{value}", "c",
                   category, doc, tier=tier, unsafe_math=unsafe_math, since=since)


def _flag(name: str, option: str, category: str, doc: str, tier: str = "common",
          knockout_prob: float = 0.6, unsafe_math: bool = False) -> Control:
    """A control that is either the option itself or absent."""
    return Control(name, option, ss.flag(option, knockout_prob), "{value}", "c", category, doc,
                   tier=tier, unsafe_math=unsafe_math)


def _math(fp_contract_values: list[str]) -> tuple[Control, ...]:
    return (
        _flag("no_math_errno", "-fno-math-errno", "math_precision",
              "math functions need not set errno, so sqrt etc. inline and vectorise (same results)"),
        _flag("fast_math", "-ffast-math", "math_precision",
              "lossy floating-point rewrites: reassociation, no NaN/Inf, flush-to-zero",
              tier="advanced", knockout_prob=0.8, unsafe_math=True),
        Control("fp_contract", "-ffp-contract=", ss.choice(fp_contract_values, knockout_prob=0.6),
                "-ffp-contract={value}", "c", "math_precision",
                "fuse multiply-add into FMA (fast: across statements, off: never); changes rounding",
                unsafe_math=True),
    )


def _gcc_params() -> tuple[Control, ...]:
    return (
        Control("max_unroll_times", "--param=max-unroll-times", ss.log_sampling(2, 32, 5, knockout_prob=0.6),
                "--param=max-unroll-times={value}", "c", "unrolling_vectorization",
                "most copies one loop is unrolled into (default 8; acts with -funroll-loops)", tier="advanced"),
        Control("max_unrolled_insns", "--param=max-unrolled-insns",
                ss.log_sampling(50, 800, 5, knockout_prob=0.7), "--param=max-unrolled-insns={value}", "c",
                "unrolling_vectorization", "largest unrolled loop body in insns (default 200)", tier="advanced"),
        Control("max_completely_peeled_insns", "--param=max-completely-peeled-insns",
                ss.log_sampling(50, 1600, 6, knockout_prob=0.7), "--param=max-completely-peeled-insns={value}",
                "c", "unrolling_vectorization",
                "largest loop body after complete peeling of constant-trip loops (default 200)", tier="exotic"),
    )


def _gcc_controls() -> tuple[Control, ...]:
    return (
        _opt_level(), _ofast(), *_march("11.1"),
        _flag("unroll_loops", "-funroll-loops", "unrolling_vectorization",
              "unroll loops whose trip count is known at entry"),
        _flag("unroll_all_loops", "-funroll-all-loops", "unrolling_vectorization",
              "unroll every loop, even with unknown trip count (usually slower)", tier="exotic", knockout_prob=0.8),
        _switch("tree_vectorize", "-ftree-vectorize", "unrolling_vectorization",
                "loop and SLP vectorizer (on at -O2 with the very-cheap cost model, off at -O1/-Os)"),
        _switch("slp_vectorize", "-ftree-slp-vectorize", "unrolling_vectorization",
                "straight-line (superword) vectorizer", tier="advanced", knockout_prob=0.7),
        Control("vect_cost_model", "-fvect-cost-model=",
                ss.choice(["unlimited", "dynamic", "cheap", "very-cheap"], knockout_prob=0.6),
                "-fvect-cost-model={value}", "c", "unrolling_vectorization",
                "how sure the vectorizer must be that vector code pays off", tier="advanced", since="11.1"),
        _flag("prefetch_loop_arrays", "-fprefetch-loop-arrays", "memory_caching",
              "insert software prefetches for arrays walked by loops", tier="advanced", knockout_prob=0.7),
        _switch("omit_frame_pointer", "-fomit-frame-pointer", "register_allocation",
                "free the frame-pointer register (on by default from -O1 on x86-64)", tier="advanced",
                knockout_prob=0.7),
        *_math(["fast", "off"]),
        _flag("ipa_pta", "-fipa-pta", "code_generation",
              "interprocedural points-to analysis (sharper alias info, slow to compile)", tier="exotic",
              knockout_prob=0.8),
        *_gcc_params(),
        _flag("schedule_insns", "-fschedule-insns", "scheduling",
              "schedule instructions before register allocation (off by default on x86)", tier="advanced",
              knockout_prob=0.7),
        _flag("sched_pressure", "-fsched-pressure", "scheduling",
              "register-pressure-aware pre-allocation scheduling (acts with -fschedule-insns)",
              tier="advanced", knockout_prob=0.7),
        _switch("loop_interchange", "-floop-interchange", "unrolling_vectorization",
                "swap nested loops for better locality (on at -O3)", tier="advanced", knockout_prob=0.7),
    )


def _clang_controls() -> tuple[Control, ...]:
    return (
        _opt_level(), _ofast(), *_march("12.0"),
        _switch("unroll_loops", "-funroll-loops", "unrolling_vectorization",
                "loop unroller (on by default from -O2)"),
        _switch("vectorize", "-fvectorize", "unrolling_vectorization",
                "loop vectorizer (on by default from -O2)"),
        _switch("slp_vectorize", "-fslp-vectorize", "unrolling_vectorization",
                "straight-line (superword) vectorizer (on by default from -O2)", tier="advanced",
                knockout_prob=0.7),
        _switch("omit_frame_pointer", "-fomit-frame-pointer", "register_allocation",
                "free the frame-pointer register (on by default with optimisation on x86-64)",
                tier="advanced", knockout_prob=0.7),
        *_math(["fast", "on", "off"]),
        Control("unroll_threshold", "-mllvm -unroll-threshold", ss.log_sampling(50, 1600, 6, knockout_prob=0.7),
                "-mllvm -unroll-threshold={value}", "c", "unrolling_vectorization",
                "LLVM unroller cost budget (default 300 at -O3, 150 at -O2)", tier="exotic"),
    )


# Every C compile starts from -O2 (a later -O from the search wins), so the baseline, the empty
# config, is the usual release build rather than the compilers' -O0.
_BASE = ("-O2",)

#: gcc controls; ``march`` holds only the x86-64 levels this CPU can run.
GCC = Catalog("gcc", _gcc_controls(), base_argv=_BASE)

#: clang controls; ``march`` holds only the x86-64 levels this CPU can run.
CLANG = Catalog("clang", _clang_controls(), base_argv=_BASE)
