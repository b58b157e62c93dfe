"""What a catalog's constraint costs the search per candidate, with its verdicts cached per genome and without.

    python bench/bench_constraint.py                  # writes bench/results/constraint.{json,md}
    python bench/bench_constraint.py --seeds 3       # a quicker look

The default search on the catalog space of each one-objective real-compiler table (bench/tables), its known
conflicts as the constraint, 200 calls: the time outside the objective per call, as bench_peers.py measures it.
``cached`` is the default (``compileiq_lab.run.build.CONSTRAINT_CACHE`` genomes); ``uncached`` sets the cache to
0, so that every check decodes the genome and asks the catalog. The runs are interleaved, so machine noise hits
each alike; trajectories are the same either way (a cache of a function of the config).
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
from pathlib import Path

from _common import markdown_table, write
from bench_peers import TABLES, lab, objectives_of, table_problem

import compileiq_lab.run.build as build

BUDGET = 200


def one_objective_tables() -> list[str]:
    """The tables of one objective of both halves of the split, by name."""
    split = json.loads((TABLES / "split.json").read_text())
    return sorted(n for n, k in objectives_of([*split["tune"], *split["held_out"]]).items() if k == 1)


def ms_per_call(name: str, seed: int, cache: int) -> float:
    """The time outside the objective per call of one run, with a cache of ``cache`` verdicts."""
    keep = build.CONSTRAINT_CACHE
    build.CONSTRAINT_CACHE = cache
    try:
        trace, outside = lab(table_problem(name, "catalog"), seed, BUDGET)
    finally:
        build.CONSTRAINT_CACHE = keep
    return outside / len(trace) * 1e3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--out", type=Path, default=None, help="folder for the results (default: bench/results)")
    args = ap.parse_args()
    logging.getLogger("compileiq_lab").setLevel(logging.ERROR)
    names = one_objective_tables()
    variants = {"cached": build.CONSTRAINT_CACHE, "uncached": 0}
    ms_per_call(names[0], 0, build.CONSTRAINT_CACHE)  # warm imports and the table cache
    samples: dict[str, dict[str, list[float]]] = {n: {v: [] for v in variants} for n in names}
    for seed in range(args.seeds):
        for name in names:
            for label, cache in variants.items():
                samples[name][label].append(ms_per_call(name, seed, cache))
    rows = []
    for name in names:
        cached, uncached = (statistics.median(samples[name][v]) for v in variants)
        rows.append([name, cached, uncached, cached / uncached])
    ratios = [r[3] for r in rows]
    rows.append(["median over tables", statistics.median(r[1] for r in rows), statistics.median(r[2] for r in rows),
                 statistics.median(ratios)])
    table = markdown_table(["table (catalog space)", "ms/call, cached", "ms/call, uncached", "ratio"], rows)
    notes = (f"Median over seeds 0-{args.seeds - 1} of the time outside the objective per call (200 calls, the "
             "default search, in-memory store), the variants interleaved. Goal: at most 5 ms per candidate for the "
             "default strategy. The screened search re-checks its candidates (the generation's offspring, the "
             "best configs' neighbours) at every pick, most of them checked before.")
    write("constraint", {"budget": BUDGET, "seeds": args.seeds, "ms_per_call": samples},
          "A catalog's constraint per candidate: verdicts cached per genome, and not", table, notes, out=args.out)


if __name__ == "__main__":
    main()
