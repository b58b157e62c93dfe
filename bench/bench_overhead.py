"""Framework cost per candidate with an instant objective (pool 64, 20 generations), side by side."""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from _common import markdown_table, write

import compileiq_lab.space as ss
from compileiq_lab import Search, SearchConfiguration
from compileiq_lab.search import make_strategy
from compileiq_lab.space import SearchSpace


def flag_space() -> dict[str, Any]:
    """A compiler-like space big enough that 1,280 candidates never exhaust it."""
    sp: dict[str, Any] = {f"level{i}": ss.range(0, 31) for i in range(6)}
    sp.update({f"mode{i}": ss.choice(["a", "b", "c", "d"], knockout_prob=0.3) for i in range(4)})
    sp.update({f"flag{i}": ss.flag(f"-f{i}") for i in range(6)})
    return sp


def instant(config: dict[str, Any]) -> float:
    return float(sum(v for k, v in config.items() if k.startswith("level")))


def run_search(store: str | None, tmp: Path, i: int, **extra: Any) -> tuple[float, int]:
    cfg = SearchConfiguration(generations=20, pool_size=64, **extra)
    path = store if store is not None else str(tmp / f"run{i}.db")
    t0 = time.perf_counter()
    res = Search(instant, flag_space(), cfg, store=path).start()
    return time.perf_counter() - t0, len(res)


def bare_strategy() -> tuple[float, int]:
    space = SearchSpace(flag_space())
    s = make_strategy("ga", space, n_objectives=1, pool_size=64, seed=0, mutate_rate=1 / space.n_genes,
                      crossover_rate=0.9)
    n, t0 = 0, time.perf_counter()
    for _ in range(20):
        X = s.ask()
        F = np.array([[instant(space.decode(x))] for x in X])
        s.tell(F, np.ones(len(X), dtype=bool))
        n += len(X)
    return time.perf_counter() - t0, n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeats", type=int, default=7)
    args = ap.parse_args()
    variants = {
        "default (SQLite file store)": lambda tmp, i: run_search(None, tmp, i),
        "in-memory store": lambda tmp, i: run_search(":memory:", tmp, i),
        "timeout_s=10 (worker process)": lambda tmp, i: run_search(None, tmp, i, timeout_s=10.0),
        "bare strategy ask/tell (no store, no objective wrapper)": lambda tmp, i: bare_strategy(),
    }
    samples: dict[str, list[float]] = {k: [] for k in variants}
    counts: dict[str, int] = {}
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        run_search(":memory:", tmp, -1)  # warm imports
        for i in range(args.repeats):  # interleaved, so machine noise hits every variant alike
            for name, fn in variants.items():
                dt, n = fn(tmp, i)
                samples[name].append(dt / n * 1e3)
                counts[name] = n
    ref = statistics.median(samples["default (SQLite file store)"])
    rows = [[name, counts[name], min(v), statistics.median(v), statistics.median(v) / ref]
            for name, v in samples.items()]
    write("overhead", {"repeats": args.repeats, "ms_per_candidate": samples, "candidates": counts},
          "Framework cost per candidate (instant objective, pool 64, 20 generations)",
          markdown_table(["variant", "candidates", "min ms/cand", "median ms/cand", "ratio to default"], rows),
          "Wall time of `Search(...).start()` divided by the candidates evaluated (baseline included), "
          "imports warmed first; variants interleaved in one run. Goal: at most 0.5 ms per candidate "
          "with default settings.")


if __name__ == "__main__":
    main()
