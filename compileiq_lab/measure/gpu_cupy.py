"""The GPU worker's CuPy backend: inputs uploaded once, cubins loaded with CuPy, samples timed with CUDA events (a CUDA
graph of back-to-back launches warm, one launch after an L2 flush cold), energy from NVML."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from compileiq_lab.measure.gpu_backend import (
    COLD_FLUSH_MIN_BYTES,
    TIMER_RESOLUTION_S,
    GpuBackend,
    Prepared,
    cuda_version_text,
)
from compileiq_lab.measure.power import PowerMeter, uuid_sha256
from compileiq_lab.measure.scalars import launch_scalars

__all__ = ["CupyBackend"]

log = logging.getLogger(__name__)


class CupyBackend(GpuBackend):
    """Runs candidates of one kernel spec on one GPU with CuPy (inputs made and uploaded once; in cold mode also
    the flush buffer, twice the L2 cache and at least ``COLD_FLUSH_MIN_BYTES``)."""

    flush_buf: Any = None

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
        l2_bytes = int(props.get("l2CacheSize") or 0)
        if self.cache == "cold":
            self.flush_buf = cp.empty(max(2 * l2_bytes, COLD_FLUSH_MIN_BYTES), dtype=cp.uint8)
            self.flush_l2(self.stream)
            self.stream.synchronize()
        nvml = PowerMeter(pci_bus_id=dev.pci_bus_id)
        self.meter = nvml
        facts = {**nvml.facts(), "power_at_start_w": nvml.power_w()}
        if not nvml.available:
            self.meter = None
        locked = False
        if self.opts.get("lock_clocks_mhz") and self.meter is not None:
            import atexit

            nvml.lock_clocks(int(self.opts["lock_clocks_mhz"]))
            atexit.register(nvml.unlock_clocks)
            locked = True
        runtime = cp.cuda.runtime.runtimeGetVersion()
        info = {"name": name, "arch": f"sm_{props['major']}{props['minor']}", "device": dev.id,
                "driver_cuda": cp.cuda.runtime.driverGetVersion(), "runtime_cuda": runtime,
                "cupy": cp.__version__, "multiprocessors": props["multiProcessorCount"], "power": facts,
                "nvml": facts.get("nvml")}
        info.update(self._certificate_facts(nvml, props.get("uuid"), runtime, locked, l2_bytes))
        return info

    def _certificate_facts(self, nvml: PowerMeter, cuda_uuid: Any, runtime: int, locked: bool,
                           l2_bytes: int) -> dict[str, Any]:
        """The device facts a certificate names (None where neither NVML nor CUDA can say): the GPU's UUID only
        as a sha256, NVML's first (the whole board's), else CUDA's ``cudaDeviceProp.uuid``."""
        ident, state = nvml.identity(), nvml.state()  # the clocks after any lock
        digest = ident["uuid_sha256"]
        if digest is None and isinstance(cuda_uuid, bytes) and len(cuda_uuid) == 16:  # shorter: cut at a NUL byte
            h = cuda_uuid.hex()
            digest = uuid_sha256(f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}")  # NVML's spelling
        return {"uuid_sha256": digest, "driver_version": ident["driver_version"],
                "cuda_runtime_version": cuda_version_text(runtime), "sm_clock_mhz": state.get("sm_clock_mhz"),
                "mem_clock_mhz": state.get("mem_clock_mhz"), "clocks_locked": locked,
                "power_limit_w": state.get("power_limit_w"), "mig_mode": ident["mig_mode"],
                "l2_bytes": l2_bytes or None, "timer_resolution_s": TIMER_RESOLUTION_S, "cache": self.cache}

    def flush_l2(self, stream: Any) -> None:
        """Queue a write of the whole flush buffer on ``stream`` (a memset, as nvbench and Triton flush): every
        L2 line the previous launch left is evicted before the next one."""
        self.flush_buf.data.memset_async(0, self.flush_buf.nbytes, stream)

    def _args(self) -> list[Any]:
        k = self.kernel
        return launch_scalars(k.args, k.params, k.arg_types, self.bufs)

    def _prepare(self, item: dict[str, Any]) -> Prepared:
        return _CupyCandidate(self, item)


class _CupyCandidate(Prepared):
    """A cubin loaded with CuPy; its timed unit (a CUDA graph of back-to-back launches) is built on first use,
    after the output check, sized to about ``sample_s`` of kernel time.

    In cold mode a sample is one launch after a flush of the L2 cache, timed alone by its own events
    (recorded after the flush, so the flush is not timed; the flush, queued first, keeps the GPU busy
    while the start event and the launch are queued, so no launch gap is timed either). The warm unit is
    still built for ``replay`` (the energy window).
    """

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
        self.cold = backend.cache == "cold"
        if self.cold:
            self.sample_launches, self.method = 1, "cold-launch"

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
        self.launches, method = n, "launches"
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
                self._unit, method = self.graph.launch, "graph"
            except Exception as exc:  # noqa: BLE001 - fall back to plain launches, recorded in ``method``
                log.warning("CUDA graph capture failed (%s); timing plain launches", exc)
        if not self.cold:  # cold samples are single launches whatever the replay unit is
            self.method = method
        return self._unit

    def replay(self) -> None:
        unit = self._timing_unit()
        with self.stream:
            unit()

    def sample(self) -> float:
        if self.cold:
            return self._cold_sample()
        unit = self._timing_unit()
        with self.stream:
            unit()  # pre-roll: the GPU stays busy while the timed unit is queued, so no launch gap is timed
        return self._timed(unit, self.launches)

    def _cold_sample(self) -> float:
        """Flush the L2 cache, then time one launch alone (stream order: flush, start event, launch, end event)."""
        self.b.flush_l2(self.stream)
        self.flushes += 1
        return self._timed(self._launch, 1)

    def sync(self) -> None:
        self.stream.synchronize()

    def fence(self) -> Callable[[], None]:
        event = self.b.cp.cuda.Event(disable_timing=True)
        event.record(self.stream)
        wait: Callable[[], None] = event.synchronize
        return wait

    def close(self) -> None:
        self.graph = self._unit = None
