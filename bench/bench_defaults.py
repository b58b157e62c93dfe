"""Pick the default pool size by measurement: calls to the optimum and regret at fixed budgets."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from typing import Any

import numpy as np
from _common import markdown_table, write

from compileiq_lab import Search, SearchConfiguration
from compileiq_lab.search.config import default_pool_size
from compileiq_lab.space import SearchSpace
from compileiq_lab.testing import FlagProblem, toy_objective, toy_space


def best_trace(f: Callable[[dict[str, Any]], float], space: dict[str, Any], seed: int, budget: int,
               pool: int | None, mutate_factor: float = 1.0) -> np.ndarray:
    """Best value after each objective call (the baseline call included), up to ``budget`` calls."""
    vals: list[float] = []

    def g(c: dict[str, Any]) -> float:
        try:
            v = f(c)
        except KeyError:
            v = math.inf
        vals.append(v)
        return v if math.isfinite(v) else float("nan")

    n_genes = SearchSpace(space).n_genes
    gens = math.ceil(budget / (pool or default_pool_size(n_genes)))
    rate = min(1.0, mutate_factor / n_genes)
    Search(g, space, SearchConfiguration(generations=gens, seed=seed, pool_size=pool, mutate_rate=rate),
           store=":memory:").start()
    t = np.minimum.accumulate(np.array(vals[:budget]))
    return np.pad(t, (0, budget - len(t)), mode="edge")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--pools", default="4,6,8,10,12,16,24,auto")
    ap.add_argument("--mutate", default="1", help="mutation rates to try, as multiples of 1/genes")
    args = ap.parse_args()
    pools: list[int | None] = [None if p == "auto" else int(p) for p in args.pools.split(",")]
    factors = [float(m) for m in args.mutate.split(",")]
    settings = [(p, m) for p in pools for m in factors]
    seeds = range(args.seeds)
    flags = {f"flags{nf}x{nl}": FlagProblem(n_flags=nf, n_levels=nl, seed=0) for nf, nl in [(12, 3), (24, 4)]}
    rows, data = [], []
    for pool, factor in settings:
        label = ("auto" if pool is None else str(pool)) + ("" if factor == 1 else f", mutate {factor:g}/genes")
        toy = [best_trace(toy_objective, toy_space(), s, 400, pool, factor) for s in seeds]
        hits = [int(np.argmax(t <= 2.0)) + 1 if (t <= 2.0).any() else math.inf for t in toy]
        entry: dict[str, Any] = {"pool": label, "toy_calls_to_optimum_mean": float(np.mean(hits)),
                                 "toy_found": int(np.isfinite(hits).sum())}
        row: list[Any] = [label, entry["toy_calls_to_optimum_mean"]]
        for name, prob in flags.items():
            tr = np.array([best_trace(prob, prob.space(), s, 400, pool, factor) for s in seeds]) - prob.optimum()
            for b in (100, 200, 400):
                entry[f"{name}_regret@{b}"] = float(tr[:, b - 1].mean())
                row.append(entry[f"{name}_regret@{b}"])
        data.append(entry)
        rows.append(row)
        print(row, flush=True)
    header = ["pool", "toy: calls to optimum (mean)"] + [f"{n} regret@{b}" for n in flags for b in (100, 200, 400)]
    n_genes = {"toy": SearchSpace(toy_space()).n_genes, **{n: SearchSpace(p.space()).n_genes for n, p in flags.items()}}
    auto = {k: default_pool_size(v) for k, v in n_genes.items()}
    name = "defaults" if factors == [1.0] else "defaults_mutate"
    write(name, {"seeds": args.seeds, "n_genes": n_genes, "auto_pool": auto, "rows": data},
          "Default pool size and mutation rate: calls to the optimum and regret at fixed budgets",
          markdown_table(header, rows),
          f"Mean over seeds 0-{args.seeds - 1}. Regret = best relative runtime found minus the known optimum "
          f"after that many objective calls (baseline call included). Genes per problem: {n_genes}; "
          f"the automatic pool for each: {auto}.")


if __name__ == "__main__":
    main()
