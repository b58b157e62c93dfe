"""GPU worker side: load a cubin with CuPy, check its output, time it with CUDA events, measure its energy."""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from typing import Any, Protocol

import numpy as np

from compileiq_lab.measure.power import PowerMeter, PowerSampler
from compileiq_lab.measure.stats import relative_halfwidth, summarize

__all__ = ["CupyBackend", "GpuBackend", "Prepared", "energy_window", "sample_until"]

log = logging.getLogger(__name__)
#: CUDA errors of a launch the GPU refuses before running it: the context stays usable.
LAUNCH_REFUSED = ("CUDA_ERROR_INVALID_VALUE", "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES", "CUDA_ERROR_INVALID_CONFIGURATION",
                  "cudaErrorInvalidConfiguration", "cudaErrorLaunchOutOfResources", "cudaErrorInvalidValue")


class Meter(Protocol):
    """What the energy measurement reads (PowerMeter, or a stand-in)."""

    def energy_j(self) -> float | None: ...
    def power_w(self) -> float | None: ...
    def state(self) -> dict[str, float]: ...


class Prepared:
    """One loaded candidate, ready to check and time (subclassed by each backend).

    Attributes:
        launches: Kernel launches per replay (known once timing is set up).
        method: How a replay is issued ("graph", "launches", ...).
    """

    launches: int = 1
    method: str = ""

    def check(self) -> tuple[bool, str]:
        """Run once on fresh inputs and compare with the reference -> (ok, message)."""
        raise NotImplementedError

    def replay(self) -> None:
        """Queue one timed unit of work (``launches`` kernel launches) without waiting."""
        raise NotImplementedError

    def sample(self) -> float:
        """Time one replay; returns seconds per launch."""
        raise NotImplementedError

    def sync(self) -> None:
        """Wait for queued work."""

    def fence(self) -> Callable[[], None]:
        """Mark the work queued so far; the returned function waits until it is done."""
        self.sync()
        return lambda: None

    def close(self) -> None:
        """Release the candidate's resources."""


def sample_until(sample: Callable[[], float], opts: dict[str, Any]) -> list[float]:
    """Take timing samples: warm up for ``warmup_s``, then sample until ``min_samples`` are taken and the
    median's 95 % CI half-width is within ``ci_target`` (relative), or ``budget_s`` is spent, or
    ``max_samples`` are taken."""
    t_end = time.perf_counter() + opts["warmup_s"]
    sample()
    while time.perf_counter() < t_end:
        sample()
    samples: list[float] = []
    t_end = time.perf_counter() + opts["budget_s"]
    while len(samples) < opts["max_samples"]:
        samples.append(sample())
        if len(samples) >= opts["min_samples"] and (
                time.perf_counter() >= t_end or (len(samples) % 5 == 0
                                                  and relative_halfwidth(samples) <= opts["ci_target"])):
            break
    return samples


def energy_window(prep: Prepared, meter: Meter, window_s: float, per_launch_s: float) -> dict[str, float]:
    """Mean power (W) while the kernel runs back to back for about ``window_s``, and energy per launch (J).

    Work is queued in chunks of about 20 ms, always one chunk ahead of the one being waited for,
    so the GPU never idles between ``busy_from`` and ``busy_to`` whatever the host does (NVML
    calls can take milliseconds). A sampling thread reads the total-energy counter and the power;
    mean power is the counter's rise between its first and last step inside the busy span,
    divided by the time between them (without counter steps: the mean of the power samples).
    Energy per launch is that power times the time per launch measured with CUDA events, so
    launch overheads and host gaps are never charged to the kernel.
    """
    per_replay = max(per_launch_s * prep.launches, 1e-7)
    chunk = max(1, round(0.02 / per_replay))

    def queue() -> Callable[[], None]:
        for _ in range(chunk):
            prep.replay()
        return prep.fence()

    with PowerSampler(meter) as sampler:
        wait_prev = queue()
        wait = queue()
        wait_prev()  # the first chunk is done and the second one is queued: busy from here on
        busy_from = time.perf_counter()
        while True:
            wait_next = queue()
            wait()
            wait = wait_next
            busy_to = time.perf_counter()
            if busy_to - busy_from >= window_s:
                break
        wait()
    inside = [(t, j, w) for t, j, w in sampler.readings if busy_from <= t <= busy_to]
    steps = [(t, j) for (t, j, _), (_, jp, _) in zip(inside[1:], inside) if j is not None and j != jp]
    watts = [w for _, _, w in inside if w is not None]
    out = {"power_peak": max(watts) if watts else math.nan, "power_samples": float(len(watts)),
           "power_sampled_mean": float(np.mean(watts)) if watts else math.nan, "energy_window_s": busy_to - busy_from}
    if len(steps) >= 2 and steps[-1][0] > steps[0][0]:
        power, method = (steps[-1][1] - steps[0][1]) / (steps[-1][0] - steps[0][0]), 0.0
    elif watts:
        power, method = float(np.mean(watts)), 1.0
    else:
        raise RuntimeError("NVML gave neither energy-counter steps nor power samples during the energy window")
    out.update(power=float(power), energy=float(power) * per_launch_s, energy_method=method)
    return out


class GpuBackend:
    """The worker's request handler: ``measure`` one candidate, or ``remeasure`` several interleaved.

    Subclasses provide ``_setup(init) -> info``, ``_prepare(item) -> Prepared`` and ``meter``.
    """

    meter: Meter | None = None
    opts: dict[str, Any]

    def setup(self, init: dict[str, Any]) -> dict[str, Any]:
        self.opts = dict(init["options"])
        import scipy.stats  # noqa: F401 - imported now, not inside the first timing budget

        return self._setup(init)

    def _setup(self, init: dict[str, Any]) -> dict[str, Any]:
        raise NotImplementedError

    def _prepare(self, item: dict[str, Any]) -> Prepared:
        raise NotImplementedError

    def handle(self, op: str, payload: Any) -> dict[str, Any]:
        if op == "measure":
            return self.measure(payload)
        if op == "remeasure":
            return self.remeasure(payload)
        raise ValueError(f"unknown request {op!r}")

    def _energy(self, prep: Prepared, per_launch_s: float) -> dict[str, float]:
        if self.meter is None:
            return {}
        try:
            return energy_window(prep, self.meter, self.opts["energy_window_s"], per_launch_s)
        except RuntimeError as exc:  # NVML said nothing: no energy value, but the context is fine
            log.warning("no energy measurement: %s", exc)
            return {}

    def measure(self, item: dict[str, Any]) -> dict[str, Any]:
        """Check, time and (when asked) measure the energy of one candidate.

        A launch the GPU refuses (block too large for the compiled limits, too many registers or
        too much shared memory) is a ``run_error`` that leaves the context usable; any other error
        propagates and the worker is replaced (a sticky error such as an illegal address poisons
        the context).
        """
        try:
            return self._measure(item)
        except Exception as exc:
            text = f"{type(exc).__name__}: {exc}"
            if any(code in text for code in LAUNCH_REFUSED):
                return {"status": "run_error", "error": f"the GPU refused the launch: {text}"[:800], "metrics": {},
                        "fatal": False}
            raise

    def _measure(self, item: dict[str, Any]) -> dict[str, Any]:
        prep = self._prepare(item)
        try:
            ok, message = prep.check()
            if not ok:
                return {"status": "wrong_output", "error": message, "metrics": {}}
            samples = sample_until(prep.sample, self.opts)
            metrics = summarize(samples)
            metrics["launches_per_sample"] = float(prep.launches)
            if self.opts.get("energy"):
                metrics.update(self._energy(prep, metrics["runtime_median"]))
            if self.meter is not None:
                metrics.update(self.meter.state())
            return {"status": "ok", "error": "", "metrics": metrics, "method": prep.method}
        finally:
            prep.close()

    def remeasure(self, req: dict[str, Any]) -> dict[str, Any]:
        """Time several candidates in interleaved rounds (order reversed every other round)."""
        items: dict[str, dict[str, Any]] = req["items"]
        preps: dict[str, Prepared] = {}
        out: dict[str, Any] = {"status": "ok", "checks": {}, "samples": {}, "energy": {}, "power": {}}
        try:
            for label, item in items.items():
                preps[label] = self._prepare(item)
                out["checks"][label] = prep_check = preps[label].check()
                if not prep_check[0]:
                    preps.pop(label).close()
            labels = list(preps)
            for label in labels:  # warm-up
                sample_until(preps[label].sample, {**self.opts, "budget_s": 0.0, "min_samples": 3,
                                                   "max_samples": 3})
            out["samples"] = {label: [] for label in labels}
            for r in range(int(req["rounds"])):
                for label in labels if r % 2 == 0 else labels[::-1]:
                    out["samples"][label].append(preps[label].sample())
            for r in range(int(req.get("energy_rounds", 0)) if self.meter is not None else 0):
                for label in labels if r % 2 == 0 else labels[::-1]:
                    e = self._energy(preps[label], float(np.median(out["samples"][label])))
                    out["energy"].setdefault(label, []).append(e["energy"])
                    out["power"].setdefault(label, []).append(e["power"])
            out["state"] = self.meter.state() if self.meter is not None else {}
            return out
        finally:
            for prep in preps.values():
                prep.close()


class CupyBackend(GpuBackend):
    """Runs candidates of one kernel spec on one GPU with CuPy (inputs made and uploaded once)."""

    def _setup(self, init: dict[str, Any]) -> dict[str, Any]:
        import cupy as cp

        self.cp = cp
        dev = cp.cuda.Device(int(self.opts.get("device", 0)))
        dev.use()
        self.kernel = kernel = init["kernel"]  # the kernel spec (its workload applied), sent by the parent
        inputs = kernel.make_inputs()
        self.expected = kernel.reference_outputs(inputs)
        self.pristine = {k: cp.asarray(v) for k, v in inputs.items()}
        self.bufs = {k: cp.empty_like(v) for k, v in self.pristine.items()}
        self.bufs.update({b.name: cp.zeros(kernel.shape_of(b), dtype=b.dtype) for b in kernel.outputs})
        self.stream = cp.cuda.Stream(non_blocking=True)
        props = cp.cuda.runtime.getDeviceProperties(dev.id)
        name = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
        self.meter = PowerMeter(pci_bus_id=dev.pci_bus_id)
        facts = {**self.meter.facts(), "power_at_start_w": self.meter.power_w()}
        if not self.meter.available:
            self.meter = None
        if self.opts.get("lock_clocks_mhz") and self.meter is not None:
            import atexit

            self.meter.lock_clocks(int(self.opts["lock_clocks_mhz"]))
            atexit.register(self.meter.unlock_clocks)
        return {"name": name, "arch": f"sm_{props['major']}{props['minor']}", "device": dev.id,
                "driver_cuda": cp.cuda.runtime.driverGetVersion(), "runtime_cuda": cp.cuda.runtime.runtimeGetVersion(),
                "cupy": cp.__version__, "multiprocessors": props["multiProcessorCount"], "power": facts,
                "nvml": facts.get("nvml")}

    def _args(self) -> list[Any]:
        params = self.kernel.params
        return [self.bufs[a] if a in self.bufs else np.int32(params[a]) for a in self.kernel.args]

    def _prepare(self, item: dict[str, Any]) -> Prepared:
        return _CupyCandidate(self, item)


class _CupyCandidate(Prepared):
    """A cubin loaded with CuPy; its timed unit (a CUDA graph of back-to-back launches) is built on first use,
    after the output check, sized to about ``sample_s`` of kernel time."""

    def __init__(self, backend: CupyBackend, item: dict[str, Any]) -> None:
        self.b, cp = backend, backend.cp
        self.stream = backend.stream
        self.fn = cp.RawModule(path=item["cubin"]).get_function(item["entry"])
        self.grid, self.block, self.shmem = tuple(item["grid"]), tuple(item["block"]), int(item["shared_bytes"])
        if self.shmem > 48 * 1024:
            self.fn.max_dynamic_shared_size_bytes = self.shmem
        self.args = backend._args()
        self.start, self.end = cp.cuda.Event(), cp.cuda.Event()
        self.graph: Any = None
        self._unit: Callable[[], None] | None = None

    def _launch(self, n: int = 1) -> None:
        for _ in range(n):
            self.fn(self.grid, self.block, self.args, shared_mem=self.shmem)

    def check(self) -> tuple[bool, str]:
        b = self.b
        with self.stream:
            for k, v in b.pristine.items():
                b.bufs[k][...] = v
            for buf in b.kernel.outputs:
                b.bufs[buf.name].fill(0)
            self._launch()
        self.stream.synchronize()
        outputs = {buf.name: b.cp.asnumpy(b.bufs[buf.name]) for buf in b.kernel.outputs}
        verdict: tuple[bool, str] = b.kernel.check(outputs, b.expected)
        return verdict

    def _timed(self, issue: Callable[[], None], n: int) -> float:
        self.start.record(self.stream)
        with self.stream:
            issue()
        self.end.record(self.stream)
        self.end.synchronize()
        return float(self.b.cp.cuda.get_elapsed_time(self.start, self.end)) / 1000.0 / n

    def _timing_unit(self) -> Callable[[], None]:
        if self._unit is not None:
            return self._unit
        opts = self.b.opts
        self._timed(lambda: self._launch(3), 3)  # load and warm
        per = self._timed(lambda: self._launch(3), 3)
        n = int(min(opts["max_graph_launches"], max(1, round(opts["sample_s"] / max(per, 1e-7)))))
        self.launches, self.method = n, "launches"
        self._unit = lambda: self._launch(n)
        if opts.get("use_graph", True):
            try:
                with self.stream:
                    self.stream.begin_capture()
                    try:
                        self._launch(n)
                    finally:
                        self.graph = self.stream.end_capture()
                upload = getattr(self.graph, "upload", None)
                if upload is not None:  # instantiate now, so a failure falls back here rather than in timing
                    upload(self.stream)
                self._unit, self.method = self.graph.launch, "graph"
            except Exception as exc:  # noqa: BLE001 - fall back to plain launches, recorded in ``method``
                log.warning("CUDA graph capture failed (%s); timing plain launches", exc)
        return self._unit

    def replay(self) -> None:
        unit = self._timing_unit()
        with self.stream:
            unit()

    def sample(self) -> float:
        unit = self._timing_unit()
        with self.stream:
            unit()  # pre-roll: the GPU stays busy while the timed unit is queued, so no launch gap is timed
        return self._timed(unit, self.launches)

    def sync(self) -> None:
        self.stream.synchronize()

    def fence(self) -> Callable[[], None]:
        event = self.b.cp.cuda.Event(disable_timing=True)
        event.record(self.stream)
        wait: Callable[[], None] = event.synchronize
        return wait

    def close(self) -> None:
        self.graph = self._unit = None
