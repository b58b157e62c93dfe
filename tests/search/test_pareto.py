"""Exact Pareto front, dominance and hypervolume, and the Results front/best/normalisation."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compileiq_lab.search.pareto import dominates, hypervolume, pareto_mask
from compileiq_lab.store.results import Results
from compileiq_lab.store.sqlite import EvalRecord


def _ref_dominates(a, b) -> bool:
    return all(x <= y for x, y in zip(a, b)) and any(x < y for x, y in zip(a, b))


def _ref_front(rows) -> list[bool]:
    """O(n^2) reference: on the front iff finite and no other finite row dominates it."""
    ok = [not any(math.isnan(v) for v in r) for r in rows]
    return [ok[i] and not any(ok[j] and _ref_dominates(rows[j], rows[i])
                              for j in range(len(rows)) if j != i)
            for i in range(len(rows))]


@st.composite
def _grids(draw, nan: bool = False):
    k = draw(st.integers(1, 4))
    cell = st.integers(0, 3).map(float)
    if nan:
        cell = st.one_of(cell, cell, cell, st.just(math.nan))
    return k, draw(st.lists(st.lists(cell, min_size=k, max_size=k), max_size=40))


# -- pareto_mask ------------------------------------------------------------------------------


@settings(max_examples=150, deadline=None)
@given(_grids())
def test_pareto_mask_matches_brute_force(grid) -> None:
    k, rows = grid
    F = np.array(rows, dtype=float).reshape(len(rows), k)
    mask = pareto_mask(F)
    assert mask.dtype == bool and mask.shape == (len(rows),)
    assert mask.tolist() == _ref_front(rows)


@settings(max_examples=80, deadline=None)
@given(_grids(nan=True))
def test_pareto_mask_with_nan_matches_brute_force(grid) -> None:
    k, rows = grid
    F = np.array(rows, dtype=float).reshape(len(rows), k)
    assert pareto_mask(F).tolist() == _ref_front(rows)


@settings(max_examples=50, deadline=None)
@given(_grids(), st.randoms(use_true_random=False))
def test_pareto_mask_is_permutation_invariant(grid, rnd) -> None:
    k, rows = grid
    perm = list(range(len(rows)))
    rnd.shuffle(perm)
    F = np.array(rows, dtype=float).reshape(len(rows), k)
    assert pareto_mask(F[perm]).tolist() == pareto_mask(F)[perm].tolist()


def test_weakly_dominated_tie_is_excluded() -> None:
    assert pareto_mask(np.array([[1, 2], [1, 3]])).tolist() == [True, False]
    assert pareto_mask(np.array([[1, 3], [1, 2]])).tolist() == [False, True]


def test_identical_rows_are_all_kept() -> None:
    assert pareto_mask(np.array([[2, 2], [2, 2], [3, 1], [3, 3]])).tolist() == [True, True, True, False]


def test_nan_rows_never_on_front() -> None:
    F = np.array([[math.nan, 0.0], [5.0, 5.0], [0.0, math.nan]])
    assert pareto_mask(F).tolist() == [False, True, False]
    assert pareto_mask(np.full((3, 2), math.nan)).tolist() == [False] * 3


def test_single_objective_keeps_every_minimum() -> None:
    F = np.array([3.0, 1.0, 2.0, 1.0, 4.0])
    assert pareto_mask(F).tolist() == [False, True, False, True, False]
    assert pareto_mask(F[:, None]).tolist() == [False, True, False, True, False]


def test_empty_input() -> None:
    assert pareto_mask(np.zeros((0, 2))).tolist() == []


# -- dominates --------------------------------------------------------------------------------


@pytest.mark.parametrize(("a", "b", "expected"), [
    ((1, 1), (2, 2), True),
    ((1, 2), (1, 3), True),
    ((1, 3), (1, 2), False),
    ((1, 2), (1, 2), False),
    ((1, 3), (2, 2), False),
    ((2, 2), (1, 3), False),
    ((0,), (1,), True),
    ((1,), (0,), False),
])
def test_dominates_truth_table(a, b, expected: bool) -> None:
    assert dominates(np.array(a), np.array(b)) is expected


# -- hypervolume ------------------------------------------------------------------------------


def test_hypervolume_staircase_by_hand() -> None:
    # union of [1,4]x[3,4], [2,4]x[2,4], [3,4]x[1,4] = 1*1 + 1*2 + 1*3
    assert hypervolume(np.array([[1, 3], [2, 2], [3, 1]]), np.array([4, 4])) == pytest.approx(6.0)


def test_hypervolume_single_point_is_box() -> None:
    assert hypervolume(np.array([[1.0, 2.0, 0.5]]), np.array([3.0, 3.0, 1.0])) == pytest.approx(2 * 1 * 0.5)


def test_hypervolume_ignores_points_not_better_than_ref() -> None:
    base = hypervolume(np.array([[1, 3], [2, 2], [3, 1]]), np.array([4, 4]))
    with_extra = hypervolume(np.array([[1, 3], [2, 2], [3, 1], [4, 0], [5, 5], [0, 4]]), np.array([4, 4]))
    assert with_extra == pytest.approx(base)
    assert hypervolume(np.array([[4, 4], [6, 1]]), np.array([4, 4])) == 0.0
    assert hypervolume(np.zeros((0, 2)), np.array([4, 4])) == 0.0


def test_hypervolume_dominated_points_add_nothing() -> None:
    assert hypervolume(np.array([[1, 1], [2, 2], [3, 1]]), np.array([4, 4])) == pytest.approx(9.0)


# -- Results ----------------------------------------------------------------------------------


def _rec(i: int, scores, *, status: str = "ok", baseline: bool = False) -> EvalRecord:
    return EvalRecord(eval_id=i, generation=0 if baseline else 1 + i // 4, config_key=f"k{i}",
                      params={} if baseline else {"x": i}, status=status,
                      error="" if status == "ok" else "boom",
                      scores=None if scores is None else [float(s) for s in scores],
                      elapsed_s=0.1, started_at=1000.0 + i, is_baseline=baseline)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.one_of(st.none(), st.tuples(st.integers(0, 3), st.integers(0, 3))), max_size=30))
def test_results_front_mixed_directions_matches_brute_force(rows) -> None:
    records = [_rec(i, r, status="ok" if r is not None else "error") for i, r in enumerate(rows)]
    res = Results(records, directions=["min", "max"])
    ok = [(i, r) for i, r in enumerate(rows) if r is not None]
    adjusted = [(float(r[0]), -float(r[1])) for _, r in ok]
    expected = [i for (i, _), keep in zip(ok, _ref_front(adjusted)) if keep]
    front = res.pareto_front()
    assert [row["eval_id"] for row in front] == expected
    assert all(row["status"] == "ok" for row in front)


def test_results_front_excludes_failed_rows() -> None:
    records = [_rec(0, (5, 5)), _rec(1, None, status="error"), _rec(2, None, status="timeout"),
               _rec(3, (1, 9))]
    front = Results(records, directions=["min", "max"]).pareto_front()
    assert [r["eval_id"] for r in front] == [3]


def test_results_front_empty_when_nothing_succeeded() -> None:
    res = Results([_rec(0, None, status="error")], directions=["min", "min"])
    assert res.pareto_front() == []
    assert res.get_best_result() == []


def test_best_single_objective_earliest_among_ties() -> None:
    records = [_rec(0, (3,)), _rec(1, None, status="error"), _rec(2, (1,)), _rec(3, (2,)), _rec(4, (1,))]
    best = Results(records, directions=["min"]).get_best_result()
    assert best["eval_id"] == 2
    assert best["score_1"] == 1.0


def test_best_single_objective_maximise() -> None:
    records = [_rec(0, (3,)), _rec(1, (7,)), _rec(2, (7,)), _rec(3, (2,))]
    assert Results(records, directions=["max"]).get_best_result()["eval_id"] == 1


def test_best_single_objective_none_when_all_failed() -> None:
    assert Results([_rec(0, None, status="error")], directions=["min"]).get_best_result() is None


def test_best_two_objectives_is_pareto_front() -> None:
    records = [_rec(0, (1, 3)), _rec(1, (2, 2)), _rec(2, (2, 3)), _rec(3, (3, 1)), _rec(4, (1, 3))]
    res = Results(records, directions=["min", "min"])
    best = res.get_best_result()
    assert isinstance(best, list)
    assert best == res.pareto_front()
    assert [r["eval_id"] for r in best] == [0, 1, 3, 4]


def test_get_results_normalize_divides_by_baseline() -> None:
    records = [_rec(0, (4, 10), baseline=True), _rec(1, (2, 20)), _rec(2, None, status="error"),
               _rec(3, (6, 5))]
    df = Results(records, directions=["min", "max"]).get_results(normalize=True)
    assert df["norm_score_1"].tolist()[:2] == [1.0, 0.5]
    assert df["norm_score_1"].iloc[3] == pytest.approx(1.5)
    assert df["norm_score_2"].tolist()[:2] == [1.0, 2.0]
    assert df["norm_score_2"].iloc[3] == pytest.approx(0.5)
    assert math.isnan(df["norm_score_1"].iloc[2])
    assert df["is_baseline"].tolist() == [True, False, False, False]


def test_get_results_normalize_nan_when_baseline_failed() -> None:
    records = [_rec(0, None, status="error", baseline=True), _rec(1, (2, 20)), _rec(2, (6, 5))]
    df = Results(records, directions=["min", "min"]).get_results(normalize=True)
    assert df["norm_score_1"].isna().all()
    assert df["norm_score_2"].isna().all()
    assert df["score_1"].tolist()[1:] == [2.0, 6.0]


def test_get_results_without_normalize_has_no_norm_columns() -> None:
    df = Results([_rec(0, (1,), baseline=True)], directions=["min"]).get_results()
    assert not [c for c in df.columns if c.startswith("norm_")]
    assert list(df.columns[:5]) == ["eval_id", "generation", "status", "error", "score_1"]
