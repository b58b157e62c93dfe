"""GPU runs from the parent: a long-lived GPU worker process per run, replaced on hang, fault or crash."""

from __future__ import annotations

import logging
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from compileiq_lab.exceptions import ConfigurationError, StaticOnlyKernelError
from compileiq_lab.measure.backends.base import CUBIN_METRICS
from compileiq_lab.measure.entries import cubin_entries, resolve_entry
from compileiq_lab.measure.gpu_backend import CACHE_MODES
from compileiq_lab.measure.kernel import Kernel
from compileiq_lab.measure.runner import RunOutcome
from compileiq_lab.measure.worker import WorkerDied, WorkerProcess, WorkerTimeout

__all__ = [
    "CUPY_BACKEND",
    "GPU_METRICS",
    "GpuOptions",
    "GpuRunner",
    "arch_runs_on",
    "entry_symbol",
    "gpu_target",
    "gpu_unavailable_reason",
    "start_gpu_runner",
]

log = logging.getLogger(__name__)
#: The objectives a GPU run measures (power and energy need NVML).
GPU_METRICS = frozenset({"runtime", "runtime_median", "power", "energy"})
#: The real backend (CuPy + CUDA events + NVML); tests without a GPU pass a stand-in instead.
CUPY_BACKEND = "compileiq_lab.measure.gpu_cupy:CupyBackend"
_PROBE = "import cupy; n = cupy.cuda.runtime.getDeviceCount(); print(n)"
_TARGET = "import cupy; print('sm_' + cupy.cuda.Device(0).compute_capability)"


def _probe(code: str, timeout_s: float) -> subprocess.CompletedProcess[str] | None:
    """Run ``code`` in a fresh interpreter (so this process never opens a CUDA context); None on timeout."""
    try:
        return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return None


def gpu_unavailable_reason(timeout_s: float = 60.0) -> str | None:
    """Why GPU runs are impossible here (no CuPy, no driver, no GPU), or None. Probed in a subprocess,
    so the calling process (a notebook kernel) never opens a CUDA context."""
    res = _probe(_PROBE, timeout_s)
    if res is None:
        return f"probing the GPU took over {timeout_s} s"
    if res.returncode != 0:
        last = (res.stderr.strip().splitlines() or ["unknown error"])[-1]
        if "No module named 'cupy'" in last:
            return "CuPy is not installed (pip install 'compileiq-lab[gpu]')"
        return f"CuPy sees no usable GPU ({last[:200]})"
    return None if res.stdout.strip() not in ("", "0") else "CuPy sees no GPU"


def gpu_target(timeout_s: float = 60.0) -> str | None:
    """The compile target of GPU 0 ("sm_90" on an H100/H200), probed in a subprocess; None without a GPU."""
    res = _probe(_TARGET, timeout_s)
    out = res.stdout.strip() if res is not None else ""
    return out if res is not None and res.returncode == 0 and out.startswith("sm_") else None


def arch_runs_on(arch: str, device_arch: str) -> bool:
    """Whether a cubin built for ``arch`` (sm_XY) loads on a GPU of ``device_arch``: same major, minor <= the GPU's
    (arch-specific targets such as sm_90a need the exact GPU)."""
    a, d = arch.removeprefix("sm_"), device_arch.removeprefix("sm_")
    if not (a[:2].isdigit() and d[:2].isdigit()):
        return False
    if a[-1].isalpha():
        return a[:-1] == d
    return int(a) // 10 == int(d) // 10 and int(a) % 10 <= int(d) % 10


@dataclass
class GpuOptions:
    """How a GPU candidate is timed and measured.

    Attributes:
        device: CUDA device index.
        warmup_s: Warm-up time before timing.
        budget_s: Time spent sampling (unless the CI target is met sooner).
        min_samples, max_samples: Sample count bounds.
        ci_target: Stop once the median's 95 % CI half-width is within this fraction of it.
        sample_s: Aim for this much kernel time per sample (a CUDA graph of back-to-back launches).
        max_graph_launches: At most this many launches per sample.
        use_graph: Replay a captured CUDA graph (launch gaps hidden) instead of plain launches.
        energy: Measure energy and power (NVML) after timing.
        energy_window_s: Length of the energy batch.
        lock_clocks_mhz: Lock the SM clock at this value during the run (needs rights; never by default).
        cache: "warm" (the default): a sample is a CUDA graph of back-to-back launches, each finding in the L2
            cache what the previous one left. "cold": the L2 cache is flushed (a buffer of twice its size, at
            least 256 MiB, is written) before every timed launch and each launch is timed alone, the flush
            excluded; a sample is then one launch (``launches_per_sample`` 1), ``use_graph`` and
            ``max_graph_launches`` apply to the energy window only.
    """

    device: int = 0
    warmup_s: float = 0.02
    budget_s: float = 0.25
    min_samples: int = 10
    max_samples: int = 200
    ci_target: float = 0.005
    sample_s: float = 1e-3
    max_graph_launches: int = 1000
    use_graph: bool = True
    energy: bool = False
    energy_window_s: float = 0.3
    lock_clocks_mhz: int | None = None
    cache: str = "warm"

    def __post_init__(self) -> None:
        if self.cache not in CACHE_MODES:
            raise ConfigurationError(
                f"GpuOptions.cache must be one of {', '.join(map(repr, CACHE_MODES))}, but got {self.cache!r}; "
                "use 'warm' (L2 kept between back-to-back launches, the default) or 'cold' (L2 flushed before "
                "every timed launch)")


class GpuRunner:
    """Check, time and measure compiled candidates of one kernel on a GPU, in a worker process.

    The calling process never holds a CUDA context. A candidate that hangs past ``timeout_s`` is
    recorded as ``run_timeout``, one whose process dies as ``crashed``, one that faults (a sticky
    CUDA error poisons the context) as ``run_error``; in each case the worker is replaced before
    the next candidate. A wrong answer is ``wrong_output`` and is not timed.

    Args:
        kernel: A runnable CUDA kernel spec (entry, launch, inputs, outputs, reference).
        options: Timing and energy settings.
        timeout_s: Limit per candidate (loading, checking, timing, energy).
        backend: ``"module:Class"`` of the worker's backend (a stand-in for tests).
        workload: One of the kernel's ``[[workloads]]`` (other input sizes), None for its default params.
    """

    def __init__(self, kernel: Kernel, options: GpuOptions | None = None, timeout_s: float = 60.0,
                 backend: str = CUPY_BACKEND, workload: str | None = None) -> None:
        if kernel.language not in ("cuda", "ptx") or kernel.static_only or kernel.grid is None:
            raise StaticOnlyKernelError(f"kernel {kernel.name!r} cannot run on a GPU: it needs language cuda, an "
                                        "entry, outputs with a reference and a [launch] table; use static objectives "
                                        "for it")
        self.base_kernel = kernel.with_workload(None) if kernel.workload is None else kernel
        self.kernel = kernel.with_workload(workload)
        self.options, self.timeout_s = options or GpuOptions(), timeout_s
        self.backend, self.workload = backend, workload
        # the spec itself travels to the worker (pickled): the worker never looks kernels up
        self._setup = {"kernel": self.kernel, "workload": workload, "options": asdict(self.options)}
        self.worker = WorkerProcess(backend, self._setup, what="GPU worker")

    def start(self) -> dict[str, Any]:
        """Start the worker; returns the GPU's facts (name, arch, driver, NVML state) and the facts a certificate
        names, None where unknown: ``uuid_sha256`` (never the UUID itself), ``driver_version``,
        ``cuda_runtime_version``, ``sm_clock_mhz``, ``mem_clock_mhz`` (at start), ``clocks_locked``,
        ``power_limit_w``, ``mig_mode`` ("enabled"/"disabled"), ``l2_bytes``, ``timer_resolution_s``, ``cache``.

        Raises:
            ConfigurationError: No GPU, no CuPy, or the kernel's inputs/reference failed in the worker.
        """
        info: dict[str, Any] = self.worker.start()
        return info

    @property
    def info(self) -> dict[str, Any]:
        """The GPU's facts from the worker's start (empty before)."""
        return dict(self.worker.info or {})

    def metrics(self) -> frozenset[str]:
        """The objectives its runs measure."""
        return GPU_METRICS if self.options.energy else GPU_METRICS - {"power", "energy"}

    def identity(self, defines: Mapping[str, Any] | None) -> str:
        """The launch geometry: the same code under another geometry is another run."""
        return repr(self.kernel.launch_dims(defines))

    @property
    def restarts(self) -> int:
        """Workers replaced after hangs, faults or crashes."""
        return self.worker.restarts

    def item(self, cubin: str | Path, define_values: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The launch request of one cubin (geometry from the kernel's [launch] and the define values; the entry as
        its symbol in the cubin, so that a plain C++ name finds its mangled kernel)."""
        grid, block, shmem = self.kernel.launch_dims(define_values)
        return {"cubin": str(cubin), "entry": entry_symbol(self.kernel.entry, cubin), "grid": list(grid),
                "block": list(block), "shared_bytes": shmem}

    def run(self, cubin: str | Path, define_values: Mapping[str, Any] | None = None) -> RunOutcome:
        """Check, time (and measure the energy of) one cubin."""
        try:
            reply = self.worker.call("measure", self.item(cubin, define_values), self.timeout_s)
        except WorkerTimeout:
            return RunOutcome("run_timeout", f"the kernel did not finish within {self.timeout_s} s (timeout); "
                                             "the GPU worker was replaced")
        except WorkerDied as exc:
            return RunOutcome("crashed", f"the GPU worker process died ({exc.how}); it was replaced")
        if reply.get("fatal"):
            self.worker.kill()  # the CUDA context may be poisoned: start afresh for the next candidate
        return RunOutcome(reply["status"], reply.get("error", ""), dict(reply.get("metrics", {})))

    def for_workload(self, workload: str | None) -> GpuRunner:
        """A runner with the same settings on another of the kernel's workloads (its own worker)."""
        return GpuRunner(self.base_kernel, self.options, self.timeout_s, self.backend, workload)

    def remeasure(self, items: Mapping[str, tuple[str | Path, Mapping[str, Any] | None]], rounds: int = 40,
                  energy_rounds: int = 0) -> dict[str, Any]:
        """Time several cubins in interleaved rounds (ABAB..., order reversed every other round) in a fresh worker.

        Args:
            items: label -> (cubin, define values).
            rounds: Samples per candidate, one per round.
            energy_rounds: Interleaved energy windows per candidate (needs NVML).

        Returns:
            {"samples": {label: [s per launch, ...]}, "energy": {label: [J, ...]}, "power": {label: [W, ...]},
            "checks": {label: (ok, message)}, "state": GPU clocks/temperature,
            "cache": "warm" | "cold", "timer_resolution_s": CUDA events' resolution (s),
            "launches_per_sample": {label: launches per timed interval} (per-launch resolution: resolution /
            launches), "cache_flushes": {label: L2 flushes}, "throttled_rounds": rounds re-taken because the
            SM clock fell by over 5 % during them, "throttled_round_numbers": [their 0-based numbers],
            "throttle_persisted": re-takes that throttled again (kept), "throttle_checked": whether the SM
            clock could be read at all}.

        Raises:
            ConfigurationError: The worker hung, died or failed (the message says which).
        """
        payload = {"items": {k: self.item(c, d) for k, (c, d) in items.items()}, "rounds": rounds,
                   "energy_rounds": energy_rounds}
        limit = self.timeout_s * (1 + len(items)) + rounds * len(items) * 0.1
        return self._fresh_call("remeasure", payload, limit, f"re-measuring {len(items)} candidates")

    def _fresh_call(self, op: str, payload: dict[str, Any], limit_s: float, what: str) -> dict[str, Any]:
        """One request to a fresh worker (a clean CUDA context), closed afterwards.

        Raises:
            ConfigurationError: The worker hung, died or answered with an error (``what`` failed, and why).
        """
        fresh = WorkerProcess(self.backend, self._setup, what="GPU worker")
        try:
            fresh.start()
            reply = fresh.call(op, payload, limit_s)
        except (WorkerTimeout, WorkerDied) as exc:
            raise ConfigurationError(f"{what} failed: the GPU worker "
                                     f"{'hung' if isinstance(exc, WorkerTimeout) else 'died'} ({exc})") from None
        finally:
            fresh.close()
        if reply.get("status") != "ok":
            raise ConfigurationError(f"{what} failed in the GPU worker: {reply.get('error', reply)}")
        out: dict[str, Any] = reply
        return out

    def energy_check(self, cubin: str | Path, defines: Mapping[str, Any] | None = None,
                     seconds: float = 10.0) -> dict[str, Any]:
        """Check the energy method on one cubin in a fresh worker: energy per launch from a short fed window (what
        runs measure) against NVML's own counter over ``seconds`` of back-to-back launches.

        Returns:
            {"window_energy", "counter_energy" (J per launch), "ratio" (window / counter), "window_power",
            "counter_power" (W), "per_launch_s" (CUDA events), "wall_per_launch_s" (host clock over the long run),
            "launches", "seconds"}.

        Raises:
            ConfigurationError: No NVML, a wrong output, or a worker that hung or died.
        """
        return self._fresh_call("energy_check", {"item": self.item(cubin, defines), "seconds": seconds},
                                self.timeout_s + 3 * seconds, "the energy check")

    def close(self) -> None:
        """Stop the worker; clocks locked on request are unlocked (also when the worker was killed)."""
        self.worker.close()
        if self.options.lock_clocks_mhz:
            from compileiq_lab.measure.power import PowerMeter

            PowerMeter(index=self.options.device).unlock_clocks()


def entry_symbol(entry: str | None, cubin: str | Path) -> str | None:
    """The symbol of ``entry`` in ``cubin`` (the name itself when it is not found there: the launch then says so)."""
    if entry is None:
        return None
    try:
        return resolve_entry(entry, cubin_entries(cubin))
    except (ConfigurationError, ValueError, OSError):
        return entry


def start_gpu_runner(kernel: Kernel, arch: str, objectives: Sequence[str], timeout_s: float,
                     options: GpuOptions | None = None, backend: str | None = None) -> GpuRunner:
    """Start the GPU worker that measures ``objectives`` of ``kernel`` built for ``arch``, or say why it cannot.

    Raises:
        ConfigurationError: No usable GPU, power/energy without NVML, or a target the GPU cannot load.
    """
    wanted = sorted(set(objectives) & GPU_METRICS)
    wants_power = bool({"power", "energy"} & set(objectives))
    options = replace(options or GpuOptions(), energy=wants_power)
    runner = GpuRunner(kernel, options, timeout_s=timeout_s, backend=backend or CUPY_BACKEND)
    try:
        info = runner.start()
    except ConfigurationError as exc:
        why = str(exc).splitlines()[0].removeprefix("the GPU worker could not start: ")
        log.debug("GPU worker start failed: %s", exc)
        raise ConfigurationError(
            f"objectives {wanted} run the kernel on an NVIDIA GPU, but the GPU worker could not start: {why[:400]}. "
            "On a machine with an NVIDIA GPU install the gpu extra (pip install 'compileiq-lab[gpu]'); elsewhere "
            f"use static objectives {sorted(CUBIN_METRICS)}") from None
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
