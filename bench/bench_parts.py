"""What picking a generation one candidate at a time costs per candidate, against picking it whole, side by side.

    python bench/bench_parts.py                  # writes bench/results/parts.{json,md}
    python bench/bench_parts.py --repeats 5

One objective on a 10-control space (six 32-value ranges, four 4-value choices that can be left out), an instant
objective, 1,280 candidates per run, the default search (its offspring screen included) driven through ask/tell:
``ask(1)`` is what ``start()`` asks with one evaluation slot, ``ask()`` a whole generation at once (as with as many
slots as the pool). The variants are interleaved, so machine noise hits each alike.
"""

from __future__ import annotations

import argparse
import logging
import statistics
import time
from typing import Any

from _common import markdown_table, write

import compileiq_lab.space as ss
from compileiq_lab import Search, SearchConfiguration

CALLS = 1280
POOLS = (5, 16, 64)


def space() -> dict[str, Any]:
    """Ten controls: the most a space may have for its generations to be picked one at a time."""
    sp: dict[str, Any] = {f"level{i}": ss.range(0, 31) for i in range(6)}
    sp.update({f"mode{i}": ss.choice(["a", "b", "c", "d"], knockout_prob=0.3) for i in range(4)})
    return sp


def instant(config: dict[str, Any]) -> float:
    return float(sum(v for k, v in config.items() if k.startswith("level")))


def run(pool: int, part: int | None) -> float:
    """ms per candidate of one run of CALLS candidates, asked ``part`` at a time (None: whole generations)."""
    s = Search(None, space(), SearchConfiguration(generations=CALLS // pool + 1, pool_size=pool, seed=0),
               store=":memory:")
    n, t0 = 0, time.perf_counter()
    while n < CALLS and (batch := s.ask(n=part)):
        s.tell(batch, [instant(c.config) for c in batch])
        n += len(batch)
    return (time.perf_counter() - t0) / n * 1e3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    logging.getLogger("compileiq_lab").setLevel(logging.ERROR)  # the space has no baseline: said once per run
    samples: dict[str, list[float]] = {}
    run(5, 1)  # warm imports
    for _ in range(args.repeats):
        for pool in POOLS:
            for label, part in (("one at a time", 1), ("whole", None)):
                samples.setdefault(f"{pool}|{label}", []).append(run(pool, part))
    rows = []
    for pool in POOLS:
        one, whole = (statistics.median(samples[f"{pool}|{k}"]) for k in ("one at a time", "whole"))
        rows.append([pool, one, whole, one / whole])
    table = markdown_table(["pool", "ms/cand, one at a time (start() with one slot)", "ms/cand, whole generation",
                            "ratio"], rows)
    notes = (f"Median of {args.repeats} interleaved runs of {CALLS} candidates each (instant objective, in-memory "
             "store, the default search with its offspring screen). Goal: at most 5 ms per candidate for the "
             "default strategy. Each pick of a generation asked in parts scores at most 64 of the generation's "
             "candidates and 64 fresh neighbours of the best, so the cost does not grow with the pool.")
    write("parts", {"calls": CALLS, "pools": list(POOLS), "ms_per_candidate": samples},
          "Picking a generation one at a time: cost per candidate", table, notes)


if __name__ == "__main__":
    main()
