"""The canary: before a search, check that the compiler controls reach the compiler at all.

A compiler wrapper or a framework's cache that drops the arguments makes every candidate the same machine code, and a
search then "finds" noise. The canary compiles the run's baseline and the baseline with the catalog's optimisation
level at its lowest (``-O0``), once per argument stage that has such a control (ptxas, the nvcc front end, a C
compiler), and asks for different machine code. With a GPU runner it also times the two builds in interleaved rounds
and notes whether the difference shows in the time (a memory-bound kernel may run as fast at ``-O0``).
"""

from __future__ import annotations

import logging
import math
import re
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from compileiq_lab.exceptions import ConfigurationError
from compileiq_lab.measure.archvariant import variant_problem
from compileiq_lab.measure.backends.base import Backend
from compileiq_lab.measure.binary import inspect_elf
from compileiq_lab.measure.entries import cubin_entries, kernel_listing
from compileiq_lab.measure.evaluator import config_argv
from compileiq_lab.measure.gpu import GpuRunner
from compileiq_lab.measure.nvcc import CudaCompiler
from compileiq_lab.measure.stats import compare
from compileiq_lab.measure.templates import instantiation_hint
from compileiq_lab.space.catalogs import CATALOGS, Catalog, Control
from compileiq_lab.space.catalogs.base import controls_of
from compileiq_lab.toolchain.tools import find_tool, keep_ends

if TYPE_CHECKING:
    from compileiq_lab.kernels.run import KernelRun

__all__ = ["MIN_TIME_DIFFERENCE", "NO_CONTROL", "ROUNDS", "CanaryResult", "canary", "check_canary",
           "optimisation_controls"]

log = logging.getLogger(__name__)

#: The reason of a canary that had nothing to test (it passes: a canary that cannot run must not block a search).
NO_CONTROL = "no optimisation-level control to test"
#: A time difference of at least this fraction counts as measurable (so does one whose confidence interval excludes 1).
MIN_TIME_DIFFERENCE = 0.05
#: Interleaved timing rounds per build.
ROUNDS = 30
#: An optimisation-level control: its argument ends in ``-O{value}`` (ptxas, gcc and clang ``-O``, ``-Xcicc -O``).
_LEVEL = re.compile(r"(?:^|\s)-O\{value\}$")
#: Which stage's control is tested first (and timed): the one that makes the machine code.
_STAGE_ORDER = {"backend": 0, "c": 0, "frontend": 1}


@dataclass(frozen=True)
class CanaryResult:
    """What the canary found.

    Attributes:
        ok: The controls reach the compiler (or there was nothing to test); False: do not search.
        reason: What was found, in words (for a failure: the rule, what happened, the likely causes and the fix).
        control: The optimisation-level control tested (the failing one, else the first tested), or None.
        value: The value it was set to (the lowest level, 0; the highest when the baseline already sets 0).
        stage: The argument stage of ``control`` ("backend", "frontend", "c").
        baseline_hash, canary_hash: The machine-code hashes of the baseline and of the baseline plus ``control``.
        baseline_argv, canary_argv: The compiler arguments of the two builds, per stage.
        baseline_time_s, canary_time_s: Median seconds per launch of the two builds (None without a GPU runner, for
            static runs, with ``measure=False`` or when the timing failed).
        time_ratio: ``canary_time_s / baseline_time_s`` (> 1: the canary build is slower).
        time_differs: Whether the two times differ measurably (see ``MIN_TIME_DIFFERENCE``); None when not timed.
        checked: Every control whose code change was checked, in order.
    """

    ok: bool
    reason: str
    control: str | None = None
    value: Any = None
    stage: str | None = None
    baseline_hash: str | None = None
    canary_hash: str | None = None
    baseline_argv: Mapping[str, Sequence[str]] | None = None
    canary_argv: Mapping[str, Sequence[str]] | None = None
    baseline_time_s: float | None = None
    canary_time_s: float | None = None
    time_ratio: float | None = None
    time_differs: bool | None = None
    checked: tuple[str, ...] = ()


def optimisation_controls(catalog: Catalog) -> tuple[Control, ...]:
    """The catalog's optimisation-level controls, one per argument stage, the machine-code stage first.

    A control counts when its argument ends in ``-O{value}``: ptxas ``opt_level`` (back end), nvcc's ``cicc_opt``
    (``-Xcicc -O``, front end), gcc's and clang's ``opt_level`` (``-O``).
    """
    found = sorted((c for c in catalog.controls if _LEVEL.search(c.template)), key=lambda c: _STAGE_ORDER[c.stage])
    by_stage: dict[str, Control] = {}
    for c in found:
        by_stage.setdefault(c.stage, c)
    return tuple(by_stage.values())


def canary(run: KernelRun, *, measure: bool = True) -> CanaryResult:
    """Check, before a search, that the compiler controls change the machine code.

    Compiles the run's baseline (``run.baseline_config()``) and the baseline with each optimisation-level control
    (see ``optimisation_controls``; from the compiler's curated catalog when the run's own subset has none) at its
    lowest level, in a scratch folder (nothing is cached for the run). The same machine code means the arguments did
    not reach the compiler. With ``measure`` and a GPU runner the first control's two builds are also timed.

    Args:
        run: The kernel run about to be searched.
        measure: Time the two builds on the run's GPU runner, if it has one.

    Returns:
        The result; it raises nothing: a canary build that fails is ``ok`` False with the compiler's message in
        ``reason``; a baseline that does not compile, or a failed timing, leaves ``ok`` True (the search's baseline
        row reports the first; the reason says why it was not timed).
    """
    catalog, controls = _catalog_with_levels(run)
    if not controls:
        return CanaryResult(True, NO_CONTROL)
    base = run.baseline_config() or {}
    run.workdir.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="canary-", dir=run.workdir))
    try:
        try:
            backend = run.scratch_backend(scratch)
        except ConfigurationError as exc:  # a remote run compiles on its workers: not checked here, not blocked
            why = str(exc).splitlines()[0]
            where = " (this run compiles on its cluster's workers: not checked here)" if run.remote else ""
            return CanaryResult(run.remote, f"the canary must compile with the run's compilers here, but it cannot: "
                                            f"{why}{where}")
        return _check(run, catalog, controls, backend, base, measure)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def check_canary(run: KernelRun, *, measure: bool = True) -> None:
    """Run the canary (see ``canary``) before a search; a passing one logs its reason.

    Raises:
        ConfigurationError: The controls did not change the machine code, or a canary build did not compile (the
            message says which, with both builds' arguments and the fix).
    """
    result = canary(run, measure=measure)
    if not result.ok:
        raise ConfigurationError(result.reason)
    log.info("canary: %s", result.reason)


# -- the builds --------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Build:
    argv: dict[str, list[str]]
    path: Path | None
    code_hash: str | None
    error: str
    log: str = ""


def _catalog_with_levels(run: KernelRun) -> tuple[Catalog, tuple[Control, ...]]:
    """The run's catalog when it has an optimisation-level control, else the compiler's curated one (a run that
    searches a subset still gets the check), else the run's with none."""
    controls = optimisation_controls(run.catalog)
    full = CATALOGS.get(run.catalog_name)
    if controls or full is None or full.compiler != run.catalog.compiler:
        return run.catalog, controls
    return full, optimisation_controls(full)


def _compile(run: KernelRun, catalog: Catalog, backend: Backend, config: Mapping[str, Any]) -> _Build:
    argv = config_argv(run.kernel, catalog, config)
    outcome = backend.compile(argv)
    if not outcome.ok or outcome.path is None:
        stage = f" ({outcome.stage} stage)" if outcome.stage else ""
        return _Build(argv, None, None, f"{outcome.status}{stage}: {keep_ends(outcome.error.strip(), 1200)}")
    code = inspect_elf(outcome.path, kind=backend.binary_kind, entry=outcome.symbol).code_hash
    return _Build(argv, outcome.path, code, "", outcome.log)


#: The preprocessor's warning (gcc's, which nvcc uses too) when a source #defines a macro the command line defined.
_REDEFINED = re.compile(r'"([A-Za-z_][A-Za-z0-9_]*)" redefined')


def _warn_overridden_defines(run: KernelRun, compiler_log: str) -> list[str]:
    """Warn about the fixed defines and -D knobs the source #defines again (the compiler warned that it redefines
    them): the source's value applies after its #define, so the value given, or searched, may not. Returns their
    names."""
    given = run.kernel.build.define_names() | set(run.kernel.defines)
    names = sorted(set(_REDEFINED.findall(compiler_log)) & given)
    for name in names:
        what = "-D knob" if name in run.kernel.defines else "--define"
        log.warning("the source #defines %s again, after the %s %s=...: the compiler warns \"%s\" redefined, and "
                    "from that line on the source's value applies; guard it with #ifndef %s, or drop the %s",
                    name, what, name, name, name, what)
    return names


def _level(control: Control, base: Mapping[str, Any]) -> Any:
    """The lowest optimisation level, 0 (every compiler with a ``-O{value}`` control reads ``-O0`` as none), or the
    domain's highest when the baseline already sets 0."""
    if base.get(control.name) != 0:
        return 0
    numbers = [v for v in getattr(control.param, "values", ()) if isinstance(v, int) and not isinstance(v, bool)]
    return max(numbers, default=3)


def _check(run: KernelRun, catalog: Catalog, controls: Sequence[Control], backend: Backend,
           base: Mapping[str, Any], measure: bool) -> CanaryResult:
    baseline = _compile(run, catalog, backend, base)
    if baseline.error:  # the search's baseline reports it (and whether a searched control may fix it): not blocked
        return CanaryResult(True, f"not checked: the baseline does not compile ({baseline.error[:300]}); the search's "
                                  "baseline row reports it", baseline_argv=baseline.argv)
    _warn_overridden_defines(run, baseline.log)
    unfit = _module_problem(run, backend, baseline)
    if unfit is not None:
        return unfit
    tested: list[tuple[Control, Any, _Build]] = []
    skipped: list[str] = []
    for control in controls:
        value = _level(control, base)
        config = {**base, control.name: value}
        conflict = catalog.conflict(controls_of(config))
        if conflict:
            skipped.append(f"{control.name}={value} not tested ({conflict})")
            continue
        build = _compile(run, catalog, backend, config)
        facts = _facts(control, value, baseline, build, [*(c.name for c, _, _ in tested), control.name])
        shown = " ".join(control.argv(value))
        if build.error:
            return CanaryResult(False, f"the canary build (the baseline plus {control.name}={value}, `{shown}`) must "
                                       f"compile, but it failed: {build.error}; arguments {build.argv}; fix: check "
                                       f"that the compiler takes `{shown}` (a wrapper that rewrites arguments may "
                                       "not), or put the real compiler first on PATH", **facts)
        if build.code_hash == baseline.code_hash:
            return CanaryResult(False, _same_code(run, backend, control, value, baseline, build), **facts)
        tested.append((control, value, build))
    if not tested:
        return CanaryResult(True, f"{NO_CONTROL}: {'; '.join(skipped)}")
    control, value, build = tested[0]
    facts = _facts(control, value, baseline, build, [c.name for c, _, _ in tested])
    names = ", ".join(f"{c.name}={v}" for c, v, _ in tested)
    reason = f"the controls reach the compiler: {names} changed the machine code"
    if skipped:
        reason += f" ({'; '.join(skipped)})"
    gpu = run.gpu
    if not measure or gpu is None or baseline.path is None or build.path is None:
        return CanaryResult(True, reason, **facts)
    return _timed(gpu, base.get("defines"), baseline.path, build.path, f"{control.name}={value}", reason, facts)


def _module_problem(run: KernelRun, backend: Backend, baseline: _Build) -> CanaryResult | None:
    """What the baseline's module says before any control is tried: a CUDA source that needs another arch variant
    and a multi-kernel module without an entry are warned about; a module without a kernel fails the check."""
    cc = getattr(backend, "cc", None)
    if run.kernel.language == "cuda" and isinstance(cc, CudaCompiler):
        variant = variant_problem(cc, run.kernel.source_path, baseline.argv.get("frontend", ()))
        if variant:
            log.warning("%s", variant)
    kernels = cubin_entries(baseline.path) if backend.binary_kind == "cubin" and baseline.path is not None else None
    if kernels and len(kernels) > 1 and run.kernel.entry is None:
        log.warning("%s holds %d kernels and no entry names one, so the static metrics are the whole module's "
                    "(registers and spills: the most any kernel has; sass_instructions: all of them together); pass "
                    "--entry NAME to tune one of: %s", run.kernel.source_path.name, len(kernels),
                    kernel_listing(kernels))
    if kernels is not None and not kernels:
        hint = instantiation_hint(run.kernel.source_path) or (
            "a template __global__ kernel has code only once instantiated: add one "
            "(`template __global__ void k<256>(float*);`)")
        return CanaryResult(False, f"{run.kernel.source_path.name} must hold a kernel to tune (a __global__ function, "
                                   "or a PTX .entry), but it holds none: it compiled to a module without one; fix: "
                                   "tune the file that defines the kernel (a file of host code or device functions "
                                   f"alone has nothing to measure); {hint}, and name it with --entry",
                            baseline_argv=baseline.argv)
    return None


def _facts(control: Control, value: Any, baseline: _Build, build: _Build, checked: Sequence[str]) -> dict[str, Any]:
    """The result's fields that say what was built."""
    return {"control": control.name, "value": value, "stage": control.stage, "baseline_hash": baseline.code_hash,
            "canary_hash": build.code_hash, "baseline_argv": baseline.argv, "canary_argv": build.argv,
            "checked": tuple(checked)}


def _same_code(run: KernelRun, backend: Backend, control: Control, value: Any, baseline: _Build,
               build: _Build) -> str:
    shown = " ".join(control.argv(value))
    return (f"the compiler controls must change the machine code, but they did not: the baseline and the baseline plus "
            f"{control.name}={value} (`{shown}`, {control.stage} stage) compiled to the same code (hash "
            f"{(baseline.code_hash or '')[:16]}); baseline arguments {baseline.argv}, canary arguments {build.argv}; "
            f"compilers used: {_compilers(backend)}. Likely causes: a kernel too small for any optimisation level to "
            "change its code (an empty or one-statement kernel), a compiler wrapper or a framework cache that "
            "drops or overrides the arguments, or a compiler first on PATH that is not the real one. A search of "
            f"{run.kernel.name!r} here would only measure noise. Fix: tune the real kernel (or pass --no-canary to "
            "search anyway), or put the real compiler first on PATH (or remove the wrapper, or turn the cache off), "
            "then run again")


def _compilers(backend: Backend) -> str:
    """The backend's compilers, each with its version and where PATH (or the CUDA wheels) finds it."""
    try:
        versions = backend.toolchain()
    except ConfigurationError as exc:
        return f"unknown ({str(exc).splitlines()[0]})"
    out = []
    for name, version in versions.items():
        try:
            where = f" at {find_tool(name)}"
        except ConfigurationError:  # a library (NVRTC), not an executable
            where = ""
        out.append(f"{name} {version}{where}")
    return ", ".join(out) or "unknown"


# -- the timing ----------------------------------------------------------------------------------------------------
def _timed(gpu: GpuRunner, defines: Mapping[str, Any] | None, baseline: Path, build: Path, label: str, reason: str,
           facts: dict[str, Any]) -> CanaryResult:
    """The passing result with both builds timed in interleaved rounds (a failed timing is noted, not raised)."""
    try:
        reply = gpu.remeasure({"baseline": (baseline, defines), "canary": (build, defines)}, rounds=ROUNDS)
    except ConfigurationError as exc:
        return CanaryResult(True, f"{reason}; the two builds could not be timed: {str(exc).splitlines()[0]}", **facts)
    samples = reply.get("samples", {})
    failed = {k: msg for k, (ok, msg) in reply.get("checks", {}).items() if not ok}
    if failed or len(samples.get("baseline", ())) < 2 or len(samples.get("canary", ())) < 2:
        why = "; ".join(f"{k}: {m}" for k, m in failed.items()) or "too few timing samples"
        return CanaryResult(True, f"{reason}; the two builds could not be timed ({why})", **facts)
    b, c = samples["baseline"], samples["canary"]
    try:
        comparison = compare(b, c, method="paired-bootstrap")
    except ValueError as exc:  # a sample that is not a positive time
        return CanaryResult(True, f"{reason}; the two builds could not be timed ({exc})", **facts)
    b_med, c_med = float(np.median(b)), float(np.median(c))
    ratio = c_med / b_med
    differs = abs(math.log(ratio)) >= math.log1p(MIN_TIME_DIFFERENCE) or comparison.win or comparison.loss
    timed = {**facts, "baseline_time_s": b_med, "canary_time_s": c_med, "time_ratio": ratio, "time_differs": differs}
    if not differs:
        return CanaryResult(True, f"{reason}, but not the time: {label} ran {ratio:.3f}x the baseline's time (less "
                                  f"than {MIN_TIME_DIFFERENCE:.0%} apart, the interval overlaps); the kernel may be "
                                  "bound by memory rather than code, so wins in time may be few", **timed)
    how = "slower" if ratio > 1 else "faster"
    return CanaryResult(True, f"{reason} and the time: {label} ran {ratio:.3f}x the baseline's time ({how})", **timed)

