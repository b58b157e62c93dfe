"""The `compileiq-lab tune` and `catalog` commands: headless tuning of a kernel's compiler controls."""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

__all__ = ["add_tune_parser", "add_catalog_parser", "run_tune", "run_catalog"]

_DEFAULT_OBJECTIVES = {"cuda": "sass_instructions,registers", "c": "runtime"}
_DEFAULT_SPACE = {"cuda": "nvcc", "c": "gcc"}


def add_tune_parser(sub: Any) -> None:
    """Register `tune`."""
    t = sub.add_parser(
        "tune", help="tune a kernel's compiler controls (static metrics anywhere, CPU runtime for C, GPU "
                     "runtime/power/energy for CUDA on an NVIDIA GPU)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Search compiler controls for a kernel and print the Pareto table.\n\n"
                    "examples:\n  compileiq-lab tune reduction --space ptxas --objectives registers,sass_instructions\n"
                    "  compileiq-lab tune sgemm --objectives runtime,energy --export sgemm.acf   (NVIDIA GPU)\n"
                    "  compileiq-lab tune kernels/dot --objectives runtime --generations 8\n"
                    "  compileiq-lab tune my_kernel.cu --arch sm_90 --export best.json")
    t.add_argument("kernel", help="bundled kernel name, kernel folder, or a bare .cu/.c file")
    t.add_argument("--arch", default="sm_90", help="CUDA target (default sm_90)")
    t.add_argument("--space", default=None, help="catalog: nvcc (front end + ptxas), ptxas, nvrtc (in-process "
                                                  "NVRTC), gcc, clang (default: nvcc for CUDA, gcc for C)")
    t.add_argument("--objectives", default=None, help="comma list, e.g. registers,sass_instructions,compile_time "
                                                       "(CUDA), runtime,energy,power (CUDA on a GPU) or "
                                                       "runtime,instructions (C)")
    t.add_argument("--categories", default=None, help="comma list of control categories to search")
    t.add_argument("--controls", default=None, help="comma list of control names to search")
    t.add_argument("--unsafe-math", action="store_true", help="also search precision-changing controls")
    t.add_argument("--generations", type=int, default=10)
    t.add_argument("--pool-size", type=int, default=None)
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--workers", type=int, default=None,
                   help="candidates evaluated at once (default: CPU count for static objectives, 1 when a "
                        "runtime/instructions objective is timed)")
    t.add_argument("--store", default=None, help="run store path (default: a new file under ./compileiq_runs/)")
    t.add_argument("--export", default=None, help="write the best point as an ACF (open JSON: controls, argv, "
                                                   "arch, objectives, baseline, code hash)")
    t.add_argument("--timeout", type=float, default=120.0, help="limit per compiler call / run in seconds")
    t.add_argument("--workdir", default=None, help="scratch folder for PTX cache and binaries")
    t.add_argument("--full-nvcc", action="store_true", help="one nvcc call per candidate instead of cached PTX + ptxas")
    t.add_argument("--surrogate", action="store_true",
                   help="pre-screen offspring with a random forest of the evaluations so far (needs scikit-learn; "
                        "see bench/results/surrogate.md for where it pays)")
    t.add_argument("--warm-start", default="auto", metavar="auto|none|RUN.db",
                   help="open the first generation with the fronts of earlier runs of this kernel and space (same "
                        "arch first, then others) found next to the store (auto, the default), of one run, or none")
    t.add_argument("--validate", type=int, default=None, metavar="ROUNDS",
                   help="after a GPU run, re-measure the front and the baseline interleaved for ROUNDS rounds and "
                        "report speedups with 95 %% CIs (default 40 for GPU objectives; 0 turns it off)")


def add_catalog_parser(sub: Any) -> None:
    """Register `catalog`."""
    c = sub.add_parser("catalog", help="list the compiler controls active for the installed compiler",
                       description="List a catalog's controls checked against the installed compiler.\n\n"
                                   "example: compileiq-lab catalog ptxas",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    c.add_argument("name", help="nvcc, nvcc_frontend, ptxas, gcc or clang")


def _split(text: str | None) -> list[str] | None:
    return [x.strip() for x in text.split(",") if x.strip()] if text else None


def _catalog(name: str) -> Any:
    from compileiq_lab.exceptions import ConfigurationError
    from compileiq_lab.space.catalogs import active, get_catalog

    try:
        catalog, left_out = active(get_catalog(name))
    except ConfigurationError:
        if name != "nvrtc":
            raise
        print("note: no nvcc/ptxas to check NVRTC options against; using the whole curated catalog",
              file=sys.stderr)
        return get_catalog(name)
    for control, why in left_out:
        print(f"note: {control} left out: {why}", file=sys.stderr)
    return catalog


def run_catalog(args: argparse.Namespace) -> int:
    """Print a catalog's active controls."""
    catalog = _catalog(args.name)
    print(f"{'control':32} {'stage':9} {'category':24} {'tier':9} unsafe  domain / doc")
    for c in catalog.controls:
        print(f"{c.name:32} {c.stage:9} {c.category:24} {c.tier:9} {'yes' if c.unsafe_math else '':6}  "
              f"{c.param!r}\n{'':84}{c.doc}")
    return 0


def _progress(total_generations: int) -> Any:
    state = {"evals": 0, "failed": 0, "t0": time.monotonic()}

    def on_event(event: dict[str, Any]) -> None:
        if event["type"] == "evaluation":
            state["evals"] += 1
            state["failed"] += event["record"].status != "ok"
        elif event["type"] == "generation":
            g = event["generation"]
            bar = "#" * int(20 * g / total_generations) if total_generations else ""
            print(f"\rgeneration {g:3d}/{total_generations} [{bar:20}] {state['evals']} evaluations, "
                  f"{state['failed']} failed, best {event['best_score_1']}, "
                  f"{time.monotonic() - state['t0']:.0f} s", end="", file=sys.stderr, flush=True)
        elif event["type"] == "finished":
            print(file=sys.stderr)
    return on_event


def run_tune(args: argparse.Namespace) -> int:
    """Tune a kernel and print the Pareto table; returns the exit code."""
    from compileiq_lab import Search, SearchConfiguration
    from compileiq_lab.kernels import load_kernel
    from compileiq_lab.measure.evaluator import KernelEvaluator

    if args.export and (Path(args.export).is_dir() or not Path(args.export).resolve().parent.is_dir()):
        from compileiq_lab.exceptions import ConfigurationError

        raise ConfigurationError(f"--export must name a file in an existing folder, but got {args.export!r}; "
                                 "create the folder first")
    kernel = load_kernel(args.kernel)
    space_name = args.space or _DEFAULT_SPACE[kernel.language]
    catalog = _catalog(space_name).select(names=_split(args.controls), categories=_split(args.categories),
                                          include_unsafe=args.unsafe_math)
    objectives = _split(args.objectives) or _split(_DEFAULT_OBJECTIVES[kernel.language])
    compiler = space_name if space_name in ("gcc", "clang", "nvrtc") else "gcc"
    evaluator = KernelEvaluator(kernel, catalog, objectives, arch=args.arch, workdir=args.workdir,
                                timeout_s=args.timeout, two_stage=not args.full_nvcc, compiler=compiler)
    warm, sources = _warm_start(args, kernel, space_name)
    cfg = SearchConfiguration(generations=args.generations, pool_size=args.pool_size, seed=args.seed,
                              num_objectives=len(objectives), problem_type=evaluator.directions,
                              objective_names=objectives, warm_start=warm or None, surrogate=args.surrogate)
    meta = {"kernel": kernel.name, "language": kernel.language, "source_sha256": kernel.source_sha256(),
            "catalog": space_name, "arch": args.arch if kernel.language == "cuda" else None,
            "objectives": objectives, "toolchain": evaluator.toolchain()}
    if evaluator.gpu is not None:
        meta["gpu"] = evaluator.gpu_info
    if sources:
        meta["warm_start_from"] = sources
        print(f"warm start: {len(warm)} configs from the fronts of {len(sources)} earlier run(s) "
              f"({', '.join(sources[:3])}{' ...' if len(sources) > 3 else ''})", file=sys.stderr)
    search = Search(evaluator, evaluator.space(), cfg, store=args.store, constraint=evaluator.constraint,
                    metadata=meta)
    print(f"tuning {kernel.name} ({kernel.language}) over {len(catalog.controls)} {space_name} controls"
          f"{' + ' + str(len(kernel.defines)) + ' -D knobs' if kernel.defines else ''}; objectives {objectives}; "
          f"store {search.store_path}", file=sys.stderr)
    from compileiq_lab.measure.evaluator import CPU_RUN_OBJECTIVES

    # timed CPU runs must not share the CPU with compiles unless asked: one at a time by default; GPU runs
    # are serialised by the evaluator, so compiles overlap them
    cpu_timed = kernel.language == "c" and set(objectives) & set(CPU_RUN_OBJECTIVES)
    workers = args.workers or (1 if cpu_timed else (os.cpu_count() or 1))
    try:
        results = search.start(callback=_progress(args.generations), workers=max(1, workers))
        _print_front(results, evaluator, objectives)
        rounds = 40 if args.validate is None else args.validate
        if evaluator.gpu is not None and rounds > 0 and results.status != "interrupted" and results.pareto_front():
            _validate_run(results, evaluator, rounds)
    finally:
        evaluator.close()
    if args.export:
        _export(args.export, results, evaluator, meta)
    if results.status == "interrupted":
        return 130
    if not results.pareto_front():
        first = next((r for r in results.records if r.status != "ok"), None)
        print(f"compileiq-lab: error: no candidate succeeded; first failure ({first.status if first else '?'}): "
              f"{(first.error if first else '')[:400]}", file=sys.stderr)
        return 1
    return 0


def _warm_start(args: argparse.Namespace, kernel: Any, space_name: str) -> tuple[list[dict[str, Any]], list[str]]:
    """Configs from earlier runs (see --warm-start); none when continuing an existing store."""
    from compileiq_lab.analysis.registry import warm_start_configs
    from compileiq_lab.store.sqlite import DEFAULT_DIR

    if args.warm_start == "none" or (args.store and Path(args.store).exists()):
        return [], []
    if args.warm_start != "auto":
        from compileiq_lab import load_results

        front = load_results(args.warm_start).pareto_front()
        return [r["params"] for r in front if r["params"]], [args.warm_start]
    directory = Path(args.store).resolve().parent if args.store else Path(DEFAULT_DIR)
    arch = args.arch if kernel.language == "cuda" else None
    return warm_start_configs(kernel.name, arch, space_name, directory, source_sha256=kernel.source_sha256())


def _validate_run(results: Any, evaluator: Any, rounds: int) -> None:
    from compileiq_lab.cli.runs import print_validation
    from compileiq_lab.exceptions import ConfigurationError
    from compileiq_lab.analysis.validation import validate

    print(f"re-measuring the front and the baseline interleaved ({rounds} rounds)...", file=sys.stderr)
    try:
        print_validation(validate(results, evaluator, rounds=rounds))
    except ConfigurationError as exc:
        print(f"note: no re-measurement: {exc}", file=sys.stderr)


def _print_front(results: Any, evaluator: Any, objectives: list[str]) -> None:
    base = results.baseline
    front = sorted(results.pareto_front(), key=lambda r: r["score_1"])
    print(f"\n{len(results)} evaluations, statuses {results.status_counts()}, run {results.status}")
    st = evaluator.stats
    print(f"compiles {st['compiles']}, conflicts skipped {st['conflicts']}, distinct machine code "
          f"{len(evaluator.code_hashes)} of {st['compiles']} compiled configs"
          + (f", runs saved by code-hash dedup {st['runs_saved']}" if st["runs"] else ""))
    head = "  ".join(f"{o:>18}" for o in objectives)
    print(f"\n{'eval':>5}  {head}  arguments")
    if base is not None and base["status"] == "ok":
        print(f"{'base':>5}  " + "  ".join(f"{base[f'score_{i + 1}']:18.6g}" for i in range(len(objectives)))
              + f"  {' '.join(_flat_argv(evaluator, base)) or '(compiler defaults)'}   (baseline)")
    for row, same in _group_ties(front, evaluator, len(objectives)):
        flat = " ".join(_flat_argv(evaluator, row)) or "(defaults)"
        more = f"   (+{same} configs with the same scores)" if same else ""
        print(f"{row['eval_id']:5d}  " + "  ".join(f"{row[f'score_{i + 1}']:18.6g}" for i in range(len(objectives)))
              + f"  {flat}{more}")
    print(f"\nstored in {results.store_path}")


def _flat_argv(evaluator: Any, row: dict[str, Any]) -> list[str]:
    return [a for v in evaluator.argv(row["params"]).values() for a in v]


def _group_ties(front: list[dict[str, Any]], evaluator: Any, k: int) -> list[tuple[dict[str, Any], int]]:
    """One row per distinct score vector (the one with the fewest arguments) and how many it stands for."""
    groups: dict[tuple[float, ...], list[dict[str, Any]]] = {}
    for row in front:
        groups.setdefault(tuple(row[f"score_{i + 1}"] for i in range(k)), []).append(row)
    return [(min(rows, key=lambda r: (len(_flat_argv(evaluator, r)), r["eval_id"])), len(rows) - 1)
            for rows in groups.values()]


def _export(path: str, results: Any, evaluator: Any, meta: dict[str, Any]) -> None:
    """Write the best point (first objective; fewest arguments on ties) as an ACF."""
    from compileiq_lab.acf.export import point_acf

    front = results.pareto_front()
    if not front:
        print("nothing to export: no successful evaluation", file=sys.stderr)
        return
    sign = 1.0 if evaluator.directions[0] == "min" else -1.0
    best = min(front, key=lambda r: (sign * r["score_1"], len(_flat_argv(evaluator, r)), r["eval_id"]))
    rec = next(r for r in results.records if r.eval_id == best["eval_id"])
    point_acf(results, rec, evaluator.kernel, evaluator.catalog, meta).write(path)
    print(f"exported eval {best['eval_id']} to {path}", file=sys.stderr)
