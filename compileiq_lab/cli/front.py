"""The table a tune run ends with: the baseline, the Pareto front beside it and what the compiler taught."""

from __future__ import annotations

from compileiq_lab.kernels import KernelRun, shown_argv
from compileiq_lab.store import EvalRecord, Results

__all__ = ["budget_ended", "print_front"]


def budget_ended(results: Results) -> str:
    """That a budget ended the run, and which, in words ("" where none did)."""
    reason = results.header.stop_reason
    return f"ended by its budget: {reason} (continue it with a larger one)" \
        if reason in ("max_evaluations", "time_budget") else ""


def print_front(results: Results, run: KernelRun, before: int = 0) -> None:
    """The end of a tune run: its counts (the compiles of this session, after ``before`` evaluations stored by
    earlier ones), the baseline, the Pareto front beside it and what the compiler taught."""
    base = results.baseline_record
    names = results.objective_names
    sign = results.objectives[0].sign
    budget = budget_ended(results)
    print(f"\n{len(results)} evaluations, statuses {results.status_counts()}, run {results.status}"
          + (f", {budget}" if budget else ""))
    st = run.evaluator.stats
    print(f"{f'this session ({len(results) - before} evaluations): ' if before else ''}"
          f"compiles {st['compiles']}, conflicts skipped {st['conflicts']}, distinct machine code "
          f"{len(run.evaluator.code_hashes)} of {st['compiles']} compiled configs"
          + (f", runs saved by code-hash dedup {st['runs_saved']}" if st["runs"] else ""))
    print("objectives: " + "; ".join(o.label for o in results.objectives))
    if run.kernel.build.args:
        print(f"every compile, the baseline included, also had the build's fixed {' '.join(run.kernel.build.args)}")
    if not any(r.status == "ok" for r in results.records):  # nothing to tabulate: tune's error says why
        print(f"\nstored in {results.store_path}")
        return
    head = "  ".join(f"{o:>18}" for o in names)
    print(f"\n{'eval':>5}  {head}  arguments")
    if base is not None and base.status == "ok" and base.scores:
        print(f"{'base':>5}  " + "  ".join(f"{v:18.6g}" for v in base.scores)
              + f"  {' '.join(_flat_argv(run, base)) or '(compiler defaults)'}   (baseline)")
    front = sorted(results.distinct_front(), key=lambda pair: (sign * (pair[0].scores or [0.0])[0], pair[0].eval_id))
    for rec, same in front:
        flat = "(the baseline above)" if rec.is_baseline else " ".join(_flat_argv(run, rec)) or "(defaults)"
        more = f"   (+{same} configs with the same scores)" if same else ""
        print(f"{rec.eval_id:5d}  " + "  ".join(f"{v:18.6g}" for v in rec.scores or []) + f"  {flat}{more}")
        if base is not None and base.status == "ok" and base.scores and rec.scores and not rec.is_baseline:
            changes = [f"{o.name} {o.change(v, b)}" for o, v, b in zip(results.objectives, rec.scores, base.scores)]
            print(f"{'':5}  " + "; ".join(changes))
    if front and all(rec.is_baseline for rec, _ in front):
        print(f"{'':5}  no config beat the compiler defaults on {'any objective' if len(names) > 1 else names[0]}")
    learned = results.learned_conflicts()
    if learned:
        print(f"\nlearned from the compiler (never asked again): {len(learned)} conflicts named by failed compiles "
              "or controls it said it ignored")
        for line in learned:
            print(f"  {line}")
    print(f"\nstored in {results.store_path}")


def _flat_argv(run: KernelRun, rec: EvalRecord) -> list[str]:
    return shown_argv(run.catalog_name, run.argv(rec.params))
