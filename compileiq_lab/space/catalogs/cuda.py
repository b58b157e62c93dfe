"""Curated CUDA controls: the nvcc front end (.cu -> .ptx) and ptxas (.ptx -> cubin), CUDA 12.x-13.x."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from compileiq_lab import space as ss
from compileiq_lab.space.catalogs.base import Catalog, Conflict, Control, option_name

__all__ = ["NVCC", "NVCC_FRONTEND", "NVRTC", "PTXAS", "fixed_arg_problem", "fixed_controls"]

_BOOL = [True, False]


class _DimsControl(Control):
    """A control whose value may be a block shape "X,Y[,Z]": rendered as one option per number.

    ptxas reads ``--maxntid=16 --maxntid=16`` as ``--maxntid=16,16`` (same cubin, measured with 13.0),
    and only the repeated form survives ``nvcc -Xptxas``, which splits its argument at commas
    (``-Xptxas --maxntid=16,16`` hands ptxas a stray input file "16").
    """

    def argv(self, value: Any) -> list[str]:
        """Arguments for one value: an int or "N" as is, "X,Y[,Z]" as the option once per number."""
        if isinstance(value, str) and "," in value:
            return [tok for dim in value.split(",") for tok in Control.argv(self, dim)]
        return Control.argv(self, value)


# Each control's knockout means "leave the compiler's default"; values the compiler silently
# ignores (ptxas -O4 and up, register-usage-level outside 0..10) are not offered, nor are debug,
# sanitiser or host-only switches (-G, -lineinfo, --sanitize, host -O).
# Measured with ptxas 13.0 and left out:
# - --maxrregcount below 24: every arch (sm_75..sm_120) warns "adjusting per thread register count of N
#   to lower bound of 24" and uses 24;
# - --device-function-maxrregcount: acts only with --compile-only (-c); every build here is whole-program
#   (two-stage ptxas, nvcc -cubin, NVRTC), where ptxas warns "not supported for 'whole program
#   compilation', will be ignored";
# - --compile-only (-c) and --extensible-whole-program (-ewp): relocatable (ET_REL) or extensible objects
#   that need a device link before a module load, which no build here does;
# - --position-independent-code=false: same .text, only symbol/info sections change;
# - --device-stack-protector, --sp-bounds-check, --dont-merge-basicblocks, --return-at-end,
#   --make-errors-visible-at-exit: hardening and debugging aids, not tuning;
# - --maxntid with more than 1024 threads (2048, "32,33"): accepted without a word, meaningless.
_PTXAS_CONTROLS = (
    Control("opt_level", "--opt-level", ss.choice([0, 1, 2, 3], knockout_prob=0.5), "-O{value}",
            "backend", "code_generation", "ptxas optimisation level (default 3; 2 and 3 often give the same code)"),
    # the grid of 12 log-spaced values from 32 is kept as it was: stored runs and ACFs hold its values (ptxas takes
    # down to 24, see above; a new grid would make every earlier maxrregcount ACF unreadable)
    Control("maxrregcount", "--maxrregcount", ss.log_sampling(32, 255, 12, knockout_prob=0.5),
            "--maxrregcount={value}", "backend", "register_allocation",
            "upper bound on registers per thread: fewer registers, more occupancy, maybe spills "
            "(24 is ptxas' floor on every arch; it overrides --maxntid and --minnctapersm)"),
    Control("register_usage_level", "--register-usage-level", ss.range(0, 10, knockout_prob=0.5),
            "--register-usage-level={value}", "backend", "register_allocation",
            "aggressiveness of optimisations that raise register use (0..10, default 5; beta)",
            tier="advanced", since="12.4"),
    Control("allow_expensive_optimizations", "--allow-expensive-optimizations",
            ss.choice(_BOOL, knockout_prob=0.5), "--allow-expensive-optimizations={value}", "backend",
            "scheduling", "allow optimisations that cost compile time and memory (default on at -O2+)",
            tier="advanced"),
    Control("def_load_cache", "--def-load-cache", ss.choice(["ca", "cg", "cs", "lu", "cv"], knockout_prob=0.6),
            "-dlcm={value}", "backend", "memory_caching",
            "default cache modifier of global loads (ca: L1+L2, cg: L2 only, cs: streaming, ...)", tier="advanced"),
    Control("def_store_cache", "--def-store-cache", ss.choice(["wb", "cg", "cs", "wt"], knockout_prob=0.7),
            "-dscm={value}", "backend", "memory_caching", "default cache modifier of global stores",
            tier="exotic"),
    Control("force_load_cache", "--force-load-cache", ss.choice(["ca", "cg", "cs", "lu", "cv"], knockout_prob=0.7),
            "-flcm={value}", "backend", "memory_caching",
            "cache modifier of every weak global load, also those the code set (__ldg, __ldcs); "
            "volatile/acquire loads keep theirs; wins over --def-load-cache", tier="advanced"),
    Control("force_store_cache", "--force-store-cache", ss.choice(["wb", "cg", "cs", "wt"], knockout_prob=0.8),
            "-fscm={value}", "backend", "memory_caching",
            "cache modifier of every weak global store, also those the code set (__stcs); "
            "wins over --def-store-cache", tier="exotic"),
    Control("minnctapersm", "--minnctapersm", ss.choice([1, 2, 3, 4, 6, 8], knockout_prob=0.7),
            "--minnctapersm={value}", "backend", "register_allocation",
            "minimum CTAs per SM to plan registers for (acts with --maxntid, or over __launch_bounds__ "
            "with --override-directive-values)", tier="advanced"),
    # 1-D values stay ints (as stored ACFs hold them); block shapes "X,Y[,Z]" come after them
    _DimsControl("maxntid", "--maxntid",
                 ss.choice([64, 128, 256, 512, 1024, "16,16", "32,8", "32,16", "32,32", "8,8,4", "16,16,4"],
                           knockout_prob=0.8),
                 "--maxntid={value}", "backend", "register_allocation",
                 "assumed maximum block shape (threads, or X,Y[,Z]: their product is the kernel's thread limit); "
                 "launches with more threads in all fail; ignored with --maxrregcount, and under "
                 "__launch_bounds__ unless --override-directive-values", tier="exotic"),
    Control("override_directive_values", "--override-directive-values",
            ss.flag("--override-directive-values", 0.7), "{value}", "backend", "register_allocation",
            "let --maxntid/--minnctapersm/--maxrregcount override the kernel's own launch bounds",
            tier="advanced"),
    Control("fast_compile", "--Ofast-compile", ss.choice(["min", "mid", "max"], knockout_prob=0.8),
            "--Ofast-compile={value}", "backend", "compile_speed",
            "trade runtime for compile speed by disabling optimisations", tier="exotic", since="12.8"),
    Control("split_compile", "--split-compile", ss.choice([0, 2, 4], knockout_prob=0.8),
            "--split-compile={value}", "backend", "compile_speed",
            "threads used by ptxas optimisations (0: all CPUs); compile time only", tier="exotic"),
    Control("disable_optimizer_constants", "--disable-optimizer-constants",
            ss.flag("--disable-optimizer-constants", 0.8),
            "{value}", "backend", "code_generation", "do not use the optimizer constant bank", tier="exotic"),
    Control("optimize_float_atomics", "--optimize-float-atomics", ss.flag("--optimize-float-atomics", 0.7),
            "{value}", "backend", "math_precision", "faster floating-point atomics that may change results",
            tier="advanced", unsafe_math=True),
    Control("ptxas_fmad", "--fmad", ss.choice(_BOOL, knockout_prob=0.7), "--fmad={value}", "backend",
            "math_precision", "contract multiply-add into FMA in ptxas (default true)", tier="advanced",
            unsafe_math=True),
)

# measured with ptxas 13.0: these combinations end in "Conflicting options"
_PTXAS_CONFLICTS = (
    Conflict({"fast_compile": ["min", "mid"]}, {"opt_level": [None, 1]},
             "ptxas: --Ofast-compile=min|mid only combines with -O1 (or no -O)"),
    Conflict({"fast_compile": ["max"]}, {"opt_level": [None, 0]},
             "ptxas: --Ofast-compile=max only combines with -O0 (or no -O)"),
    Conflict({"fast_compile": ["min"], "allow_expensive_optimizations": [False]}, {"fast_compile": []},
             "ptxas: --Ofast-compile=min conflicts with --allow-expensive-optimizations=false"),
)

PTXAS = Catalog("ptxas", _PTXAS_CONTROLS, _PTXAS_CONFLICTS)

_FRONTEND_CONTROLS = (
    Control("use_fast_math", "--use_fast_math", ss.flag("--use_fast_math", 0.7), "{value}", "frontend",
            "math_precision", "fast approximate math: ftz, approximate div/sqrt, fmad", unsafe_math=True),
    Control("ftz", "--ftz", ss.choice(_BOOL, knockout_prob=0.6), "--ftz={value}", "frontend", "math_precision",
            "flush single-precision denormals to zero", unsafe_math=True),
    Control("prec_div", "--prec-div", ss.choice(_BOOL, knockout_prob=0.6), "--prec-div={value}", "frontend",
            "math_precision", "IEEE-rounded single-precision division (false: faster approximation)",
            unsafe_math=True),
    Control("prec_sqrt", "--prec-sqrt", ss.choice(_BOOL, knockout_prob=0.6), "--prec-sqrt={value}", "frontend",
            "math_precision", "IEEE-rounded single-precision square root", unsafe_math=True),
    Control("fmad", "--fmad", ss.choice(_BOOL, knockout_prob=0.6), "--fmad={value}", "frontend",
            "math_precision", "contract multiply-add into FMA in the front end (default true)", unsafe_math=True),
    Control("extra_device_vectorization", "--extra-device-vectorization",
            ss.flag("--extra-device-vectorization", 0.5), "{value}", "frontend", "unrolling_vectorization",
            "more aggressive vectorisation of device code in the front end"),
    Control("cicc_opt", "-Xcicc", ss.choice([0, 1, 2, 3], knockout_prob=0.6), "-Xcicc -O{value}", "frontend",
            "code_generation", "NVVM (cicc) optimisation level (undocumented; default 3)", tier="advanced"),
    Control("restrict", "--restrict", ss.flag("--restrict", 0.7), "{value}", "frontend", "code_generation",
            "assume kernel pointer parameters do not alias (wrong if they do)", tier="advanced",
            unsafe_math=True),
    Control("jump_table_density", "--jump-table-density", ss.choice([0, 10, 25, 50, 75, 100], knockout_prob=0.7),
            "--jump-table-density={value}", "frontend", "code_generation",
            "case density (percent) from which a switch becomes a jump table (default 101: never)",
            tier="advanced"),
)
# Measured with nvcc 13.0 and NVRTC 13.0 and left out:
# - --dopt: its only value is "on", which is implicit without -G (and -G is a debug switch);
# - --dlink-time-opt (-dlto), with or without -rdc=true: nvcc refuses it with -ptx ("'-dlto' is not
#   compatible with '-ptx'") and with -cubin ("Option '-dlto' cannot generate '--cubin' intermediate at
#   compile time"); NVRTC returns LTO IR and no cubin;
# - --relocatable-device-code=true (-rdc): nvcc -cubin (it adds ptxas --compile-only) and NVRTC give a
#   relocatable cubin that needs a device link before a module load; in the two-stage build ptxas
#   assembles the PTX as a whole program unless given -c, so the two builds would differ. A device-link
#   mode needs a linking build (nvlink or nvJitLink) first.

NVCC_FRONTEND = Catalog("nvcc", _FRONTEND_CONTROLS)

#: Front end and ptxas together: the full space of a two-stage CUDA compile.
NVCC = Catalog("nvcc", _FRONTEND_CONTROLS + _PTXAS_CONTROLS, _PTXAS_CONFLICTS)

#: The same controls as NVRTC options (front end as is, ptxas ones through -Xptxas=); NVRTC has no -Xcicc.
NVRTC = Catalog("nvrtc", tuple(c for c in _FRONTEND_CONTROLS if c.name != "cicc_opt") + _PTXAS_CONTROLS,
                _PTXAS_CONFLICTS)

#: nvcc options that choose what a compile writes, or write files of their own: never fixed arguments of a CUDA
#: build (the tool picks the output). Compared without their dashes and ``=value``.
_OUTPUT_OPTIONS = frozenset({"fatbin", "cubin", "ptx", "fdevice-time-trace", "fdevice-syntax-only", "m32", "machine",
                             "forward-unknown-to-host-linker", "optix-ir", "ltoir", "lto", "dlink", "dlto", "lib",
                             "link", "run"})


@functools.cache
def _control_spellings() -> dict[str, Control]:
    """Each spelling of a CUDA control's option, without dashes, to the control (``Catalog.spellings`` of nvcc's)."""
    return NVCC.spellings()


#: The rule a CUDA build's fixed arguments keep (see ``fixed_arg_problem``).
FIXED_ARG_RULE = ("a fixed argument of a CUDA build (after --, or [build] args) is neither a ptxas control nor an "
                  "output choice")
#: Front-end controls a fixed one sets too (nvcc's --use_fast_math is --ftz=true --prec-div=false
#: --prec-sqrt=false --fmad=true).
_IMPLIED = {"use_fast_math": ("ftz", "prec_div", "prec_sqrt", "fmad")}


def fixed_arg_fix(problem: str) -> str:
    """What a message about a refused fixed argument says: why (``fixed_arg_problem``'s answer), then the fix."""
    return (f"{problem[:1].upper()}{problem[1:]}. Drop it: search the control instead (--controls NAME; "
            "`compileiq-lab catalog` lists each control's values), or keep only dialect, warning and front-end "
            "switches such as -std=c++17 or --use_fast_math.")


def fixed_arg_problem(arg: str) -> str | None:
    """Why a fixed argument may not go in a CUDA build, or None. Fixed arguments reach only the front end (``nvcc
    -ptx``, NVRTC) while ptxas builds each candidate, so a ptxas control given as one (``-maxrregcount=16``) would be
    missing from the code measured though a real build has it; an option that picks the output (``-fatbin``) is the
    tool's to choose. A front-end control (``--use_fast_math``, ``-ftz=true``) is the build's as the user has it:
    it is left out of the search (``fixed_controls``)."""
    name = option_name(arg)
    if name in _OUTPUT_OPTIONS:
        return "it chooses what nvcc writes, which the tool chooses"
    control = _control_spellings().get(name)
    if control is None or control.stage != "backend":
        return None
    return (f"it sets the ptxas control {control.name!r}: fixed arguments reach only the front end (nvcc -ptx, "
            "NVRTC), so the code measured would lack it while a real build has it")


def fixed_controls(args: Sequence[str]) -> dict[str, str]:
    """The front-end controls a CUDA build's fixed arguments set (those they imply included), each with the argument
    that sets it: the search leaves them as the build has them."""
    out: dict[str, str] = {}
    for arg in args:
        control = _control_spellings().get(option_name(arg))
        if control is not None and control.stage != "backend":
            for name in (control.name, *_IMPLIED.get(control.name, ())):
                out.setdefault(name, arg)
    return out
