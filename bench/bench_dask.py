"""Where evaluations run: wall time and worker utilisation of compile-bound searches on the local executors and on a
Dask LocalCluster (synchronous and asynchronous), Dask's overhead per task, the asynchronous mode's bias toward fast
candidates, and a paper model of a larger cluster (Amdahl's bound from the compile/benchmark ratio measured here)."""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from typing import Any

import dask
import distributed
from _common import markdown_table, write

import compileiq_lab.space as ss
from compileiq_lab import Search, SearchConfiguration
from compileiq_lab.kernels import KernelRun


def cluster(workers: int) -> tuple[Any, Any]:
    with dask.config.set({"distributed.scheduler.allowed-failures": 0}):
        c = distributed.LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=":0",
                                     silence_logs=50)
    return c, distributed.Client(c)


def search_once(kernel: str, mode: str, generations: int, pool: int, workers: int, client: Any) -> dict[str, Any]:
    """One ptxas search of a bundled kernel (static objectives: compile-bound); wall time and utilisation."""
    with tempfile.TemporaryDirectory() as d:
        remote = mode.startswith("dask")
        run = KernelRun(kernel, "ptxas", ["registers", "sass_instructions"], workdir=d, remote=remote,
                        workers=workers)
        cfg = {"generations": generations, "pool_size": pool, "seed": 0, "asynchronous": mode.endswith("async")}
        slots = 1 if mode == "local serial" else workers
        t0 = time.perf_counter()
        res = Search.of(run, store=":memory:", executor=client if remote else None, **cfg).start(workers=slots)
        wall = time.perf_counter() - t0
        run.close()
    busy = sum(r.elapsed_s for r in res.records)
    return {"kernel": kernel, "mode": mode, "candidates": len(res), "wall_s": wall,
            "per_candidate_s": wall / len(res), "busy_s": busy, "utilisation": busy / (wall * slots),
            "failed": sum(r.status != "ok" for r in res.records)}


def overhead_per_task(client: Any, n: int) -> dict[str, float]:
    """Seconds per evaluation of an objective that does nothing: local inline vs Dask (2 workers)."""
    space = {f"x{i}": ss.range(0, 99) for i in range(6)}
    out = {}
    for label, executor, workers in (("local inline", None, 1), ("dask", client, None)):
        cfg = SearchConfiguration(generations=n // 16, pool_size=16, seed=0)
        t0 = time.perf_counter()
        res = Search(lambda c: float(sum(c.values())), space, cfg, store=":memory:", executor=executor).start(
            workers=workers)
        out[label] = (time.perf_counter() - t0) / len(res)
    out["dask_scheduling_s"] = out["dask"] - out["local inline"]
    return out


def bias(slots: int, repeats: int) -> list[dict[str, Any]]:
    """The asynchronous mode's bias toward fast candidates: on a bowl whose better half is 4x slower to evaluate,
    the share of evaluations from the slow (good) half and the best score at the same budget, sync vs async."""
    space = {f"x{i}": ss.range(0, 9) for i in range(4)}

    def objective(c: dict[str, Any]) -> float:
        f = float(sum((v - 3) ** 2 for v in c.values()))
        time.sleep(0.02 if f <= 12 else 0.005)  # good candidates take longer
        return f

    rows = []
    for asynchronous in (False, True):
        shares, bests, walls = [], [], []
        for seed in range(repeats):
            cfg = SearchConfiguration(generations=6, pool_size=8, seed=seed, asynchronous=asynchronous)
            t0 = time.perf_counter()
            res = Search(objective, space, cfg, store=":memory:").start(workers=slots)
            walls.append(time.perf_counter() - t0)
            searched = [r for r in res.records if not r.is_baseline]
            shares.append(sum(r.scores[0] <= 12 for r in searched) / len(searched))
            bests.append(min(r.scores[0] for r in searched))
        rows.append({"mode": "asynchronous" if asynchronous else "synchronous", "slow_share": sum(shares) / repeats,
                     "best_mean": sum(bests) / repeats, "wall_s": sum(walls) / repeats})
    return rows


def model(compile_s: float, cores: int = 32 * 8, gpus: int = 8) -> list[dict[str, Any]]:
    """Candidates per second of a cluster of ``gpus`` GPUs and ``cores`` compile cores, for benchmark times per
    unique binary of 0.1-1 s (Amdahl: the slower of the two pipelines bounds the rate; code-hash dedup sends only
    unique binaries to a GPU)."""
    rows = []
    for bench_s in (0.1, 0.3, 1.0):
        for unique in (1.0, 0.25):
            compile_rate, gpu_rate = cores / compile_s, gpus / (bench_s * unique)
            rows.append({"bench_s": bench_s, "unique_share": unique, "compile_rate": compile_rate,
                         "gpu_rate": gpu_rate, "rate": min(compile_rate, gpu_rate),
                         "bound": "compile" if compile_rate < gpu_rate else "GPU",
                         "one_gpu_16_cores": min(16 / compile_s, 1 / (bench_s * unique))})
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--kernels", default="reduction,sgemm")
    p.add_argument("--generations", type=int, default=6)
    p.add_argument("--pool", type=int, default=12)
    p.add_argument("--workers", type=int, default=os.cpu_count() or 2)
    p.add_argument("--repeats", type=int, default=10)
    args = p.parse_args()
    c, client = cluster(args.workers)
    try:
        searches = [search_once(k, mode, args.generations, args.pool, args.workers, client)
                    for k in args.kernels.split(",")
                    for mode in ("local serial", "local pool", "dask sync", "dask async")]
        overhead = overhead_per_task(client, 320)
    finally:
        client.close()
        c.close()
    skew = bias(4, args.repeats)
    serial = {s["kernel"]: s for s in searches if s["mode"] == "local serial"}
    compile_s = sum(s["busy_s"] for s in serial.values()) / sum(s["candidates"] for s in serial.values())
    paper = model(compile_s)
    table = markdown_table(
        ["kernel", "mode", "candidates", "wall s", "s per candidate", "vs serial", "utilisation"],
        [[s["kernel"], s["mode"], s["candidates"], s["wall_s"], s["per_candidate_s"],
          serial[s["kernel"]]["wall_s"] / s["wall_s"], f"{100 * s['utilisation']:.0f} %"] for s in searches])
    table += "\n\nOverhead per evaluation of an objective that does nothing (320 calls): " + ", ".join(
        f"{k} {1000 * v:.2f} ms" for k, v in overhead.items()) + "."
    table += "\n\n" + markdown_table(
        ["mode (4 threads, slow good half)", "share of evaluations from the slow half", "best score (mean)", "wall s"],
        [[r["mode"], r["slow_share"], r["best_mean"], r["wall_s"]] for r in skew])
    table += "\n\n" + markdown_table(
        ["benchmark s per binary", "unique share", "compile-bound rate /s", "GPU-bound rate /s", "8 GPUs x 32 cores /s",
         "bound", "1 GPU + 16 cores /s"],
        [[r["bench_s"], r["unique_share"], r["compile_rate"], r["gpu_rate"], r["rate"], r["bound"],
          r["one_gpu_16_cores"]] for r in paper])
    notes = (f"{args.workers} workers (Dask: one single-threaded worker process each); ptxas searches over the bundled "
             f"kernels' ptxas controls and -D knobs, {args.generations} generations of {args.pool}, static objectives "
             "(registers, SASS instructions), so every candidate is a compile. Utilisation = the candidates' summed "
             "evaluation time / (wall time x slots). "
             f"Measured compile time per candidate here: {compile_s:.3f} s (serial). On 2 cores a pool cannot beat "
             "two compiles at once, and Dask adds process start-up and a few ms per task: its value is remote and "
             "multi-GPU workers, not speed on one small machine. The bias table: with results told as they arrive, a "
             "slow candidate is never dropped (it joins the survivor selection when it lands), so the share of "
             "evaluations spent in the slow half should stay near the synchronous one. The model assumes benchmark "
             "times per unique binary (not measured here: no GPU) and the compile time measured here; "
             "the rate of a cluster is the smaller of cores / compile time and GPUs / (benchmark time x unique "
             "share).")
    write("dask", {"searches": searches, "overhead": overhead, "bias": skew, "model": paper,
                   "compile_s_per_candidate": compile_s, "args": vars(args)},
          "Executors: local vs Dask LocalCluster", table, notes)


if __name__ == "__main__":
    main()
