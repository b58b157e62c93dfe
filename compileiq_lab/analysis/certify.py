"""Certified wins: Holm-adjusted intervals over the points re-measured, the timer and A/A criteria, an ACF's certificate
and its re-check."""

from __future__ import annotations

import logging
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from compileiq_lab.exceptions import ConfigurationError
from compileiq_lab.measure.stats import MIN_ROUNDS, compare, exceed_p_value
from compileiq_lab.space.space import SearchSpace

if TYPE_CHECKING:
    from compileiq_lab.kernels.run import KernelRun
    from compileiq_lab.store.header import Validation

__all__ = ["DEVICE_FACTS", "Recheck", "certificate", "certify", "check_rounds", "noise_floor", "recheck"]

log = logging.getLogger(__name__)

#: The GPU's facts a certificate records (from the GPU worker's info; missing ones are None).
DEVICE_FACTS = ("name", "arch", "uuid_sha256", "driver_version", "cuda_runtime_version", "sm_clock_mhz",
                "mem_clock_mhz", "clocks_locked", "power_limit_w", "mig_mode", "l2_bytes")


def noise_floor(low: float, high: float) -> float:
    """An A/A interval covering 1: 0 (no evidence of bias); else the distance of its far end from 1."""
    return 0.0 if low <= 1.0 <= high else max(1.0 - low, high - 1.0)


def certify(rows: Sequence[dict[str, Any]], samples: Mapping[str, Sequence[float]], base: str,
            label_of: Mapping[int, str], *, floor: float, confidence: float, method: str,
            timer: Mapping[str, Any] | None = None) -> None:
    """Decide which re-measured points are certified wins; adds to each row ``p_value``, ``holm_confidence``,
    ``adjusted_low``/``adjusted_high``, ``certified`` and, when not, ``why_not``.

    The best of many candidates looks faster by chance (selection bias), so each point's interval is widened by
    Holm's step-down over the m points tested: sorted by their one-sided p-value of "speedup <= 1 + floor", the k-th
    (from 0) is tested at alpha / (m - k) and the step-down stops at the first that fails. A point is certified when
    it passes, its adjusted interval lies above 1 + the A/A floor, its difference per launch is at least the timer's
    resolution per launch, it is not the baseline's own code, and it loses significantly on no other workload.

    Args:
        rows: One row per point (``eval_id``; with other workloads, ``workloads`` name -> {loss, ...}).
        samples: Per-launch times per label, one per interleaved round.
        base: The baseline's label.
        label_of: Each point's label.
        floor: The A/A noise floor.
        confidence: The (two-sided) level before adjustment.
        method: See ``compileiq_lab.measure.stats.compare``.
        timer: ``resolution_s`` (one timed sample) and ``launches`` (label -> launches per sample), where known.
    """
    alpha = (1 - confidence) / 2  # one-sided: the lower end of the two-sided interval
    threshold = 1.0 + floor
    n_boot = max(4000, int(4 * len(rows) / alpha))  # the smallest bootstrap p-value must be able to pass alpha / m
    p = {r["eval_id"]: exceed_p_value(samples[base], samples[label_of[r["eval_id"]]], threshold, method=method,
                                      n_boot=n_boot) for r in rows}
    stopped_at: int | None = None
    for k, row in enumerate(sorted(rows, key=lambda r: p[r["eval_id"]])):
        label = label_of[row["eval_id"]]
        level = alpha / (len(rows) - k)
        adjusted = compare(samples[base], samples[label], confidence=1 - 2 * level, method=method)
        why: list[str] = []
        if stopped_at is not None:
            why.append(f"Holm's step-down stopped at eval {stopped_at}, whose evidence was stronger")
        elif p[row["eval_id"]] > level or adjusted.low <= threshold:
            stopped_at = row["eval_id"]
            why.append(f"its Holm-adjusted interval [{adjusted.low:.4f}, {adjusted.high:.4f}] does not lie above "
                       f"1 + the A/A floor ({threshold:.4f})")
        resolution = _resolution_per_launch(timer, base, label)
        gain = float(np.median(samples[base]) - np.median(samples[label]))
        if resolution is not None and gain < resolution:
            why.append(f"the gain ({gain * 1e9:.1f} ns per launch) is below the timer's resolution "
                       f"({resolution * 1e9:.1f} ns per launch)")
        if row.get("same_code_as_baseline"):
            why.append("it is the baseline's own machine code")
        wrong = list(row.get("wrong_output_on") or [])
        if wrong:
            why.append(f"it computes wrong output on workload{'s' if len(wrong) > 1 else ''} {', '.join(wrong)}")
        losses = [name for name, e in (row.get("workloads") or {}).items() if e.get("loss") and name not in wrong]
        if losses:
            why.append(f"it loses on workload{'s' if len(losses) > 1 else ''} {', '.join(losses)}")
        row.update(p_value=p[row["eval_id"]], holm_confidence=1 - 2 * level, adjusted_low=adjusted.low,
                   adjusted_high=adjusted.high, certified=not why)
        if why:
            row["why_not"] = "; ".join(why)


def _resolution_per_launch(timer: Mapping[str, Any] | None, *labels: str) -> float | None:
    """The timer's resolution divided by the fewest launches per sample of the labels (None when unknown)."""
    if not timer or not timer.get("resolution_s"):
        return None
    launches = timer.get("launches") or {}
    counts = [float(launches[label]) for label in labels if launches.get(label)]
    return float(timer["resolution_s"]) / min(counts) if counts else float(timer["resolution_s"])


def certificate(validation: Validation, row: Mapping[str, Any], code_hash: str | None,
                acf_name: str = "this.acf") -> dict[str, Any]:
    """The ACF's ``validation.certificate`` of one point: where, how and with what result it was measured, and the
    one-line command that re-checks it."""
    device = validation.device
    workloads = {"tuning": {k: row.get(k) for k in ("speedup", "low", "high", "adjusted_low", "adjusted_high")}}
    for name, e in (row.get("workloads") or {}).items():
        workloads[name] = {k: e.get(k) for k in ("speedup", "low", "high", "win", "loss", "error") if k in e}
    return {"certified": bool(row.get("certified")), "why_not": row.get("why_not", ""),
            **{f"gpu_{k}" if k != "name" else "gpu": device.get(k) for k in DEVICE_FACTS},
            **({"cpu": device["cpu"]} if device.get("cpu") else {}),
            "cache": validation.cache, "rounds": validation.rounds, "confidence": validation.confidence,
            "method": validation.method, "holm_points": len(validation.rows),
            "aa": dict(validation.baseline.get("aa") or {}), "noise_floor": validation.noise_floor,
            "timer_resolution_s": validation.timer.get("resolution_s"), "workloads": workloads,
            "code_hash": code_hash, "recheck": f"compileiq-lab validate --acf {shlex.quote(acf_name)}"}


@dataclass(frozen=True)
class Recheck:
    """A re-measurement of an ACF's point against the baseline on this GPU (``validate --acf``).

    Attributes:
        speedup, low, high: The point over the baseline, with its interval.
        aa_low, aa_high: The A/A control (the baseline against itself) measured with it.
        tolerance: How far below 1 the lower bound may fall (default: the A/A noise, see ``recheck``).
        passed: ``low >= 1 - tolerance``.
        code_hash: The machine code rebuilt now; ``recorded_hash`` the ACF's (a difference is reported).
        rounds: Interleaved rounds.
    """

    speedup: float
    low: float
    high: float
    aa_low: float
    aa_high: float
    tolerance: float
    passed: bool
    code_hash: str
    recorded_hash: str | None
    rounds: int


def check_rounds(rounds: int) -> None:
    """Refuse interleaved timing rounds that are not an integer >= MIN_ROUNDS (fewer give no usable interval)."""
    if isinstance(rounds, bool) or not isinstance(rounds, int) or rounds < MIN_ROUNDS:
        raise ConfigurationError(f"rounds must be an integer >= {MIN_ROUNDS} (interleaved samples per point), but got "
                                 f"{rounds!r}; use e.g. rounds=40 (--rounds 40)")


def recheck(controls: Mapping[str, Any], run: KernelRun, *, recorded: Mapping[str, Any] | None = None,
            recorded_hash: str | None = None, rounds: int = 40, tolerance: float | None = None,
            confidence: float | None = None, method: str | None = None) -> Recheck:
    """Re-measure a point (an ACF's controls) and the baseline interleaved, with an A/A control, on this GPU (or, for
    a C kernel, this CPU).

    A regression gate for CI: it passes while the re-measured lower bound stays at or above ``1 - tolerance``. The
    default tolerance is the noise the A/A control shows: the larger of the A/A floor the ACF recorded, the one
    measured now and the half-width of the A/A interval measured now; so a true small win (whose lower bound
    wanders by about that much from run to run) does not fail by chance, while a real regression does.

    Args:
        controls: The point's controls (``acf.controls``).
        run: A measuring kernel run of the ACF's kernel (``KernelRun.from_acf(acf, measure=True, ...)``).
        recorded: The ACF's ``validation`` (its floor, confidence and method are used where not given).
        recorded_hash: The ACF's code hash (a difference from the rebuilt code is logged).
        rounds: Interleaved rounds (>= 10).
        tolerance: How far below 1 the lower bound may fall, in [0, 1).
        confidence, method: Of the intervals (default: the recorded ones, else 0.95 and the paired bootstrap).

    Raises:
        ConfigurationError: Nothing that times the kernel, bad rounds or tolerance, a build that fails, or wrong output
            on the tuning workload or any other the kernel declares.
    """
    recorded = recorded or {}
    confidence = float(confidence if confidence is not None else recorded.get("confidence", 0.95))
    method = str(method if method is not None else recorded.get("method", "paired-bootstrap"))
    if tolerance is not None and not (isinstance(tolerance, (int, float)) and 0 <= tolerance < 1):
        raise ConfigurationError(f"tolerance must lie in [0, 1), but got {tolerance!r}; e.g. 0.01 lets the lower "
                                 "bound fall to 0.99")
    timer = run.timer
    if timer is None:
        raise ConfigurationError("validate --acf re-measures the runtime: it needs a kernel run with a runtime "
                                 "objective, on a machine with an NVIDIA GPU for a CUDA kernel")
    check_rounds(rounds)
    base_path, base_hash = run.build(SearchSpace(run.search_space()).baseline() or {})
    point_path, point_hash = run.build(dict(controls))
    defines = controls.get("defines")
    items = {"baseline": (base_path, None), "baseline#aa": (base_path, None), "point": (point_path, defines)}
    timer.close()
    reply = timer.remeasure(items, rounds=rounds, energy_rounds=0)
    failed = {k: msg for k, (ok, msg) in reply["checks"].items() if not ok}
    if failed:
        raise ConfigurationError(f"the re-measured codes must produce the reference output, but {failed}")
    for name in run.kernel.workloads:  # a point that computes a wrong answer on another input size fails the gate
        pair = {k: items[k] for k in ("baseline", "point")}  # one round: its outputs are checked, not its time
        checks = timer.for_workload(name).remeasure(pair, rounds=1, energy_rounds=0)["checks"]
        for label, whose in (("baseline", "the compiler defaults"), ("point", "the ACF's point")):
            if not checks[label][0]:
                raise ConfigurationError(f"{whose} must compute the reference output on every workload of the kernel, "
                                         f"but on workload {name!r}: {checks[label][1]}"[:600]
                                         + ("; fix the kernel or the workload's params" if label == "baseline" else ""))
    s = reply["samples"]
    c = compare(s["baseline"], s["point"], confidence=confidence, method=method)
    aa = compare(s["baseline"], s["baseline#aa"], confidence=confidence, method=method)
    if tolerance is None:
        floor = recorded.get("noise_floor")
        tolerance = max(float(floor) if isinstance(floor, (int, float)) else 0.0, noise_floor(aa.low, aa.high),
                        (aa.high - aa.low) / 2)
    if recorded_hash and recorded_hash != point_hash:
        log.warning("the rebuilt machine code %s differs from the recorded %s (another compiler or source): the "
                    "check measures what the ACF builds now", point_hash[:16], recorded_hash[:16])
    if point_hash == base_hash:
        log.warning("the ACF's controls build the baseline's own machine code here")
    return Recheck(c.speedup, c.low, c.high, aa.low, aa.high, tolerance, c.low >= 1.0 - tolerance, point_hash,
                   recorded_hash, rounds)

