"""The screen's neighbours of the best config, on and off, on every single-objective real-compiler table and the seed
toy: mean calls to the optimum over many seeds, tune and held-out half apart.

    python bench/bench_neighbours.py                 # 120 seeds from 100 (writes bench/results/neighbours.*)
    python bench/bench_neighbours.py --seeds 30 --seed0 0

"Off" is the same default search with ``DensityScreen.HILL_MAX_CONTROLS = 0`` (no space gets neighbours), so the two
differ in nothing else. The seeds start at 100 by default: bench_peers.py reports seeds 0-59.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import time
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import numpy as np
from _common import markdown_table, write
from bench_peers import TABLES, half_of, lab, metrics, objectives_of, table_problem, toy_problem

from compileiq_lab.search.screen import DensityScreen

BUDGET = 200
DEFAULT_MAX_CONTROLS = DensityScreen.HILL_MAX_CONTROLS


def cell(args: tuple[str, str, bool, list[int]]) -> dict[str, Any]:
    """Calls to the optimum of one (table, way, neighbours on/off) over the seeds."""
    name, way, on, seeds = args
    logging.getLogger("compileiq_lab").setLevel(logging.ERROR)
    DensityScreen.HILL_MAX_CONTROLS = DEFAULT_MAX_CONTROLS if on else 0
    p = toy_problem() if name == "toy" else table_problem(name, way)
    calls = [metrics(p, lab(p, s, BUDGET)[0], BUDGET)["calls_to_best"] for s in seeds]
    return {"table": name, "way": way, "neighbours": on, "calls": calls}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, default=120)
    ap.add_argument("--seed0", type=int, default=100)
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    args = ap.parse_args()
    split = json.loads((TABLES / "split.json").read_text())
    single = [n for n, k in objectives_of([*split["tune"], *split["held_out"]]).items() if k == 1]
    seeds = list(range(args.seed0, args.seed0 + args.seeds))
    jobs = [(n, w, on, seeds) for n in single for w in ("catalog", "plain") for on in (True, False)]
    jobs += [("toy", "catalog", on, seeds) for on in (True, False)]
    t0 = time.time()
    with ProcessPoolExecutor(args.workers) as ex:
        results = list(ex.map(cell, jobs))
    by = {(r["table"], r["way"], r["neighbours"]): r["calls"] for r in results}
    rows, sums = [], {}
    for n in [*single, "toy"]:
        half = half_of(n, split)
        for w in ("catalog",) if n == "toy" else ("catalog", "plain"):
            on, off = (np.array(by[(n, w, v)], dtype=float) for v in (True, False))
            se = float(np.std(on - off, ddof=1) / np.sqrt(len(on)))
            rows.append([n, half, w, on.mean(), off.mean(), on.mean() / off.mean(), se,
                         f"{int((on <= BUDGET).sum())}/{len(on)}", f"{int((off <= BUDGET).sum())}/{len(off)}"])
            if n != "toy":
                s = sums.setdefault((half, w), [0.0, 0.0])
                s[0] += on.mean()
                s[1] += off.mean()
    for (half, w), (a, b) in sorted(sums.items()):
        rows.append([f"sum of {half}", half, w, a, b, a / b, "", "", ""])
    header = ["table", "half", "space", "mean calls, neighbours on (default)", "off", "on / off",
              "standard error of on - off", "reached, on", "reached, off"]
    notes = (f"Seeds {seeds[0]}-{seeds[-1]}, budget {BUDGET} calls (a miss counts as {BUDGET + 1}), the default "
             "search otherwise; the neighbours were chosen on the tune half. Paired by seed: the standard error is "
             f"that of the per-seed difference. {time.time() - t0:.0f} s.")
    write("neighbours", {"seeds": seeds, "budget": BUDGET, "cells": results}, "Neighbours of the best, on and off",
          markdown_table(header, rows), notes)


if __name__ == "__main__":
    main()
