"""One rule for identical points: the representative has the fewest parameters set, then the earliest id."""

from __future__ import annotations

from typing import Any

import pytest

from compileiq_lab.exceptions import ConfigurationError
from compileiq_lab.store.results import Results, representative
from compileiq_lab.store.sqlite import EvalRecord


def _rec(i: int, scores: list[float] | None, params: dict[str, Any], status: str = "ok") -> EvalRecord:
    return EvalRecord(eval_id=i, generation=1, config_key=str(i), params=params, status=status, error="",
                      scores=scores, elapsed_s=0.0, started_at=0.0, is_baseline=False)


def _results() -> Results:
    return Results([
        _rec(0, [3.0, 9.0], {"a": 1, "b": 2, "c": 3}),
        _rec(1, [2.0, 9.0], {"a": 1, "b": 2}),      # best on objective 0 ...
        _rec(2, [2.0, 9.0], {"a": 5}),              # ... tied: fewer params set
        _rec(3, [2.0, 9.0], {"z": 5}),              # tied, as few params, later
        _rec(4, [2.0, 12.0], {}),                   # ties on objective 0 but dominated on objective 1
        _rec(5, [5.0, 1.0], {"a": 1, "q": 2}),
        _rec(6, None, {}, status="compile_error"),
    ], directions=["min", "min"])


def test_representative_is_fewest_params_then_earliest() -> None:
    res = _results()
    assert representative([res.records[i] for i in (0, 1, 2, 3)]).eval_id == 2
    assert representative([res.records[3], res.records[2]]).eval_id == 2  # order given does not matter


def test_representative_counts_each_parameter_of_a_nested_group() -> None:
    grouped = _rec(0, [1.0], {"defines": {"A": 1, "B": 2, "C": 3}})  # three -D knobs set, one group
    flat = _rec(1, [1.0], {"d": "-d", "e": "-e"})
    assert representative([grouped, flat]).eval_id == 1
    assert representative([_rec(0, [1.0], {"defines": {"A": 1}, "x": 1}), flat]).eval_id == 0  # 2 vs 2: the earlier


def test_best_record_breaks_ties_on_the_front_then_by_the_rule() -> None:
    res = _results()
    best = res.best_record(0)
    assert best is not None and best.eval_id == 2  # eval 4 has fewer params but is dominated
    assert res.best_record(1).eval_id == 5  # type: ignore[union-attr]
    assert res.best_record(res.objective_names[1]) == res.best_record(1)  # by name too
    for wrong in ("nope", 2, -1, True):
        with pytest.raises(ConfigurationError, match="objective must be one of .* or an index below 2, but got"):
            res.best_record(wrong)  # type: ignore[arg-type]


def test_distinct_front_folds_identical_scores() -> None:
    assert [(r.eval_id, n) for r, n in _results().distinct_front()] == [(2, 2), (5, 0)]


def test_representative_of_any_identical_point_and_failures() -> None:
    res = _results()
    assert [res.representative_of(i).eval_id for i in (1, 2, 3)] == [2, 2, 2]  # type: ignore[union-attr]
    assert res.representative_of(4).eval_id == 4  # type: ignore[union-attr]
    assert res.representative_of(6) is None and res.representative_of(99) is None
    assert [r.eval_id for r in res.identical_to(res.records[2])] == [1, 3]


def test_single_objective_best_result_uses_the_rule() -> None:
    res = Results([_rec(0, [1.0], {"a": 1, "b": 1}), _rec(1, [1.0], {"a": 1}), _rec(2, [4.0], {})],
                  directions=["min"])
    assert res.get_best_result()["eval_id"] == 1  # type: ignore[index]
