"""The ACF of one evaluated point of a kernel run (controls spelled out, re-measured speedups included)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from compileiq_lab.acf.format import ACF
from compileiq_lab.exceptions import ConfigurationError
from compileiq_lab.measure.evaluator import config_argv
from compileiq_lab.store.header import KernelMeta, Validation

if TYPE_CHECKING:
    from compileiq_lab.kernels.spec import KernelSpec
    from compileiq_lab.space.catalogs.base import Catalog
    from compileiq_lab.store.results import Results
    from compileiq_lab.store.sqlite import EvalRecord

__all__ = ["full_controls", "point_acf"]


def full_controls(kernel: KernelSpec, params: Mapping[str, Any]) -> dict[str, Any]:
    """A point's controls with every -D knob spelled out (the baseline leaves them at their defaults)."""
    if not kernel.defines:
        return dict(params)
    return {**params, "defines": dict(kernel.define_values(params.get("defines")))}


def _summary(validation: Validation, row: dict[str, Any], gpu: str | None) -> dict[str, Any]:
    """The ACF's ``validation`` field: one point's re-measured speedup and how it was measured."""
    summary = {"speedup": row["speedup"], "low": row["low"], "high": row["high"], "win": row["win"],
               "noise_floor": validation.noise_floor, "confidence": validation.confidence,
               "method": validation.method, "rounds": validation.rounds, "runtime": row["runtime_median"],
               "baseline_runtime": validation.baseline["runtime_median"], "energy_ratio": row["energy_ratio"],
               "gpu": gpu}
    if row.get("workloads"):
        summary["workloads"] = {w: {k: v for k, v in e.items() if k in ("speedup", "low", "high", "win", "error")}
                                for w, e in row["workloads"].items()}
    return summary


def point_acf(results: Results, rec: EvalRecord, kernel: KernelSpec, catalog: Catalog,
              meta: KernelMeta | Mapping[str, Any] | None = None, validation: Validation | None = None) -> ACF:
    """The ACF of one evaluated point of a kernel run, with its re-measured speedup where the run has one.

    Args:
        results: The run.
        rec: The point (a successful evaluation of the run).
        kernel: The kernel spec the run tuned.
        catalog: The catalog its controls come from.
        meta: The run's kernel facts (default: its header's).
        validation: A re-measurement (default: the run's latest one).

    Raises:
        ConfigurationError: The run records no kernel facts, or the point breaks a rule of the format.
    """
    facts = meta if isinstance(meta, KernelMeta) else KernelMeta.from_dict(meta) if meta is not None \
        else results.header.kernel
    if facts is None:
        raise ConfigurationError("an ACF needs the kernel facts of the run (kernel, catalog, objectives), but its "
                                 "header has none; pass meta=kernel_run.metadata()")
    base = results.baseline_record
    controls = full_controls(kernel, rec.params)
    validation = validation if validation is not None else results.validation
    row = validation.row(rec.eval_id) if validation is not None else None
    gpu = (facts.gpu or {}).get("name")
    ci: dict[str, list[float]] = {}
    summary = None
    if validation is not None and row is not None:
        ci = {"runtime": row["runtime_ci"], "speedup": [row["low"], row["high"]]}
        summary = _summary(validation, row, gpu)
    ok_base = base is not None and base.status == "ok" and base.scores is not None
    return ACF.from_choice(
        compiler=facts.catalog, controls=controls, argv=config_argv(kernel, catalog, controls),
        objectives=dict(zip(facts.objectives, rec.scores or [])), kernel=kernel.name,
        source_sha256=kernel.source_sha256(),
        baseline={n: base.scores[i] if ok_base and base is not None and base.scores else None
                  for i, n in enumerate(facts.objectives)},
        arch=facts.arch, toolchain=facts.toolchain, code_hash=rec.detail.get("code_hash"),
        run={"store": results.store_path, "eval_id": rec.eval_id, "seed": results.header.config.get("seed")},
        ci=ci, validation=summary, gpu=gpu)
