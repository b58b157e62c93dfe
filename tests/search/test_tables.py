"""Real-compiler tables replayed: rows agree with the compiler, failures raise its message, both ways of searching
a table reach the same rows, the catalog's conflicts are real, and a default search over a table is deterministic."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from compileiq_lab import Search, SearchConfiguration
from compileiq_lab.measure.binary import inspect_elf
from compileiq_lab.measure.nvcc import parse_ptxas_verbose
from compileiq_lab.space.catalogs import get_catalog
from compileiq_lab.testing import tool_available
from compileiq_lab.testing.tables import UNSET_VALUE, Table, TableCompileError, TableObjective, table_best
from compileiq_lab.toolchain.tools import find_tool

ROOT = Path(__file__).resolve().parents[2]
TABLES = ROOT / "bench" / "tables"
CONFLICTING = "matrixmul_ptxas"  # ptxas controls with --Ofast-compile conflicts, on a public 3-kernel file


def _names() -> list[str]:
    return sorted(p.name.removesuffix(".csv.gz") for p in TABLES.glob("*.csv.gz"))


@pytest.fixture(scope="module")
def table() -> Table:
    return Table.load(TABLES / CONFLICTING)


def test_every_table_holds_every_config_of_its_controls_and_its_manifest_figures():
    names = _names()
    assert len(names) >= 8
    split = json.loads((TABLES / "split.json").read_text())
    assert sorted(split["tune"] + split["held_out"]) == names
    assert not set(split["tune"]) & set(split["held_out"])
    for name in names:
        t = Table.load(TABLES / name)
        sizes = [p.n_values + p.can_knockout for p in t.controls.values()]
        assert t.size == int(np.prod(sizes)) == t.manifest["configs"], name
        best = table_best(list(t.rows.values()), t.objectives)
        assert best["front"] == t.manifest["front"] and best["holders"] == t.manifest["holders"], name


def test_a_failed_compile_raises_the_compilers_message(table: Table):
    obj = TableObjective(table)
    failed = next(k for k, r in table.rows.items() if r["status"] != "ok")
    config = {n: json.loads(v) for n, v in zip(table.controls, failed) if v}
    with pytest.raises(TableCompileError, match="ptxas.*Conflicting options"):
        obj(config)
    assert obj.calls == 1 and obj.history == [failed]


def test_the_plain_and_the_catalog_space_reach_the_same_rows(table: Table):
    plain = table.plain_space()
    assert all(UNSET_VALUE in p.values for p in plain.values())
    obj = TableObjective(table)
    for combo in itertools.islice(itertools.product(*(p.values for p in plain.values())), 0, None, 37):
        config = dict(zip(plain, combo))
        catalog_config = {n: v for n, v in config.items() if v != UNSET_VALUE}
        assert obj.row(config) is obj.row(catalog_config)


def test_configs_outside_the_table_are_refused_with_the_reason(table: Table):
    obj = TableObjective(table)
    with pytest.raises(KeyError, match="no controls"):
        obj({"not_a_control": 1})
    with pytest.raises(KeyError, match="enumerated values"):
        obj({"opt_level": 7})
    with pytest.raises(ValueError, match=r"objectives must be metrics of the table .* but got \['runtime'\]; its "
                                         r"metrics: \['sass_instructions', 'registers'"):
        TableObjective(table, ["runtime"])
    with pytest.raises(ValueError, match=r"one or more, each once, but got \[\]"):
        TableObjective(table, [])  # not the table's own, silently
    with pytest.raises(ValueError, match=r"each once, but got \['registers', 'registers'\]"):
        TableObjective(table, ["registers", "registers"])
    with pytest.raises(ValueError, match=r"but got the str 'registers'; pass \['registers'\]"):
        TableObjective(table, "registers")  # type: ignore[arg-type]


def test_a_table_made_elsewhere_replays_its_own_metrics_without_a_catalog(tmp_path: Path):
    # a hand-made table of a compiler no catalog has: a runtime and a compile time per config, one config rejected
    import csv
    import gzip

    from compileiq_lab import space as ss

    controls = {"unroll": ss.choice([1, 2, 4], knockout_prob=0.5), "mode": ss.choice(["fast", "safe"])}
    rows = []
    for unroll, mode in itertools.product(["", "1", "2.0", "4"], ['"fast"', "safe"]):  # as written by hand
        bad = unroll == "4" and mode == '"fast"'
        runtime = "" if bad else str(10.0 - (int(float(unroll or 1)) * (2 if mode == '"fast"' else 1)))
        rows.append({"unroll": unroll, "mode": mode, "status": "compile_error" if bad else "ok",
                     "message": "cc: unroll 4 conflicts with fast" if bad else "", "runtime_ms": runtime,
                     "compile_s": "" if bad else "0.5", "note": "n/a"})

    def write(name: str, rows: list[dict[str, str]]) -> Path:
        with gzip.open(tmp_path / f"{name}.csv.gz", "wt", newline="") as fh:
            writer = csv.DictWriter(fh, list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
        (tmp_path / f"{name}.json").write_text(json.dumps({"controls": {n: p.to_spec() for n, p in controls.items()},
                                                           "objectives": ["runtime_ms"]}))
        return tmp_path / name

    t = Table.load(write("mine", rows))
    assert t.catalog is None and t.metrics == ["runtime_ms", "compile_s"] and t.size == 8
    obj = TableObjective(t)
    assert obj({"unroll": 2, "mode": "fast"}) == 6.0 and obj({"mode": "safe"}) == 9.0  # absent: the default
    assert TableObjective(t, ["runtime_ms", "compile_s"])({"unroll": 1, "mode": "fast"}) == (8.0, 0.5)
    with pytest.raises(TableCompileError, match="unroll 4 conflicts with fast"):
        obj({"unroll": 4, "mode": "fast"})
    assert t.constraint({"unroll": 4, "mode": "fast"}) is None  # no catalog: no known conflicts
    assert t.best()["best"] == [6.0] and t.best()["holders"] == 2  # unroll 2 fast, unroll 4 safe
    with pytest.raises(ValueError, match=r"but got \['note'\]"):  # text is no metric
        TableObjective(t, ["note"])
    with pytest.raises(ValueError, match=r"control column 'unroll' must be one of its values \[1, 2, 4\] as JSON, "
                                         r"or empty for unset, but got '8'"):
        Table.load(write("typo", [{**rows[0], "unroll": "8"}, *rows[1:]]))
    res = Search(obj, t.plain_space(), SearchConfiguration(generations=6, seed=1), store=":memory:").start()
    assert res.best_record(0) is not None and res.best_record(0).scores == [6.0]


def test_a_table_made_elsewhere_may_be_an_uncompressed_csv_without_messages(tmp_path: Path):
    # the least a table needs: a column per control, a status, a metric; a failure without a message raises its status
    from compileiq_lab import space as ss

    (tmp_path / "flat.json").write_text(json.dumps({"controls": {"o": ss.choice([1, 2, 3]).to_spec()},
                                                    "objectives": ["t"]}))
    (tmp_path / "flat.csv").write_text("o,status,t\n1,ok,3.5\n2,ok,2.5\n3,timeout,\n")
    t = Table.load(tmp_path / "flat.csv")
    assert t.size == 3 and t.metrics == ["t"] and t.best()["best"] == [2.5]
    obj = TableObjective(t)
    assert obj({"o": 2}) == 2.5
    with pytest.raises(TableCompileError, match="^timeout$"):
        obj({"o": 3})
    (tmp_path / "bare.json").write_text((tmp_path / "flat.json").read_text())
    (tmp_path / "bare.csv").write_text("o,t\n1,3.5\n")
    with pytest.raises(ValueError, match=r"must have a column per control and a status column .* lacks \['status'\]"):
        Table.load(tmp_path / "bare")
    with pytest.raises(FileNotFoundError, match=r"none.csv.gz \(or none.csv\)"):
        Table.load(tmp_path / "none")


def test_every_conflict_the_catalog_knows_is_a_config_ptxas_rejected(table: Table):
    rejected = [k for k in table.rows if table.constraint(_config(table, k)) is not None]
    assert rejected, "the conflicting control set hits the catalog's conflicts"
    assert all(table.rows[k]["status"] == "compile_error" for k in rejected)
    failed = sum(r["status"] != "ok" for r in table.rows.values())
    assert len(rejected) == failed  # and on this table they are all of its rejections


def _config(table: Table, key: tuple[str, ...]) -> dict[str, object]:
    return {n: json.loads(v) for n, v in zip(table.controls, key) if v}


@pytest.mark.skipif(not tool_available("ptxas") or not tool_available("nvcc"), reason="needs nvcc and ptxas")
def test_rows_agree_with_the_compiler(table: Table, tmp_path: Path):
    src = ROOT / table.manifest["source"]
    ptx = tmp_path / "k.ptx"
    subprocess.run([find_tool("nvcc"), "-arch=sm_90", "-ptx", src.name, "-o", str(ptx)], cwd=src.parent, check=True)
    rng = np.random.default_rng(0)
    keys = list(table.rows)
    picked = [tuple("" for _ in table.controls)] + [keys[i] for i in rng.choice(len(keys), 4, replace=False)]
    catalog = get_catalog(table.catalog).select(list(table.controls))
    for key in picked:
        row = table.rows[key]
        out = tmp_path / "k.cubin"
        res = subprocess.run([find_tool("ptxas"), "-arch=sm_90", "-v", *catalog.argv(_config(table, key)), str(ptx),
                              "-o", str(out)], capture_output=True, text=True)
        assert (res.returncode == 0) == (row["status"] == "ok"), (key, res.stderr[-300:])
        if res.returncode == 0:
            assert inspect_elf(out).sass_instructions == row["sass_instructions"]
            assert parse_ptxas_verbose(res.stdout + res.stderr)["registers"] == row["registers"]


@pytest.mark.parametrize("way", ["catalog", "plain"])
def test_a_default_search_over_a_table_is_deterministic_and_counts_its_failures(table: Table, way: str):
    def run() -> tuple[list[tuple[str, ...]], int]:
        obj = TableObjective(table)
        space = table.catalog_space() if way == "catalog" else table.plain_space()
        res = Search(obj, space, SearchConfiguration(generations=6, seed=2), store=":memory:",
                     constraint=table.constraint if way == "catalog" else None).start()
        df = res.get_results()
        assert len(df) == obj.calls
        return obj.history, int((df["status"] != "ok").sum())
    (a, fa), (b, fb) = run(), run()
    assert a == b and fa == fb
    assert len(set(a)) == len(a)
    if way == "catalog":  # the known conflicts are never asked
        assert all(table.constraint(_config(table, k)) is None for k in a)


def _bench_peers():  # the peers bench (bench/bench_peers.py), imported as `make bench-peers` runs it
    import sys

    sys.path.insert(0, str(ROOT / "bench"))
    import bench_peers

    return bench_peers


def test_the_peers_bench_counts_calls_to_the_front_repeats_and_failures():
    bp = _bench_peers()
    p = bp.Problem("t", "plain", {}, lambda c: None, lambda c: (), 2, np.array([[1.0, 3.0], [2.0, 1.0]]),
                   np.array([5.0, 5.0]))
    trace = [(("a",), (2.0, 1.0)), (("b",), None), (("a",), (2.0, 1.0)), (("c",), (3.0, 3.0)), (("d",), (1.0, 3.0))]
    m = bp.metrics(p, trace, 200)
    assert (m["calls_to_best"], m["repeats"], m["infeasible"]) == (5, 1, 1)  # the whole front once the 5th call
    assert m["hv@50"] == pytest.approx(1.0)


def test_the_peers_bench_runs_on_a_table_made_elsewhere_outside_the_split(tmp_path: Path):
    import shutil

    bp = _bench_peers()
    for suffix in (".json", ".csv.gz"):
        shutil.copy(TABLES / f"{CONFLICTING}{suffix}", tmp_path / f"mine{suffix}")
    split = json.loads((TABLES / "split.json").read_text())
    assert [bp.half_of(n, split) for n in (CONFLICTING, "llmc_softmax_nvcc", "toy", str(tmp_path / "mine"))] == \
        ["tune", "held-out", "toy", "outside"]
    p = bp.table_problem(str(tmp_path / "mine"), "plain")  # a path, as --tables takes one
    trace, _ = bp.lab(p, 0, 40)
    assert any(v is None for _, v in trace) and bp.metrics(p, trace, 40)["infeasible"] >= 1


@pytest.mark.parametrize("method", ["random", "lab"])
def test_the_peers_bench_runs_a_method_over_seeds_on_a_table(method: str):
    bp = _bench_peers()
    cell = bp.run_cell((CONFLICTING, "catalog" if method == "lab" else "plain", method, [0, 1], 60))
    assert [s["seed"] for s in cell["seeds"]] == [0, 1]
    for s in cell["seeds"]:
        assert s["calls"] == 60 and s["repeats"] == 0
        assert 1 <= s["calls_to_best"] <= 61
    if method == "lab":  # the catalog's conflicts are its constraints, and they are all this table's rejections
        assert all(s["infeasible"] == 0 for s in cell["seeds"])
    else:
        assert sum(s["infeasible"] for s in cell["seeds"]) > 0


def test_the_peers_bench_reports_each_goal_with_its_interval():
    bp = _bench_peers()

    def cell(way: str, method: str, calls: list[int]) -> dict:
        return {"table": "t", "way": way, "method": method, "per_seed": [{"calls_to_best": c} for c in calls]}
    data = [cell("plain", "optuna_tpe", [30, 30, 30, 30]), cell("plain", "lab", [10, 10, 10, 10]),
            cell("catalog", "lab", [20, 24, 28, 201])]  # one run in four missed the optimum
    text = bp.goal_notes(data, {"t": 1, "m": 2})
    rows = {line.split(" | ")[1]: line for line in text.splitlines() if line.startswith("| t |")}
    assert "| 0.33 | 0.33-0.33 | met |" in rows["plain"]  # no spread, no noise
    catalog = rows["catalog"]
    assert "| 68.2 | 30.0 | 2.27 |" in catalog and "**not met**" in catalog and "75% **short**" in catalog
    assert "catalog space 0 of 1, plain space 1 of 1" in text
    lo, hi = bp.ratio_interval(np.array([10.0, 20.0, 30.0]), np.array([20.0, 20.0, 20.0]))
    assert 0.5 <= lo < 1.0 < hi <= 1.5  # the ratio of means is 1; resampled, it spreads both ways


def _bench_variants():  # the variants bench (bench/bench_variants.py), imported as it runs
    _bench_peers()
    import bench_variants

    return bench_variants


def test_the_variants_bench_sends_each_setting_where_it_belongs_and_names_the_rule_for_a_bad_one():
    bv = _bench_variants()
    name, s = bv.parse_variant("v=HILL_TWIN=0.65,MOVE_STRENGTH=2,part_candidates=32,gamma=0.2,pool_size=6,"
                               "model='none',workers=4")
    assert name == "v"
    assert s == {"class": {"HillPicks.HILL_TWIN": 0.65, "TwinModel.MOVE_STRENGTH": 2,
                           "PymooStrategy.part_candidates": 32},
                 "screen": {"gamma": 0.2}, "config": {"pool_size": 6, "model": "none"}, "start": {"workers": 4}}
    from compileiq_lab.search.evolutionary import GAStrategy, PymooStrategy

    before = PymooStrategy.part_candidates
    try:  # applied where the search reads it: the GA the engine builds inherits it
        bv.apply({"class": {"PymooStrategy.part_candidates": 32}, "screen": {}, "config": {}})
        assert GAStrategy.part_candidates == 32
    finally:
        PymooStrategy.part_candidates = before
    with pytest.raises(SystemExit, match="neither a constant of DensityScreen, HillPicks, TwinModel, AdditiveModel"):
        bv.parse_variant("v=frobnicate=1")
    with pytest.raises(SystemExit, match="must read NAME=KEY=VALUE"):
        bv.parse_variant("v")
    with pytest.raises(SystemExit, match="KEY=VALUE, but got 'gamma'"):
        bv.parse_variant("v=gamma")


def test_the_variants_bench_interval_is_paired_by_seed():
    bv = _bench_variants()
    base = np.array([[10.0, 30.0, 50.0], [20.0, 20.0, 80.0]])  # tables x seeds, a wide spread over the seeds
    assert bv.paired_interval(base, base) == (1.0, 1.0)
    lo, hi = bv.paired_interval(base * 0.8, base)  # 20 % fewer calls on every seed: no noise left, paired
    assert lo == pytest.approx(0.8) and hi == pytest.approx(0.8) and bv.verdict(lo, hi) == "fewer calls"
    assert bv.verdict(0.9, 1.1) == "noise" and bv.verdict(1.05, 1.2) == "more calls"


def test_the_variants_bench_runs_a_variant_on_the_default_seeds(tmp_path):
    out = tmp_path / "v"
    subprocess.run([sys.executable, str(ROOT / "bench" / "bench_variants.py"), "--variant", "off=HILL_MAX_CONTROLS=0",
                    "--seeds", "2", "--seed0", "7", "--workers", "2", "--out", str(out)], check=True,
                   capture_output=True, cwd=ROOT)
    data = json.loads(out.with_suffix(".json").read_text())
    assert data["seeds"] == [7, 8] and data["variants"]["off"]["class"] == {"DensityScreen.HILL_MAX_CONTROLS": 0}
    calls = {(c["variant"], c["table"], c["way"]): c["calls"] for c in data["cells"]}
    tables = ROOT / "bench" / "tables"
    tune = json.loads((tables / "split.json").read_text())["tune"]
    single = [n for n in tune if len(json.loads((tables / f"{n}.json").read_text())["objectives"]) == 1]
    assert {(v, n, w) for v in ("default", "off") for n in single for w in ("catalog", "plain")} == set(calls)
    assert all(len(c) == 2 and all(1 <= x <= 201 for x in c) for c in calls.values())
    # the variant is another search (no neighbours of the best): some run takes another number of calls
    assert any(calls[("off", n, w)] != calls[("default", n, w)] for n in single for w in ("catalog", "plain"))
    md = out.with_suffix(".md").read_text()
    assert "| off | plain |" in md and "| default | catalog |" in md and "paired bootstrap" in md


def _make_tables():  # the tables' maker (bench/make_tables.py), imported as it runs
    _bench_peers()
    import make_tables

    return make_tables


@pytest.mark.skipif(not tool_available("ptxas") or not tool_available("nvcc"), reason="needs nvcc and ptxas")
def test_a_table_remade_elsewhere_holds_the_committed_rows_of_its_configs(tmp_path: Path):
    import dataclasses

    mt = _make_tables()
    spec = next(s for s in mt.SPECS if s.name == CONFLICTING)
    keep = ["opt_level", "fast_compile"]  # 20 configs, 9 of them in a conflict ptxas names
    small = dataclasses.replace(spec, name="remade", controls={n: spec.controls[n] for n in keep})
    manifest = mt.make_table(small, 2, out=tmp_path)
    mt.write_readme(tmp_path)
    assert manifest["configs"] == 5 * 4 and "`remade`" in (tmp_path / "README.md").read_text()
    assert not (TABLES / "remade.json").exists() and not (TABLES / "remade.csv.gz").exists()
    remade, committed = Table.load(tmp_path / "remade"), Table.load(TABLES / CONFLICTING)
    others = ("",) * (len(committed.controls) - len(keep))
    assert remade.controls.keys() == set(keep) and len(remade.rows) == manifest["configs"]
    assert manifest["failed"] == 9
    for key, row in remade.rows.items():
        full = dict(zip(keep, key)) | dict(zip([n for n in committed.controls if n not in keep], others))
        old = committed.rows[tuple(full[n] for n in committed.controls)]
        assert (row["status"], row.get("sass_instructions"), row.get("registers")) == \
            (old["status"], old.get("sass_instructions"), old.get("registers")), key


def test_the_tables_maker_deals_the_split_only_into_bench_tables(tmp_path: Path):
    mt = _make_tables()
    with pytest.raises(SystemExit) as stop:
        mt.main(["--split", "--out", str(tmp_path)])
    assert stop.value.code == 2 and not list(tmp_path.iterdir())
