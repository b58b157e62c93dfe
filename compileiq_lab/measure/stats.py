"""Statistics for timings: median CIs, stopping rules, and speedup CIs (bootstrap or Welch) for wins."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

__all__ = ["METHODS", "MIN_ROUNDS", "Comparison", "compare", "exceed_p_value", "median_ci", "relative_halfwidth",
           "summarize"]

METHODS = ("bootstrap", "paired-bootstrap", "welch")
#: The fewest interleaved timing rounds a re-measurement takes (fewer give no usable interval).
MIN_ROUNDS = 10


def _arr(samples: Sequence[float], what: str) -> np.ndarray:
    a = np.asarray(samples, dtype=float)
    if a.ndim != 1 or a.size < 2 or not np.all(np.isfinite(a)) or np.any(a <= 0):
        raise ValueError(f"{what}: `at least 2 finite positive samples` must hold, but got {a.size} samples "
                         f"(min {a.min() if a.size else 'n/a'}); measure more repeats")
    return a


def median_ci(samples: Sequence[float], confidence: float = 0.95) -> tuple[float, float]:
    """Distribution-free confidence interval of the median from order statistics (binomial ranks).

    With fewer than 6 samples no rank pair reaches 95 %; the sample range is returned then.
    """
    a = np.sort(np.asarray(samples, dtype=float))
    n = a.size
    if n == 0:
        raise ValueError("median_ci: `at least 1 sample` must hold, but got 0; measure first")
    from scipy.stats import binom

    lo = int(binom.ppf((1 - confidence) / 2, n, 0.5))  # number of samples below the lower bound
    lo = min(max(lo - 1, 0), n - 1)
    hi = min(n - 1 - lo, n - 1)
    return float(a[lo]), float(a[hi])


def relative_halfwidth(samples: Sequence[float], confidence: float = 0.95) -> float:
    """Half the width of ``median_ci`` divided by the median (inf for fewer than 2 samples)."""
    if len(samples) < 2:
        return math.inf
    lo, hi = median_ci(samples, confidence)
    med = float(np.median(samples))
    return (hi - lo) / 2 / med if med > 0 else math.inf


def summarize(samples: Sequence[float]) -> dict[str, float]:
    """median, min, IQR, mean, CV and count of per-launch times (seconds)."""
    a = np.asarray(samples, dtype=float)
    q1, med, q3 = np.percentile(a, [25, 50, 75])
    mean = float(a.mean())
    return {"runtime": float(med), "runtime_median": float(med), "runtime_min": float(a.min()),
            "runtime_iqr": float(q3 - q1), "runtime_mean": mean,
            "runtime_cv": float(a.std(ddof=1) / mean) if a.size > 1 and mean > 0 else 0.0, "samples": float(a.size)}


@dataclass(frozen=True)
class Comparison:
    """Speedup of a candidate over a baseline: ``median(baseline) / median(candidate)`` with a CI.

    Attributes:
        speedup: Point estimate (> 1: the candidate is faster).
        low, high: Bounds of the confidence interval.
        confidence: e.g. 0.95.
        method: "bootstrap" (independent resampling of the medians), "paired-bootstrap" (median of
            per-round ratios, resampled by round) or "welch" (t interval on log times).
        n_baseline, n_candidate: Sample counts.
    """

    speedup: float
    low: float
    high: float
    confidence: float
    method: str
    n_baseline: int
    n_candidate: int

    @property
    def win(self) -> bool:
        """The candidate is faster: the whole interval lies above 1."""
        return self.low > 1.0

    @property
    def loss(self) -> bool:
        """The candidate is slower: the whole interval lies below 1."""
        return self.high < 1.0

    def to_dict(self) -> dict[str, Any]:
        """Plain data, with ``win``/``loss``."""
        return {**asdict(self), "win": self.win, "loss": self.loss}


def compare(baseline: Sequence[float], candidate: Sequence[float], *, confidence: float = 0.95,
            method: str = "paired-bootstrap", n_boot: int = 4000, seed: int = 0) -> Comparison:
    """Speedup of ``candidate`` over ``baseline`` (per-launch times) with a confidence interval.

    "paired-bootstrap" needs samples taken in interleaved rounds (sample i of each in round i): it
    cancels drift (clocks, temperature) that hits both alike. "bootstrap" and "welch" treat the
    two sets as independent.

    Raises:
        ValueError: Fewer than 2 positive finite samples, unequal lengths for the paired method,
            or an unknown method.
    """
    b, c = _arr(baseline, "baseline samples"), _arr(candidate, "candidate samples")
    if not 0.5 < confidence < 1:
        raise ValueError(f"confidence: `0.5 < confidence < 1` must hold, but got {confidence}; use e.g. 0.95")
    alpha = 1 - confidence
    if method in ("paired-bootstrap", "bootstrap"):
        est, boots = _bootstrap(b, c, method, n_boot, seed)
        lo, hi = np.quantile(boots, [alpha / 2, 1 - alpha / 2])
    elif method == "welch":
        from scipy.stats import t as student_t

        lb, lc = np.log(b), np.log(c)
        vb, vc = lb.var(ddof=1) / lb.size, lc.var(ddof=1) / lc.size
        diff = float(lb.mean() - lc.mean())
        se = math.sqrt(vb + vc)
        if se == 0:
            lo = hi = diff
        else:
            df = (vb + vc) ** 2 / (vb ** 2 / (lb.size - 1) + vc ** 2 / (lc.size - 1))
            q = float(student_t.ppf(1 - alpha / 2, df))
            lo, hi = diff - q * se, diff + q * se
        est, lo, hi = math.exp(diff), math.exp(lo), math.exp(hi)
    else:
        raise ValueError(f"method: `one of {list(METHODS)}` must hold, but got {method!r}")
    return Comparison(est, float(lo), float(hi), confidence, method, int(b.size), int(c.size))


def _bootstrap(b: np.ndarray, c: np.ndarray, method: str, n_boot: int, seed: int) -> tuple[float, np.ndarray]:
    """The speedup estimate and ``n_boot`` resampled speedups: "paired-bootstrap" resamples the per-round ratios
    (their median), "bootstrap" the two medians independently."""
    rng = np.random.default_rng(seed)
    if method == "paired-bootstrap":
        if b.size != c.size:
            raise ValueError(f"paired-bootstrap: `equal sample counts (one per round)` must hold, but got "
                             f"{b.size} and {c.size}; use method='bootstrap' for unpaired samples")
        ratios = b / c
        return float(np.median(ratios)), np.median(ratios[rng.integers(0, ratios.size, (n_boot, ratios.size))], axis=1)
    mb = np.median(b[rng.integers(0, b.size, (n_boot, b.size))], axis=1)
    mc = np.median(c[rng.integers(0, c.size, (n_boot, c.size))], axis=1)
    return float(np.median(b) / np.median(c)), mb / mc


def exceed_p_value(baseline: Sequence[float], candidate: Sequence[float], threshold: float, *,
                   method: str = "paired-bootstrap", n_boot: int = 4000, seed: int = 0) -> float:
    """One-sided p-value of "the speedup is at most ``threshold``" (small: the candidate is faster than that).

    The bootstrap methods count the resampled speedups at or below the threshold (``(1 + k) / (1 + n_boot)``, never
    0); "welch" takes the t distribution of the log-time difference. The same resampling as ``compare``.

    Raises:
        ValueError: As for ``compare``.
    """
    b, c = _arr(baseline, "baseline samples"), _arr(candidate, "candidate samples")
    if method in ("paired-bootstrap", "bootstrap"):
        boots = _bootstrap(b, c, method, n_boot, seed)[1]
    elif method == "welch":
        from scipy.stats import t as student_t

        lb, lc = np.log(b), np.log(c)
        vb, vc = lb.var(ddof=1) / lb.size, lc.var(ddof=1) / lc.size
        se = math.sqrt(vb + vc)
        diff = float(lb.mean() - lc.mean()) - math.log(threshold)
        if se == 0:
            return 0.0 if diff > 0 else 1.0
        df = (vb + vc) ** 2 / (vb ** 2 / (lb.size - 1) + vc ** 2 / (lc.size - 1))
        return float(student_t.sf(diff / se, df))
    else:
        raise ValueError(f"method: `one of {list(METHODS)}` must hold, but got {method!r}")
    return float((1 + np.count_nonzero(boots <= threshold)) / (1 + n_boot))
