"""KernelRun: the one place a kernel run is composed (spec, catalog, objectives, arch, backend, runner, header)."""

from __future__ import annotations

import dataclasses
import logging
import os
import shutil
import tempfile
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from compileiq_lab.exceptions import ConfigurationError, SearchStateError
from compileiq_lab.kernels.baseline import baseline_stop_reason, wrong_output_stop_reason
from compileiq_lab.kernels.choices import (
    DEFAULT_ARCH,
    check_limits,
    check_objectives,
    default_objectives,
    gpu_arch,
    run_backend,
    run_catalog,
    run_metrics,
    run_target,
    without_avx512,
)
from compileiq_lab.kernels.cudalibs import cuda_version
from compileiq_lab.kernels.headers import changes_since, headers_sha256
from compileiq_lab.kernels.load import adapt_kernel, kernel_ref, load_kernel
from compileiq_lab.kernels.reopen import RecordedPoint, acf_arguments, header_arguments
from compileiq_lab.kernels.scratch import scratch_folder
from compileiq_lab.kernels.signature import launch_types
from compileiq_lab.kernels.spec import GPU_LANGUAGES, KernelSpec
from compileiq_lab.kernels.stages import ClusterStages, portable
from compileiq_lab.measure.backends.base import Backend
from compileiq_lab.measure.cpu import CpuRunner
from compileiq_lab.measure.entries import ptx_header
from compileiq_lab.measure.evaluator import KernelEvaluator, config_argv, config_conflict, kernel_space
from compileiq_lab.measure.gpu import GpuOptions, GpuRunner, start_gpu_runner
from compileiq_lab.measure.measurement import Measurement
from compileiq_lab.measure.runner import Runner
from compileiq_lab.space.catalogs import Catalog
from compileiq_lab.space.objectives import METRICS, Objective
from compileiq_lab.space.space import SearchSpace
from compileiq_lab.store.header import KernelMeta, RunHeader
from compileiq_lab.store.sqlite import EvalRecord
from compileiq_lab.toolchain.context import BuildContext

__all__ = ["KernelRun", "RecordedPoint"]

log = logging.getLogger(__name__)


class KernelRun(ClusterStages):
    """A kernel to tune: its spec, the catalog controls searched, the objectives, the target and the build.

    It picks the compile backend (CUDA two-stage, full nvcc, NVRTC or a C host build) and, for run
    objectives, the runner (a GPU worker, or timed CPU runs), and builds the evaluator from them. It
    is the objective of a search (``Search.of(kernel_run, generations=...)``) and rebuilds itself
    from a stored run's header (``from_header``) or an ACF (``from_acf``).

    Args:
        kernel: A bundled kernel name, a kernel folder (kernel.toml), a .cu/.cuh/.ptx/.c file, or a loaded KernelSpec.
        catalog: A catalog name (restricted to what the installed compiler supports) or a Catalog used as
            it is; default: nvcc for CUDA kernels, gcc for C kernels.
        objectives: Objective names (see ``compileiq_lab.space.METRICS``); default: by target
            (GPU: runtime, energy; CPU: runtime; static CUDA: sass_instructions, registers;
            static C: text_bytes, compile_time).
        target: "gpu", "cpu" or "static"; default: from the objectives, else the first this machine offers
            for the kernel (a GPU for a runnable CUDA kernel where one is usable, the CPU for a runnable C one).
        arch: CUDA target; default: the GPU's own for GPU runs, else sm_90.
        controls, categories, tiers: Keep only these controls of the catalog (names, categories, tiers).
        unsafe_math: Also search precision-changing controls (named ones are always kept).
        two_stage: CUDA: nvcc -ptx once per front-end set, then ptxas (else one full nvcc call each).
        timeout_s: Limit per compiler call and per run.
        workdir: Scratch folder (a temporary one, removed at exit, if None: ``kernels.scratch.scratch_folder``).
        workers: Evaluations at once; default: 1 when CPU runs or compile times are timed, else the CPU count.
        gpu_options: How GPU candidates are timed.
        gpu_backend: The GPU worker's backend (``"module:Class"``; a stand-in for tests without a GPU).
        catalog_name: The name stored in the header for a Catalog object (default: its compiler).
        measure: False for a build-only run (argv, build, ACF export, verify): no runner is started, and the
            build is made the way a measuring run would make it (an executable with the timing harness when
            CPU runs are among the objectives).
        entry, build, block: A bare .cu file's kernel to tune (plain or mangled name), a build context added to the
            kernel's own (include directories, fixed defines, extra arguments), and a bare file's launch block
            (see ``compileiq_lab.kernels.load_kernel``).
        learn: Keep, in each row, the rule of a control the compiler said it ignored (``detail["ignored_rules"]``),
            which the search learns with the conflicts failed compiles name and never asks again
            (``SearchConfiguration.learn_conflicts``); False: the ignored controls are still marked, nothing is
            learned from them.
        nvidia_acfs: NVIDIA's control files, searched as one more control ("none" or one of them, applied with
            ptxas ``--apply-controls``; needs CUDA 13.3 or newer).
        remote: The evaluations run elsewhere (a Dask executor's workers, each of which rebuilds this run from its
            recipe when it is unpickled): no runner is started here, and nothing is measured here until called.

    Raises:
        ConfigurationError: A kernel, catalog, objective or target that cannot work here (the message says
            which and what to do instead).
    """

    def __init__(self, kernel: str | os.PathLike[str] | KernelSpec, catalog: str | Catalog | None = None,
                 objectives: Sequence[str] | None = None, *, target: str | None = None, arch: str | None = None,
                 controls: Sequence[str] | None = None, categories: Sequence[str] | None = None,
                 tiers: Sequence[str] | None = None, unsafe_math: bool = False, two_stage: bool = True,
                 timeout_s: float = 120.0, workdir: str | os.PathLike[str] | None = None, workers: int | None = None,
                 gpu_options: GpuOptions | None = None, gpu_backend: str | None = None,
                 catalog_name: str | None = None, measure: bool = True, entry: str | None = None,
                 build: BuildContext | None = None, block: Sequence[int] | None = None, learn: bool = True,
                 nvidia_acfs: Sequence[str | os.PathLike[str]] | None = None, remote: bool = False) -> None:
        check_limits(timeout_s, workers)
        # how a worker process rebuilds this run (see __reduce__): the same arguments, with files named absolutely
        self._recipe: dict[str, Any] = {
            "kernel": portable(kernel), "objectives": objectives, "timeout_s": timeout_s, "workers": workers,
            "two_stage": two_stage, "gpu_options": gpu_options, "gpu_backend": gpu_backend, "measure": measure,
            "entry": entry, "build": build, "block": block, "learn": learn,
            "nvidia_acfs": portable(nvidia_acfs) if nvidia_acfs else None}
        spec = kernel if isinstance(kernel, KernelSpec) else load_kernel(kernel)
        self.kernel = adapt_kernel(spec, entry=entry, build=build, block=block, nvidia_acfs=nvidia_acfs)
        language = self.kernel.language
        self.catalog_name, self.catalog, self.left_out, self.catalog_note = run_catalog(
            language, catalog, catalog_name, controls, categories, tiers, unsafe_math, self.kernel.build.args,
            knobs=bool(self.kernel.defines))
        if language in GPU_LANGUAGES and "maxntid" in self.catalog.names and not self.kernel.block_threads():
            self.catalog_note = "; ".join(filter(None, [self.catalog_note, (
                "--maxntid is searched without the kernel's launch block: a value below the threads per block it is "
                "launched with builds, but fails to launch (static metrics do not show it); give the block (--block, "
                "the lab's launch block field, kernel.toml [launch] block) so that such values are not offered")]))
        self.target = run_target(self.kernel, objectives, target)
        names = list(objectives) if objectives is not None else default_objectives(language, self.target)
        check_objectives(self.kernel, names)
        if "instructions" in names:
            self.catalog, dropped = without_avx512(self.catalog)
            self.left_out += dropped
        self.objectives: list[Objective] = [METRICS[n] for n in names]
        runs = set(names) & run_metrics(language)
        self._gpu_runs = bool(runs) and language in GPU_LANGUAGES
        if language == "ptx":  # a module is assembled for its own target unless told otherwise
            self.arch: str | None = arch or ptx_header(self.kernel.source_path.read_text(errors="replace")).target \
                or DEFAULT_ARCH
        elif language == "cuda":
            self.arch = arch or (gpu_arch() if runs else None) or DEFAULT_ARCH
        else:
            self.arch = None
        self.workdir = Path(workdir).resolve() if workdir is not None else scratch_folder()
        self.timeout_s, self.measures = timeout_s, measure
        self._two_stage, self._link = two_stage, bool(runs)
        self._backend: Backend | None = None
        self._evaluator: KernelEvaluator | None = None
        self._compiler: KernelEvaluator | None = None
        self._lazy = threading.RLock()  # evaluators made on first use are made once, whichever thread comes first
        self._runs, self._gpu_options, self._gpu_backend, self._learn = runs, gpu_options, gpu_backend, learn
        self._recipe.update(catalog=self.catalog, catalog_name=self.catalog_name, target=self.target, arch=self.arch)
        self.remote = remote
        if measure and not remote:  # built now, so that a missing compiler or GPU is said before any search starts
            self._evaluator = self._measuring_evaluator()
        # CPU runs and compile times share no CPU with compiles unless asked (GPU runs are serialised, compiles overlap)
        self.workers = workers or (1 if (language == "c" and runs) or "compile_time" in names else os.cpu_count() or 1)
        self._warm = threading.Lock()
        self._warmed = "compile_time" not in names  # compile_time: warm the compiler up before the baseline

    def _measuring_evaluator(self) -> KernelEvaluator:
        """The evaluator of a measuring run: the backend and, for run objectives, the GPU worker or the CPU runner."""
        backend, names = self.backend, self.objective_names
        runner: Runner | None = None
        if self._gpu_runs:
            problem, types = launch_types(self.kernel, self.arch or DEFAULT_ARCH, self.workdir, self.timeout_s)
            if problem:  # wrong values would reach the kernel: every run would fail its check or crash
                raise ConfigurationError(problem)
            # the worker passes each scalar with its parameter's type (an int as a size_t, a float as a double ...)
            runner = start_gpu_runner(dataclasses.replace(self.kernel, arg_types=types), self.arch or DEFAULT_ARCH,
                                      names, self.timeout_s, self._gpu_options, self._gpu_backend)
        elif self._runs:
            runner = CpuRunner(self.kernel, self.workdir, names, timeout_s=self.timeout_s)
        return KernelEvaluator(self.kernel, self.catalog, names, backend, runner, learn=self._learn)

    # -- rebuilding ------------------------------------------------------------------------------
    @classmethod
    def from_header(cls, header: RunHeader, kernel: str | None = None, **options: Any) -> KernelRun:
        """The kernel run a stored run was made with (kernel, catalog and its controls, objectives, arch).

        Args:
            header: The run's header (``load_results(path).header``).
            kernel: Another kernel name or path to load instead of the recorded one.
            **options: Other KernelRun arguments (workdir, timeout_s, gpu_backend, ...).

        Raises:
            ConfigurationError: The run was not made by a KernelRun (its header names no kernel).
        """
        args, kwargs = header_arguments(header, kernel)
        return cls(*args, **{**kwargs, **options})

    @classmethod
    def from_acf(cls, acf: RecordedPoint, kernel: str | None = None, acf_folder: Path | None = None,
                 **options: Any) -> KernelRun:
        """A build-only kernel run (``measure=False``) that compiles an ACF's point the way its tuning run did:
        the same kernel (its ``build.source``, else its bundled name), entry and build context.

        Args:
            acf: The ACF.
            kernel: Another kernel name or path to load instead of the one the ACF names.
            acf_folder: The ACF file's folder (default: the folder of the file the ACF was read from or written
                to): ``build.source`` is looked up there first, then relative to the working folder.
            **options: Other KernelRun arguments (workdir, timeout_s, two_stage, ``objectives`` instead of the ACF's,
                ``measure=True`` to measure, ...).

        Raises:
            ConfigurationError: A CUDA ACF without arch, or a kernel that cannot be found or loaded (the message
                says to pass ``kernel``).
        """
        names = options.pop("objectives", None)
        folder = acf_folder if acf_folder is not None else getattr(acf, "folder", None)
        args, kwargs = acf_arguments(acf, kernel, folder, names)
        return cls(*args, **{**kwargs, **options})

    # -- what a search needs (the Problem protocol of ``compileiq_lab.run``) ----------------------
    def __call__(self, config: dict[str, Any]) -> Measurement:
        """Compile (and for run objectives, run) one config.

        Raises:
            SearchStateError: This is a build-only run (``measure=False``).
        """
        if not self.measures:
            raise SearchStateError("this KernelRun builds only (measure=False); make one with measure=True to "
                                   "evaluate configs")
        if not self._warmed:
            self.warm_up()
        return self.evaluator(config)

    def warm_up(self) -> float | None:
        """Compile the defaults once, cached nowhere, so that the baseline's compile_time pays no cold start (done
        first when compile_time is an objective); returns its seconds (None when it failed: the run reports it)."""
        with self._warm:
            if self._warmed:
                return None
            self._warmed = True
            status, seconds = self.scratch_compile(SearchSpace(self.search_space()).baseline() or {})
            log.info("compiler warm-up: %s in %.3f s", status, seconds)
            return seconds if status == "ok" else None

    def scratch_compile(self, config: Mapping[str, Any]) -> tuple[str, float]:
        """Compile a config in a fresh scratch folder (nothing cached, nothing kept); returns (status, seconds
        the compiler stages took)."""
        scratch = Path(tempfile.mkdtemp(prefix="scratch-", dir=self.workdir))
        try:
            outcome = self.scratch_backend(scratch).compile(self.argv(config))
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        return outcome.status, sum(v for k, v in outcome.metrics.items() if k.endswith("_time_s"))

    def baseline_verdict(self, record: EvalRecord) -> str | None:
        """Why a search cannot get anywhere after this baseline evaluation, or None to search on (the one rule,
        used by the CLI and the lab alike: ``compileiq_lab.kernels.baseline.baseline_stop_reason``)."""
        version = None
        if self.kernel.language in GPU_LANGUAGES:
            try:
                version = cuda_version(self.toolchain())
            except (ConfigurationError, OSError) as exc:  # the verdict names no release then
                log.info("no compiler version for the baseline's verdict: %s", exc)
        return baseline_stop_reason(self.kernel, self.catalog, record, cuda_version=version)

    def first_generation_verdict(self, records: list[EvalRecord]) -> str | None:
        """Why a search stops once its first generation has ended with no config ok, or None to search on: every
        output so far differs from the reference (``compileiq_lab.kernels.baseline.wrong_output_stop_reason``)."""
        return wrong_output_stop_reason(self.kernel, records)

    def search_space(self) -> dict[str, Any]:
        """The searched controls plus a ``defines`` group for the kernel's -D knobs."""
        return kernel_space(self.kernel, self.catalog)

    def constraint(self, config: Mapping[str, Any]) -> str | None:
        """Why a config is not worth compiling (a known conflict of the catalog), or None. What a run learns (conflicts
        named by failed compiles, combinations the compiler ignored) the search holds (``search.conflicts``)."""
        if self._evaluator is not None:
            return self._evaluator.constraint(config)
        return config_conflict(self.catalog, config)

    def headers_sha256(self) -> str | None:
        """SHA-256 of the headers the kernel's source reads (``kernels.headers.headers_sha256``), or None."""
        return headers_sha256(self.kernel, self.arch, self.catalog.compiler)

    def changes_since(self, source_sha256: str | None, headers: str | None, since: str) -> list[str]:
        """What changed in the kernel's code since ``since`` recorded its source's and its headers' digests
        (``kernels.headers.changes_since``)."""
        return changes_since(self.kernel, source_sha256, headers, self.arch, self.catalog.compiler, since)

    def metadata(self, **extra: Any) -> dict[str, Any]:
        """The run header's facts of this kernel run (``extra``: more facts, e.g. warm-start sources)."""
        ref, k = kernel_ref(self.kernel), self.kernel
        headers = self.headers_sha256()
        if headers is not None:
            extra = {"headers_sha256": headers, **extra}
        spec = k.spec_sha256()
        if spec is not None:  # the inputs and the output check: stored rows of another reference are not comparable
            extra = {"spec_sha256": spec, **extra}
        if ref != k.name:
            extra = {"kernel_path": ref, **extra}
        if k.spec_file is None and k.entry:  # a bare file's entry, which a reopened run passes on as its entry
            extra = {"entry": k.entry, **extra}
        elif k.entry:  # the entry a kernel folder's kernel.toml names: a resumed run with another is another setup
            extra = {"spec_entry": k.entry, **extra}
        if k.spec_file is None and k.block:
            extra = {"block": list(k.block), **extra}
        if k.build:
            extra = {"build": {"include_dirs": [str(d) for d in k.build.include_dirs], "defines": dict(k.build.defines),
                               "args": list(k.build.args)}, **extra}
        if k.language == "ptx":
            header = ptx_header(k.source_path.read_text(errors="replace"))
            extra = {"ptx": {"version": header.version, "target": header.target}, **extra}
        if k.origin:
            extra = {"origin": dict(k.origin), **extra}
        if k.nvidia_acfs:
            extra = {"nvidia_acfs": {a.label: {"file": str(a.path), "sha256": a.sha256}
                                     for a in k.nvidia_acfs.values()}, **extra}
        gpu = self.gpu
        return KernelMeta(kernel=self.kernel.name, catalog=self.catalog_name,
                          objectives=tuple(self.objective_names), language=self.kernel.language,
                          source_sha256=self.kernel.source_sha256(), arch=self.arch, toolchain=self.toolchain(),
                          gpu=gpu.info if gpu is not None else None, extra=extra).to_dict()

    # -- the build and the measurement -------------------------------------------------------------
    @property
    def backend(self) -> Backend:
        """The compile path (made on first use in a build-only run: exporting needs no compiler)."""
        with self._lazy:
            if self._backend is None:
                self._backend = self.scratch_backend()
            return self._backend

    @property
    def evaluator(self) -> KernelEvaluator:
        """The evaluator (in a build-only run it measures the static objectives only; a remote run makes its
        measuring one on first use)."""
        with self._lazy:
            if self._evaluator is None and self.measures:
                self._evaluator = self._measuring_evaluator()
            if self._evaluator is None:
                static = [o for o in self.objective_names if o in self.backend.metrics()] or ["text_bytes"]
                self._evaluator = KernelEvaluator(self.kernel, self.catalog, static, self.backend)
            return self._evaluator

    @property
    def objective_names(self) -> list[str]:
        """Objective names, in score order."""
        return [o.name for o in self.objectives]

    @property
    def stats(self) -> dict[str, int]:
        """Compiles, distinct codes, runs, runs saved by code-hash dedup and conflicts skipped so far."""
        return self.evaluator.stats

    @property
    def code_hashes(self) -> set[str]:
        """Distinct machine codes seen so far."""
        return self.evaluator.code_hashes

    @property
    def gpu_info(self) -> dict[str, Any]:
        """The GPU's facts (name, arch, driver, NVML state) when GPU objectives are measured, else {}."""
        return self.evaluator.gpu_info

    @property
    def gpu(self) -> GpuRunner | None:
        """The GPU worker measuring this run's GPU objectives, if any."""
        runner = self.timer
        return runner if isinstance(runner, GpuRunner) else None

    @property
    def timer(self) -> GpuRunner | CpuRunner | None:
        """What times this run's kernel for a re-measurement: the GPU worker, or a timed C kernel's CPU runner."""
        runner = self._evaluator.runner if self._evaluator is not None else None
        return runner if isinstance(runner, GpuRunner) or (isinstance(runner, CpuRunner) and runner.timed) else None

    def argv(self, config: Mapping[str, Any]) -> dict[str, list[str]]:
        """The compiler arguments of a config, per stage."""
        return config_argv(self.kernel, self.catalog, config)

    def build(self, config: Mapping[str, Any]) -> tuple[Path, str]:
        """Compile one config (cached); returns (binary path, machine-code hash)."""
        return self.evaluator.build(config)

    def toolchain(self) -> dict[str, str]:
        """Compiler versions used (the compile backend's: a remote run's client starts no GPU worker for them)."""
        return self.backend.toolchain()

    def close(self) -> None:
        """Stop the GPU worker, if any (it also ends with this process)."""
        if self._evaluator is not None:
            self._evaluator.close()

    def __repr__(self) -> str:
        return (f"KernelRun(kernel={self.kernel.name!r}, catalog={self.catalog_name!r}, "
                f"objectives={self.objective_names!r}, target={self.target!r}, arch={self.arch!r})")

    def scratch_backend(self, folder: str | os.PathLike[str] | None = None) -> Backend:
        """A compile path like the run's own that builds into ``folder`` (default: the run's scratch folder, the
        cache the search uses): elsewhere, nothing is cached for the run, e.g. a check before the search."""
        return run_backend(self.kernel, self.catalog, self.arch or DEFAULT_ARCH, Path(folder or self.workdir),
                           self.timeout_s, two_stage=self._two_stage, link=self._link)
