"""GPU tuning check: tune bundled kernels for runtime + energy on the nvcc/ptxas space, then re-measure
the front against the nvcc defaults interleaved, and report speedups with 95 % CIs (needs an NVIDIA GPU)."""

from __future__ import annotations

import argparse
import datetime as dt
import logging
import os
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import RESULTS, markdown_table, write

log = logging.getLogger("bench_gpu")
KERNELS = ("reduction", "sgemm", "softmax", "attention")


def tune_one(name: str, budget_s: float, rounds: int, seed: int, workdir: Path,
             backend: str | None = None, knobs: bool = True) -> dict[str, Any]:
    """Tune one kernel within ``budget_s`` of search time, validate the front, return the figures."""
    from compileiq_lab import Search, SearchConfiguration
    from compileiq_lab.analysis.validation import validate
    from compileiq_lab.kernels import KernelRun
    from compileiq_lab.measure.gpu import GpuOptions
    from compileiq_lab.run.events import GenerationEvent, RunEvent

    t0 = time.monotonic()
    objectives = ["runtime", "energy"]  # nvcc catalog, the default safe set (no precision-changing controls)
    ev = KernelRun(name, "nvcc", objectives, workdir=workdir / name, timeout_s=30,
                   gpu_options=GpuOptions(energy_window_s=0.25), gpu_backend=backend)
    try:
        cfg = SearchConfiguration(generations=100, seed=seed, num_objectives=2,
                                  problem_type=[o.direction for o in ev.objectives], objective_names=objectives)
        space = ev.search_space()
        if not knobs:  # compiler controls only: the kernel's -D knobs stay at their defaults
            space.pop("defines", None)
        search = Search(ev, space, cfg, store=str(workdir / f"{name}.db"), constraint=ev.constraint,
                        metadata=ev.metadata())
        progress = {"gen": 0}

        def on_event(event: RunEvent) -> None:
            if isinstance(event, GenerationEvent):
                progress["gen"] = event.generation
                if time.monotonic() - t0 > budget_s:
                    search.stop()

        results = search.start(callback=on_event, workers=min(16, os.cpu_count() or 1))
        search_s = time.monotonic() - t0
        v = validate(results, ev, rounds=rounds)
        best = max(v.rows, key=lambda r: r["speedup"])
        by_id = {r.eval_id: r for r in results.records}
        runs, saved = ev.stats["runs"], ev.stats["runs_saved"]
        return {
            "kernel": name, "gpu": ev.gpu_info.get("name"), "generations": progress["gen"],
            "candidates": len(results), "statuses": results.status_counts(),
            "distinct_code": len(ev.code_hashes), "runs": runs, "runs_saved_by_dedup": saved,
            "dedup_savings": saved / (runs + saved) if runs + saved else 0.0,
            "baseline_ms": v.baseline["runtime_median"] * 1e3,
            "baseline_ci_ms": [x * 1e3 for x in v.baseline["runtime_ci"]],
            "best_ms": best["runtime_median"] * 1e3, "speedup": best["speedup"], "ci": [best["low"], best["high"]],
            "win": best["win"], "energy_change": (best["energy_ratio"] - 1) if best["energy_ratio"] else None,
            "best_eval": best["eval_id"], "workloads": best.get("workloads", {}), "mixed": best.get("mixed", False),
            "noise_floor": v.noise_floor, "best_argv": ev.argv(by_id[best["eval_id"]].params),
            "front": v.rows, "rounds": rounds, "search_s": search_s, "wall_s": time.monotonic() - t0,
            "gpu_state": v.gpu, "knobs": knobs,
            "recorded_samples": {"baseline": v.samples["baseline"], "best": v.samples[str(best["eval_id"])]},
        }
    finally:
        ev.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--kernels", default=",".join(KERNELS))
    ap.add_argument("--budget-s", type=float, default=60.0, help="search time per kernel (validation comes on top)")
    ap.add_argument("--rounds", type=int, default=40, help="interleaved re-measurement rounds")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=str(RESULTS), help="folder for gpu_<date>.json/.md")
    ap.add_argument("--no-knobs", action="store_true", help="search compiler controls only (the kernels' -D "
                                                            "knobs stay at their defaults)")
    ap.add_argument("--standin", action="store_true", help="dry run without a GPU (stand-in worker; figures "
                                                           "are not GPU figures)")
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    name = (f"gpu_{dt.date.today().isoformat()}" + ("_flags_only" if args.no_knobs else "")
            + ("_standin" if args.standin else ""))
    rows, failures = [], {}
    with tempfile.TemporaryDirectory(prefix="compileiq-gpu-") as tmp:
        for kernel in [k for k in args.kernels.split(",") if k]:
            log.info("tuning %s for %.0f s", kernel, args.budget_s)
            try:
                backend = "compileiq_lab.testing.gpu_standin:StandInBackend" if args.standin else None
                rows.append(tune_one(kernel, args.budget_s, args.rounds, args.seed, Path(tmp), backend,
                                     knobs=not args.no_knobs))
                r = rows[-1]
                log.info("%s: %.4f ms -> %.4f ms, speedup %.4f [%.4f, %.4f], win %s", kernel, r["baseline_ms"],
                         r["best_ms"], r["speedup"], r["ci"][0], r["ci"][1], r["win"])
            except Exception:  # noqa: BLE001 - one kernel's failure must not lose the others' figures
                failures[kernel] = traceback.format_exc(limit=6)
                log.error("%s failed:\n%s", kernel, failures[kernel])
            table = markdown_table(
                ["kernel", "baseline ms", "best ms", "speedup [95 % CI]", "win", "energy change", "other workloads",
                 "candidates", "dedup savings", "generations", "wall s"],
                [[r["kernel"], r["baseline_ms"], r["best_ms"],
                  f"{r['speedup']:.4f} [{r['ci'][0]:.4f}, {r['ci'][1]:.4f}]",
                  "yes" if r["win"] else "no",
                  f"{r['energy_change'] * 100:+.1f} %" if r["energy_change"] is not None else "n/a",
                  ", ".join(f"{w} {e['speedup']:.3f}{'' if e['win'] else ' (no win)'}" if "speedup" in e
                            else f"{w} wrong output" for w, e in r["workloads"].items()) or "none",
                  r["candidates"], f"{r['dedup_savings'] * 100:.0f} %", r["generations"], round(r["wall_s"])]
                 for r in rows])
            gpu = rows[0]["gpu"] if rows else "no GPU result"
            space = ("nvcc front end + ptxas controls only (safe set; -D knobs at their defaults)" if args.no_knobs
                     else "nvcc front end + ptxas controls (safe set) and the kernels' -D knobs")
            notes = (f"GPU: {gpu}. Objectives runtime + energy (NSGA-II), {space}, {args.budget_s:.0f} s of search "
                     "per kernel, then the front and the "
                     f"baseline re-measured interleaved ({args.rounds} rounds, paired bootstrap of per-round "
                     "ratios). Speedup = baseline median / point median per launch (CUDA graph replays timed with "
                     "CUDA events); win = the CI lies above 1. Energy per launch = mean power while the kernel runs "
                     "back to "
                     "back (NVML energy counter) x time per launch."
                     + (f"\n\nFailed: {sorted(failures)}" if failures else ""))
            settings = {k: v for k, v in vars(args).items() if k != "out"}  # no machine paths in results
            write(name, {"rows": rows, "failures": failures, "args": settings}, "GPU tuning check", table, notes,
                  out=Path(args.out))
    return 0 if rows and not failures else 1


if __name__ == "__main__":
    sys.exit(main())
