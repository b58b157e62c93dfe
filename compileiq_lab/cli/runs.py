"""The run and ACF commands of `compileiq-lab`: show, export, flags, verify, validate, report."""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path
from typing import Any

from compileiq_lab.acf import load_acf
from compileiq_lab.acf.format import ACF_FORMATS
from compileiq_lab.analysis.certify import recheck
from compileiq_lab.analysis.validation import validate
from compileiq_lab.cli.front import budget_ended
from compileiq_lab.cli.options import (
    UsageError,
    add_pick_arguments,
    check_output_file,
    export_point,
    fraction,
    rounds,
)
from compileiq_lab.exceptions import CompileIQLabError, ConfigurationError, StaticOnlyKernelError
from compileiq_lab.kernels import KernelRun
from compileiq_lab.store import Results, Validation, load_results, writer_pid
from compileiq_lab.store.pick import miscomputing
from compileiq_lab.viz.report import write_report

__all__ = ["RUN_COMMANDS", "add_run_parsers", "print_validation"]


def _sub(sub: Any, name: str, help_: str, example: str) -> argparse.ArgumentParser:
    # argparse %-formats help strings (not descriptions): a literal % must be doubled there
    parser: argparse.ArgumentParser = sub.add_parser(
        name, help=help_.replace("%", "%%"), description=f"{help_}.\n\nexample: {example}",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    return parser


def add_run_parsers(sub: Any) -> None:
    """Register show, export, flags, verify, validate and report."""
    s = _sub(sub, "show", "summarise a stored run: best per objective, the front, failures by status",
             "compileiq-lab show compileiq_runs/run-....db")
    s.add_argument("store", help="the run's .db file")
    e = _sub(sub, "export", "write any evaluated point of a tune run as an ACF",
             "compileiq-lab export run.db --eval-id 42 -o best.acf")
    e.add_argument("store")
    e.add_argument("--eval-id", type=int, default=None,
                   help="the point (default: the one --pick picks; of identical points the one with the fewest "
                        "controls set, then the earliest, as tune --export picks)")
    e.add_argument("-o", "--output", required=True, help="the .acf file to write")
    add_pick_arguments(e)
    f = _sub(sub, "flags", "print the compiler arguments an ACF holds", "compileiq-lab flags best.acf --stage nvcc")
    f.add_argument("acf")
    f.add_argument("--stage", default=None, choices=("nvcc", "ptxas", "nvrtc", "c"),
                   help="nvcc (default for CUDA), ptxas, nvrtc, c (default for C)")
    f.add_argument("--options-file", action="store_true", help="one argument per line, for nvcc --options-file")
    f.add_argument("--with-build", action="store_true",
                   help="also print the fixed build context (-I relative to the kernel source's folder, -D, extra "
                        "arguments) before the tuned arguments")
    v = _sub(sub, "verify", "recompile a kernel with an ACF's controls and compare the machine-code hash",
             "compileiq-lab verify best.acf")
    v.add_argument("acf")
    v.add_argument("--kernel", default=None, help="kernel name, folder or .cu/.cuh/.ptx/.c file (default: the ACF's "
                                                  "build.source or its bundled kernel)")
    v.add_argument("--full-nvcc", action="store_true", help="rebuild with one nvcc call instead of nvcc -ptx + ptxas")
    v.add_argument("--ignore-changes", action="store_true",
                   help="compare the machine code even where the kernel source or the installed toolchain differs "
                        "from the recorded one (warns instead of failing)")
    v.epilog = ("example, after an edit to the kernel or a compiler update:\n"
                "  compileiq-lab verify best.acf --ignore-changes\n\n"
                "exit status (the last line says which: on stdout; FAILED and errors on stderr):\n"
                "  0  OK        the rebuilt machine code equals the recorded hash\n"
                "  1  CHANGED   the kernel source or the installed toolchain differs from the recorded one: the\n"
                "               hashes are not comparable, nothing is built (--ignore-changes compares anyway)\n"
                "  1  MISMATCH  the rebuilt machine code differs from the recorded hash\n"
                "  1  FAILED    the ACF's controls no longer compile (or conflict)\n"
                "  1  UNKNOWN   the ACF records no machine-code hash to compare with\n"
                "  1  an unreadable or invalid ACF, or a kernel that cannot be loaded (compileiq-lab: error: ...)\n"
                "  2  bad arguments")
    va = _sub(sub, "validate", "re-measure a run's front and baseline interleaved (a GPU run's, or a C kernel's "
                               "CPU runtime: speedups with 95 % CIs, Holm-adjusted certification), or re-check an "
                               "ACF's win on this machine",
              "compileiq-lab validate run.db --rounds 60\n         compileiq-lab validate --acf best.acf   (a CI gate)")
    va.add_argument("store", nargs="?", default=None, help="the run's .db file (or --acf)")
    va.add_argument("--acf", default=None, help="re-measure this ACF's point and the baseline (with an A/A control) "
                                                "and exit 1 when the speedup's lower bound falls below 1 - tolerance")
    va.add_argument("--tolerance", type=fraction, default=None,
                    help="with --acf: how far below 1 the lower bound may fall (default: the noise the A/A control "
                         "shows: the larger of the recorded and the fresh A/A floor and the fresh A/A half-width)")
    va.add_argument("--kernel", default=None, help="with --acf: the kernel to load instead of the ACF's")
    va.add_argument("--gpu-backend", default=None, help=argparse.SUPPRESS)  # a stand-in GPU for tests and dry runs
    va.add_argument("--eval-id", type=int, action="append", help="a point to re-measure (repeatable; "
                                                                    "default: the Pareto front)")
    va.add_argument("--rounds", type=rounds(), default=40, help="interleaved timing rounds (default 40)")
    va.epilog = ("exit status with --acf (the last line says which):\n"
                 "  0  PASSED  the re-measured speedup's lower bound is at least 1 - tolerance\n"
                 "  1  FAILED  it fell below (a regression, or a win that no longer holds on this GPU)\n"
                 "  1  an unreadable ACF, no GPU, a build that fails (compileiq-lab: error: ...)\n"
                 "  2  bad arguments")
    r = _sub(sub, "report", "write a self-contained HTML report of a run", "compileiq-lab report run.db -o report.html")
    r.add_argument("store")
    r.add_argument("-o", "--output", required=True, help="the .html file to write")


def _load(path: str) -> Results:
    """A stored run; on a damaged store, one warning line saying what was lost (the rest is read)."""
    res = load_results(path)
    if res.damage:
        notes = "; ".join(res.damage[:3]) + (" ..." if len(res.damage) > 3 else "")
        print(f"compileiq-lab: warning: run store {path!r} is damaged ({notes}); reading its {len(res)} intact rows",
              file=sys.stderr)
    return res


def _show(args: argparse.Namespace) -> int:
    res = _load(args.store)
    meta = res.header.kernel
    print(f"run {res.store_path}: {len(res)} evaluations, status {res.status}"
          + (f"; kernel {meta.kernel} ({meta.catalog}, {meta.arch or 'cpu'})" if meta else ""))
    if res.status == "running" and writer_pid(res.store_path) is None:
        print("no process is running it now: it was killed or crashed (every finished evaluation is kept); continue "
              "it with the same tune command and --store, or Search.resume")
    if budget := budget_ended(res):
        print(budget)
    elif res.header.stop_reason and res.header.stop_reason != "generations":
        print(f"stopped early: {res.header.stop_reason}")
    base = res.baseline_record
    base_scores = base.scores if base is not None and base.status == "ok" and base.scores else None
    for i, objective in enumerate(res.objectives):
        best = res.best_record(i)
        if best is None:
            break
        value = (best.scores or [0.0])[i]
        if base_scores and value == base_scores[i]:  # a tie with the compiler defaults: no config to name for it
            print(f"best {objective.label}: {objective.format(value)}, the baseline's: no config beat the compiler "
                  f"defaults on {objective.name}")
            continue
        ref = (f" (baseline {objective.format(base_scores[i])}; {objective.change(value, base_scores[i])})"
               if base_scores else "")
        print(f"best {objective.label}: {objective.format(value)} at eval {best.eval_id}{ref}")
    front = res.distinct_front()
    print(f"\nPareto front: {len(front)} distinct points (identical scores folded: fewest controls, then earliest)")
    for rec, same in front[:20]:
        print(f"  eval {rec.eval_id:5d}: " + ", ".join(f"{o.name}={o.format(v)}" for o, v in
                                                        zip(res.objectives, rec.scores or []))
              + f"  {rec.params}" + (f"  (+{same} with the same scores)" if same else ""))
    if res.validation is not None:
        print_validation(res.validation)
    failed = {k: v for k, v in res.status_counts().items() if k != "ok"}
    if failed:
        print("\nfailures by status:")
        for status, n in sorted(failed.items()):
            first = next(r for r in res.records if r.status == status)
            line = first.error_line
            why = line if len(line) <= 400 else line[:400] + " ..."  # (a compiler's message can be a page long)
            print(f"  {status}: {n} (e.g. eval {first.eval_id}: {why})")
    return 0


def _export(args: argparse.Namespace) -> int:
    check_output_file(args.output, "-o/--output", args.store)
    res = _load(args.store)
    rec = None
    if args.eval_id is not None and args.pick is not None:
        raise UsageError(f"`--eval-id or --pick, not both` must hold, but got --eval-id {args.eval_id} and --pick "
                         f"{args.pick!r}; give the point (--eval-id) or the rule that picks one (--pick)")
    if args.eval_id is not None:
        rec = res.record(args.eval_id)
        if rec is None or rec.status != "ok":
            raise ConfigurationError(f"--eval-id must name a successful evaluation of {args.store}, but got "
                                     f"{args.eval_id!r} ({rec.status if rec else 'no such evaluation'}); "
                                     "see `compileiq-lab show` for the ids")
        if why := miscomputing(res, rec):
            print(f"WARNING: {why} when the run was validated: exported as asked, but no pick would choose it",
                  file=sys.stderr)
    try:
        run = KernelRun.from_header(res.header, measure=False)
        code = export_point(args, args.output, res, run, rec=rec)
    except CompileIQLabError as exc:
        damaged = " (a damaged store)" if res.damage else ""
        raise ConfigurationError(f"cannot export from {args.store!r}{damaged}: {exc}") from exc
    if code == 0:
        print(f"wrote {args.output} from {args.store}")
    return code


def print_validation(v: Validation) -> None:
    """Print a validation as a table: speedup with its CI, win, energy change."""
    b = v.baseline
    print(f"\nre-measured interleaved ({v.rounds} rounds, {v.method}, {v.confidence:.0%} CI); "
          f"baseline {b['runtime_median'] * 1e6:.2f} us per {'launch' if v.gpu else 'call'}; "
          f"A/A noise floor {v.noise_floor * 100:.2f} %")
    energies = any(r["energy_ratio"] is not None for r in v.rows)  # (none on a CPU, nor without NVML)
    print(f"{'eval':>5}  {'runtime us':>10}  {'speedup':>8}  {'CI':>17}  {'win':>4}  {'energy  ' if energies else ''}"
          "(win: CI above 1 + floor)")
    for r in v.rows:
        energy = "" if not energies else (f"{(r['energy_ratio'] - 1) * 100:+.1f} %" if r["energy_ratio"] is not None
                                          else "n/a")
        print(f"{r['eval_id']:5d}  {r['runtime_median'] * 1e6:10.2f}  {r['speedup']:8.4f}  "
              f"[{r['low']:.4f}, {r['high']:.4f}]  {'yes' if r['win'] else 'no':>4}  {energy}"
              + ("  (same code as baseline)" if r["same_code_as_baseline"] else
                 f"  (same code as eval {r['same_code_as']}: measured once)" if r.get("same_code_as") is not None
                 else ""))
        for name, e in (r.get("workloads") or {}).items():
            verdict = e.get("error") or (f"{e['speedup']:.4f} [{e['low']:.4f}, {e['high']:.4f}] "
                                         f"{'win' if e['win'] else 'LOSS' if e['loss'] else 'no win'}")
            print(f"{'':5}  workload {name}: {verdict}")
        if r.get("mixed"):
            print(f"{'':5}  WARNING: eval {r['eval_id']} wins on the tuning workload but loses on another")
        if r.get("wrong_output_on"):
            print(f"{'':5}  WARNING: eval {r['eval_id']} computes wrong output on workload "
                  f"{', '.join(r['wrong_output_on'])}: not a win, and no export picks it")


def _validate(args: argparse.Namespace) -> int:
    if (args.acf is None) == (args.store is None):
        raise UsageError("validate takes a run store or --acf FILE (one of the two), but got "
                         f"{'both' if args.acf else 'neither'}; e.g. `compileiq-lab validate run.db` or "
                         "`compileiq-lab validate --acf best.acf`")
    if args.acf is not None:
        if args.eval_id:
            raise UsageError(f"`--eval-id is for a run store, not --acf` must hold, but got --eval-id "
                             f"{' '.join(map(str, args.eval_id))} with --acf {args.acf}; the ACF holds one point: drop "
                             "--eval-id, or validate the run store it came from")
        return _recheck_acf(args)
    res = load_results(args.store)
    run = KernelRun.from_header(res.header, gpu_backend=args.gpu_backend)
    try:
        v = validate(res, run, eval_ids=args.eval_id or None, rounds=args.rounds)
    finally:
        run.close()
    print_validation(v)
    print(f"\nstored in {args.store}; `compileiq-lab export` now includes the speedup and its CI")
    return 0


def _recheck_acf(args: argparse.Namespace) -> int:
    """``validate --acf``: re-measure the point against the baseline on this GPU (a C kernel's on this CPU); 1 when
    its win no longer holds."""
    acf = load_acf(Path(args.acf))
    try:
        run = KernelRun.from_acf(acf, kernel=args.kernel, acf_folder=Path(args.acf).resolve().parent, measure=True,
                                 objectives=["runtime"], gpu_backend=args.gpu_backend)
    except StaticOnlyKernelError:
        raise ConfigurationError(f"validate --acf times the point against the compiler defaults, so its kernel must "
                                 f"run, but {acf.kernel!r} is a static-only kernel (a bare file). Give it as a folder "
                                 "whose kernel.toml names its entry, inputs, outputs, reference and [launch] (validate "
                                 "--acf FILE --kernel FOLDER); `verify` checks a static point's machine code instead"
                                 ) from None
    try:
        recorded = acf.validation or {}
        r = recheck(acf.controls, run, recorded=recorded, recorded_hash=acf.code_hash, rounds=args.rounds,
                    tolerance=args.tolerance)
    finally:
        run.close()
    before = f"; recorded {recorded['speedup']:.4f} [{recorded['low']:.4f}, {recorded['high']:.4f}]" \
        if recorded.get("speedup") else ""
    print(f"re-measured {r.rounds} interleaved rounds: speedup {r.speedup:.4f} [{r.low:.4f}, {r.high:.4f}]{before}; "
          f"A/A [{r.aa_low:.4f}, {r.aa_high:.4f}]")
    if run.kernel.workloads:  # (recheck refuses a point that computes wrong output on any of them)
        print(f"output right on the tuning workload and on every declared one: {', '.join(run.kernel.workloads)}")
    if r.recorded_hash and r.recorded_hash != r.code_hash:
        print(f"warning: the machine code now ({r.code_hash[:16]}) differs from the recorded {r.recorded_hash[:16]}",
              file=sys.stderr)
    verdict = "PASSED" if r.passed else "FAILED"
    print(f"validate: {verdict}: lower bound {r.low:.4f} {'>=' if r.passed else '<'} 1 - tolerance "
          f"({1 - r.tolerance:.4f})", file=sys.stdout if r.passed else sys.stderr)
    return 0 if r.passed else 1


def _flags(args: argparse.Namespace) -> int:
    acf = load_acf(Path(args.acf))
    stage = args.stage or ("c" if acf.compiler in ("gcc", "clang") else "nvrtc" if acf.compiler == "nvrtc"
                           else "nvcc")
    argv = acf.args(stage)
    build = _build_argv(acf)
    if build and args.with_build and stage == "c":  # as the tuned builds had it: the dialect, the build, the point
        argv = [*argv[:1], *build, *argv[1:]]  # (a -std= of the build's comes after -std=c11, and wins)
    elif build and args.with_build:
        argv = [*build, *argv] if stage != "ptxas" else argv
    elif build:
        print(f"note: the point was tuned with the fixed build context {shlex.join(build)} (include folders relative "
              "to the kernel source's folder; --with-build prints it in front)", file=sys.stderr)
    if acf.dropped:
        print(f"note: left out as having no effect: {', '.join(sorted(acf.dropped))}", file=sys.stderr)
    extra = [t for t in acf.argv.get("frontend", []) if not t.startswith("-D")]
    if stage == "ptxas" and extra:
        print(f"note: the PTX must come from `nvcc -ptx` with the front-end controls {shlex.join(extra)} "
              "(see --stage nvcc)", file=sys.stderr)
    print(acf.options_file_text() if args.options_file else shlex.join(argv))
    return 0


def _build_argv(acf: Any) -> list[str]:
    b = acf.build
    return [*(f"-I{d}" for d in b["include_dirs"]), *(f"-D{k}={v}" for k, v in b["defines"].items()), *b["args"]]


def _verify(args: argparse.Namespace) -> int:
    acf = load_acf(Path(args.acf))
    run = KernelRun.from_acf(acf, kernel=args.kernel, measure=False, two_stage=not args.full_nvcc,
                             acf_folder=Path(args.acf).resolve().parent)
    # what makes the recorded hash comparable: the same source, built by the same compilers
    changes = run.changes_since(acf.source_sha256, acf.build.get("headers_sha256"), "the ACF was made")
    installed = run.toolchain()
    if acf.toolchain and installed != acf.toolchain:
        changes.append(f"the installed toolchain differs from the recorded one ({installed} vs {acf.toolchain}): "
                       "a different machine-code hash is expected")
    if changes and not args.ignore_changes:
        print(f"verify: CHANGED: {'; '.join(changes)}; a recorded machine-code hash is only comparable on the same "
              "source and toolchain (re-export the point from a run on these, or pass --ignore-changes to compare "
              "anyway)")
        return 1
    for change in changes:
        print(f"warning: {change} (--ignore-changes: comparing anyway)", file=sys.stderr)
    conflict = run.constraint(acf.controls)
    outcome = None if conflict else run.evaluator.compile(acf.controls)
    if outcome is None or not outcome.ok or outcome.path is None:
        status, why = ("compile_error", conflict) if outcome is None else (outcome.status, outcome.error)
        print(f"verify: FAILED: the compile ends in {status}: {(why or '')[:400]}", file=sys.stderr)
        return 1
    code_hash = run.evaluator.identity(outcome, whole=acf.format == ACF_FORMATS[0])  # version 1: the whole module
    if acf.code_hash is None:
        print(f"verify: UNKNOWN: the ACF records no machine-code hash; this build is {code_hash[:16]}")
        return 1
    same = code_hash == acf.code_hash
    print(f"verify: {'OK' if same else 'MISMATCH'}: machine code {code_hash[:16]} "
          f"{'equals' if same else 'differs from'} the recorded {(acf.code_hash or 'none')[:16]}")
    return 0 if same else 1


def _report(args: argparse.Namespace) -> int:
    check_output_file(args.output, "-o/--output", args.store)
    results = _load(args.store)
    run = None
    if results.header.kernel is not None:  # a kernel run: the report shows what the picked point's controls changed
        try:
            run = KernelRun.from_header(results.header, measure=False)
        except ConfigurationError as exc:
            print(f"note: no machine-code section ({str(exc)[:200]})", file=sys.stderr)
    try:
        out = write_report(results, Path(args.output), run)
    finally:
        if run is not None:
            run.close()
    print(f"wrote {out}")
    return 0


RUN_COMMANDS = {"show": _show, "export": _export, "flags": _flags, "verify": _verify, "validate": _validate,
                "report": _report}
