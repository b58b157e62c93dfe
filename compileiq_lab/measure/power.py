"""NVML power and energy for one GPU: energy counter, power sampling thread, device facts; absent -> unavailable."""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

__all__ = ["PowerMeter", "PowerSampler", "nvml_unavailable_reason", "uuid_sha256"]

log = logging.getLogger(__name__)


def nvml_unavailable_reason() -> str | None:
    """Why NVML cannot be used here (no package, no driver library, no GPU), or None when it can."""
    try:
        import pynvml
    except ImportError:
        return "nvidia-ml-py is not installed (pip install nvidia-ml-py)"
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        return f"NVML could not start: {exc} (no NVIDIA driver on this machine?)"
    try:
        if pynvml.nvmlDeviceGetCount() < 1:
            return "NVML sees no GPU"
    finally:
        pynvml.nvmlShutdown()
    return None


def uuid_sha256(uuid: str | bytes | None) -> str | None:
    """The sha256 (hex) of a GPU UUID as NVML spells it ("GPU-xxxxxxxx-..."): a stable device identity for a
    record that never shows the UUID itself; None for none."""
    if not uuid:
        return None
    text = uuid.decode() if isinstance(uuid, bytes) else str(uuid)
    return hashlib.sha256(text.strip().encode()).hexdigest()


class PowerMeter:
    """Power, energy and device facts of one GPU through NVML.

    ``reason`` is None when NVML works, else why power and energy are unavailable (the meter then
    answers nothing; callers report the objectives as unavailable instead of failing).

    Args:
        pci_bus_id: The GPU's PCI bus id (matches CUDA's device, whatever CUDA_VISIBLE_DEVICES says);
            None: NVML's device ``index``.
        index: Used when ``pci_bus_id`` is None.
    """

    def __init__(self, pci_bus_id: str | None = None, index: int = 0) -> None:
        self.reason: str | None = None
        self.has_energy_counter = False
        self._nvml: Any = None
        self._handle: Any = None
        try:
            import pynvml
        except ImportError:
            self.reason = "nvidia-ml-py is not installed (pip install nvidia-ml-py)"
            return
        try:
            pynvml.nvmlInit()
            self._handle = self._find(pynvml, pci_bus_id, index)
        except pynvml.NVMLError as exc:
            self.reason = f"NVML unavailable: {exc}"
            return
        self._nvml = pynvml
        try:
            pynvml.nvmlDeviceGetTotalEnergyConsumption(self._handle)
            self.has_energy_counter = True
        except pynvml.NVMLError as exc:
            log.info("no NVML energy counter (%s); energy comes from power samples", exc)
        try:
            pynvml.nvmlDeviceGetPowerUsage(self._handle)
        except pynvml.NVMLError as exc:
            self.reason = f"NVML cannot read this GPU's power: {exc}"

    @staticmethod
    def _find(pynvml: Any, pci_bus_id: str | None, index: int) -> Any:
        """The device handle by PCI bus id (NVML writes the domain with 8 digits, CUDA with 4), else by index."""
        if pci_bus_id:
            want = pci_bus_id.lower().split(":", 1)[-1]
            for i in range(pynvml.nvmlDeviceGetCount()):
                h = pynvml.nvmlDeviceGetHandleByIndex(i)
                bus = pynvml.nvmlDeviceGetPciInfo(h).busId
                bus = bus.decode() if isinstance(bus, bytes) else str(bus)
                if bus.lower().split(":", 1)[-1] == want:
                    return h
            log.warning("no NVML device has PCI bus id %s; using NVML device %d", pci_bus_id, index)
        return pynvml.nvmlDeviceGetHandleByIndex(index)

    @property
    def available(self) -> bool:
        """Whether power and energy can be measured."""
        return self.reason is None

    def _try(self, fn: Callable[..., Any], *args: Any) -> Any:
        if self._nvml is None:
            return None
        try:
            return fn(self._handle, *args)
        except self._nvml.NVMLError:
            return None

    def energy_j(self) -> float | None:
        """The total-energy counter in joules (since driver load), or None."""
        if not self.has_energy_counter:
            return None
        mj = self._try(self._nvml.nvmlDeviceGetTotalEnergyConsumption)
        return None if mj is None else mj / 1000.0

    def power_w(self) -> float | None:
        """Current board power in watts, or None."""
        mw = self._try(self._nvml.nvmlDeviceGetPowerUsage) if self._nvml else None
        return None if mw is None else mw / 1000.0

    def state(self) -> dict[str, float]:
        """Clocks (MHz), temperature (C) and power limit (W) now; keys absent where NVML cannot say."""
        if self._nvml is None:
            return {}
        n = self._nvml
        out: dict[str, float] = {}
        for key, value in (("sm_clock_mhz", self._try(n.nvmlDeviceGetClockInfo, n.NVML_CLOCK_SM)),
                           ("mem_clock_mhz", self._try(n.nvmlDeviceGetClockInfo, n.NVML_CLOCK_MEM)),
                           ("temperature_c", self._try(n.nvmlDeviceGetTemperature, n.NVML_TEMPERATURE_GPU)),
                           ("power_limit_w", self._try(n.nvmlDeviceGetEnforcedPowerLimit))):
            if value is not None:
                out[key] = float(value) / (1000.0 if key == "power_limit_w" else 1.0)
        return out

    def facts(self) -> dict[str, Any]:
        """GPU name, driver version and the current state, for the run header."""
        if self._nvml is None:
            return {"nvml": self.reason}
        name = self._try(self._nvml.nvmlDeviceGetName)
        try:
            driver = self._nvml.nvmlSystemGetDriverVersion()
        except self._nvml.NVMLError:
            driver = None

        def dec(v: Any) -> Any:
            return v.decode() if isinstance(v, bytes) else v

        return {"name": dec(name), "driver": dec(driver), "energy_counter": self.has_energy_counter,
                "nvml": self.reason, **self.state()}

    def identity(self) -> dict[str, Any]:
        """``uuid_sha256`` (the GPU UUID's sha256, never the UUID), ``driver_version`` and ``mig_mode``
        ("enabled", "disabled"); each None where NVML cannot say (no NVML, a GPU without MIG)."""
        out: dict[str, Any] = {"uuid_sha256": None, "driver_version": None, "mig_mode": None}
        if self._nvml is None:
            return out
        n = self._nvml
        out["uuid_sha256"] = uuid_sha256(self._try(n.nvmlDeviceGetUUID))
        try:
            driver = n.nvmlSystemGetDriverVersion()
            out["driver_version"] = driver.decode() if isinstance(driver, bytes) else str(driver)
        except n.NVMLError:
            pass
        get_mig = getattr(n, "nvmlDeviceGetMigMode", None)  # older bindings lack it
        mig = self._try(get_mig) if get_mig is not None else None
        if mig is not None:
            current = mig[0] if isinstance(mig, (list, tuple)) else mig
            out["mig_mode"] = "enabled" if current == getattr(n, "NVML_DEVICE_MIG_ENABLE", 1) else "disabled"
        return out

    def lock_clocks(self, mhz: int) -> None:
        """Lock the SM clock at ``mhz`` (needs root or the admin setting). Only done when a user asks."""
        self._nvml.nvmlDeviceSetGpuLockedClocks(self._handle, int(mhz), int(mhz))

    def unlock_clocks(self) -> None:
        """Undo ``lock_clocks`` (nothing to undo without NVML)."""
        if self._nvml is not None:
            self._try(self._nvml.nvmlDeviceResetGpuLockedClocks)


class PowerSampler:
    """A thread that reads board power and the energy counter every ``interval_s`` while in a ``with`` block.

    Attributes:
        samples: Watts read, in order.
        readings: (perf_counter time, joules or None, watts or None) per poll.
    """

    def __init__(self, meter: Any, interval_s: float = 0.005) -> None:
        self.meter, self.interval_s = meter, interval_s
        self.samples: list[float] = []
        self.readings: list[tuple[float, float | None, float | None]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="compileiq-power", daemon=True)

    def _loop(self) -> None:
        while not self._stop.is_set():
            joules, watts = self.meter.energy_j(), self.meter.power_w()
            self.readings.append((time.perf_counter(), joules, watts))
            if watts is not None:
                self.samples.append(watts)
            self._stop.wait(self.interval_s)

    def __enter__(self) -> PowerSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join(timeout=1.0)
