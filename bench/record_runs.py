"""Record full run stores of the bundled C kernels, timed for real on this CPU, for the lab's replay without a GPU.

Each kernel gets a short gcc search for runtime and compile time (one evaluation at a time, so timed runs do not
share the CPU with compiles); its store goes to ``bench/results/runs/<kernel>-cpu.db`` and a README there says what
each one holds. GPU recordings (``<kernel>.db``) come from ``bench/bench_certify.py --steps record`` on a GPU machine.

    .venv/bin/python bench/record_runs.py [--kernels matmul_c,stencil_c] [--generations 4] [--pool 8]
"""

from __future__ import annotations

import argparse
import logging
import sqlite3
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import RESULTS, environment, markdown_table

from compileiq_lab import Search
from compileiq_lab.kernels import KernelRun
from compileiq_lab.store import load_results

log = logging.getLogger("record_runs")
OBJECTIVES = ["runtime", "compile_time"]


def record(kernel: str, folder: Path, generations: int, pool: int, seed: int) -> dict[str, Any]:
    """One kernel's recorded run (an existing store of the same name is replaced); returns its facts."""
    store = folder / f"{kernel}-cpu.db"
    for old in (store, Path(f"{store}-wal"), Path(f"{store}-shm"), Path(f"{store}.lock")):
        old.unlink(missing_ok=True)
    t0 = time.time()
    with tempfile.TemporaryDirectory() as d:
        run = KernelRun(kernel, "gcc", OBJECTIVES, workdir=d)
        try:
            search = Search.of(run, store=str(store), generations=generations, pool_size=pool, seed=seed)
            try:
                search.start(workers=1)
            finally:
                search.close()  # the last connection: SQLite folds its write-ahead log into the file
        finally:
            run.close()
    Path(f"{store}.lock").unlink(missing_ok=True)  # only a writer lock; the store is complete without it
    ship(store)
    results = load_results(str(store))
    statuses = results.status_counts()
    facts = {"kernel": kernel, "store": store.name, "objectives": OBJECTIVES, "status": results.status,
             "evaluations": len(results), "statuses": statuses, "front": len(results.front_records()),
             "generations": generations, "pool_size": pool, "seed": seed, "wall_s": round(time.time() - t0, 1),
             "size_bytes": store.stat().st_size}
    log.info("%s: %d evaluations (%s), %s, %.0f s, %d bytes", kernel, len(results), statuses, results.status,
             facts["wall_s"], facts["size_bytes"])
    return facts


def ship(store: Path) -> None:
    """Make a finished store one self-contained file: a rollback journal instead of the write-ahead log (readers
    then leave no ``-wal``/``-shm`` files beside it; a run that continues it switches back), compacted."""
    conn = sqlite3.connect(store, isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode=DELETE")
        conn.execute("VACUUM")
    finally:
        conn.close()


def readme(rows: list[dict[str, Any]], env: dict[str, Any], command: str) -> str:
    """What the recorded stores hold, how they were made, and where GPU recordings come from."""
    table = markdown_table(
        ["store", "kernel", "objectives", "evaluations", "statuses", "on the front", "status", "recording (s)",
         "size (KiB)"],
        [[r["store"], r["kernel"], ", ".join(r["objectives"]), r["evaluations"],
          ", ".join(f"{n} {s}" for s, n in sorted(r["statuses"].items())), r["front"], r["status"], r["wall_s"],
          f"{r['size_bytes'] / 1024:.0f}"] for r in rows])
    machine = ", ".join(f"{k} {v}" for k, v in env.items())
    return (
        "# Recorded runs\n\n"
        "Full run stores for the lab's replay without a GPU (`compileiq_lab.run.replay_run(path)` emits a stored "
        "run's events at its recorded pace, so the dashboard watches it as if it ran; `compileiq-lab show PATH` "
        "reads one).\n\n"
        "## CPU recordings (`*-cpu.db`)\n\n"
        "C kernels tuned with the **gcc** catalog for `runtime` (the kernel's median run time, measured on this "
        f"CPU) and `compile_time` (seconds per compile), one evaluation at a time:\n\n{table}\n\n"
        f"Each is a search of {rows[0]['generations']} generations of {rows[0]['pool_size']} candidates plus the "
        f"baseline (the compiler defaults), seed {rows[0]['seed']}.\n\n"
        f"Machine: {machine}.\n\n"
        f"Made by:\n\n```\n{command}\n```\n\n"
        "## GPU recordings (`<kernel>.db`)\n\n"
        "Runs of CUDA kernels with runtime, compile time, power, energy and a validation come from "
        "`bench/bench_certify.py --steps record` on a GPU machine (it writes them here as `<kernel>.db`, without "
        "the `-cpu` suffix). A store's header says which kind it is: its `metadata` names the kernel, the "
        "catalog (`gcc` here, `ptxas` there), the language (`c` here) and, for GPU runs, the `gpu`.\n")


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--kernels", default="matmul_c,stencil_c")
    p.add_argument("--generations", type=int, default=4)
    p.add_argument("--pool", type=int, default=8)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=str(RESULTS / "runs"))
    args = p.parse_args()
    folder = Path(args.out)
    folder.mkdir(parents=True, exist_ok=True)
    rows = [record(k, folder, args.generations, args.pool, args.seed) for k in args.kernels.split(",")]
    command = (f".venv/bin/python bench/record_runs.py --kernels {args.kernels} --generations {args.generations} "
               f"--pool {args.pool} --seed {args.seed}")
    (folder / "README.md").write_text(readme(rows, environment(), command))
    for lock in folder.glob("*.db.lock"):
        lock.unlink()


if __name__ == "__main__":
    main()
