"""KernelEvaluator: a config of compiler controls -> compile -> metrics -> Measurement, with code-hash dedup."""

from __future__ import annotations

import atexit
import logging
import shutil
import tempfile
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from compileiq_lab.exceptions import ConfigurationError
from compileiq_lab.measure.binary import inspect_elf
from compileiq_lab.measure.compile import CompileOutcome, CudaCompiler
from compileiq_lab.measure.measurement import Measurement
from compileiq_lab.space import params as ss
from compileiq_lab.space.catalogs.base import Catalog

if TYPE_CHECKING:
    from compileiq_lab.kernels.spec import KernelSpec
    from compileiq_lab.measure.gpu import GpuOptions, GpuRunner

__all__ = ["KernelEvaluator", "config_argv", "OBJECTIVES", "STATIC_OBJECTIVES", "RUN_OBJECTIVES",
           "GPU_OBJECTIVES", "CPU_RUN_OBJECTIVES"]

log = logging.getLogger(__name__)

#: Objectives from the compiler alone (no GPU, deterministic): name -> (direction, description).
STATIC_OBJECTIVES = {
    "registers": ("min", "registers per thread (ptxas -v)"),
    "spill_bytes": ("min", "spill stores + loads in bytes (ptxas -v)"),
    "stack_bytes": ("min", "stack frame bytes (ptxas -v)"),
    "smem_bytes": ("min", "static shared memory bytes (ptxas -v)"),
    "sass_instructions": ("min", "SASS instructions in the cubin's .text sections"),
    "text_bytes": ("min", "bytes of machine code (.text sections)"),
    "binary_size": ("min", "bytes of the whole compiled file"),
    "compile_time": ("min", "wall seconds to compile (front end + back end; C: whole build)"),
}
#: Objectives that run a C kernel on the CPU.
CPU_RUN_OBJECTIVES = {
    "runtime": ("min", "seconds per call: fastest timed call (CPU kernels); median per launch (GPU kernels)"),
    "runtime_median": ("min", "median seconds per call"),
    "instructions": ("min", "instructions executed by one call (valgrind callgrind, CPU kernels)"),
}
#: Objectives that run a CUDA kernel on the GPU (CuPy worker process; power/energy need NVML).
GPU_OBJECTIVES = {
    "runtime": CPU_RUN_OBJECTIVES["runtime"],
    "runtime_median": CPU_RUN_OBJECTIVES["runtime_median"],
    "power": ("min", "mean board power in W while the kernel runs back to back (NVML)"),
    "energy": ("min", "energy per launch in J (NVML total-energy counter)"),
}
RUN_OBJECTIVES = {**CPU_RUN_OBJECTIVES, **GPU_OBJECTIVES}
OBJECTIVES = {**STATIC_OBJECTIVES, **RUN_OBJECTIVES}
_CUDA_OK = set(STATIC_OBJECTIVES) | set(GPU_OBJECTIVES)
_C_OK = {"text_bytes", "binary_size", "compile_time"} | set(CPU_RUN_OBJECTIVES)


def config_argv(kernel: "KernelSpec", catalog: Catalog, config: Mapping[str, Any]) -> dict[str, list[str]]:
    """The compiler arguments of a config (controls + ``defines`` group) per stage.

    CUDA: {"frontend": -D knobs + front-end controls, "backend": ptxas controls};
    C: {"c": -D knobs + the catalog's base arguments + controls}.
    """
    controls = {k: v for k, v in config.items() if k != "defines"}
    defines = kernel.define_args(config.get("defines"))
    if kernel.language == "cuda":
        return {"frontend": defines + catalog.argv(controls, "frontend"), "backend": catalog.argv(controls, "backend")}
    return {"c": defines + catalog.base_argv_list() + catalog.argv(controls)}


class KernelEvaluator:
    """Evaluate configs of one catalog on one kernel.

    The config holds catalog controls by name and, when the kernel declares ``-D`` knobs, a
    ``defines`` group. Known compiler conflicts are rejected before any compile (see
    ``constraint``). Candidates whose machine code is identical to an earlier one (same hash of
    the code sections) reuse that one's run measurement instead of running again.

    Args:
        kernel: The kernel spec.
        catalog: The controls searched (already restricted to the installed compiler).
        objectives: Names from OBJECTIVES, in score order.
        arch: CUDA target (CUDA kernels).
        workdir: Scratch folder (a temporary one if None).
        timeout_s: Limit per compiler call and per run.
        two_stage: CUDA: nvcc -ptx once per front-end set, then ptxas (else one full nvcc call each).
        compiler: C compiler for C kernels ("gcc" or "clang"); for CUDA kernels "nvrtc" compiles
            in-process with NVRTC instead of nvcc/ptxas.
        gpu_options: How GPU candidates are timed (runtime/power/energy objectives of CUDA kernels).
        gpu_backend: The GPU worker's backend (``"module:Class"``; a stand-in for tests without a GPU).

    Raises:
        ConfigurationError: Objectives that cannot be measured here (no GPU for runtime, no NVML for
            power/energy, a target the GPU cannot load), or a catalog that does not fit the kernel.
    """

    def __init__(self, kernel: "KernelSpec", catalog: Catalog, objectives: Sequence[str], arch: str = "sm_90",
                 workdir: str | Path | None = None, timeout_s: float = 120.0, two_stage: bool = True,
                 compiler: str = "gcc", gpu_options: "GpuOptions | None" = None,
                 gpu_backend: str | None = None) -> None:
        self.kernel, self.catalog, self.objectives = kernel, catalog, list(objectives)
        allowed = _CUDA_OK if kernel.language == "cuda" else _C_OK
        bad = [o for o in self.objectives if o not in allowed]
        if not self.objectives or bad:
            raise ConfigurationError(
                f"objectives for a {kernel.language} kernel must be among {sorted(allowed)}, but got "
                f"{self.objectives}; pick from those")
        if kernel.language == "c" and ({o for o in self.objectives} & set(RUN_OBJECTIVES)) and not kernel.inputs:
            raise ConfigurationError(f"kernel {kernel.name!r} declares no inputs, so it cannot run; "
                                     "use static objectives (text_bytes, binary_size, compile_time)")
        stages = {c.stage for c in catalog.controls}
        fits = {"frontend", "backend"} if kernel.language == "cuda" else {"c"}
        if stages - fits:
            raise ConfigurationError(
                f"catalog {catalog.compiler!r} controls stages {sorted(stages)}, but a {kernel.language} kernel "
                f"takes {sorted(fits)}; use " + ("nvcc, ptxas or nvrtc" if kernel.language == "cuda" else "gcc or clang"))
        if workdir is None:
            workdir = tempfile.mkdtemp(prefix="compileiq-")
            atexit.register(shutil.rmtree, workdir, True)  # scratch only: results live in the run store
        self.workdir = Path(workdir)
        self.two_stage = two_stage
        self.nvrtc = None
        if kernel.language == "cuda" and compiler == "nvrtc":
            from compileiq_lab.measure.nvrtc import NvrtcCompiler

            self.nvrtc = NvrtcCompiler(arch, self.workdir)
        elif kernel.language == "cuda":
            self.cuda = CudaCompiler(arch, self.workdir, timeout_s)
        else:
            from compileiq_lab.measure.cpu import CRunner

            if compiler not in ("gcc", "clang"):
                raise ConfigurationError(f"C kernels compile with gcc or clang, but got compiler={compiler!r}")
            self.runner = CRunner(kernel, self.workdir, compiler=compiler, timeout_s=timeout_s,
                                  runs=bool(set(self.objectives) & set(RUN_OBJECTIVES)))
        self.gpu: GpuRunner | None = None
        if kernel.language == "cuda" and set(self.objectives) & set(GPU_OBJECTIVES):
            self.gpu = self._start_gpu(arch, timeout_s, gpu_options, gpu_backend)
        self._lock = threading.Lock()
        self._run_lock = threading.Lock()  # one timed run at a time: parallel runs distort each other
        self._by_hash: dict[str, dict[str, Any]] = {}
        self._hashes: set[str] = set()
        self.stats = {"compiles": 0, "unique_code": 0, "runs": 0, "runs_saved": 0, "conflicts": 0}

    def _start_gpu(self, arch: str, timeout_s: float, options: "GpuOptions | None",
                   backend: str | None) -> "GpuRunner":
        from dataclasses import replace

        from compileiq_lab.measure.gpu import CUPY_BACKEND, GpuOptions, GpuRunner, arch_runs_on

        wants_power = bool({"power", "energy"} & set(self.objectives))
        options = replace(options or GpuOptions(), energy=wants_power)
        runner = GpuRunner(self.kernel, options, timeout_s=timeout_s, backend=backend or CUPY_BACKEND)
        try:
            info = runner.start()
        except ConfigurationError as exc:
            why = str(exc).splitlines()[0].removeprefix("the GPU worker could not start: ")
            log.debug("GPU worker start failed: %s", exc)
            raise ConfigurationError(
                f"objectives {sorted(set(self.objectives) & set(GPU_OBJECTIVES))} run the kernel on an NVIDIA GPU, "
                f"but the GPU worker could not start: {why[:400]}. On a machine with an NVIDIA GPU install "
                "the gpu extra (pip install 'compileiq-lab[gpu]'); elsewhere use static objectives "
                f"{sorted(STATIC_OBJECTIVES)}") from None
        if wants_power and info.get("nvml"):
            runner.close()
            raise ConfigurationError(f"objectives power/energy are unavailable here: {info['nvml']}. Drop them "
                                     "(runtime still works) or install nvidia-ml-py on a machine with the NVIDIA driver")
        if not arch_runs_on(arch, info.get("arch", "")):
            runner.close()
            raise ConfigurationError(f"arch must be a target this GPU ({info.get('name')}, {info.get('arch')}) can "
                                     f"load, but got {arch!r}; use --arch {info.get('arch')}")
        log.info("GPU worker on %s (%s)", info.get("name"), info.get("arch"))
        return runner

    @property
    def gpu_info(self) -> dict[str, Any]:
        """The GPU's facts (name, arch, driver, NVML state) when GPU objectives are measured, else {}."""
        return self.gpu.info if self.gpu is not None else {}

    def close(self) -> None:
        """Stop the GPU worker, if any (it also ends with this process)."""
        if self.gpu is not None:
            self.gpu.close()

    def __repr__(self) -> str:
        return (f"KernelEvaluator(kernel={self.kernel.name!r}, catalog={self.catalog.compiler!r}, "
                f"objectives={self.objectives!r})")

    @property
    def code_hashes(self) -> set[str]:
        """Distinct machine codes seen so far."""
        return set(self._hashes)

    def toolchain(self) -> dict[str, str]:
        """Compiler versions used (for the run header)."""
        from compileiq_lab.measure.compile import tool_version

        if self.nvrtc is not None:
            return {"nvrtc": self.nvrtc.version}
        if self.kernel.language == "cuda":
            return {"nvcc": self.cuda.version, "ptxas": tool_version(self.cuda.ptxas)}
        return {self.runner.compiler: tool_version(self.runner.cc)}

    @property
    def directions(self) -> list[str]:
        """"min"/"max" per objective."""
        return [OBJECTIVES[o][0] for o in self.objectives]

    def space(self) -> dict[str, Any]:
        """The search space: the catalog's controls plus a ``defines`` group for the kernel's knobs."""
        sp: dict[str, Any] = dict(self.catalog.space())
        if self.kernel.defines:
            sp["defines"] = {k: ss.choice(list(v)) for k, v in self.kernel.defines.items()}
        return sp

    def constraint(self, config: Mapping[str, Any]) -> str | None:
        """Why the compiler would reject a config (a known conflict), or None."""
        return self.catalog.conflict({k: v for k, v in config.items() if k != "defines"})

    def argv(self, config: Mapping[str, Any]) -> dict[str, list[str]]:
        """The compiler arguments of a config, per stage."""
        return config_argv(self.kernel, self.catalog, config)

    def __call__(self, config: Mapping[str, Any]) -> Measurement:
        """Compile (and for run objectives, run) one config."""
        reason = self.constraint(config)
        if reason:
            with self._lock:
                self.stats["conflicts"] += 1
            return Measurement("compile_error", error=reason, detail={"conflict": True})
        argv = self.argv(config)
        outcome = self._compile(argv)
        with self._lock:
            self.stats["compiles"] += 1
        if not outcome.ok:
            return Measurement(outcome.status, error=outcome.error[-1500:], detail={"argv": argv})
        info = inspect_elf(outcome.path, kind="host" if self.kernel.language == "c" else "cubin")
        metrics = dict(outcome.metrics)
        metrics.update(text_bytes=float(info.text_bytes), binary_size=float(info.file_bytes),
                       compile_time=metrics.get("frontend_time_s", 0.0) + metrics.get("backend_time_s", 0.0)
                       + metrics.get("compile_time_s", 0.0))
        if self.kernel.language == "cuda":
            metrics["sass_instructions"] = float(info.sass_instructions)
        detail: dict[str, Any] = {"argv": argv, "code_hash": info.code_hash}
        with self._lock:
            detail["duplicate_code"] = info.code_hash in self._hashes
            self._hashes.add(info.code_hash)
        if set(self.objectives) & set(RUN_OBJECTIVES):
            run = self._run_once(info.code_hash, outcome.path, config.get("defines"))
            detail.update(run_reused=run["reused"])
            if run["status"] != "ok":
                return Measurement(run["status"], error=run["error"], detail={**detail, "metrics": metrics})
            metrics.update(run["metrics"])
        missing = [o for o in self.objectives if o not in metrics]
        if missing:
            return Measurement("error", error=f"no value for objectives {missing}", detail={**detail, "metrics": metrics})
        detail["metrics"] = metrics
        return Measurement("ok", scores=tuple(metrics[o] for o in self.objectives), detail=detail)

    def _compile(self, argv: dict[str, list[str]]) -> CompileOutcome:
        if self.kernel.language != "cuda":
            return self.runner.compile(argv["c"])
        src, entry = self.kernel.source_path, self.kernel.entry
        if self.nvrtc is not None:
            from compileiq_lab.measure.nvrtc import nvrtc_options

            return self.nvrtc.compile(src, nvrtc_options(argv["frontend"], argv["backend"]), entry)
        if not self.two_stage:
            return self.cuda.full(src, argv["frontend"], argv["backend"], entry)
        ptx = self.cuda.ptx(src, argv["frontend"])
        if not ptx.ok:
            return ptx
        out = self.cuda.cubin(ptx.path, argv["backend"], entry)
        out.metrics.update(ptx.metrics)
        return out

    def build(self, config: Mapping[str, Any]) -> tuple[Path, str]:
        """Compile one config (cached); returns (binary path, code hash).

        Raises:
            ConfigurationError: The config conflicts or does not compile.
        """
        reason = self.constraint(config)
        outcome = None if reason else self._compile(self.argv(config))
        if outcome is None or not outcome.ok:
            raise ConfigurationError(f"the config must compile, but it failed: {(reason or outcome.error)[-400:]}")
        return outcome.path, inspect_elf(outcome.path, kind="host" if self.kernel.language == "c" else "cubin").code_hash

    def _run_once(self, code_hash: str, exe: Path, defines: Mapping[str, Any] | None = None) -> dict[str, Any]:
        key = code_hash
        if self.gpu is not None:  # same code under another launch geometry is another run
            key += repr(self.kernel.launch_dims(defines))
        with self._run_lock:
            if key in self._by_hash:
                with self._lock:
                    self.stats["runs_saved"] += 1
                return {**self._by_hash[key], "reused": True}
            metrics: dict[str, float] = {}
            status, error = "ok", ""
            if self.gpu is not None:
                r = self.gpu.run(exe, defines)
                status, error, metrics = r.status, r.error, dict(r.metrics)
            elif {"runtime", "runtime_median"} & set(self.objectives):
                r = self.runner.run(exe)
                status, error, metrics = r.status, r.error, dict(r.metrics)
            if status == "ok" and "instructions" in self.objectives:
                r = self.runner.instructions(exe)
                status, error = r.status, r.error
                metrics.update(r.metrics)
            result = {"status": status, "error": error, "metrics": metrics, "reused": False}
            self._by_hash[key] = result
        with self._lock:
            self.stats["runs"] += 1
            self.stats["unique_code"] += 1
        return result
