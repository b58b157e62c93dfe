"""Where evaluations run: wall time and worker utilisation of compile-bound searches on the local executors and on a
Dask LocalCluster (synchronous and asynchronous), Dask's overhead per task, the asynchronous mode's bias toward fast
candidates, and a paper model of a larger cluster (Amdahl's bound from the compile/benchmark ratio measured here)."""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
import zlib
from typing import Any

import dask
import distributed
import numpy as np
from _common import RESULTS, markdown_table, write

import compileiq_lab.space as ss
from compileiq_lab import Search, SearchConfiguration
from compileiq_lab.kernels import KernelRun
from compileiq_lab.run import steady
from compileiq_lab.run.dask_executor import CLUSTER_SETTINGS


def cluster(workers: int) -> tuple[Any, Any]:
    with dask.config.set(CLUSTER_SETTINGS):
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
    """Seconds per evaluation of an objective that does nothing: local inline, and Dask with 2 and with 16
    evaluations out at once (the last is the single-writer client's throughput: its serial part)."""
    space = {f"x{i}": ss.range(0, 99) for i in range(6)}
    out = {}
    for label, executor, workers in (("local inline", None, 1), ("dask, 2 at once", client, 2),
                                     ("dask, 16 at once", client, 16)):
        cfg = SearchConfiguration(generations=n // 16, pool_size=16, seed=0, baseline=False)
        t0 = time.perf_counter()
        res = Search(lambda c: float(sum(c.values())), space, cfg, store=":memory:", executor=executor).start(
            workers=workers)
        out[label] = (time.perf_counter() - t0) / len(res)
    return out


def bias(slots: int, repeats: int) -> list[dict[str, Any]]:
    """The asynchronous mode's bias toward fast candidates, at the same budget (8 generations of 8, ``slots`` at
    once): on a bowl whose good part (score <= 12) takes 10x longer to evaluate ("slow = good"), and on one whose
    evaluation times are heavy-tailed and unrelated to the score ("neutral"). Per mode: the share of evaluations
    from the good part, the best score, the wall time; async with the default bounded staleness (2 pools) and
    unbounded."""
    space = {f"x{i}": ss.range(0, 9) for i in range(4)}

    def slow_good(c: dict[str, Any]) -> float:
        f = float(sum((v - 3) ** 2 for v in c.values()))
        time.sleep(0.004 * (10.0 if f <= 12 else 1.0))
        return f

    def neutral(c: dict[str, Any]) -> float:
        f = float(sum((v - 3) ** 2 for v in c.values()))
        h = zlib.crc32(repr(sorted(c.items())).encode()) % 1000 / 1000
        time.sleep(0.002 + 0.03 * h ** 3)
        return f

    rows = []
    for problem, objective in (("slow = good", slow_good), ("neutral", neutral)):
        for mode, lag in (("synchronous", None), ("asynchronous", steady.LAG_POOLS), ("async, unbounded", 0.0)):
            shares, bests, walls = [], [], []
            default = steady.LAG_POOLS
            steady.LAG_POOLS = default if lag is None else lag
            try:
                for seed in range(repeats):
                    cfg = SearchConfiguration(generations=8, pool_size=8, seed=seed, asynchronous=lag is not None,
                                              baseline=False)
                    t0 = time.perf_counter()
                    res = Search(objective, space, cfg, store=":memory:").start(workers=slots)
                    walls.append(time.perf_counter() - t0)
                    shares.append(sum(r.scores[0] <= 12 for r in res.records) / len(res.records))
                    bests.append(min(r.scores[0] for r in res.records))
            finally:
                steady.LAG_POOLS = default
            rows.append({"problem": problem, "mode": mode, "good_share": sum(shares) / repeats,
                         "best_mean": sum(bests) / repeats, "best_se": float(np.std(bests, ddof=1) / np.sqrt(repeats)),
                         "wall_s": sum(walls) / repeats})
    return rows


def h200_benchmark_s() -> dict[str, float]:
    """Seconds of search per GPU run in the recorded H200 tuning check (bench/results/gpu_2026-11-30.json): an upper
    bound of one benchmark's time there (the GPU may have waited for compiles), per kernel."""
    path = RESULTS / "gpu_2026-11-30.json"
    if not path.exists():
        return {}
    rows = json.loads(path.read_text())["rows"]
    return {r["kernel"]: r["search_s"] / r["runs"] for r in rows if r.get("runs")}


def model(compile_s: float, client_s: float, bench_times: list[float], cores: int = 32 * 8,
          gpus: int = 8) -> list[dict[str, Any]]:
    """Candidates per second of a cluster of ``gpus`` GPUs and ``cores`` compile cores, for benchmark times per
    unique binary of 0.1-1 s. Amdahl: the slowest of the three pipelines bounds the rate: the compiles (cores /
    compile time), the GPUs (GPUs / (benchmark time x unique share): code-hash dedup sends only unique binaries to
    a GPU), and the single-writer client, which handles every result in turn (1 / its seconds per result)."""
    rows = []
    for bench_s in bench_times:
        for unique in (1.0, 0.25):
            rates = {"compile": cores / compile_s, "GPU": gpus / (bench_s * unique), "client": 1 / client_s}
            bound = min(rates, key=lambda k: rates[k])
            rows.append({"bench_s": bench_s, "unique_share": unique, **{f"{k}_rate": v for k, v in rates.items()},
                         "rate": rates[bound], "bound": bound,
                         "one_gpu_16_cores": min(16 / compile_s, 1 / (bench_s * unique), 1 / client_s)})
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--kernels", default="reduction,sgemm")
    p.add_argument("--generations", type=int, default=6)
    p.add_argument("--pool", type=int, default=12)
    p.add_argument("--workers", type=int, default=os.cpu_count() or 2)
    p.add_argument("--repeats", type=int, default=30)
    args = p.parse_args()
    c, client = cluster(args.workers)
    try:
        searches = []
        for k in args.kernels.split(","):
            for mode in ("local serial", "local pool", "dask sync", "dask async"):
                if mode.startswith("dask"):
                    client.restart()  # fresh worker processes: no compile cache carried over from the last mode
                searches.append(search_once(k, mode, args.generations, args.pool, args.workers, client))
        overhead = overhead_per_task(client, 320)
    finally:
        client.close()
        c.close()
    skew = bias(8, args.repeats)
    serial = {s["kernel"]: s for s in searches if s["mode"] == "local serial"}
    compile_s = sum(s["busy_s"] for s in serial.values()) / sum(s["candidates"] for s in serial.values())
    h200 = h200_benchmark_s()
    paper = model(compile_s, overhead["dask, 16 at once"],
                  sorted({0.1, 1.0, *(round(v, 3) for v in h200.values())}))
    table = markdown_table(
        ["kernel", "mode", "candidates", "wall s", "s per candidate", "vs serial", "utilisation"],
        [[s["kernel"], s["mode"], s["candidates"], s["wall_s"], s["per_candidate_s"],
          serial[s["kernel"]]["wall_s"] / s["wall_s"], f"{100 * s['utilisation']:.0f} %"] for s in searches])
    table += "\n\nWall time per evaluation of an objective that does nothing (320 calls): " + ", ".join(
        f"{k} {1000 * v:.2f} ms" for k, v in overhead.items()) + "."
    sync = {r["problem"]: r for r in skew if r["mode"] == "synchronous"}
    table += "\n\n" + markdown_table(
        ["problem (8 threads, 64 calls)", "mode", "share of evaluations with score <= 12", "best score (mean +/- s.e.)",
         "wall s", "vs synchronous"],
        [[r["problem"], r["mode"], r["good_share"], f"{r['best_mean']:.2f} +/- {r['best_se']:.2f}", r["wall_s"],
          sync[r["problem"]]["wall_s"] / r["wall_s"]] for r in skew])
    table += "\n\n" + markdown_table(
        ["benchmark s per binary", "unique share", "compile rate /s", "GPU rate /s", "client rate /s",
         "8 GPUs x 32 cores /s", "bound", "1 GPU + 16 cores /s"],
        [[r["bench_s"], r["unique_share"], r["compile_rate"], r["GPU_rate"], r["client_rate"], r["rate"], r["bound"],
          r["one_gpu_16_cores"]] for r in paper])
    notes = (f"{args.workers} workers (Dask: one single-threaded worker process each); ptxas searches over the bundled "
             f"kernels' ptxas controls and -D knobs, {args.generations} generations of {args.pool}, static objectives "
             "(registers, SASS instructions), so every candidate is a compile. Utilisation = the candidates' summed "
             "evaluation time / (wall time x slots). "
             f"Measured compile time per candidate here: {compile_s:.3f} s (serial). On 2 cores a pool cannot beat "
             "two compiles at once, and Dask adds process start-up and a few ms per task: its value is remote and "
             "multi-GPU workers, not speed on one small machine. The bias table: results are told as they arrive and a "
             "slow candidate is never dropped (it joins the survivor selection when it lands), but while it is out "
             "the offspring are bred without it, so where the good candidates are the slow ones an unbounded "
             "steady state spends fewer calls on them; the default bounds the staleness (no new candidate once "
             f"{steady.LAG_POOLS:g} pools were proposed since the oldest one still out). The model takes benchmark "
             "times per unique binary of 0.1 s, 1 s and the H200 tuning check's seconds of search per GPU run ("
             + ", ".join(f"{k} {v:.3f} s" for k, v in h200.items())
             + "; an upper bound: no GPU here), the compile time measured here (ptxas only: a front-end compile "
             "costs more) and the client's seconds per result measured here with 16 out at once; the rate of a "
             "cluster is the smallest of cores / compile time, GPUs / (benchmark time x unique share) and 1 / the "
             "client's seconds per result.")
    write("dask", {"searches": searches, "overhead": overhead, "bias": skew, "model": paper, "h200_benchmark_s": h200,
                   "compile_s_per_candidate": compile_s, "args": vars(args)},
          "Executors: local vs Dask LocalCluster", table, notes)


if __name__ == "__main__":
    main()
