"""The default search against named variants of it on the real-compiler tables, paired by seed: mean calls to the
optimum per table and space, their sums, and how sure the difference is.

    python bench/bench_variants.py --variant twin65=HILL_TWIN=0.65 --variant pool6=pool_size=6
    python bench/bench_variants.py --variant g=gamma=0.2,local=0.3 --half held-out --seeds 60 --seed0 400

A variant is ``NAME=SETTING[,SETTING...]``, each setting ``KEY=VALUE`` (a number, true/false, or text): a class
attribute of ``DensityScreen``, ``HillPicks``, ``TwinModel`` or ``AdditiveModel`` (upper case, e.g. ``HILL_TWIN``) or
of ``PymooStrategy`` (e.g. ``part_candidates``), an argument of ``DensityScreen`` (``gamma``, ``local``, ...) or a
field of ``SearchConfiguration`` (``pool_size``, ``model``, ...), or ``workers`` (evaluation slots of ``start()``,
threads; an asynchronous run with several is not reproducible call for call). Every variant runs on the same seeds as
the default, so seed-to-seed noise cancels in part; the interval is a paired bootstrap over the seeds (each resample
draws seeds and uses them for every table, space and variant). One-objective tables only.

This is the bench to choose a default with: on the tune half (split.json), then once on the held-out half. At 60 seeds
the sum of the tune half's plain-space means moved by 9 calls between two blocks of seeds (seeds 400-459: 60.1,
460-519: 69.0), as much as most variants moved it: a variant's verdict is only as good as its interval.
"""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import json
import logging
import os
import time
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import numpy as np
from _common import markdown_table, write
from bench_peers import TABLES, half_of, lab, metrics, objectives_of, table_problem

from compileiq_lab.search import screen as screen_module
from compileiq_lab.search.additive import AdditiveModel
from compileiq_lab.search.config import SearchConfiguration
from compileiq_lab.search.evolutionary import PymooStrategy
from compileiq_lab.search.hill import HillPicks
from compileiq_lab.search.screen import DensityScreen
from compileiq_lab.search.twins import TwinModel

BUDGET = 200
#: The classes whose upper-case constants a variant may set, by name.
CONSTANT_OWNERS: dict[str, type] = {c.__name__: c for c in (DensityScreen, HillPicks, TwinModel, AdditiveModel)}
WAYS = ("catalog", "plain")
Settings = dict[str, dict[str, Any]]  # "class" (name -> attribute values), "screen", "config", "start"


def parse_value(text: str) -> Any:
    """A setting's value: a number, true/false/none, or the text itself (quoted, ``'none'``, it stays text)."""
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    low = text.strip().lower()
    if low in ("true", "false"):
        return low == "true"
    if low == "none":
        return None
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def parse_variant(spec: str) -> tuple[str, Settings]:
    """``NAME=KEY=VALUE[,KEY=VALUE...]`` as (name, settings sorted by where each key goes)."""
    name, sep, body = spec.partition("=")
    if not sep or not name or not body:
        raise SystemExit(f"--variant: must read NAME=KEY=VALUE[,KEY=VALUE...], but got {spec!r}; e.g. "
                         f"--variant twin65=HILL_TWIN=0.65")
    screen_args = set(inspect.signature(DensityScreen.__init__).parameters) - {"self", "space", "n_objectives", "seed"}
    fields = {f.name for f in dataclasses.fields(SearchConfiguration)}
    out: Settings = {"class": {}, "screen": {}, "config": {}, "start": {}}
    for item in body.split(","):
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep:
            raise SystemExit(f"--variant {name}: each setting must read KEY=VALUE, but got {item!r}")
        owners = [c.__name__ for c in CONSTANT_OWNERS.values() if hasattr(c, key)]
        if key.isupper() and owners:
            owner = owners[0]
            out["class"][f"{owner}.{key}"] = parse_value(value)
        elif not key.startswith("_") and key in vars(PymooStrategy):
            out["class"][f"PymooStrategy.{key}"] = parse_value(value)
        elif key in screen_args:
            out["screen"][key] = parse_value(value)
        elif key in fields:
            out["config"][key] = parse_value(value)
        elif key == "workers":
            out["start"][key] = parse_value(value)
        else:
            raise SystemExit(f"--variant {name}: {key!r} is neither a constant of {', '.join(CONSTANT_OWNERS)}, nor a "
                             f"PymooStrategy attribute (e.g. part_candidates), nor a DensityScreen argument "
                             f"({', '.join(sorted(screen_args))}), nor a SearchConfiguration field, nor workers; use "
                             f"one of those names")
    return name, out


def apply(settings: Settings) -> None:
    """Make this process's default search the variant (class attributes set, the screen's arguments defaulted)."""
    for dotted, value in settings["class"].items():
        owner, attr = dotted.split(".")
        setattr({**CONSTANT_OWNERS, "PymooStrategy": PymooStrategy}[owner], attr, value)
    if settings["screen"]:
        given = dict(settings["screen"])

        class Variant(DensityScreen):
            def __init__(self, *args: Any, **kwargs: Any) -> None:
                super().__init__(*args, **{**given, **kwargs})

        screen_module.DensityScreen = Variant  # type: ignore[misc]  # the engine imports it from there per run


def cell(args: tuple[str, str, Settings, list[int]]) -> list[float]:
    """Calls to the optimum of one table and space under one variant, per seed (a fresh process per cell, so that a
    variant's settings never reach another's)."""
    name, way, settings, seeds = args
    logging.getLogger("compileiq_lab").setLevel(logging.ERROR)
    apply(settings)
    p = table_problem(name, way)
    start = settings.get("start", {})
    return [float(metrics(p, lab(p, s, BUDGET, **start, **settings["config"])[0], BUDGET)["calls_to_best"])
            for s in seeds]


def paired_interval(variant: np.ndarray, base: np.ndarray, level: float = 0.9, n: int = 2000) -> tuple[float, float]:
    """A paired bootstrap interval of sum(mean variant) / sum(mean base); both arrays are (tables, seeds), each
    resample draws seeds once for every table and both."""
    rng = np.random.default_rng(0)
    idx = rng.integers(0, base.shape[1], (n, base.shape[1]))
    ratio = variant[:, idx].mean(axis=2).sum(axis=0) / base[:, idx].mean(axis=2).sum(axis=0)
    lo, hi = np.quantile(ratio, [(1 - level) / 2, (1 + level) / 2])
    return float(lo), float(hi)


def verdict(lo: float, hi: float) -> str:
    """Fewer or more calls than the default where the interval says so, else noise."""
    return "fewer calls" if hi < 1 else "more calls" if lo > 1 else "noise"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--variant", action="append", default=[], help="NAME=KEY=VALUE[,KEY=VALUE...] (repeatable)")
    ap.add_argument("--half", choices=("tune", "held-out"), default="tune")
    ap.add_argument("--seeds", type=int, default=120)
    ap.add_argument("--seed0", type=int, default=400, help="first seed (bench_peers.py reports seeds 0-59)")
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--out", default="variants", help="results name under bench/results/ (or a path)")
    args = ap.parse_args()
    variants = dict([("default", {"class": {}, "screen": {}, "config": {}, "start": {}}),
                      *map(parse_variant, args.variant)])
    split = json.loads((TABLES / "split.json").read_text())
    tables = [n for n, k in objectives_of([*split["tune"], *split["held_out"]]).items()
              if k == 1 and half_of(n, split) == args.half]
    seeds = list(range(args.seed0, args.seed0 + args.seeds))
    jobs = [(v, n, w, s) for v, s in variants.items() for n in tables for w in WAYS]
    t0 = time.time()
    with ProcessPoolExecutor(args.workers, max_tasks_per_child=1) as ex:
        calls = list(ex.map(cell, [(n, w, s, seeds) for _, n, w, s in jobs]))
    by = {(v, n, w): np.array(c) for (v, n, w, _), c in zip(jobs, calls)}
    rows: list[list[Any]] = []
    for w in WAYS:
        base = np.array([by[("default", n, w)] for n in tables])
        for v in variants:
            m = np.array([by[(v, n, w)] for n in tables])
            lo, hi = paired_interval(m, base)
            means = m.mean(axis=1)
            reached = f"{int((m <= BUDGET).sum())}/{m.size}"
            rows.append([v, w, *[float(x) for x in means], float(means.sum()),
                         float(means.sum() / base.mean(axis=1).sum()),
                         "" if v == "default" else f"{lo:.2f}-{hi:.2f}", "" if v == "default" else verdict(lo, hi),
                         reached])
    header = ["variant", "space", *tables, "sum", "sum / default's", "90 % interval", "verdict", "reached"]
    notes = (f"{args.half} half, seeds {seeds[0]}-{seeds[-1]}, budget {BUDGET} calls (a miss counts as {BUDGET + 1}); "
             "mean calls to the optimum per table. The interval is a paired bootstrap over the seeds of the ratio of "
             "sums; \"noise\" where it holds 1. Variants: "
             + "; ".join(f"`{v}` {json.dumps(s)}" for v, s in variants.items() if v != "default")
             + f". {time.time() - t0:.0f} s.")
    write(args.out, {"half": args.half, "seeds": seeds, "budget": BUDGET, "variants": variants,
                     "cells": [{"variant": v, "table": n, "way": w, "calls": c.tolist()}
                               for (v, n, w), c in by.items()]},
          "The default search against variants of it", markdown_table(header, rows), notes)


if __name__ == "__main__":
    main()
