"""Which point of a run to export: the best on one objective, the knee of the front, or no regression anywhere."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np

from compileiq_lab.exceptions import ConfigurationError
from compileiq_lab.store.results import Results, representative

if TYPE_CHECKING:
    from compileiq_lab.store.header import Validation
    from compileiq_lab.store.sqlite import EvalRecord

__all__ = ["PICK_CHOICES", "PICK_RULES", "default_pick", "miscomputing", "pick_point"]

#: The rules besides an objective's name.
PICK_RULES = ("knee", "no-regression")
#: What a pick takes besides an objective's name: "first" (the first objective's best) and the rules.
PICK_CHOICES = ("first", *PICK_RULES)


def default_pick(static: bool) -> str:
    """The rule a run's export uses unless told: "no-regression" for static runs (a static front's extremes are
    often de-optimisations: -O0 with 3x the instructions for fewer registers, a register cap that spills), the
    first objective for measured runs."""
    return "no-regression" if static else "first"


def pick_point(results: Results, rule: str = "first",
               validation: Validation | None = None) -> tuple[EvalRecord | None, str]:
    """The point ``rule`` picks among the run's Pareto front, and a line saying why.

    Args:
        results: The run.
        rule: An objective's name (its best point), "first" (the first objective), "knee" (the front point
            nearest the ideal point once each objective is scaled to [0, 1] over the front) or "no-regression"
            (the best point on the first objective, then on the next ones, among those no worse than the baseline on
            any objective, nor, where a kernel run records them and they are no objectives, in bytes spilled or
            stack frame bytes).
        validation: The run's re-measurement (default: the one ``results`` holds): points it found computing wrong
            output on another workload, and points with their machine code, are left out before the front is made.

    Raises:
        ConfigurationError: An unknown rule (the message lists the rules), or "no-regression" on a run without a
            successful baseline.
    """
    names = results.objective_names
    if rule not in PICK_CHOICES and rule not in names:
        raise ConfigurationError(f"--pick must be an objective of the run ({', '.join(names)}) or one of "
                                 f"{list(PICK_CHOICES)}, but got {rule!r}; pick one of those")
    results, said = _without_miscomputing(results, validation if validation is not None else results.validation)
    if said and not any(r.status == "ok" and r.scores for r in results.records):
        return None, f"no successful point computes the right output on every workload ({said})"
    said = f" among the points that compute the right output on every workload (wrong: {said})" if said else ""
    if rule == "first" or rule in names:
        i = 0 if rule == "first" else names.index(rule)
        return results.best_record(i), f"the best {names[i]}{said}"
    front = [rec for rec, _ in results.distinct_front() if rec.scores]
    if not front:
        return None, "no successful evaluation"
    signs = np.array([o.sign for o in results.objectives], dtype=float)  # 1: lower is better, -1: higher
    scores = np.array([rec.scores for rec in front], dtype=float) * signs
    if rule == "knee":
        scale = np.abs(scores).max(axis=0)  # scaled first, so that a span near the largest float cannot overflow
        unit = scores / np.where(np.isfinite(scale) & (scale > 0), scale, 1.0)
        low, high = unit.min(axis=0), unit.max(axis=0)
        span = np.where(high > low, high - low, 1.0)
        with np.errstate(invalid="ignore"):
            dist = np.linalg.norm((unit - low) / span, axis=1)
        dist = np.where(np.isnan(dist), np.inf, dist)  # (an infinite score: never nearer than a finite one)
        best = float(dist.min())
        return representative([r for r, d in zip(front, dist) if d == best]), f"the knee of the front{said}"
    base = results.baseline_record
    if base is None or base.status != "ok" or not base.scores:
        raise ConfigurationError("--pick no-regression compares with the baseline, but this run has no successful "
                                 "baseline; pick an objective or knee")
    floor = np.array(base.scores, dtype=float) * signs
    # a kernel run's point spills no more than the defaults either, nor has a larger stack frame (arrays moved to
    # local memory), unless that is an objective
    guards = {m: v for m in _GUARDS if m not in names and (v := _metric(base, m)) is not None}
    if guards:  # a point that spills less may lie behind one that spills more: every point is a candidate then
        front = [r for r in results.records if r.status == "ok" and r.scores
                 and all((_metric(r, m) or 0.0) <= v for m, v in guards.items())]
        scores = np.array([rec.scores for rec in front], dtype=float).reshape(len(front), len(names)) * signs
    safe = [(tuple(s), r) for r, s in zip(front, scores) if bool(np.all(s <= floor))]
    nor = f" or in {' or '.join(_GUARDS[m] for m in guards)}" if guards else ""
    if not safe:
        return base, f"no front point is at least as good as the baseline on every objective{nor}: the baseline"
    top = min(key for key, _ in safe)  # the best first objective, then the next one ...
    rec = representative([r for key, r in safe if key == top])
    if rec.is_baseline or np.array_equal(np.array(rec.scores, dtype=float) * signs, floor):
        return rec, f"no front point beats the baseline without a loss on another objective{nor}: " + (
            "the baseline (the compiler defaults)" if rec.is_baseline else "a point that scores as the baseline")
    return rec, f"the best {names[0]} among the points no worse than the baseline on any objective{nor}{said}"


def _without_miscomputing(results: Results, validation: Validation | None) -> tuple[Results, str]:
    """``results`` without the points ``validation`` found computing wrong output on another workload, nor the points
    with their machine code (which compute the same), and which it left out, in words ("" when none)."""
    wrong = validation.wrong_output if validation is not None else {}
    if not wrong:
        return results, ""
    codes = _their_codes(results, wrong)
    kept = [r for r in results.records if r.eval_id not in wrong and r.detail.get("code_hash") not in codes]
    shown = "; ".join(f"eval {i} on {', '.join(map(repr, names))}" for i, names in sorted(wrong.items()))
    return Results(kept, objectives=results.objectives, status=results.status, store_path=results.store_path,
                   header=results.header), shown


def miscomputing(results: Results, rec: EvalRecord, validation: Validation | None = None) -> str:
    """Why no export would pick ``rec``: the workloads on which the run's re-measurement (or ``validation``) found it,
    or a point with its machine code, computing wrong output, in words; "" when it found none."""
    wrong = (validation if validation is not None else results.validation)
    flagged = wrong.wrong_output if wrong is not None else {}
    if rec.eval_id in flagged:
        return f"eval {rec.eval_id} computed wrong output on workload {', '.join(map(repr, flagged[rec.eval_id]))}"
    code = rec.detail.get("code_hash")
    twin = _their_codes(results, flagged).get(code) if isinstance(code, str) else None
    if twin is None:
        return ""
    return (f"eval {rec.eval_id} has the machine code of eval {twin}, which computed wrong output on workload "
            f"{', '.join(map(repr, flagged[twin]))}")


def _their_codes(results: Results, wrong: Mapping[int, Sequence[str]]) -> dict[str, int]:
    """The machine code of each point that computed wrong output (``Validation.wrong_output``), and the first such
    point that has it: every point with that code computes the same."""
    codes: dict[str, int] = {}
    for i in sorted(wrong):
        code = rec.detail.get("code_hash") if (rec := results.record(i)) is not None else None
        if code is not None:
            codes.setdefault(code, i)
    return codes


#: What "no-regression" also holds a kernel run's point to, where recorded and no objective: no more than the
#: baseline's (in words).
_GUARDS = {"spill_bytes": "bytes spilled", "stack_bytes": "stack frame bytes"}


def _metric(rec: EvalRecord, name: str) -> float | None:
    """A kernel run's recorded measurement of a point (e.g. ptxas' spill stores plus loads), or None where it was
    not measured."""
    metrics = rec.detail.get("metrics") if isinstance(rec.detail, dict) else None
    value = metrics.get(name) if isinstance(metrics, dict) else None
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
