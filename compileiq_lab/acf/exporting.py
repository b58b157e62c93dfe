"""Exporting a point from Python or the lab: the file written, never over another point's, and what it says of it."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from compileiq_lab.acf.export import effective_params, point_acf
from compileiq_lab.acf.lowered import lowered_note
from compileiq_lab.exceptions import ConfigurationError
from compileiq_lab.kernels import minimal_controls
from compileiq_lab.store import MEMORY
from compileiq_lab.store.guard import overwrite_problem

if TYPE_CHECKING:
    from compileiq_lab.kernels import KernelRun
    from compileiq_lab.store import Results

__all__ = ["export_notes", "export_point"]

log = logging.getLogger(__name__)


def export_point(results: Results, eval_id: int, kernel_run: KernelRun | None = None,
                 path: str | Path | None = None, folder: str | Path = ".", minimize: bool = True) -> Path:
    """Write one successful evaluation: an ACF for kernel runs, else the point as JSON. Returns its full path.

    What the lab's Export button and ``compileiq-lab export`` do, for scripts::

        kr = KernelRun("reduction", "ptxas", ["registers"])
        results = Search.of(kr, store="reduction.db", generations=5).start()
        export_point(results, results.best_record().eval_id, kr, "best.acf")

    Args:
        results: The run.
        eval_id: The evaluation.
        kernel_run: The run's KernelRun (an ACF), or None (JSON).
        path: The file; a relative one is taken inside ``folder`` (default: ``<kernel>-eval<N>.acf``).
        folder: Where files go (created if missing).
        minimize: Write the smallest control set that compiles to the same machine code (``minimal_controls``;
            the ACF's ``dropped`` says what was left out and why), as ``compileiq-lab export`` does; where it
            cannot be minimised (no compiler here) the point is written as it was, with a log warning.

    Raises:
        ConfigurationError: The evaluation does not exist or failed, or the file exists and holds another point (an
            export of the same point replaces it).
    """
    rec = results.record(eval_id)
    if rec is None or rec.status != "ok":
        raise ConfigurationError(f"export needs a successful evaluation, but eval {eval_id} is "
                                 f"{rec.status if rec else 'not in this run'}; pick a point that succeeded (click one "
                                 "in the lab; in a script e.g. results.best_record().eval_id)")
    name = kernel_run.kernel.name if kernel_run is not None else "point"
    suffix = ".acf" if kernel_run is not None else ".json"
    out = (Path(folder) / Path(path or f"{name}-eval{eval_id}{suffix}")).resolve()
    if path is None and _held_by_another(out, results, eval_id):  # the default name of another run's export
        out = out.with_name(f"{name}-{Path(results.store_path).stem}-eval{eval_id}{suffix}")
    if problem := overwrite_problem(out, results.store_path):  # (first: a store is never read as a point's JSON)
        raise ConfigurationError(f"an export never writes over a run, but {out.name} in {out.parent}: {problem}; "
                                 "name another file")
    if held := _held_by_another(out, results, eval_id):
        raise ConfigurationError(f"an export never replaces another point's file, but {out.name} in {out.parent} "
                                 f"holds {held}; name another file, or delete that one first")
    out.parent.mkdir(parents=True, exist_ok=True)
    if kernel_run is not None:
        meta = results.header.kernel or kernel_run.metadata()
        controls, dropped = effective_params(rec), {}
        if minimize:
            try:
                minimal = minimal_controls(kernel_run, controls, rec.detail.get("ignored_controls") or {})
                controls, dropped = minimal.controls, minimal.dropped
            except ConfigurationError as exc:
                log.warning("eval %d is exported as it was, not minimised: %s", eval_id, str(exc)[:300])
        point_acf(results, rec, kernel_run.kernel, kernel_run.catalog, meta, controls=controls, dropped=dropped,
                  acf_path=out).write(out)
        return out
    out.write_text(json.dumps({"eval_id": eval_id, "params": rec.params, "status": rec.status,
                               "objectives": dict(zip(results.objective_names, rec.scores or [])),
                               "store": results.store_path}, indent=2, sort_keys=True) + "\n")
    return out


def _held_by_another(out: Path, results: Results, eval_id: int) -> str:
    """What the file ``out`` holds when it is not this run's export of this point ("" when it is, or is not there):
    an export is never lost silently."""
    if not out.exists():
        return ""
    try:
        data = json.loads(out.read_text())
        run = data.get("run") if isinstance(data.get("run"), dict) else data  # an ACF's provenance, or a point's JSON
        store, held = run.get("store"), run.get("eval_id")
    except (OSError, ValueError, AttributeError):
        return "another file"
    if held == eval_id and _same_store(store, results.store_path):
        return ""
    return f"eval {held} of {store}" if held is not None else "another file"


def _same_store(a: Any, b: str) -> bool:
    """Whether two recorded store paths name one file (relative ones from here; an in-memory run is no file)."""
    if not isinstance(a, str) or MEMORY in (a, b):
        return False
    return Path(a).resolve() == Path(b).resolve()


def export_notes(path: Path, kernel_run: KernelRun | None) -> list[str]:
    """What an ACF export says besides where it went (as ``compileiq-lab export`` says it): the controls dropped as
    having no effect (and when none is left, that it is the compiler defaults), and a lowered optimisation level."""
    if kernel_run is None:  # (a Python objective's point: its JSON)
        return []
    acf = json.loads(path.read_text())
    controls, dropped = dict(acf.get("controls") or {}), sorted(acf.get("dropped") or {})
    knobs = {k: v[0] for k, v in kernel_run.kernel.defines.items()}  # the kernel's knobs at their defaults
    defaults = not {k: v for k, v in controls.items() if k != "defines"} and controls.get("defines", knobs) == knobs
    notes = []
    if dropped:
        notes.append(f"dropped as having no effect (the machine code is identical without them): {', '.join(dropped)}"
                     + ("; it sets no control: the compiler defaults build this point's machine code"
                        if defaults else ""))
    note = lowered_note(kernel_run, controls, str(path))
    return notes + ([note] if note else [])
