"""Statistically valid wins: re-measure a run's front and its baseline interleaved and give speedups with CIs."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import numpy as np

from compileiq_lab.analysis.certify import DEVICE_FACTS, certify, check_rounds, noise_floor
from compileiq_lab.exceptions import ConfigurationError
from compileiq_lab.measure.cpu import cpu_model
from compileiq_lab.measure.stats import METHODS, MIN_ROUNDS, compare, median_ci
from compileiq_lab.store.header import RunHeader, Validation
from compileiq_lab.store.sqlite import MEMORY, EvalRecord, RunStore

if TYPE_CHECKING:
    from compileiq_lab.kernels.run import KernelRun
    from compileiq_lab.measure.cpu import CpuRunner
    from compileiq_lab.measure.gpu import GpuRunner
    from compileiq_lab.store.results import Results

__all__ = ["MIN_ROUNDS", "Validation", "save_validation", "validate"]

log = logging.getLogger(__name__)


def _points(results: Results, objective: int, eval_ids: Sequence[int] | None, max_points: int) -> list[EvalRecord]:
    by_id = {r.eval_id: r for r in results.records}
    if eval_ids is not None:
        bad = [i for i in eval_ids if i not in by_id or by_id[i].status != "ok"]
        if bad:
            raise ConfigurationError(f"eval ids must name successful evaluations, but got {bad}; "
                                     "see `compileiq-lab show` for the ids")
        return [by_id[i] for i in eval_ids]
    sign = results.objectives[objective].sign
    front = sorted(results.front_records(), key=lambda r: sign * (r.scores or [0.0])[objective])
    return front[:max_points]


def validate(results: Results, run: KernelRun, *, eval_ids: Sequence[int] | None = None,
             rounds: int = 40, energy_rounds: int | None = None, confidence: float = 0.95,
             method: str = "paired-bootstrap", max_points: int = 8, save: bool = True,
             workloads: Sequence[str] | None = None) -> Validation:
    """Re-measure points of a run and the baseline interleaved (a GPU run's in a fresh worker, a timed C kernel's in
    fresh processes, each sample its fastest call), with speedup CIs.

    Each point's code is rebuilt (cached), identical machine code is measured once, and all are
    timed in ``rounds`` interleaved rounds (ABAB..., order reversed every other round), so drift
    hits all alike. The baseline is also measured twice under two labels (an A/A control): any
    systematic difference between two identical measurements (order effects, code placement,
    launch overheads of very short kernels) shows as an A/A interval that excludes 1; its far
    end's distance from 1 is then the ``noise_floor`` (else 0). A point is a "win" only where the
    lower end of its speedup CI lies above 1 + noise_floor.

    Args:
        results: The run (its baseline must have succeeded).
        run: A KernelRun of the same kernel, catalog and arch with a GPU objective, or a C kernel's with runtime (e.g.
            the one that tuned, or ``KernelRun.from_header(results.header)``).
        eval_ids: Points to re-measure (default: the Pareto front, best runtime first, at most ``max_points``).
        rounds: Timing samples per point.
        energy_rounds: Interleaved energy windows per point (default 2 when NVML works, else 0; none on a CPU).
        confidence: Level of the intervals.
        method: See ``compileiq_lab.measure.stats.compare``.
        max_points: Cap on front points re-measured.
        save: Store the result in the run's header, if the run is on disk (as its only writer: a store another
            run is writing is refused before anything is measured). ``results`` itself is a snapshot and stays
            as it was: ``load_results(path)`` reads the stored validation.
        workloads: The kernel's other ``[[workloads]]`` to re-measure every point on as well (default: all
            it declares; [] for none; a C kernel's too, on the CPU). Each point's row gets ``workloads``
            (name -> speedup, low, high, win, loss, or the error when its output is wrong there) and ``mixed`` (a
            win on the tuning workload but a loss on another: a warning is logged and the lab shows it).

    Raises:
        ConfigurationError: Nothing that times the kernel, a failed baseline, a point that no longer compiles or
            checks.
    """
    _check_settings(rounds, confidence, method)
    timer = run.timer
    if timer is None:
        raise ConfigurationError("validate needs a kernel run with a measured objective: a GPU one (runtime, power "
                                 "or energy) on a CUDA kernel, or runtime on a runnable C kernel; static metrics "
                                 "are exact and need no re-measurement")
    base = results.baseline_record
    if base is None or base.status != "ok":
        raise ConfigurationError("validate compares with the baseline (compiler defaults), but the run's baseline "
                                 f"{'is missing' if base is None else 'failed: ' + base.status}; "
                                 "nothing to compare with")
    names = list(results.objective_names)
    points = _points(results, names.index("runtime") if "runtime" in names else 0, eval_ids, max_points)
    # the store's writer first: a run still writing it is said before minutes of measuring, not after
    writer = RunStore(results.store_path) if save and results.store_path != MEMORY else None
    try:
        if writer is not None:
            writer.acquire()
        validation = _remeasure(run, timer, base, points, rounds, energy_rounds, confidence, method,
                                _workloads(run, workloads))
        if writer is not None:
            writer.update_header(validation=validation)
    finally:
        if writer is not None:
            writer.close()
    return validation


def _workloads(run: KernelRun, asked: Sequence[str] | None) -> list[str]:
    """The other workloads to re-measure on: those asked (default: every one the kernel declares)."""
    return list(run.kernel.workloads) if asked is None else list(asked)


def _check_settings(rounds: int, confidence: float, method: str) -> None:
    check_rounds(rounds)
    if not 0.5 < confidence < 1:
        raise ConfigurationError(f"confidence must lie between 0.5 and 1, but got {confidence!r}; use e.g. 0.95")
    if method not in METHODS:
        raise ConfigurationError(f"method must be one of {list(METHODS)}, but got {method!r}")


def _codes(run: KernelRun, recs: Sequence[EvalRecord]) -> tuple[dict[str, tuple[Any, Any]], dict[int, str]]:
    """The distinct codes to time (label -> (binary, define values)) and each record's label; the first
    record's code (the baseline) is also measured under a second label, the A/A control."""
    items: dict[str, tuple[Any, Any]] = {}
    label_of: dict[int, str] = {}
    for rec in recs:
        path, code_hash = run.build(rec.params)
        defines = rec.params.get("defines")
        key = f"{code_hash[:16]}:{run.kernel.launch_dims(defines) if run.gpu is not None else 'cpu'}"
        label_of[rec.eval_id] = key
        items.setdefault(key, (path, defines))
    items[label_of[recs[0].eval_id] + "#aa"] = items[label_of[recs[0].eval_id]]
    return items, label_of


def _remeasure(run: KernelRun, runner: GpuRunner | CpuRunner, base: EvalRecord, points: list[EvalRecord],
               rounds: int, energy_rounds: int | None, confidence: float, method: str,
               workloads: list[str]) -> Validation:
    """Time the baseline and the points interleaved (in a fresh worker on a GPU), on the tuning workload and (on a GPU)
    the others."""
    gpu = run.gpu  # None: a C kernel timed on the CPU
    items, label_of = _codes(run, [base, *points])
    b_label = label_of[base.eval_id]
    aa_label = b_label + "#aa"
    if energy_rounds is None:
        energy_rounds = 0 if runner.info.get("nvml") or gpu is None else 2  # (None: NVML works)
    log.info("re-measuring %d distinct codes (%d points + baseline), %d rounds", len(items), len(points), rounds)
    runner.close()  # a GPU search's worker: one CUDA context at a time (it restarts if the run is used again)
    reply = runner.remeasure(items, rounds=rounds, energy_rounds=energy_rounds)
    failed = {k: msg for k, (ok, msg) in reply["checks"].items() if not ok}
    if failed:
        raise ConfigurationError(f"re-measured points must still produce the reference output, but {failed}")
    samples, energy = reply["samples"], reply.get("energy", {})

    def energy_mean(label: str) -> float | None:
        return float(np.mean(energy[label])) if energy.get(label) else None

    aa = compare(samples[b_label], samples[aa_label], confidence=confidence, method=method)
    floor = noise_floor(aa.low, aa.high)
    rows = []
    first_of: dict[str, int] = {}  # each code's first point: a later one with the same code is that one's twin
    for rec in points:
        label = label_of[rec.eval_id]
        twin = first_of.setdefault(label, rec.eval_id)
        c = compare(samples[b_label], samples[label], confidence=confidence, method=method)
        eb, ec = energy_mean(b_label), energy_mean(label)
        rows.append({"eval_id": rec.eval_id, "runtime_median": float(np.median(samples[label])),
                     "runtime_ci": list(median_ci(samples[label], confidence)), "speedup": c.speedup,
                     "low": c.low, "high": c.high, "win": c.low > 1.0 + floor, "loss": c.high < 1.0 - floor,
                     "samples": len(samples[label]),
                     "energy": ec, "energy_ratio": ec / eb if ec is not None and eb else None,
                     "same_code_as_baseline": label == b_label,
                     "same_code_as": twin if twin != rec.eval_id else None})
    for name in workloads:
        _validate_workload(runner, name, items, label_of, points, rows, rounds, confidence, method)
    launches = reply.get("launches_per_sample")
    timer = {"resolution_s": reply.get("timer_resolution_s"),
             "launches": dict(launches) if isinstance(launches, dict) else {}}
    certify(rows, samples, b_label, label_of, floor=floor, confidence=confidence, method=method, timer=timer)
    for row in rows:
        if row["win"] and not row["certified"]:
            log.info("eval %d: a win, not certified: %s", row["eval_id"], row.get("why_not"))
    return Validation(
        rows=rows, baseline={"eval_id": base.eval_id, "runtime_median": float(np.median(samples[b_label])),
                             "runtime_ci": list(median_ci(samples[b_label], confidence)),
                             "energy": energy_mean(b_label),
                             "aa": {"speedup": aa.speedup, "low": aa.low, "high": aa.high}, "noise_floor": floor},
        rounds=rounds, confidence=confidence, method=method, workloads=workloads,
        gpu={**runner.info.get("power", {}), **reply.get("state", {})},
        created=datetime.now(UTC).isoformat(timespec="seconds"),
        samples={"baseline": list(samples[b_label]), "baseline_aa": list(samples[aa_label]),
                 **{str(rec.eval_id): list(samples[label_of[rec.eval_id]]) for rec in points}},
        cache=str(reply.get("cache") or getattr(getattr(runner, "options", None), "cache", "warm")), timer=timer,
        device={k: runner.info.get(k) for k in DEVICE_FACTS} if gpu is not None else {"cpu": cpu_model()})


def save_validation(path: str, validation: Validation) -> RunHeader:
    """Store a validation in a run's header, as the run's only writer; returns the new header.

    Raises:
        StoreError: Another run is writing the store (wait for it or stop it first).
    """
    store = RunStore(path)
    try:
        store.acquire()
        return store.update_header(validation=validation)
    finally:
        store.close()


def _validate_workload(base: GpuRunner | CpuRunner, name: str, items: dict[str, Any], label_of: dict[int, str],
                       points: list[EvalRecord], rows: list[dict[str, Any]], rounds: int, confidence: float,
                       method: str) -> None:
    """Re-measure the same codes on another workload (its own inputs; on a GPU in a fresh worker); add to each row."""
    base_label = next(iter(items))  # the baseline was added first
    runner = base.for_workload(name)
    log.info("re-measuring %d codes on workload %r", len(items), name)
    reply = runner.remeasure(items, rounds=rounds)
    samples = reply["samples"]
    failed = {k: msg for k, (ok, msg) in reply["checks"].items() if not ok}
    if base_label in failed:
        raise ConfigurationError(f"the baseline must produce the reference output on workload {name!r}, but "
                                 f"{failed[base_label]}; fix the kernel or the workload's params")
    aa = compare(samples[base_label], samples[base_label + "#aa"], confidence=confidence, method=method)
    floor = noise_floor(aa.low, aa.high)
    for rec, row in zip(points, rows):
        label = label_of[rec.eval_id]
        if label in failed:  # a point that computes a wrong answer somewhere is no win anywhere
            entry: dict[str, Any] = {"error": f"wrong output: {failed[label]}"[:300], "win": False, "loss": True}
            row["win"] = False
            row.setdefault("wrong_output_on", []).append(name)
            log.warning("eval %d computes wrong output on workload %r: not a win, and no export picks it",
                        rec.eval_id, name)
        else:
            c = compare(samples[base_label], samples[label], confidence=confidence, method=method)
            entry = {"speedup": c.speedup, "low": c.low, "high": c.high, "win": c.low > 1.0 + floor,
                     "loss": c.high < 1.0 - floor}
        row.setdefault("workloads", {})[name] = entry
        row["mixed"] = bool(row["win"] and any(v["loss"] for v in row["workloads"].values()))
        if row["mixed"] and entry["loss"]:
            log.warning("eval %d wins on the tuning workload but loses on workload %r", rec.eval_id, name)
