"""GPU worker side: load a cubin with CuPy, check its output, time it with CUDA events, measure its energy.

Two cache modes: "warm" times a CUDA graph of back-to-back launches (the L2 cache keeps what the previous
launch left there); "cold" writes a buffer larger than the L2 cache before every timed launch (as nvbench's
cold mode and Triton's ``do_bench`` do) and times that launch alone with its own pair of CUDA events.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol

import numpy as np

from compileiq_lab.measure.power import PowerSampler
from compileiq_lab.measure.stats import relative_halfwidth, summarize

__all__ = ["CACHE_MODES", "COLD_FLUSH_MIN_BYTES", "THROTTLE_DROP", "TIMER_RESOLUTION_S", "GpuBackend", "Prepared",
           "clock_dropped", "cuda_version_text", "energy_window", "sample_until"]

log = logging.getLogger(__name__)
#: CUDA errors of a launch the GPU refuses before running it: the context stays usable.
LAUNCH_REFUSED = ("CUDA_ERROR_INVALID_VALUE", "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES", "CUDA_ERROR_INVALID_CONFIGURATION",
                  "cudaErrorInvalidConfiguration", "cudaErrorLaunchOutOfResources", "cudaErrorInvalidValue")
#: How finely a pair of CUDA events times an interval: "a resolution of around 0.5 microseconds" (CUDA Runtime API,
#: cudaEventElapsedTime). Per launch it is this divided by the launches one timed interval covers.
TIMER_RESOLUTION_S = 0.5e-6
#: "warm": L2 kept between back-to-back launches; "cold": L2 flushed before every timed launch.
CACHE_MODES = ("warm", "cold")
#: The cold-mode flush buffer holds twice the L2 cache and at least this much (Triton flushes 256 MB): writing it
#: evicts every line the previous launch left, and keeps the GPU busy while the timed launch is queued.
COLD_FLUSH_MIN_BYTES = 256 * 2**20
#: A re-measurement round is re-taken (once) when the SM clock fell by more than this fraction during it.
THROTTLE_DROP = 0.05


class Meter(Protocol):
    """What the energy measurement reads (PowerMeter, or a stand-in)."""

    def energy_j(self) -> float | None: ...
    def power_w(self) -> float | None: ...
    def state(self) -> dict[str, float]: ...


class Prepared:
    """One loaded candidate, ready to check and time (subclassed by each backend).

    Attributes:
        launches: Kernel launches per replay (known once timing is set up).
        sample_launches: Kernel launches in one timed interval of ``sample`` (0: the same as ``launches``; 1 in
            cold mode, where each launch follows its own flush).
        method: How a sample is issued ("graph", "launches", "cold-launch", ...).
        flushes: L2 flushes issued so far (cold mode).
    """

    launches: int = 1
    sample_launches: int = 0
    method: str = ""
    flushes: int = 0

    @property
    def launches_per_sample(self) -> int:
        """Kernel launches one timing sample's interval covers (its per-launch resolution is
        ``TIMER_RESOLUTION_S / launches_per_sample``)."""
        return self.sample_launches or self.launches

    def check(self) -> tuple[bool, str]:
        """Run once on fresh inputs and compare with the reference -> (ok, message)."""
        raise NotImplementedError

    def replay(self) -> None:
        """Queue one timed unit of work (``launches`` kernel launches) without waiting."""
        raise NotImplementedError

    def sample(self) -> float:
        """Time one replay (cold mode: one launch after a flush); returns seconds per launch."""
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


def clock_dropped(before: float | None, after: float | None, drop: float = THROTTLE_DROP) -> bool:
    """Whether the SM clock fell by more than ``drop`` (a fraction) from ``before`` to ``after`` (MHz); False
    when either reading is missing."""
    return before is not None and after is not None and before > 0 and (before - after) / before > drop


def cuda_version_text(version: int | None) -> str | None:
    """CUDA's integer version as "major.minor" (12040 -> "12.4"); None for none."""
    if not version or version <= 0:
        return None
    return f"{version // 1000}.{version % 1000 // 10}"


def energy_window(prep: Prepared, meter: Meter, window_s: float, per_launch_s: float) -> dict[str, float]:
    """Mean power (W) while the kernel runs back to back for about ``window_s``, and energy per launch (J).

    Work is queued in chunks of about 20 ms, always one chunk ahead of the one being waited for,
    so the GPU never idles between ``busy_from`` and ``busy_to`` whatever the host does (NVML
    calls can take milliseconds). A sampling thread reads the total-energy counter and the power;
    mean power is the counter's rise between its first and last step inside the busy span,
    divided by the time between them (without counter steps: the mean of the power samples).
    Energy per launch is that power times the time per launch measured with CUDA events, so
    launch overheads and host gaps are never charged to the kernel. In cold mode the window still runs
    back-to-back launches without flushes (the flushes' own power would otherwise dominate the reading),
    and ``per_launch_s`` is the cold time per launch.
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

    Subclasses provide ``_setup(init) -> info``, ``_prepare(item) -> Prepared`` and ``meter``; their
    candidates honour ``opts["cache"]`` ("warm" or "cold", see ``CACHE_MODES``).
    """

    meter: Meter | None = None
    opts: dict[str, Any]

    @property
    def cache(self) -> str:
        """The cache mode: "warm" or "cold"."""
        return str(self.opts.get("cache", "warm"))

    def setup(self, init: dict[str, Any]) -> dict[str, Any]:
        self.opts = dict(init["options"])
        if self.cache not in CACHE_MODES:
            raise ValueError(f"cache must be one of {', '.join(map(repr, CACHE_MODES))}, but got {self.cache!r}; "
                             "pass GpuOptions(cache='warm') or GpuOptions(cache='cold')")
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
        if op == "energy_check":
            return self.energy_check(payload)
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
            metrics.update(self._timer_facts(prep))
            if self.opts.get("energy"):
                metrics.update(self._energy(prep, metrics["runtime_median"]))
            if self.meter is not None:
                metrics.update(self.meter.state())
            return {"status": "ok", "error": "", "metrics": metrics, "method": prep.method, "cache": self.cache}
        finally:
            prep.close()

    def _timer_facts(self, prep: Prepared) -> dict[str, float]:
        """What a caller needs to judge a sample's resolution, and the cache mode (1.0: cold) as numbers."""
        return {"launches_per_sample": float(prep.launches_per_sample), "timer_resolution_s": TIMER_RESOLUTION_S,
                "cache_cold": 1.0 if self.cache == "cold" else 0.0, "cache_flushes": float(prep.flushes)}

    def _sm_clock(self) -> float | None:
        """The SM clock now (MHz), None where the meter cannot say."""
        if self.meter is None:
            return None
        value = self.meter.state().get("sm_clock_mhz")
        return None if value is None else float(value)

    def _round(self, preps: Mapping[str, Prepared], order: list[str]) -> tuple[dict[str, float], bool]:
        """One sample of each candidate in ``order``, and whether the SM clock dropped during the round."""
        before = self._sm_clock()
        got = {label: preps[label].sample() for label in order}
        return got, clock_dropped(before, self._sm_clock())

    def remeasure(self, req: dict[str, Any]) -> dict[str, Any]:
        """Time several candidates in interleaved rounds (order reversed every other round).

        The SM clock is read before and after each round; a round during which it fell by more than
        ``THROTTLE_DROP`` is re-taken once (its samples discarded) and counted in ``throttled_rounds``; a
        re-take that throttles again is kept and counted in ``throttle_persisted``.
        """
        items: dict[str, dict[str, Any]] = req["items"]
        preps: dict[str, Prepared] = {}
        out: dict[str, Any] = {"status": "ok", "checks": {}, "samples": {}, "energy": {}, "power": {},
                               "cache": self.cache, "timer_resolution_s": TIMER_RESOLUTION_S}
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
            throttled: list[int] = []
            persisted = 0
            for r in range(int(req["rounds"])):
                order = labels if r % 2 == 0 else labels[::-1]
                got, dropped = self._round(preps, order)
                if dropped:  # the GPU throttled during the round: its samples are not comparable, take it again
                    log.info("SM clock dropped during round %d; re-taking it", r)
                    throttled.append(r)
                    got, dropped = self._round(preps, order)
                    persisted += dropped
                for label in order:
                    out["samples"][label].append(got[label])
            out.update(throttled_rounds=len(throttled), throttled_round_numbers=throttled,
                       throttle_persisted=persisted, throttle_checked=self._sm_clock() is not None,
                       launches_per_sample={label: preps[label].launches_per_sample for label in labels},
                       cache_flushes={label: preps[label].flushes for label in labels})
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

    def energy_check(self, req: dict[str, Any]) -> dict[str, Any]:
        """The energy method (power over a short fed window x time per launch) against NVML's own total-energy
        counter over a long steady run of back-to-back launches (its rise / the launches in it)."""
        if self.meter is None:
            return {"status": "error", "error": "NVML is unavailable: no energy counter to check against"}
        prep = self._prepare(req["item"])
        try:
            ok, message = prep.check()
            if not ok:
                return {"status": "wrong_output", "error": message}
            per_launch = float(np.median(sample_until(prep.sample, self.opts)))
            window = energy_window(prep, self.meter, self.opts["energy_window_s"], per_launch)
            chunk = max(1, round(0.02 / max(per_launch * prep.launches, 1e-7)))
            replays = 0

            def queue() -> Callable[[], None]:
                nonlocal replays
                for _ in range(chunk):
                    prep.replay()
                replays += chunk
                return prep.fence()

            wait = queue()
            wait()  # warm: the GPU is busy from the next queue on
            replays = 0
            e0, t0 = self.meter.energy_j(), time.perf_counter()
            wait = queue()
            while time.perf_counter() - t0 < float(req.get("seconds", 10.0)):
                wait_next = queue()
                wait()
                wait = wait_next
            wait()
            e1, t1 = self.meter.energy_j(), time.perf_counter()
            if e0 is None or e1 is None or e1 <= e0:
                return {"status": "error", "error": "NVML's energy counter did not advance during the long run"}
            launches = replays * prep.launches
            counter = (e1 - e0) / launches
            return {"status": "ok", "per_launch_s": per_launch, "window_energy": window["energy"],
                    "window_power": window["power"], "counter_energy": counter, "counter_power": (e1 - e0) / (t1 - t0),
                    "ratio": window["energy"] / counter, "launches": launches, "seconds": t1 - t0,
                    "wall_per_launch_s": (t1 - t0) / launches}
        finally:
            prep.close()
