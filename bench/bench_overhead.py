"""Framework cost per candidate with an instant objective (pool 64, 20 generations), side by side; with ``--curve``,
also how it changes with the run's length (1,000 to 100,000 calls)."""

from __future__ import annotations

import argparse
import logging
import statistics
import tempfile
import time
import zlib
from pathlib import Path
from typing import Any

import numpy as np
from _common import markdown_table, write

import compileiq_lab.space as ss
from compileiq_lab import Search, SearchConfiguration
from compileiq_lab.run.build import build_strategy
from compileiq_lab.space import SearchSpace
from compileiq_lab.space.space import config_key

#: Run lengths of the curve (objective calls); each is measured max(1, CURVE_CALLS // n) times (at most 5). 3,000 is
#: past the warm-up: the screen seeks twins among the last 512 evaluations and fits its model on the last 2,000.
CURVE_SIZES = (1_000, 3_000, 10_000, 100_000)
CURVE_CALLS = 20_000


def flag_space() -> dict[str, Any]:
    """A compiler-like space big enough that 1,280 candidates never exhaust it."""
    sp: dict[str, Any] = {f"level{i}": ss.range(0, 31) for i in range(6)}
    sp.update({f"mode{i}": ss.choice(["a", "b", "c", "d"], knockout_prob=0.3) for i in range(4)})
    sp.update({f"flag{i}": ss.flag(f"-f{i}") for i in range(6)})
    return sp


def instant(config: dict[str, Any]) -> float:
    return float(sum(v for k, v in config.items() if k.startswith("level")))


def noise(config: dict[str, Any]) -> float:
    """A score the GA cannot converge on (a hash of the config): its pool keeps finding unseen offspring at once."""
    return float(zlib.crc32(config_key(config).encode()))


def run_search(store: str | None, tmp: Path, i: int, **extra: Any) -> tuple[float, int]:
    cfg = SearchConfiguration(generations=20, pool_size=64, **extra)
    path = store if store is not None else str(tmp / f"run{i}.db")
    t0 = time.perf_counter()
    res = Search(instant, flag_space(), cfg, store=path).start()
    return time.perf_counter() - t0, len(res)


def bare_strategy(calls: int = 1280, objective: Any = instant) -> tuple[float, int]:
    """The strategy alone, as a run's engine builds it with the default settings (its offspring screen included),
    asking what a run of ``calls`` candidates asks (the same seed and scores)."""
    space = SearchSpace(flag_space())
    s = build_strategy(space, SearchConfiguration(generations=1, pool_size=64, seed=0), None)
    n, t0 = 0, time.perf_counter()
    while n < calls:
        X = s.ask()[: calls - n]
        F = np.array([[objective(space.decode(x))] for x in X])
        n += len(X)
        if n < calls:
            s.tell(F, np.ones(len(X), dtype=bool))
    return time.perf_counter() - t0, n


def curve_run(objective: Any, store: str, calls: int) -> tuple[float, int]:
    """One run of exactly ``calls`` objective calls (``max_evaluations``; the flag space has no baseline row)."""
    cfg = SearchConfiguration(generations=calls // 64 + 2, pool_size=64, max_evaluations=calls)
    t0 = time.perf_counter()
    res = Search(objective, flag_space(), cfg, store=store).start()
    dt = time.perf_counter() - t0
    assert len(res) == calls and res.header.stop_reason == "max_evaluations", (len(res), res.header.stop_reason)
    return dt, len(res)


def curve(sizes: tuple[int, ...], tmp: Path) -> tuple[dict[str, Any], list[list[Any]]]:
    """ms per candidate at each run length: the run (SQLite file and memory store), the strategy alone, and the
    framework's share (run minus strategy), for the instant objective and for one the GA cannot converge on."""
    data: dict[str, Any] = {"sizes": list(sizes), "ms_per_candidate": {}}
    rows = []
    for oname, objective in (("instant", instant), ("noise", noise)):
        med: dict[str, list[float]] = {}
        for variant in ("SQLite file store", "in-memory store", "bare strategy"):
            med[variant] = []
            for n in sizes:
                samples = []
                for r in range(min(5, max(1, CURVE_CALLS // n))):
                    if variant == "bare strategy":
                        dt, got = bare_strategy(n, objective)
                    else:
                        store = ":memory:" if variant == "in-memory store" else str(tmp / f"curve-{oname}-{n}-{r}.db")
                        dt, got = curve_run(objective, store, n)
                    samples.append(dt / got * 1e3)
                med[variant].append(statistics.median(samples))
                data["ms_per_candidate"].setdefault(f"{oname}: {variant}", {})[n] = samples
        for store_name in ("SQLite file store", "in-memory store"):
            bare = med["bare strategy"]
            med[f"framework ({store_name} minus strategy)"] = [a - b for a, b in zip(med[store_name], bare)]
        for variant, values in med.items():
            rows.append([f"{oname}: {variant}", *values, values[-1] / values[0]])
    data["median_ms_per_candidate"] = {r[0]: dict(zip(sizes, r[1:-1])) for r in rows}
    return data, rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--curve", action="store_true",
                    help="also measure ms per candidate by run length (--curve-sizes) and the ratio last/first")
    ap.add_argument("--curve-sizes", type=lambda t: tuple(int(x) for x in t.split(",")), default=CURVE_SIZES,
                    metavar="N,N,...", help="the run lengths of --curve (default 1000,3000,10000,100000)")
    args = ap.parse_args()
    logging.getLogger("compileiq_lab").setLevel(logging.ERROR)  # the flag space has no baseline: said once per run
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
        curve_data, curve_rows = curve(args.curve_sizes, tmp) if args.curve else ({}, [])
    ref = statistics.median(samples["default (SQLite file store)"])
    rows = [[name, counts[name], min(v), statistics.median(v), statistics.median(v) / ref]
            for name, v in samples.items()]
    table = markdown_table(["variant", "candidates", "min ms/cand", "median ms/cand", "ratio to default"], rows)
    notes = ("Wall time of `Search(...).start()` divided by the candidates evaluated (baseline included), "
             "imports warmed first; variants interleaved in one run. The default strategy includes its offspring "
             "screen (a model): goal at most 5 ms per candidate with default settings (0.5 ms for a strategy "
             "without a model).")
    if curve_rows:
        sizes = [f"{n:,} calls" for n in args.curve_sizes]
        table += ("\n\n## Cost per candidate by run length (pool 64, 16 controls in 20 genes)\n\n"
                  + markdown_table(["variant", *sizes, "ratio last/first"], curve_rows))
        notes += (" Curve: median ms per candidate of runs of exactly N calls (`max_evaluations=N`; "
                  f"min(5, max(1, {CURVE_CALLS:,} // N)) runs each); `bare strategy` asks the same candidates with "
                  "no store, engine or objective wrapper (built as the engine builds it, its screen included), and "
                  "`framework` is the run minus it. `instant` (the sum of six genes) lets the GA converge, after "
                  "which mating finds ever fewer unseen offspring; `noise` (a hash of the config) does not converge.")
    write("overhead", {"repeats": args.repeats, "ms_per_candidate": samples, "candidates": counts,
                       **({"curve": curve_data} if curve_data else {})},
          "Framework cost per candidate (instant objective, pool 64, 20 generations)", table, notes)


if __name__ == "__main__":
    main()
