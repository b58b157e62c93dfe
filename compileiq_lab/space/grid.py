"""The value checks and grids of the space DSL: one-line errors, finite numbers, and the values of a range."""

from __future__ import annotations

import builtins
import functools
import logging
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from compileiq_lab.exceptions import SpaceDefinitionError

__all__ = ["check_number", "fail", "grid", "grid_size", "log_grid", "plain", "preview", "seed_indices"]

log = logging.getLogger(__name__)


def fail(func: str, rule: str, got: str, fix: str) -> SpaceDefinitionError:
    """The error of a DSL call: the rule, the value received and the fix."""
    return SpaceDefinitionError(f"{func}(): `{rule}` must hold, but got {got}. {fix}")


def plain(value: Any) -> Any:
    """numpy scalars and arrays (in lists and tuples too) as the Python numbers and lists they hold: CompileIQ's DSL
    takes them, and a space or a setting is stored as JSON."""
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, (list, tuple)):
        return type(value)(plain(v) for v in value)
    return value


def check_number(func: str, name: str, value: Any) -> float:
    """``value`` when it is a finite int or float (that fits a float), else the error."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise fail(func, f"{name} is a finite number", f"{name}={value!r}",
                    f"Pass a finite int or float as {name}.")
    try:
        finite = math.isfinite(value)
    except OverflowError:  # an int beyond the float range
        raise fail(func, f"{name} fits a float (|{name}| < 1.8e308)",
                    f"{name}=an int of {int(value).bit_length()} bits", f"Pass a smaller {name}.") from None
    if not finite:
        raise fail(func, f"{name} is a finite number", f"{name}={value!r}",
                    f"Pass a finite int or float as {name}.")
    return value


def preview(values: Sequence[Any], limit: int = 8) -> str:
    """The first values of a list and its length, for messages."""
    shown = ", ".join(repr(v) for v in values[:limit])
    return f"[{shown}{', ...' if len(values) > limit else ''}] ({len(values)} values)"


def grid_size(start: float, end: float, step: float) -> float:
    """How many values ``start, start+step, ...`` up to ``end`` gives, without building them (inf: beyond floats)."""
    if all(isinstance(v, int) for v in (start, end, step)):
        return (int(end) - int(start)) // int(step) + 1  # exact, however large
    steps = (end - start) / step
    return math.floor(steps + 1e-9) + 1 if math.isfinite(steps) else math.inf


def grid(start: float, end: float, step: float) -> list[float | int]:
    """The values ``start, start+step, ...`` up to ``end`` (float noise rounded away, the ends exact): ints where
    ``start``, ``end`` and ``step`` all are, else floats, every one (an objective formats them all alike)."""
    n = int(grid_size(start, end, step))
    if all(isinstance(v, int) for v in (start, end, step)):
        return [start + i * step for i in builtins.range(n)]
    # 12 significant digits hide float noise (0.1 * 3 -> 0.3); the ends stay exact
    values: list[float | int] = [float(f"{start + i * step:.12g}") for i in builtins.range(n)]
    values[0] = float(start)
    if abs(start + (n - 1) * step - end) <= 1e-9 * max(1.0, abs(step)):
        values[-1] = float(end)
    return values


def seed_indices(values: list[Any], start: float, end: float, step: float, seed_low: float | None,
                  seed_high: float | None) -> tuple[int, int]:
    """Indices of the first and last grid values inside [seed_low, seed_high] (all values by default)."""
    if seed_low is None and seed_high is None:
        return 0, len(values) - 1
    lo = start if seed_low is None else check_number("range", "seed_low", seed_low)
    hi = end if seed_high is None else check_number("range", "seed_high", seed_high)
    if not start <= lo <= hi <= end:
        raise fail("range", "start <= seed_low <= seed_high <= end",
                    f"(start={start!r}, seed_low={lo!r}, seed_high={hi!r}, end={end!r})",
                    "Pick seed bounds inside [start, end], low before high.")
    low = next((i for i, v in enumerate(values) if v >= lo - 1e-12), len(values))
    high = max((i for i, v in enumerate(values) if v <= hi + 1e-12), default=-1)
    if high < low:
        raise fail("range", "the seed interval holds a grid value",
                    f"(seed_low={lo!r}, seed_high={hi!r}) with step={step!r}",
                    "Widen [seed_low, seed_high] to contain start + k*step for some k.")
    return low, high


def log_grid(start: float, end: float, total: int) -> list[Any]:
    """``total`` values spaced geometrically from ``start`` to ``end`` (both kept): integers, duplicates dropped (with
    a warning saying so), when both ends are ints, else floats to 12 significant digits."""
    ratio = (end / start) ** (1.0 / (total - 1))
    raw = [start * ratio**i for i in builtins.range(total)]
    raw[-1] = end
    if isinstance(start, int) and isinstance(end, int):
        values: list[Any] = sorted({round(v) for v in raw})
        if len(values) < total:
            _merged(start, end, total, len(values))
        return values
    rounded = [start] + [float(f"{v:.12g}") for v in raw[1:-1]] + [end]
    return list(dict.fromkeys(rounded))  # drop duplicates, keep order


@functools.lru_cache(maxsize=256)
def _merged(start: int, end: int, total: int, n: int) -> None:
    """Say once per process that rounding merged a log_sampling's integer values (a stored space is rebuilt from its
    arguments whenever a run is opened, replayed or read)."""
    log.warning("log_sampling(%s, %s, total=%s) has %d distinct integer values, not %d: rounding merged the ones near "
                "%s; ask for fewer, or pass float ends for unrounded values", start, end, total, n, total, start)
