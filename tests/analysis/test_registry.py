"""Earlier runs by kernel and architecture: finding them, warm starts from their fronts (same arch first)."""

from __future__ import annotations

import time

import compileiq_lab.space as ss
from compileiq_lab import Search, SearchConfiguration
from compileiq_lab.analysis.registry import compare_fronts, find_runs, warm_start_configs


def objective(c):
    x, y = c.get("x", 0), c.get("y", 0)
    return float(x), float(9 - x + y)


def tune_run(path, arch, kernel="k", catalog="ptxas", offset=0, warm=None, **extra):
    space = {"x": ss.range(0, 9), "y": ss.range(0, 4)}
    cfg = SearchConfiguration(generations=2, pool_size=6, seed=offset, num_objectives=2,
                              objective_names=["runtime", "energy"], warm_start=warm)
    meta = {"kernel": kernel, "catalog": catalog, "arch": arch, "objectives": ["runtime", "energy"],
            "toolchain": {"nvcc": "13.0"}, "source_sha256": "ab" * 32, **extra}
    res = Search(objective, space, cfg, store=str(path), metadata=meta).start()
    time.sleep(0.01)  # distinct creation times
    return res


def test_runs_are_found_by_kernel_and_arch_and_warm_starts_prefer_the_same_arch(tmp_path):
    a80 = tune_run(tmp_path / "a.db", "sm_80")
    a90 = tune_run(tmp_path / "b.db", "sm_90", offset=1)
    tune_run(tmp_path / "other.db", "sm_90", kernel="other")
    tune_run(tmp_path / "gcc.db", "sm_90", catalog="gcc")
    (tmp_path / "junk.db").write_text("not a store")
    runs = find_runs(tmp_path, kernel="k")
    assert {r.path.rsplit("/", 1)[1] for r in runs} == {"a.db", "b.db", "gcc.db"}
    assert [r.arch for r in find_runs(tmp_path, kernel="k", arch="sm_80")] == ["sm_80"]
    configs, sources = warm_start_configs("k", "sm_80", "ptxas", tmp_path, limit=50)
    assert sources[0].endswith("a.db") and sources[1:] == [str(tmp_path / "b.db")]
    front80 = [r["params"] for r in a80.pareto_front() if r["params"]]
    assert configs[: len(front80)] == front80  # the same architecture's front comes first
    front90 = {repr(sorted(r["params"].items())) for r in a90.pareto_front() if r["params"]}
    assert {repr(sorted(c.items())) for c in configs[len(front80):]} <= front90
    assert warm_start_configs("k", "sm_90", "nvcc", tmp_path) == ([], [])


def test_a_warm_started_run_begins_with_the_earlier_front(tmp_path):
    first = tune_run(tmp_path / "a.db", "sm_80")
    configs, _ = warm_start_configs("k", "sm_90", "ptxas", tmp_path)
    second = tune_run(tmp_path / "b.db", "sm_90", offset=7, warm=configs)
    gen1 = [r.params for r in second.records if r.generation == 1]
    assert gen1[: len(configs)] == configs[:6]
    table = compare_fronts("k", tmp_path)
    assert set(table["arch"]) == {"sm_80", "sm_90"} and {"runtime", "energy", "params"} <= set(table.columns)
    assert len(table[table["arch"] == "sm_80"]) == len(first.pareto_front())


def test_warm_start_matches_source_entry_and_build_context(tmp_path):
    tune_run(tmp_path / "k4.db", "sm_90", entry="kernel4")
    tune_run(tmp_path / "inc.db", "sm_90", entry="kernel3", build={"include_dirs": ["/x"], "defines": {}, "args": []})
    tune_run(tmp_path / "old.db", "sm_90", entry="kernel3", source_sha256="cd" * 32)
    # another entry of the same file, another build context or another source version is another problem
    assert warm_start_configs("k", "sm_90", "ptxas", tmp_path, source_sha256="ab" * 32, entry="kernel3") == ([], [])
    _, used = warm_start_configs("k", "sm_90", "ptxas", tmp_path, source_sha256="ab" * 32, entry="kernel4")
    assert [u.rsplit("/", 1)[1] for u in used] == ["k4.db"]
    _, used = warm_start_configs("k", "sm_90", "ptxas", tmp_path, source_sha256="ab" * 32, entry="kernel3",
                                 build={"include_dirs": ["/x"], "defines": {}, "args": []})
    assert [u.rsplit("/", 1)[1] for u in used] == ["inc.db"]


def test_warm_start_finds_a_run_of_a_copied_tree_by_its_headers_digest(tmp_path):
    """Include folders count as the run's setup does: not where the headers' digest is recorded."""
    tune_run(tmp_path / "there.db", "sm_90", entry="kernel3", headers_sha256="d" * 64,
             build={"include_dirs": ["/old/tree/inc"], "defines": {"N": "4"}, "args": []})
    moved = {"include_dirs": ["/new/tree/inc"], "defines": {"N": "4"}, "args": []}
    _, used = warm_start_configs("k", "sm_90", "ptxas", tmp_path, entry="kernel3", build=moved,
                                 headers_sha256="d" * 64)
    assert [u.rsplit("/", 1)[1] for u in used] == ["there.db"]
    assert warm_start_configs("k", "sm_90", "ptxas", tmp_path, entry="kernel3", build=moved) == ([], [])
    other = {**moved, "defines": {"N": "8"}}
    assert warm_start_configs("k", "sm_90", "ptxas", tmp_path, entry="kernel3", build=other,
                              headers_sha256="d" * 64) == ([], [])
