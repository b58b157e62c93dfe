"""The ACF of one evaluated point of a `tune` run (controls spelled out, re-measured speedups included)."""

from __future__ import annotations

from typing import Any

__all__ = ["point_acf", "full_controls"]


def full_controls(kernel: Any, params: dict[str, Any]) -> dict[str, Any]:
    """A point's controls with every -D knob spelled out (the baseline leaves them at their defaults)."""
    if not kernel.defines:
        return dict(params)
    return {**params, "defines": dict(kernel.define_values(params.get("defines")))}


def point_acf(results: Any, rec: Any, kernel: Any, catalog: Any, meta: dict[str, Any]) -> Any:
    """The ACF of one evaluated point of a `tune` run, with its re-measured speedup where the run has one."""
    from compileiq_lab.acf.format import ACF
    from compileiq_lab.measure.evaluator import config_argv
    from compileiq_lab.analysis.validation import HEADER_KEY, Validation

    base = results.baseline
    names = meta["objectives"]
    controls = full_controls(kernel, rec.params)
    ci: dict[str, list[float]] = {}
    summary = None
    stored = results.header.get(HEADER_KEY)
    row = Validation.from_dict(stored).row(rec.eval_id) if stored else None
    gpu = (meta.get("gpu") or {}).get("name")
    if row is not None:
        ci = {"runtime": row["runtime_ci"], "speedup": [row["low"], row["high"]]}
        summary = {"speedup": row["speedup"], "low": row["low"], "high": row["high"], "win": row["win"],
                   "noise_floor": stored["baseline"].get("noise_floor", 0.0),
                   "confidence": stored["confidence"], "method": stored["method"], "rounds": stored["rounds"],
                   "runtime": row["runtime_median"], "baseline_runtime": stored["baseline"]["runtime_median"],
                   "energy_ratio": row["energy_ratio"], "gpu": gpu}
        if row.get("workloads"):
            summary["workloads"] = {w: {k: v for k, v in e.items() if k in ("speedup", "low", "high", "win", "error")}
                                    for w, e in row["workloads"].items()}
    return ACF.from_choice(
        compiler=meta["catalog"], controls=controls, argv=config_argv(kernel, catalog, controls),
        objectives=dict(zip(names, rec.scores)), kernel=kernel.name, source_sha256=kernel.source_sha256(),
        baseline={n: base[f"score_{i + 1}"] if base and base["status"] == "ok" else None for i, n in enumerate(names)},
        arch=meta.get("arch"), toolchain=meta.get("toolchain") or {}, code_hash=rec.detail.get("code_hash"),
        run={"store": results.store_path, "eval_id": rec.eval_id, "seed": results.header.get("config", {}).get("seed")},
        ci=ci, validation=summary, gpu=gpu)
