"""Calls to the optimum on the quickstart example (generations=15, seeds 0-9): the GA with its default offspring
screen and without it (model="none"), and random."""

from __future__ import annotations

import argparse
import logging
import math
import statistics
from typing import Any

from _common import markdown_table, write

from compileiq_lab import Search, SearchConfiguration
from compileiq_lab.space import SearchSpace
from compileiq_lab.testing import toy_objective, toy_space


def calls_to_optimum(strategy: str, seed: int, model: str = "density") -> tuple[float, int]:
    """Objective calls until the first 2.0, and the calls of the whole run."""
    calls = {"n": 0, "hit": math.inf}

    def f(config: dict[str, Any]) -> float:
        calls["n"] += 1
        v = toy_objective(config)
        if v == 2.0 and calls["hit"] == math.inf:
            calls["hit"] = calls["n"]
        return v

    cfg = SearchConfiguration(generations=15, problem_type="min", num_objectives=1, seed=seed, strategy=strategy,
                              model=model)
    Search(f, toy_space(), cfg, store=":memory:").start()
    return calls["hit"], calls["n"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--seeds", type=int, default=10)
    args = ap.parse_args()
    logging.getLogger("compileiq_lab").setLevel(logging.ERROR)  # "no baseline row", once per run
    size = SearchSpace(toy_space()).size
    n_opt = 2  # x=1.0, y=1, with z present or absent
    expected_random = (size + 1) / (n_opt + 1)  # sampling without replacement
    rows, data = [], {}
    for label, strategy, model in (("ga", "ga", "density"), ("ga, model='none'", "ga", "none"),
                                   ("random", "random", "density")):
        results = [calls_to_optimum(strategy, s, model) for s in range(args.seeds)]
        hits = [h for h, _ in results]
        found = sum(math.isfinite(h) for h in hits)
        mean = statistics.mean(hits) if found == len(hits) else math.inf
        data[label] = {"calls_to_optimum": hits, "calls_per_run": [n for _, n in results],
                          "found": found, "mean": mean}
        rows.append([label, f"{found}/{len(hits)}", mean, statistics.median(hits),
                     max(hits), statistics.mean(n for _, n in results)])
    rows.append(["random sampling without replacement (expected)", "-", expected_random, "-", "-", "-"])
    data["expected_random_without_replacement"] = expected_random
    write("toy", data, "Quickstart example: objective calls to the optimum 2.0 (generations=15)",
          markdown_table(["strategy", "found", "mean calls to optimum", "median", "worst", "calls per run"], rows),
          f"Seeds 0-{args.seeds - 1}, default settings (pool size chosen automatically). The space "
          f"declares no defaults, so there is no baseline call. Space: {size} configs, "
          f"{n_opt} optimal. A run that misses the optimum counts as infinite.")


if __name__ == "__main__":
    main()
