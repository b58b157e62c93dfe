"""The `compileiq-lab tune` and `catalog` commands: headless tuning of a kernel's compiler controls."""

from __future__ import annotations

import argparse
import logging
import re
import sys
import time
from collections.abc import Collection
from pathlib import Path
from typing import Any

from compileiq_lab.analysis.validation import validate
from compileiq_lab.cli.front import print_front
from compileiq_lab.cli.options import (
    UsageError,
    add_build_arguments,
    add_pick_arguments,
    add_triton_arguments,
    build_options,
    check_output_file,
    check_pick,
    check_searched_not_fixed,
    duration,
    export_point,
    int_at_least,
    kernel_argument,
    rounds,
    seconds,
)
from compileiq_lab.cli.progress import ProgressLine, progress_callback
from compileiq_lab.cli.runs import print_validation
from compileiq_lab.cli.warm import check_warm_start, warm_start
from compileiq_lab.exceptions import ConfigurationError, did_you_mean
from compileiq_lab.kernels import (
    CATALOG_NAMES,
    CATEGORIES,
    CONTROL_NAMES,
    METRICS,
    KernelRun,
    active_catalog,
    check_canary,
)
from compileiq_lab.run import Search
from compileiq_lab.run.build import encode_all
from compileiq_lab.run.start import count_run_time
from compileiq_lab.search.config import MAX_GENERATIONS
from compileiq_lab.store import DEFAULT_DIR, Results, Validation

__all__ = ["EXECUTORS", "add_catalog_parser", "add_tune_parser", "executor_spec", "run_catalog", "run_tune"]

#: The executors --executor names besides a scheduler address (as ``compileiq_lab.run.dask_executor.DaskExecutor``
#: takes them).
EXECUTORS = ("local", "dask", "dask-cuda")
_ADDRESS = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://\S+")


def executor_spec(text: str) -> str:
    """An argparse type: one of ``EXECUTORS`` or a scheduler address SCHEME://HOST:PORT (its form only: nothing is
    reached here)."""
    if text in EXECUTORS or _ADDRESS.fullmatch(text):
        return text
    raise argparse.ArgumentTypeError(f"`{', '.join(EXECUTORS)} or a scheduler address SCHEME://HOST:PORT` must hold, "
                                     f"but got {text!r}; e.g. --executor dask or --executor tcp://host:8786")


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
                    "  compileiq-lab tune my_kernel.cu --arch sm_90 --export best.acf\n\n"
                    "your own kernel (include folders, fixed defines, the kernel of a multi-kernel file, and fixed\n"
                    "compiler arguments after --):\n"
                    "  compileiq-lab tune matrixMul.cu -I ../Common --arch sm_90 --space ptxas "
                    "--objectives registers,sass_instructions\n"
                    "  compileiq-lab tune softmax.cu -I include --entry softmax_kernel4 --define BLOCK=256 -- "
                    "-std=c++17 --expt-relaxed-constexpr")
    t.add_argument("kernel", help="bundled kernel name, kernel folder, a bare .cu/.cuh/.ptx/.c file, or "
                                  "triton:FILE.py:FUNCTION (a @triton.jit kernel; see --signature)")
    add_build_arguments(t)
    add_triton_arguments(t)
    _add_space_arguments(t)
    _add_budget_arguments(t)
    _add_run_arguments(t)


def _add_space_arguments(t: argparse.ArgumentParser) -> None:
    """What is searched: the target, the catalog and its subset, the objectives."""
    t.add_argument("--arch", default=None, help="CUDA target, e.g. sm_90 or sm_90a (default: the GPU's own for GPU "
                                                "objectives, else sm_90; a Triton kernel: the GPU's own, "
                                                "arch-specific from sm_90 on, else sm_90a)")
    t.add_argument("--space", default=None, help="catalog: nvcc (front end + ptxas), ptxas, nvrtc (in-process "
                                                  "NVRTC), gcc, clang (default: nvcc for CUDA, gcc for C)")
    t.add_argument("--objectives", default=None, help="comma list, e.g. registers,sass_instructions,compile_time "
                                                       "(CUDA), runtime,energy,power (CUDA on a GPU) or "
                                                       "runtime,instructions (C); default: runtime,energy on a GPU, "
                                                       "runtime for a runnable C kernel, else "
                                                       "sass_instructions,registers (CUDA) or text_bytes,compile_time")
    t.add_argument("--categories", default=None, help="comma list of control categories to search")
    t.add_argument("--controls", default=None, help="comma list of control names to search")
    t.add_argument("--unsafe-math", action="store_true", help="also search precision-changing controls")


def _add_budget_arguments(t: argparse.ArgumentParser) -> None:
    """How long and how wide the search runs, and where its candidates are evaluated."""
    t.add_argument("--generations", type=int_at_least(1, "searched generations", MAX_GENERATIONS), default=10,
                   help="searched generations (default 10); the run ends at the first of --generations, --max-evals "
                        "and --time-budget it reaches")
    t.add_argument("--max-evals", type=int_at_least(1, "objective calls, the baseline included"), default=None,
                   metavar="N", help="end the run once it holds N evaluations (the baseline and the rows of a "
                                     "continued run count; the last generation is cut short); continue a run it ended "
                                     "with the same command and a larger N")
    t.add_argument("--time-budget", type=duration, default=None, metavar="DURATION",
                   help="end the run once it has run this long in all (the canary's builds included), e.g. 600 "
                        "(seconds), 90s, 10m or 1.5h; no candidate starts after it and the ones running are kept; "
                        "continue with a larger one")
    t.add_argument("--pool-size", type=int_at_least(2, "candidates per generation"), default=None,
                   help="candidates per generation (default: a size measured on real compiler spaces, from the "
                        "number of controls and objectives)")
    t.add_argument("--seed", type=int_at_least(0, "the search seed"), default=0,
                   help="the search seed (default 0): the same seed, space, budget and --workers ask the same "
                        "candidates (not with --asynchronous)")
    t.add_argument("--workers", type=int_at_least(1, "candidates at once"), default=None,
                   help="candidates evaluated at once (default: the CPU count; 1 when CPU runs or compile times are "
                        "timed)")
    t.add_argument("--executor", type=executor_spec, default="local", metavar="local|dask|dask-cuda|tcp://HOST:PORT",
                   help="where candidates are evaluated: this process (local, the default), a Dask LocalCluster of "
                        "one worker per core (dask), one worker per GPU (dask-cuda), or an existing Dask cluster "
                        "by its scheduler address; needs pip install 'compileiq-lab[dist]'")
    t.add_argument("--asynchronous", action="store_true",
                   help="no generation barrier: a new candidate whenever a worker is free (not reproducible call "
                        "for call; the budget stays generations x pool size)")


def _add_run_arguments(t: argparse.ArgumentParser) -> None:
    """The store, the export, the build's scratch and the checks around the search."""
    t.add_argument("--store", default=None, help="run store path (default: a new file under ./compileiq_runs/)")
    t.add_argument("--export", default=None, help="write a point of the front as an ACF (open JSON: controls, argv, "
                                                   "build context, arch, objectives, baseline, code hash); see --pick")
    add_pick_arguments(t)
    t.add_argument("--timeout", type=seconds, default=120.0,
                   help="limit per compiler call / run in seconds (default 120)")
    t.add_argument("--workdir", default=None, help="scratch folder for PTX cache and binaries")
    t.add_argument("--nvidia-acf", nargs="+", default=None, metavar="FILE",
                   help="NVIDIA's control files, searched as one more control (none, or one of them, applied with "
                        "ptxas --apply-controls; needs CUDA 13.3 or newer), together with the other controls")
    t.add_argument("--full-nvcc", action="store_true", help="one nvcc call per candidate instead of cached PTX + ptxas")
    t.add_argument("--surrogate", action="store_true",
                   help="pre-screen offspring with a random forest of the evaluations so far (needs scikit-learn; "
                        "see bench/results/surrogate.md for where it pays)")
    t.add_argument("--warm-start", default="auto", metavar="auto|none|RUN.db",
                   help="open the first generation with the fronts of earlier runs of this kernel and space (same "
                        "arch first, then others) found next to the store (auto, the default), of one run, or none")
    t.add_argument("--no-canary", action="store_true",
                   help="skip the check that the controls reach the compiler (-O0 must change the machine code and, "
                        "on a GPU, the time) before the search")
    t.add_argument("--validate", type=rounds(allow_off=True), default=None, metavar="ROUNDS",
                   help="after a run with a measured runtime (GPU objectives, or a C kernel's runtime), re-measure the "
                        "front and the baseline interleaved for ROUNDS rounds and report speedups with 95 %% CIs "
                        "(default 40, at least 10; 0 turns it off)")


def add_catalog_parser(sub: Any) -> None:
    """Register `catalog`."""
    names = CATALOG_NAMES
    c = sub.add_parser("catalog", help="list the compiler controls active for the installed compiler",
                       description="List a catalog's controls checked against the installed compiler.\n\n"
                                   f"catalogs: {', '.join(names)}\n\nexample: compileiq-lab catalog ptxas",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    c.add_argument("name", help=f"one of {', '.join(names)}")


def _split(text: str | None, option: str = "--objectives") -> list[str] | None:
    """A comma list as its items; None when the option was not given. Given but empty is an error (not the
    defaults)."""
    if text is None:
        return None
    items = [x.strip() for x in text.split(",") if x.strip()]
    if not items:
        raise UsageError(f"{option}: `a comma list of at least one name` must hold, but got {text!r}; "
                         f"leave {option} out for the defaults")
    return items


def _objectives(text: str | None) -> list[str] | None:
    """The --objectives list; a name given twice (it would only repeat a column) or no run measures is a usage
    error. A name that other kernels offer but this one does not is the run's to refuse (exit 1)."""
    names = _known(text, "--objectives", METRICS, "objectives compileiq-lab measures")
    repeated = sorted({n for n in names if names.count(n) > 1}) if names else []
    if repeated:
        raise UsageError(f"`--objectives names each objective once` must hold, but got {text!r} (repeated: "
                         f"{', '.join(repeated)}); give each once")
    return names


def _known(text: str | None, option: str, known: Collection[str], what: str) -> list[str] | None:
    """A comma list of names (see ``_split``), refused as a usage error where one is not ``known`` to any run (a
    name another kernel's catalog has but this one's lacks is the run's to refuse, exit 1)."""
    names = _split(text, option)
    unknown = [n for n in names or () if n not in known]
    if unknown:
        listed = f"pick from {sorted(known)}" if len(known) <= 20 else "`compileiq-lab catalog NAME` lists a catalog's"
        raise UsageError(f"`{option} names {what}` must hold, but got {unknown}{did_you_mean(unknown, known)}; "
                         f"{listed}")
    return names


def _space(name: str | None, what: str = "--space") -> str | None:
    """A catalog's name (``what`` gives it: the --space option, the catalog command's argument), refused as a usage
    error where it names no catalog."""
    if name is not None and name not in CATALOG_NAMES:
        raise UsageError(f"`{what} names a catalog` must hold, but got {name!r}{did_you_mean(name, CATALOG_NAMES)}"
                         f"; pick one of {list(CATALOG_NAMES)}")
    return name


def _check_run_options(args: argparse.Namespace, run: KernelRun) -> None:
    """Refuse options the run's kernel and objectives make wrong, before anything runs."""
    check_pick(args.pick, run.objective_names)
    if args.arch is not None and run.kernel.language == "c":
        raise ConfigurationError(f"--arch is the CUDA target of a CUDA, PTX or Triton kernel, but got --arch "
                                 f"{args.arch!r} for the C kernel {run.kernel.name!r}, which is built for this CPU; "
                                 "drop --arch")


def run_catalog(args: argparse.Namespace) -> int:
    """Print a catalog's active controls."""
    catalog, left_out, note = active_catalog(_space(args.name, "NAME"))
    _notes(left_out, note)
    print(f"{'control':32} {'stage':9} {'category':24} {'tier':9} unsafe  domain / doc")
    for c in catalog.controls:
        print(f"{c.name:32} {c.stage:9} {c.category:24} {c.tier:9} {'yes' if c.unsafe_math else '':6}  "
              f"{c.param!r}\n{'':84}{c.doc}")
    return 0


def _notes(left_out: tuple[tuple[str, str], ...], note: str) -> None:
    if note:
        print(f"note: {note}", file=sys.stderr)
    for control, why in left_out:
        print(f"note: {control} left out: {why}", file=sys.stderr)


def run_tune(args: argparse.Namespace) -> int:
    """Tune a kernel and print the Pareto table; returns the exit code."""
    if args.export is not None:
        check_output_file(args.export, "--export", args.store)
    elif args.pick is not None:  # (it would do nothing)
        raise UsageError(f"--pick chooses the point --export writes, but got --pick {args.pick} without --export; "
                         "add --export FILE.acf, or export later: compileiq-lab export STORE --pick ...")
    objectives = _objectives(args.objectives)  # before a Triton kernel is compiled
    controls = _known(args.controls, "--controls", CONTROL_NAMES, "controls of a catalog")
    check_searched_not_fixed(args, controls)
    check_warm_start(args)
    remote = args.executor != "local"  # the workers build and measure; nothing is measured in this process
    run = KernelRun(kernel_argument(args, (Path(args.store).parent if args.store else Path(DEFAULT_DIR)) / "triton"),
                    _space(args.space), objectives, arch=args.arch, controls=controls,
                    categories=_known(args.categories, "--categories", CATEGORIES, "control categories"),
                    unsafe_math=args.unsafe_math, two_stage=not args.full_nvcc,
                    timeout_s=args.timeout, workdir=args.workdir, workers=args.workers, nvidia_acfs=args.nvidia_acf,
                    remote=remote, **build_options(args))
    try:
        _check_run_options(args, run)
        return _tune(args, run)
    finally:
        run.close()


def _tune(args: argparse.Namespace, run: KernelRun) -> int:
    _notes(run.left_out, run.catalog_note)
    canary_s = _canary(args, run)
    facts = run.metadata()  # once: it scans the headers the source reads
    warm, sources = warm_start(args, run, facts)
    meta = {**facts, "warm_start_from": sources} if sources else facts
    remote = run.remote
    search = Search.of(run, store=args.store, metadata=meta, generations=args.generations, pool_size=args.pool_size,
                       max_evaluations=args.max_evals, time_budget_s=args.time_budget, seed=args.seed,
                       warm_start=warm or None, surrogate=args.surrogate, asynchronous=args.asynchronous,
                       executor=args.executor if remote else None)
    if canary_s:
        count_run_time(search.store, canary_s)  # the budget is the whole command's, the canary's builds included
    _say_what_runs(args, search, run, len(encode_all(search.space, warm, say=False)), sources)
    stored_rows = search.results.records
    before = len(stored_rows)
    line = ProgressLine()
    handlers = logging.getLogger().handlers
    for h in handlers:
        h.addFilter(line)
    try:
        stored = (before, sum(r.status != "ok" for r in stored_rows))  # the continued run's counts start from them
        results = search.start(callback=progress_callback(args.generations, line, stored, search.objectives[0].format),
                               workers=args.workers if remote else max(1, run.workers))
    finally:
        line.end()
        for h in handlers:
            h.removeFilter(line)
    print_front(results, run, before)
    validation = None
    n_rounds = 40 if args.validate is None else args.validate
    if run.timer is not None and n_rounds > 0 and results.status != "interrupted" and results.pareto_front():
        validation = _validate_run(results, run, n_rounds)
    if args.export:
        export_point(args, args.export, results, run, validation)
    return _exit_code(results)


def _canary(args: argparse.Namespace, run: KernelRun) -> float:
    """Check that the controls reach the compiler (not for a continued run, which was checked, nor with
    --no-canary); returns the seconds it took, which --time-budget counts."""
    if args.no_canary or (args.store and Path(args.store).exists()):
        return 0.0
    print("checking that the controls reach the compiler (the baseline and -O0 compiled once each; "
          "--no-canary skips this)", file=sys.stderr)
    began = time.monotonic()
    check_canary(run)
    canary_s = time.monotonic() - began
    if args.time_budget is not None and canary_s >= args.time_budget:
        raise ConfigurationError(
            f"--time-budget counts the canary's builds, and they took {canary_s:.1f} s of the "
            f"{args.time_budget:g} s given, so no candidate could start; give a larger --time-budget, or pass "
            "--no-canary to skip the check")
    return canary_s


def _say_what_runs(args: argparse.Namespace, search: Search, run: KernelRun, n_warm: int, sources: list[str]) -> None:
    """On stderr, before the run: a store that already holds the generations asked for (nothing new is evaluated) or
    a run it continues, the warm start (the configs this space takes), and what is tuned over which controls for
    which objectives."""
    stored = search.results.records
    done = max((r.generation for r in stored), default=0)
    ended = search.results.header.stop_reason == "generations" and done >= args.generations
    if done > args.generations or (stored and ended):
        print(f"note: {search.store_path} already holds {done} generations, "
              f"{'more than' if done > args.generations else 'as many as'} --generations {args.generations} asks "
              f"for, so nothing new is evaluated; pass --generations {done + 1} or more to continue it",
              file=sys.stderr)
    elif stored:
        print(f"continuing the run in {search.store_path}: {len(stored)} evaluations of {done} generation(s) stored, "
              f"up to generation {args.generations}", file=sys.stderr)
    if sources and n_warm:
        print(f"warm start: {n_warm} configs from the fronts of {len(sources)} earlier run(s) "
              f"({', '.join(sources[:3])}{' ...' if len(sources) > 3 else ''})", file=sys.stderr)
    kernel = run.kernel
    print(f"tuning {kernel.name} ({kernel.language}) over {len(run.catalog.controls)} {run.catalog_name} controls"
          f"{' + ' + str(len(kernel.defines)) + ' -D knobs' if kernel.defines else ''}; "
          f"objectives {run.objective_names}; store {search.store_path}", file=sys.stderr)


def _exit_code(results: Results) -> int:
    """The exit code of a finished tune (130 interrupted; 1, with the reason on stderr, where it found nothing)."""
    if results.status == "interrupted":
        return 130
    if results.status == "baseline_failed":
        print(f"compileiq-lab: error: the run stopped after the baseline: {results.header.stop_reason}",
              file=sys.stderr)
        return 1
    if results.status == "stopped" and results.header.stop_reason:
        print(f"compileiq-lab: error: the run stopped: {results.header.stop_reason}", file=sys.stderr)
        return 1
    if not results.pareto_front():
        first = next((r for r in results.records if r.status != "ok"), None)
        print(f"compileiq-lab: error: no candidate succeeded; first failure ({first.status if first else '?'}): "
              f"{(first.error if first else '')[:400]}", file=sys.stderr)
        return 1
    return 0


def _validate_run(results: Results, run: KernelRun, n_rounds: int) -> Validation | None:
    print(f"re-measuring the front and the baseline interleaved ({n_rounds} rounds)...", file=sys.stderr)
    try:
        validation = validate(results, run, rounds=n_rounds)
    except ConfigurationError as exc:
        print(f"note: no re-measurement: {exc}", file=sys.stderr)
        return None
    print_validation(validation)
    return validation
