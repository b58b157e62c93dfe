"""The objective space: what a search ranks by (Objective: name, direction, unit) and the standard kernel metrics."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from compileiq_lab.exceptions import ConfigurationError

__all__ = ["DIRECTIONS", "METRICS", "Objective", "format_quantity", "objectives_from_settings", "signs", "unit_of"]

#: The two senses an objective can have.
DIRECTIONS = ("min", "max")


@dataclass(frozen=True)
class Objective:
    """One objective of a search.

    Attributes:
        name: Its name (a column of results, an axis of plots, a key of ACF objectives).
        direction: "min" (lower is better) or "max".
        unit: Unit of its values ("s", "W", "J", "bytes", "count"; "" when unknown).
        doc: One line on what it measures.
        noise: How far apart repeated measurements of one config lie, as a share of the value (0: exact). A change
            against the baseline within it is "within noise", neither better nor worse.
    """

    name: str
    direction: str = "min"
    unit: str = ""
    doc: str = ""
    noise: float = 0.0

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ConfigurationError(f"Objective: `name is a non-empty string` must hold, but got {self.name!r}. "
                                     "Name the objective, e.g. Objective('runtime').")
        if self.direction not in DIRECTIONS:
            raise ConfigurationError(f"Objective {self.name!r}: `direction in ['min', 'max']` must hold, but got "
                                     f"{self.direction!r}. Use 'min' (lower is better) or 'max'.")
        if not (isinstance(self.noise, (int, float)) and 0 <= self.noise < 1):
            raise ConfigurationError(f"Objective {self.name!r}: `0 <= noise < 1` must hold (a share of the value), "
                                     f"but got {self.noise!r}. Use e.g. 0.05 for a 5 % spread, or 0 for exact values.")

    @property
    def sign(self) -> float:
        """+1 for "min", -1 for "max": multiplying by it turns every objective into one to minimise."""
        return 1.0 if self.direction == "min" else -1.0

    @property
    def sense(self) -> str:
        """The direction in words: "lower is better" or "higher is better"."""
        return "lower is better" if self.direction == "min" else "higher is better"

    @property
    def label(self) -> str:
        """Its name with unit and direction in words, e.g. "registers (count, lower is better)"."""
        return f"{self.name} ({self.unit + ', ' if self.unit else ''}{self.sense})"

    def format(self, value: float | None) -> str:
        """A value of this objective with its unit (see ``format_quantity``)."""
        return format_quantity(value, self.unit)

    def change(self, value: float | None, baseline: float | None) -> str | None:
        """A value against the baseline's as a change with its sense, e.g. "-19 % vs baseline, better" ("from 0 to 168
        bytes, worse" against a baseline of 0, which has no percentage; "-3.1 % vs baseline, within noise (10 %)"
        inside the objective's ``noise``); None when either is missing or not finite."""
        if value is None or baseline is None or not (math.isfinite(value) and math.isfinite(baseline)):
            return None
        if value == baseline:
            return "same as baseline"
        verdict = "better" if self.sign * (value - baseline) < 0 else "worse"
        if baseline == 0:
            return f"from 0 to {self.format(value)}, {verdict}"
        pct = 100.0 * (value - baseline) / abs(baseline)
        digits = 0 if abs(pct) >= 10 else 1 if abs(pct) >= 1 else 2
        if abs(pct) < 100.0 * self.noise:
            verdict = f"within noise ({100.0 * self.noise:g} %)"
        return f"{pct:+.{digits}f} % vs baseline, {verdict}"


#: Unit of a measurement by the suffix of its name (``compile_ms`` -> "ms").
_SUFFIX_UNITS = {"_s": "s", "_ms": "ms", "_us": "us", "_ns": "ns", "_bytes": "bytes", "_w": "W", "_j": "J",
                 "_mhz": "MHz", "_c": "C"}
#: The timing harnesses' other measurements ("share": a spread as a share of the value, shown in %).
_NAMED_UNITS = {"runtime_mean": "s", "runtime_min": "s", "runtime_iqr": "s", "runtime_cv": "share"}
_SCALES = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}
_SHOWN = {"us": "\u00b5s"}


def unit_of(name: str) -> str:
    """The unit of a measurement: a standard metric's (``METRICS``), else by its name's suffix
    (``_s``, ``_ms``, ``_bytes``, ``_w``, ``_j``, ...); "" when unknown."""
    if name in METRICS:
        return METRICS[name].unit
    if name in _NAMED_UNITS:
        return _NAMED_UNITS[name]
    lower = name.lower()
    return next((u for suffix, u in _SUFFIX_UNITS.items() if lower.endswith(suffix)), "")


def format_quantity(value: float | None, unit: str) -> str:
    """A value with its unit, times in the fitting one of s/ms/µs/ns ("12.3 µs"), counts and bytes as
    integers where they are whole; "-" for None or NaN."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    if unit in _SCALES and math.isfinite(value) and value != 0:
        seconds = value * _SCALES[unit]
        for name in ("s", "ms", "us", "ns"):
            if abs(seconds) >= _SCALES[name] or name == "ns":
                return f"{seconds / _SCALES[name]:.4g} {_SHOWN.get(name, name)}"
    if unit in ("count", "bytes") and float(value).is_integer():
        return f"{int(value)} {unit}"
    if unit == "share":  # of the value (a spread): shown in %
        return f"{100 * value:.3g} %"
    return f"{value:.6g}{' ' + unit if unit else ''}"


def signs(objectives: Sequence[Objective]) -> np.ndarray:
    """The minimisation sign of each objective, as an array (scores * signs are minimised)."""
    return np.array([o.sign for o in objectives], dtype=float)


def _metric(name: str, direction: str, unit: str, doc: str, noise: float = 0.0) -> tuple[str, Objective]:
    return name, Objective(name, direction, unit, doc, noise)


#: The objectives a kernel run can measure, by name.
METRICS: Mapping[str, Objective] = dict([
    _metric("registers", "min", "count", "registers per thread (ptxas -v)"),
    _metric("spill_bytes", "min", "bytes", "spill stores + loads in bytes (ptxas -v)"),
    _metric("stack_bytes", "min", "bytes", "stack frame bytes (ptxas -v)"),
    _metric("smem_bytes", "min", "bytes", "static shared memory bytes (ptxas -v)"),
    _metric("sass_instructions", "min", "count", "SASS instructions in the cubin's .text sections"),
    _metric("text_bytes", "min", "bytes", "bytes of machine code (.text sections)"),
    _metric("binary_size", "min", "bytes", "bytes of the whole compiled file"),
    _metric("compile_time", "min", "s", "wall seconds to compile (front end + back end; C: whole build); noisy: "
            "repeated compiles of one config vary by 2-8 % (coefficient of variation; nvcc + ptxas and gcc, "
            "bench/results/compile_noise.md), so a gap between two compiles below 10 % is not a win", noise=0.10),
    _metric("runtime", "min", "s",
            "seconds per call: fastest timed call (CPU kernels); median per launch (GPU kernels)"),
    _metric("runtime_median", "min", "s", "median seconds per call"),
    _metric("instructions", "min", "count", "instructions executed by one call (valgrind callgrind, CPU kernels)"),
    _metric("power", "min", "W", "mean board power in W while the kernel runs back to back (NVML)"),
    _metric("energy", "min", "J", "energy per launch in J (NVML total-energy counter)"),
])


def objectives_from_settings(num_objectives: int, problem_type: str | Sequence[str] = "min",
                             names: Sequence[str] | None = None,
                             known: Mapping[str, Objective] | None = None) -> list[Objective]:
    """The objectives that CompileIQ-style settings describe (the one place they are converted).

    Args:
        num_objectives: How many values the objective returns.
        problem_type: "min"/"max", or one per objective.
        names: Names per objective (default score_1..score_k).
        known: Objectives known by name (e.g. ``METRICS``): a like-named one takes their unit and noise.
    """
    directions = [problem_type] * num_objectives if isinstance(problem_type, str) else list(problem_type)
    labels = list(names) if names else [f"score_{i + 1}" for i in range(num_objectives)]
    known = known or {}
    return [Objective(n, d, known[n].unit, noise=known[n].noise) if n in known else Objective(n, d)
            for n, d in zip(labels, directions)]
