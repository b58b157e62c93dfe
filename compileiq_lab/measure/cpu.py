"""CPU kernels measured for real: run a C kernel built with the timing harness, time it, count its instructions."""

from __future__ import annotations

import logging
import platform
import re
import shutil
import signal
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from compileiq_lab.exceptions import ConfigurationError
from compileiq_lab.measure.c_shim import param_text
from compileiq_lab.measure.kernel import Kernel
from compileiq_lab.measure.runner import RunOutcome
from compileiq_lab.toolchain.tools import run_tool

__all__ = ["CPU_METRICS", "WRITES_INPUT", "CpuRunner", "cpu_model", "parse_callgrind_total", "timing_summary"]

#: How a wrong output's message says that the kernel changed its input buffers (``CpuRunner``'s harness saw it).
WRITES_INPUT = "the kernel writes its input buffer"

log = logging.getLogger(__name__)
#: A timed total under this is not trusted to rank flag sets alone (shared machines jitter).
TRUSTED_TOTAL_S = 0.05
#: The objectives a CPU run measures.
CPU_METRICS = frozenset({"runtime", "runtime_median", "instructions"})


def timing_summary(times: Sequence[float]) -> dict[str, float]:
    """min, median, mean, CV and count of per-call times; ``trusted`` is 1.0 when their sum >= 50 ms."""
    t = np.asarray(times, dtype=float)
    mean = float(t.mean())
    return {"runtime": float(t.min()), "runtime_median": float(np.median(t)), "runtime_mean": mean,
            "runtime_cv": float(t.std(ddof=1) / mean) if len(t) > 1 and mean > 0 else 0.0,
            "samples": float(len(t)), "trusted": float(t.sum() >= TRUSTED_TOTAL_S)}


def cpu_model(path: str = "/proc/cpuinfo") -> str:
    """The CPU's model name (from ``path``; else the platform's processor or machine name)."""
    try:
        m = re.search(r"^model name\s*:\s*(.+)$", Path(path).read_text(errors="replace"), re.M)
    except OSError:
        m = None
    return m.group(1).strip() if m else platform.processor() or platform.machine()


def parse_callgrind_total(text: str) -> int | None:
    """Total instruction count from a callgrind output file ("summary:" or "totals:" line)."""
    m = re.search(r"^(?:summary|totals):\s+(\d+)", text, re.M)
    return int(m.group(1)) if m else None


class CpuRunner:
    """Run one C kernel (``cil_kernel``) built with the bundled timing harness: time it, count its instructions,
    check its outputs.

    Inputs are generated once from the kernel spec and written to ``workdir``; the reference
    outputs are computed once with NumPy.

    Args:
        kernel: The kernel spec (language "c", with inputs, outputs and a reference).
        workdir: Scratch folder for inputs and outputs.
        objectives: What to measure: "runtime"/"runtime_median" (timed calls) and/or "instructions".
        timeout_s: Limit per run.
        min_repeats: Minimum timed calls (the spec's run.repeats by default).
        min_seconds: Keep timing until this much time was measured.
    """

    def __init__(self, kernel: Kernel, workdir: str | Path, objectives: Iterable[str], timeout_s: float = 60.0,
                 min_repeats: int | None = None, min_seconds: float = TRUSTED_TOTAL_S) -> None:
        wanted = set(objectives)
        self.kernel = kernel
        self.timed, self.counted = bool(wanted & {"runtime", "runtime_median"}), "instructions" in wanted
        self.workdir = Path(workdir)
        for sub in ("in", "out"):
            (self.workdir / sub).mkdir(parents=True, exist_ok=True)
        self.timeout_s = timeout_s
        self.min_repeats = min_repeats or int(kernel.repeats)
        self.min_seconds = min_seconds
        self.inputs = kernel.make_inputs()
        self.expected = kernel.reference_outputs(self.inputs)
        for name, arr in self.inputs.items():
            arr.tofile(self.workdir / "in" / f"{name}.bin")

    def metrics(self) -> frozenset[str]:
        """The objectives its runs measure."""
        timed = {"runtime", "runtime_median"} if self.timed else set()
        return frozenset(timed | ({"instructions"} if self.counted else set()))

    def identity(self, defines: Mapping[str, Any] | None) -> str:
        """Nothing but the executable makes two runs differ."""
        return ""

    @property
    def info(self) -> dict[str, Any]:
        """No device facts on the CPU."""
        return {}

    def close(self) -> None:
        """Nothing to release."""

    def for_workload(self, workload: str | None) -> CpuRunner:
        """A runner with the same settings on another of the kernel's ``[[workloads]]`` (its params, so its own
        inputs and reference outputs, in a folder of their own beside this runner's).

        Raises:
            ConfigurationError: ``workload`` is not one of the kernel's workloads.
        """
        folder = self.workdir / f"workload-{workload}" if workload is not None else self.workdir
        return CpuRunner(self.kernel.with_workload(workload), folder, self.metrics(), timeout_s=self.timeout_s,
                         min_repeats=self.min_repeats, min_seconds=self.min_seconds)

    def remeasure(self, items: Mapping[str, tuple[str | Path, Mapping[str, Any] | None]], rounds: int = 40,
                  energy_rounds: int = 0) -> dict[str, Any]:
        """Time several executables in interleaved rounds (ABAB..., order reversed every other round), as
        ``GpuRunner.remeasure`` does on a GPU: each round runs every executable once (a fresh process, at least
        ``min_repeats`` calls and ``min_seconds`` of them) and keeps its fastest call, the statistic a timed C
        search ranks by. Every run checks the outputs; the first run's verdict is reported.

        Args:
            items: label -> (executable, define values; ignored: a C kernel's defines are built in).
            rounds: Samples per executable, one per round.
            energy_rounds: Ignored (a CPU has no energy counter here).

        Returns:
            {"samples": {label: [s per call, ...]}, "energy": {}, "checks": {label: (ok, message)}, "state": {},
            "cache": "warm", "timer_resolution_s": the step a timed call is quantised to (the harness's measured
            tick, at least the clock's stated resolution), "launches_per_sample":
            {label: 1}}.

        Raises:
            ConfigurationError: An executable that fails to run (its status and message).
        """
        labels = list(items)
        samples: dict[str, list[float]] = {k: [] for k in labels}
        checks: dict[str, tuple[bool, str]] = {}
        ticks = [time.get_clock_info("monotonic").resolution]
        for r in range(rounds):
            for label in labels if r % 2 == 0 else labels[::-1]:
                out = self.time(Path(items[label][0]))
                if out.status not in ("ok", "wrong_output"):
                    raise ConfigurationError(f"re-measuring {label!r} must run the kernel, but it was "
                                             f"{out.status}: {out.error}")
                checks.setdefault(label, (out.status == "ok", out.error))
                samples[label].append(float(out.metrics["runtime"]))
                ticks.append(float(out.metrics.get("timer_tick_s", 0.0)))
        return {"samples": samples, "energy": {}, "checks": checks, "state": {}, "cache": "warm",
                "timer_resolution_s": max(ticks),
                "launches_per_sample": dict.fromkeys(labels, 1)}

    def run(self, binary: Path, defines: Mapping[str, Any] | None = None) -> RunOutcome:
        """Time the kernel (if asked) and count its instructions (if asked), checking the outputs of each."""
        metrics: dict[str, float] = {}
        for wanted, measure in ((self.timed, self.time), (self.counted, self.instructions)):
            if wanted:
                r = measure(binary)
                metrics.update(r.metrics)
                if r.status != "ok":
                    return RunOutcome(r.status, r.error, metrics)
        return RunOutcome("ok", "", metrics)

    def _args(self, tag: str) -> list[str]:
        params = [param_text(v) for v in self.kernel.params.values()]
        bufs: list[str] = []
        for b in self.kernel.inputs:
            bufs += ["in", str(self.inputs[b.name].nbytes), str(self.workdir / "in" / f"{b.name}.bin")]
        for b in self.kernel.outputs:
            nbytes = int(np.prod(self.kernel.shape_of(b))) * np.dtype(b.dtype).itemsize
            bufs += ["out", str(nbytes), str(self.workdir / "out" / f"{tag}-{b.name}.bin")]
        return [str(len(params)), *params, str(len(self.kernel.inputs) + len(self.kernel.outputs)), *bufs]

    def time(self, exe: Path) -> RunOutcome:
        """Time the kernel and check its outputs against the reference."""
        tag = exe.name
        res = run_tool([str(exe), str(self.min_repeats), str(self.min_seconds), *self._args(tag)], self.timeout_s)
        if res.timed_out:
            return RunOutcome("run_timeout", f"kernel run exceeded {self.timeout_s} s")
        if res.returncode is not None and res.returncode < 0:
            said = res.tail()[-300:].strip() or "it printed nothing"
            return RunOutcome("crashed", f"kernel process killed by signal {-res.returncode} "
                                         f"({_signal_name(-res.returncode)}): {said}")
        if res.returncode != 0:
            return RunOutcome("run_error", f"exit code {res.returncode}: {res.tail()[-500:]}")
        times = [float(x) for x in re.findall(r"^t ([\d.eE+-]+)$", res.stdout, re.M)]
        if not times:
            return RunOutcome("run_error", "the harness printed no timings")
        ok, why = self._check(tag)
        metrics = timing_summary(times)
        tick = re.search(r"^tick ([\d.eE+-]+)$", res.stdout, re.M)
        if tick:  # what each timed call is quantised to here (the clock's tick and the cost of reading it)
            metrics["timer_tick_s"] = float(tick.group(1))
        if not ok:
            return RunOutcome("wrong_output", why + self._written(res.stdout), metrics)
        return RunOutcome("ok", "", metrics)

    def _written(self, stdout: str) -> str:
        """What a wrong output's message adds when the kernel changed input buffers (the harness says which)."""
        names = [self.kernel.inputs[int(i)].name for i in re.findall(r"^written (\d+)$", stdout, re.M)
                 if int(i) < len(self.kernel.inputs)]
        if not names:
            return ""
        return (f"; {WRITES_INPUT}{'s' if len(names) > 1 else ''} {', '.join(map(repr, names))}, "
                "but the harness calls it many times on the same buffers, so each call starts from the last one's "
                "result: a kernel must not write its inputs (copy them to a scratch output and work there)")

    def _check(self, tag: str) -> tuple[bool, str]:
        outputs = {b.name: np.fromfile(self.workdir / "out" / f"{tag}-{b.name}.bin", dtype=b.dtype)
                   .reshape(self.kernel.shape_of(b)) for b in self.kernel.outputs}
        return self.kernel.check(outputs, self.expected)

    def instructions(self, exe: Path) -> RunOutcome:
        """Instructions executed inside ``cil_kernel`` for one call (valgrind callgrind; reproducible)."""
        valgrind = shutil.which("valgrind")
        if valgrind is None:
            return RunOutcome("run_error", "the instructions objective needs valgrind: apt-get install valgrind")
        out = self.workdir / "out" / f"{exe.name}.callgrind"
        argv = [valgrind, "--tool=callgrind", "--toggle-collect=cil_kernel", f"--callgrind-out-file={out}",
                str(exe), "0", "0", *self._args(exe.name + "-cg")]
        res = run_tool(argv, self.timeout_s * 4)
        if res.timed_out:
            return RunOutcome("run_timeout", "callgrind run timed out")
        if res.returncode != 0:
            return RunOutcome("run_error", f"callgrind failed (exit {res.returncode}; AVX-512 code cannot run "
                                           f"under valgrind): {res.tail()[-300:]}")
        total = parse_callgrind_total(out.read_text()) if out.exists() else None
        if total is None:
            return RunOutcome("run_error", "callgrind wrote no instruction total")
        ok, why = self._check(exe.name + "-cg")
        if not ok:
            return RunOutcome("wrong_output", why, {"instructions": float(total)})
        return RunOutcome("ok", "", {"instructions": float(total)})


def _signal_name(number: int) -> str:
    """A signal's name (``SIGSEGV``), or "an unknown signal"."""
    try:
        return signal.Signals(number).name
    except ValueError:
        return "an unknown signal"
