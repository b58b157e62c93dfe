"""What can be tuned and how by default: catalogs per language, objectives per target, the targets a machine offers."""

from __future__ import annotations

import dataclasses
import functools
import logging
import math
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

from compileiq_lab import space as ss
from compileiq_lab.exceptions import ConfigurationError, StaticOnlyKernelError, did_you_mean
from compileiq_lab.kernels.spec import GPU_LANGUAGES, KernelSpec
from compileiq_lab.measure.backends.base import CUBIN_METRICS, HOST_METRICS, Backend
from compileiq_lab.measure.backends.c import CHost
from compileiq_lab.measure.backends.cuda import CudaFull, CudaTwoStage, PtxModule
from compileiq_lab.measure.cpu import CPU_METRICS
from compileiq_lab.measure.gpu import GPU_METRICS, gpu_target, gpu_unavailable_reason
from compileiq_lab.space.catalogs import Catalog, active, get_catalog
from compileiq_lab.space.catalogs.cuda import fixed_controls
from compileiq_lab.space.objectives import METRICS
from compileiq_lab.toolchain.nvidia_acf import apply_controls_problem
from compileiq_lab.toolchain.tools import find_tool

__all__ = [
    "CATALOGS",
    "CATALOG_NAMES",
    "CONTROL_NAMES",
    "DEFAULT_ARCH",
    "TARGETS",
    "ActiveCatalog",
    "active_catalog",
    "check_limits",
    "check_objectives",
    "controls_fixed_by",
    "default_objectives",
    "gpu_arch",
    "gpu_reason",
    "objective_choices",
    "offered_catalog",
    "run_backend",
    "run_catalog",
    "run_metrics",
    "run_target",
    "static_metrics",
    "targets",
    "without_avx512",
]

log = logging.getLogger(__name__)

#: The CUDA target when none is given and no GPU decides it.
DEFAULT_ARCH = "sm_90"
#: Catalogs per kernel language; the first is the default.
CATALOGS = {"cuda": ("nvcc", "ptxas", "nvrtc", "nvcc_frontend"), "ptx": ("ptxas",), "c": ("gcc", "clang")}
#: Every catalog name a kernel of some language may take (what any kernel's --space may name), in CATALOGS' order.
CATALOG_NAMES = tuple(dict.fromkeys(name for group in CATALOGS.values() for name in group))
#: Every control name of every catalog (what any kernel's --controls may name).
CONTROL_NAMES = frozenset(n for name in CATALOG_NAMES for n in get_catalog(name).names)
#: Where a kernel can be measured: on a GPU, on this CPU, or from its build alone.
TARGETS = ("gpu", "cpu", "static")
_DEFAULT_OBJECTIVES = {("cuda", "gpu"): ("runtime", "energy"), ("cuda", "static"): ("sass_instructions", "registers"),
                       ("ptx", "gpu"): ("runtime", "energy"), ("ptx", "static"): ("sass_instructions", "registers"),
                       ("c", "cpu"): ("runtime",), ("c", "static"): ("text_bytes", "compile_time")}
_RUN_TARGET = {"cuda": "gpu", "ptx": "gpu", "c": "cpu"}


def static_metrics(language: str) -> frozenset[str]:
    """Objectives a build of a kernel in ``language`` reports without running it."""
    return CUBIN_METRICS if language in GPU_LANGUAGES else HOST_METRICS


def run_metrics(language: str) -> frozenset[str]:
    """Objectives a run of a kernel in ``language`` measures."""
    return GPU_METRICS if language in GPU_LANGUAGES else CPU_METRICS


def objective_choices(language: str, target: str) -> list[str]:
    """The objectives to offer for a target, run ones first, in the order of ``METRICS``."""
    run = run_metrics(language) if target != "static" else frozenset()
    names = run | static_metrics(language)
    return sorted((n for n in METRICS if n in names), key=lambda n: n not in run)  # (a run's first objective leads)


def default_objectives(language: str, target: str) -> list[str]:
    """The objectives a run gets when none are chosen (the CLI and the lab alike)."""
    return list(_DEFAULT_OBJECTIVES[(language, "static" if target == "static" else _RUN_TARGET[language])])


@functools.lru_cache(maxsize=1)
def gpu_reason() -> str | None:
    """Why no GPU runs here (probed once, in a subprocess: this process never opens a CUDA context), or None."""
    return gpu_unavailable_reason()


@functools.lru_cache(maxsize=1)
def gpu_arch() -> str | None:
    """The first GPU's target (e.g. "sm_90"), probed once in a subprocess; None without a GPU."""
    return gpu_target()


def targets(kernel: KernelSpec) -> list[str]:
    """Where this kernel can be measured here, the first being the default: its runs when it can run and the
    machine can run it (a GPU for CUDA), then static metrics."""
    if kernel.static_only:
        return ["static"]
    if kernel.language in GPU_LANGUAGES and gpu_reason() is not None:
        return ["static"]
    return [_RUN_TARGET[kernel.language], "static"]


class ActiveCatalog(NamedTuple):
    """A catalog as the installed compiler supports it."""

    catalog: Catalog
    #: (control, reason) per control left out.
    left_out: tuple[tuple[str, str], ...]
    #: Why the curated catalog is used unchecked, or "".
    note: str


@functools.cache
def active_catalog(name: str) -> ActiveCatalog:
    """A catalog restricted to what the installed compiler supports (checked once per process).

    NVRTC options are checked against nvcc/ptxas where they exist; without them the curated
    catalog is used as it is (and ``note`` says so).

    Raises:
        SpaceDefinitionError: For an unknown catalog name.
        ConfigurationError: If the compiler is not installed (NVRTC excepted).
    """
    catalog = get_catalog(name)
    try:
        kept, left_out = active(catalog)
    except ConfigurationError:
        if name != "nvrtc":
            raise
        return ActiveCatalog(catalog, (), "no nvcc/ptxas to check NVRTC options against; using the whole "
                                          "curated catalog")
    return ActiveCatalog(kept, tuple(left_out), "")


def offered_catalog(name: str) -> ActiveCatalog:
    """The controls to offer for a catalog in a form: the active ones, or, where its compiler cannot be asked
    (not installed), the curated ones with the reason as ``note`` (a run then says what to install)."""
    try:
        return active_catalog(name)
    except ConfigurationError as exc:
        return ActiveCatalog(get_catalog(name), (), str(exc))


def run_target(kernel: KernelSpec, objectives: Sequence[str] | None, target: str | None) -> str:
    """Where the run measures: as given, else from the objectives, else the first target this machine offers."""
    runs = sorted(set(objectives or ()) & run_metrics(kernel.language))
    if target is not None:
        offered = ("gpu", "static") if kernel.language in GPU_LANGUAGES else ("cpu", "static")
        if target not in offered:
            raise ConfigurationError(f"target for a {kernel.language} kernel must be one of {list(offered)}, but got "
                                     f"{target!r}")
        if target == "static" and runs:
            raise ConfigurationError(f"a static target measures no runs, but the objectives {runs} are measured by "
                                     f"running the kernel; pick static objectives or target {offered[0]!r}")
        return target
    if objectives:
        return _RUN_TARGET[kernel.language] if runs else "static"
    return targets(kernel)[0]


def check_objectives(kernel: KernelSpec, names: Sequence[str]) -> None:
    allowed = static_metrics(kernel.language) | run_metrics(kernel.language)
    bad = [o for o in names if o not in allowed]
    if not names or bad:
        raise ConfigurationError(f"objectives for a {kernel.language} kernel must be among {sorted(allowed)}, but got "
                                 f"{list(names)}{did_you_mean(bad, allowed)}; pick from those")
    runs = set(names) & run_metrics(kernel.language)
    if runs and (kernel.static_only or not kernel.inputs):
        raise StaticOnlyKernelError(
            f"kernel {kernel.name!r} cannot run (it needs an entry, inputs, outputs and a reference in kernel.toml), "
            f"so objectives {sorted(runs)} cannot be measured; use static objectives "
            f"{sorted(static_metrics(kernel.language))}")


def check_limits(timeout_s: object, workers: object) -> None:
    """Refuse a per-call limit or a worker count that makes no sense (it would fail every candidate)."""
    if isinstance(timeout_s, bool) or not isinstance(timeout_s, (int, float)) or not (
            math.isfinite(timeout_s) and timeout_s > 0):
        raise ConfigurationError(f"`timeout_s is a finite number of seconds > 0` must hold, but got "
                                 f"timeout_s={timeout_s!r}; pass e.g. 120 (--timeout 120)")
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int) or workers < 1):
        raise ConfigurationError(f"`workers is None or an int >= 1` must hold, but got workers={workers!r}; pass "
                                 "the number of candidates to evaluate at once (--workers 4), or None for the default")


def run_catalog(language: str, catalog: str | Catalog | None, name: str | None, controls: Sequence[str] | None,
             categories: Sequence[str] | None, tiers: Sequence[str] | None,
             unsafe_math: bool, fixed: Sequence[str] = (), knobs: bool = False
             ) -> tuple[str, Catalog, tuple[tuple[str, str], ...], str]:
    """(header name, the catalog searched, controls left out with why, a note) of a kernel run; a control the
    kernel's ``fixed`` arguments set (``--use_fast_math``) is left out of the search, as the build has it.

    Raises:
        ConfigurationError: The selection leaves no control to search and the kernel has no -D knobs (``knobs``),
            among others.
    """
    if catalog is None:
        catalog = CATALOGS[language][0]
    left_out: tuple[tuple[str, str], ...] = ()
    note = ""
    if isinstance(catalog, str):
        name, (full, left_out, note) = catalog, active_catalog(catalog)
        chosen = full.select(names=controls, categories=categories, tiers=tiers, include_unsafe=unsafe_math)
    else:
        name = name or catalog.compiler
        subset = controls is not None or categories is not None or tiers is not None
        chosen = catalog.select(names=controls, categories=categories, tiers=tiers,
                                include_unsafe=unsafe_math) if subset else catalog
    chosen, left_out = _without_fixed(chosen, language, controls, fixed, left_out)
    if not chosen.controls and not knobs:
        selection = ", ".join(f"{k} {v}" for k, v in (("controls", controls), ("categories", categories),
                                                      ("tiers", tiers)) if v is not None)
        fixed_out = ", ".join(n for n, _ in left_out)
        raise ConfigurationError(f"`the run searches at least one control` must hold, but catalog {name!r}"
                                 f"{' with ' + selection if selection else ''} leaves none to search"
                                 f"{' once it leaves out ' + fixed_out if fixed_out else ''}; name controls the "
                                 f"catalog has in those categories (`compileiq-lab catalog {name}` lists them with "
                                 "theirs), or widen the selection")
    fits = {"frontend", "backend"} if language in GPU_LANGUAGES else {"c"}
    stages = {c.stage for c in chosen.controls} | set(chosen.stages)
    front = sorted(c.name for c in chosen.controls if c.stage == "frontend")
    if language == "ptx" and (front or chosen.compiler == "nvrtc"):
        raise ConfigurationError(
            f"catalog {name!r} controls the CUDA front end ({', '.join(front[:4]) or 'NVRTC'}"
            f"{' ...' if len(front) > 4 else ''}), but a PTX kernel has none: ptxas assembles it as it is; use "
            "--space ptxas")
    named_unsafe = sorted(c.name for c in chosen.controls if c.unsafe_math and not unsafe_math
                          and c.name in set(controls or ()))
    if named_unsafe:  # (named in --controls: kept, said)
        note = "; ".join(filter(None, [note, f"{', '.join(named_unsafe)} may change floating-point results: searched "
                                             "because named, each result checked against the reference"]))
    if stages - fits or (language == "c") != (chosen.compiler in ("gcc", "clang")):
        raise ConfigurationError(
            f"catalog {chosen.compiler!r} controls stages {sorted(stages)}, but a {language} kernel takes "
            f"{sorted(fits)}; use {'nvcc, ptxas or nvrtc' if language == 'cuda' else 'gcc or clang'}")
    return name, chosen, left_out, note


def controls_fixed_by(args: Sequence[str], language: str, catalog: Catalog | None = None) -> dict[str, str]:
    """The controls a ``language`` kernel's fixed build arguments set, each with the argument that sets it: a CUDA
    front-end switch and what it implies, or a C compiler's control of ``catalog`` (default gcc's)."""
    if language == "cuda":
        return fixed_controls(args)
    if language == "c":
        return (catalog if catalog is not None else get_catalog("gcc")).fixed_by(args)
    return {}


def _without_fixed(chosen: Catalog, language: str, controls: Sequence[str] | None, fixed: Sequence[str],
                   left_out: tuple[tuple[str, str], ...]) -> tuple[Catalog, tuple[tuple[str, str], ...]]:
    """``chosen`` less the controls the build's ``fixed`` arguments set (a CUDA front-end switch and what it
    implies, a C compiler's ``-funroll-loops`` or ``-march=native``), which join ``left_out``.

    Raises:
        ConfigurationError: A control named in ``controls`` is fixed too.
    """
    fixed_by = controls_fixed_by(fixed, language, chosen)
    both = [c for c in controls or () if c in fixed_by]
    if both:
        raise ConfigurationError(f"`a control is searched or fixed, not both` must hold, but got {both[0]} in "
                                 f"--controls and {fixed_by[both[0]]} among the build's fixed arguments; drop one of "
                                 "the two")
    drop = [c.name for c in chosen.controls if c.name in fixed_by]
    if not drop:
        return chosen, left_out
    why = tuple((n, f"the build fixes it ({fixed_by[n]})") for n in drop)
    return chosen.select(names=[c.name for c in chosen.controls if c.name not in fixed_by]), left_out + why


def run_backend(k: KernelSpec, catalog: Catalog, arch: str, workdir: Path, timeout_s: float, *, two_stage: bool,
                link: bool) -> Backend:
    """The compile path of a kernel run: a C host build, a PTX module, NVRTC, or nvcc (two stages or one call).

    Raises:
        ConfigurationError: NVIDIA control files with NVRTC, or with a ptxas that cannot apply them.
    """
    if k.language == "c":
        return CHost(k, workdir, compiler=catalog.compiler, timeout_s=timeout_s, link_harness=link, context=k.build)
    if k.nvidia_acfs:
        if catalog.compiler == "nvrtc":
            raise ConfigurationError("NVIDIA control files are applied by ptxas, which an NVRTC build does not "
                                     "run; use --space ptxas or nvcc with --nvidia-acf")
        problem = apply_controls_problem(find_tool("ptxas"))
        if problem:
            raise ConfigurationError(problem)
    if k.language == "ptx":
        return PtxModule(k.source_path, k.entry, arch, workdir, timeout_s)
    if catalog.compiler == "nvrtc":
        from compileiq_lab.measure.backends.nvrtc import Nvrtc

        return Nvrtc(k.source_path, k.entry, arch, workdir, k.build)
    kind = CudaTwoStage if two_stage else CudaFull
    return kind(k.source_path, k.entry, arch, workdir, timeout_s, k.build)


#: The -march level valgrind cannot run (AVX-512): never searched where instructions are counted under it.
_AVX512_LEVEL = "x86-64-v4"


def without_avx512(catalog: Catalog) -> tuple[Catalog, tuple[tuple[str, str], ...]]:
    """The catalog without ``-march=x86-64-v4`` (and the note saying so) for a run that counts instructions under
    valgrind, which stops at the first AVX-512 instruction; unchanged where it has no such value."""
    controls = []
    dropped: tuple[tuple[str, str], ...] = ()
    for c in catalog.controls:
        values = list(getattr(c.param, "values", ()))
        if c.name == "march" and _AVX512_LEVEL in values:
            kept = [v for v in values if v != _AVX512_LEVEL]
            dropped = ((f"march={_AVX512_LEVEL}", "instructions are counted under valgrind, which cannot run "
                        "AVX-512 code"),)
            if len(kept) < 1:
                continue
            c = dataclasses.replace(c, param=ss.choice(kept, knockout_prob=c.param.knockout_prob))
        controls.append(c)
    return (dataclasses.replace(catalog, controls=tuple(controls)) if dropped else catalog), dropped
