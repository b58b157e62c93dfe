"""A stand-in GPU backend for machines without a GPU: real worker processes, scripted kernels, synthetic times.

A "cubin" given to it is either a JSON script or any other file. A script may ask for real process
trouble ("sleep_s": hang, "exit": die with that code, "raise": fail with that message, "fatal":
fail as a sticky CUDA error would, "refused": fail as a launch the GPU refuses), a wrong output
("wrong": true), or a timing ("time_s": median seconds per launch, "noise": relative spread). Any other file gets a time
proportional to its size (1 ns per byte), so bigger code is slower: a static stand-in for runtime. On a
workload named "inverted" the order flips (time = 1e8 / size ns: every speedup becomes its inverse), to
stand for flags that win on one input size and lose on another. ``COMPILEIQ_STANDIN_SPEED`` in the environment scales
every such time (a slower or faster stand-in GPU: 2 doubles them), ``COMPILEIQ_STANDIN_NAME`` names the device.
Timing samples are synthetic (drawn around the median), but the sampling loop, the stopping rule,
the interleaving and the energy-window algorithm are the real ones; the stand-in energy counter
advances in 10 ms steps at 300 W of real wall time.

Cache modes: with ``GpuOptions(cache="cold")`` every sample is one launch after a counted flush and
takes ``COLD_FACTOR`` (1.3) times the warm time, so a test sees cold mode applied end to end. A script's
"throttle_samples" (a list of 1-based numbers of that candidate's ``sample`` calls, warm-up included)
throttles the stand-in GPU during those samples: the sample takes ``1 / THROTTLED`` times as long and the
next SM-clock reading shows ``THROTTLED`` (90 %) of the usual ``SM_CLOCK_MHZ``. Device facts are fixed:
the UUID's sha256 is that of ``STANDIN_UUID``, the L2 cache 50 MiB, MIG disabled.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import numpy as np

from compileiq_lab.measure.gpu_backend import TIMER_RESOLUTION_S, GpuBackend, Prepared
from compileiq_lab.measure.power import uuid_sha256

__all__ = ["COLD_FACTOR", "L2_BYTES", "SM_CLOCK_MHZ", "STANDIN_BACKEND", "STANDIN_UUID", "THROTTLED", "NoNvmlStandIn",
           "StandInBackend", "StandInMeter", "script"]

#: Pass as ``backend=`` to GpuRunner / KernelEvaluator(gpu_backend=...).
STANDIN_BACKEND = "compileiq_lab.testing.gpu_standin:StandInBackend"
WATTS = 300.0
#: A cold-cache launch takes this many times the warm time.
COLD_FACTOR = 1.3
#: The stand-in GPU's SM clock, and the fraction of it a throttled reading shows.
SM_CLOCK_MHZ = 1980.0
THROTTLED = 0.9
#: The stand-in GPU's UUID (only its sha256 is reported) and L2 cache size.
STANDIN_UUID = "GPU-stand-in-0"
L2_BYTES = 50 * 2**20


def script(path: str | os.PathLike[str], **instructions: Any) -> Path:
    """Write a stand-in "cubin" holding ``instructions`` (see the module docstring)."""
    path = Path(path)
    path.write_text(json.dumps(instructions))
    return path


class StandInMeter:
    """An energy counter that steps every 10 ms at a constant 300 W of wall time; its SM clock reads
    ``THROTTLED`` of ``SM_CLOCK_MHZ`` once after each ``throttle()``."""

    def __init__(self) -> None:
        self.t0 = time.perf_counter()
        self.throttles = 0

    def throttle(self) -> None:
        """The GPU throttles now: the next state reading shows the lowered SM clock."""
        self.throttles += 1

    def energy_j(self) -> float:
        return WATTS * (int((time.perf_counter() - self.t0) / 0.01) * 0.01)

    def power_w(self) -> float:
        return WATTS

    def state(self) -> dict[str, float]:
        clock = SM_CLOCK_MHZ * (THROTTLED if self.throttles else 1.0)
        self.throttles = max(0, self.throttles - 1)
        return {"sm_clock_mhz": clock, "temperature_c": 40.0}


class StandInBackend(GpuBackend):
    """Scripted candidates in a real worker process (see the module docstring)."""

    def _setup(self, init: dict[str, Any]) -> dict[str, Any]:
        self.meter = StandInMeter()
        self.rng = np.random.default_rng(int(self.opts.get("seed", 0)))
        self.workload = init.get("workload")
        self.speed = float(os.environ.get("COMPILEIQ_STANDIN_SPEED", "1"))
        name = os.environ.get("COMPILEIQ_STANDIN_NAME", "stand-in GPU")
        return {"name": name, "arch": self.opts.get("arch", "sm_90"), "device": 0, "nvml": None,
                "power": {"name": name, "nvml": None}, "pid": os.getpid(),
                "uuid_sha256": uuid_sha256(STANDIN_UUID), "driver_version": "550.54.15", "cuda_runtime_version": "12.4",
                "sm_clock_mhz": SM_CLOCK_MHZ, "mem_clock_mhz": 2619.0,
                "clocks_locked": bool(self.opts.get("lock_clocks_mhz")), "power_limit_w": 700.0,
                "mig_mode": "disabled", "l2_bytes": L2_BYTES, "timer_resolution_s": TIMER_RESOLUTION_S,
                "cache": self.cache}

    def _prepare(self, item: dict[str, Any]) -> Prepared:
        raw = Path(item["cubin"]).read_bytes()
        try:
            spec = json.loads(raw.decode())
            if not isinstance(spec, dict):
                raise ValueError
        except (UnicodeDecodeError, ValueError):
            ns = (1e8 / len(raw) if self.workload == "inverted" else float(len(raw))) * self.speed
            spec = {"time_s": ns * 1e-9, "noise": 0.01}
        if "sleep_s" in spec:
            time.sleep(float(spec["sleep_s"]))
        if "exit" in spec:
            os._exit(int(spec["exit"]))
        if "raise" in spec:
            raise RuntimeError(spec["raise"])
        if spec.get("refused"):
            raise RuntimeError("CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES: too many resources requested for launch (stand-in)")
        if spec.get("fatal"):
            raise RuntimeError("CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access was encountered (stand-in)")
        meter = self.meter if isinstance(self.meter, StandInMeter) else None
        return _ScriptedCandidate(spec, self.opts, self.rng, meter)


class _ScriptedCandidate(Prepared):
    """Synthetic samples around the scripted median, with real sleeps standing in for the GPU's work
    (cold mode: one flush and one launch per sample, ``COLD_FACTOR`` slower)."""

    method = "stand-in"

    def __init__(self, spec: dict[str, Any], opts: dict[str, Any], rng: np.random.Generator,
                 meter: StandInMeter | None = None) -> None:
        self.spec, self.rng, self.meter = spec, rng, meter
        self.median, self.noise = float(spec.get("time_s", 1e-4)), float(spec.get("noise", 0.01))
        self.launches = max(1, min(int(opts["max_graph_launches"]), round(opts["sample_s"] / self.median)))
        self.wall = min(self.median * self.launches, 0.002)  # real work per replay, capped to keep tests quick
        self.cold = opts.get("cache", "warm") == "cold"
        if self.cold:
            self.sample_launches, self.method = 1, "stand-in-cold"
        self.throttle_at = {int(k) for k in spec.get("throttle_samples", [])}
        self.samples_taken = 0

    def check(self) -> tuple[bool, str]:
        if self.spec.get("wrong"):
            return False, "stand-in: output 'out' differs beyond rtol=1e-05, atol=1e-08"
        return True, "stand-in: all outputs within tolerance"

    def replay(self) -> None:
        time.sleep(self.wall)

    def sample(self) -> float:
        self.samples_taken += 1
        median = self.median
        if self.cold:
            self.flushes += 1
            median *= COLD_FACTOR
            time.sleep(min(median, 0.002))
        else:
            time.sleep(self.wall)
        if self.samples_taken in self.throttle_at:
            median /= THROTTLED
            if self.meter is not None:
                self.meter.throttle()
        return float(median * np.exp(self.noise * self.rng.standard_normal()))


class NoNvmlStandIn(StandInBackend):
    """The stand-in on a machine whose NVML library is missing: power and energy are unavailable."""

    def _setup(self, init: dict[str, Any]) -> dict[str, Any]:
        info = super()._setup(init)
        self.meter = None
        reason = "NVML unavailable: NVML Shared Library Not Found"
        # as the real backend without NVML: the UUID (from CUDA), runtime and L2 size are known, the rest is not
        return {**info, "nvml": reason, "power": {"nvml": reason}, "driver_version": None, "sm_clock_mhz": None,
                "mem_clock_mhz": None, "clocks_locked": False, "power_limit_w": None, "mig_mode": None}
