"""Which point an export picks: an objective, the knee, or no regression against the baseline."""

from __future__ import annotations

import pytest

from compileiq_lab.exceptions import ConfigurationError
from compileiq_lab.store import EvalRecord, Results
from compileiq_lab.store.pick import default_pick, miscomputing, pick_point


def _rec(i: int, scores: list[float], params: dict | None = None, spills: float | None = None) -> EvalRecord:
    return EvalRecord(eval_id=i, generation=0, config_key=str(i), params=params if params is not None else {"x": i},
                      status="ok", error="", scores=scores, elapsed_s=0.0, started_at=0.0, is_baseline=i == 0,
                      detail={} if spills is None else {"metrics": {"spill_bytes": spills}})


def _results() -> Results:
    # registers, sass_instructions: the baseline 40 / 400; eval 1 has fewer registers but 3x the instructions
    records = [_rec(0, [40, 400], {}), _rec(1, [20, 1200]), _rec(2, [32, 380]), _rec(3, [36, 300]), _rec(4, [44, 290])]
    return Results(records, ["min", "min"], objective_names=["registers", "sass_instructions"])


def test_by_objective_and_default() -> None:
    res = _results()
    assert pick_point(res, "registers")[0].eval_id == 1
    assert pick_point(res, "sass_instructions")[0].eval_id == 4
    assert pick_point(res, "first")[0].eval_id == 1
    assert default_pick(True) == "no-regression" and default_pick(False) == "first"


def test_no_regression_never_worse_than_the_baseline() -> None:
    rec, why = pick_point(_results(), "no-regression")
    assert rec.eval_id == 2 and "no worse than the baseline" in why
    worse = Results([_rec(0, [10, 100], {}), _rec(1, [5, 200])], ["min", "min"],
                    objective_names=["registers", "sass_instructions"])
    rec, why = pick_point(worse, "no-regression")
    assert rec.eval_id == 0 and "the baseline" in why


def test_no_regression_leaves_out_points_that_spill_more_than_the_baseline() -> None:
    # a kernel run's static metrics: eval 1's register cap halves the registers but spills 1,720 bytes
    records = [_rec(0, [64, 400], {}, spills=0), _rec(1, [28, 390], spills=1720), _rec(2, [48, 395], spills=0)]
    res = Results(records, ["min", "min"], objective_names=["registers", "sass_instructions"])
    rec, why = pick_point(res, "no-regression")
    assert rec.eval_id == 2 and "or in bytes spilled" in why
    assert pick_point(res, "registers")[0].eval_id == 1  # asked by name, the best registers is still given
    only_spills = Results(records[:2], ["min", "min"], objective_names=["registers", "sass_instructions"])
    rec, why = pick_point(only_spills, "no-regression")
    assert rec.eval_id == 0 and "no front point beats the baseline" in why and "compiler defaults" in why
    # spilling as an objective of the run: the objectives alone decide
    spill_obj = Results([_rec(0, [64, 0], {}, spills=0), _rec(1, [28, 8], spills=8)], ["min", "min"],
                        objective_names=["registers", "spill_bytes"])
    assert pick_point(spill_obj, "no-regression")[0].eval_id == 0


def test_no_regression_leaves_out_points_whose_stack_frame_grew() -> None:
    # eval 1's -Xcicc -O1 and register cap moved the accumulators to a 384-byte local-memory frame, spilling nothing
    def rec(i: int, scores: list[float], stack: float) -> EvalRecord:
        return EvalRecord(eval_id=i, generation=0, config_key=str(i), params={"x": i} if i else {}, status="ok",
                          error="", scores=scores, elapsed_s=0.0, started_at=0.0, is_baseline=i == 0,
                          detail={"metrics": {"spill_bytes": 0, "stack_bytes": stack}})

    res = Results([rec(0, [127, 900], 0), rec(1, [32, 340], 384), rec(2, [120, 880], 0)], ["min", "min"],
                  objective_names=["registers", "sass_instructions"])
    got, why = pick_point(res, "no-regression")
    assert got.eval_id == 2 and "or in bytes spilled or stack frame bytes" in why


def test_knee_balances_the_objectives() -> None:
    assert pick_point(_results(), "knee")[0].eval_id in (2, 3)


def test_knee_of_a_front_spanning_the_largest_floats() -> None:
    # finite scores an objective may return, whose span overflows a float: the balanced point is still the knee
    extreme = Results([_rec(1, [1e308, -1e308]), _rec(2, [-1e308, 1e308]), _rec(3, [1.0, 1.0])], ["min", "min"],
                      objective_names=["a", "b"])
    assert pick_point(extreme, "knee")[0].eval_id == 3


def test_unknown_rule() -> None:
    with pytest.raises(ConfigurationError, match="registers, sass_instructions"):
        pick_point(_results(), "fastest")


def test_every_rule_picks_among_the_points_that_compute_the_right_output_everywhere() -> None:
    """A point re-measured as computing wrong output on another workload (and any point with its machine code) is
    left out before the front is made: the points it dominated come back onto it, for every rule."""
    from compileiq_lab.store import Validation

    def rec(i: int, runtime: float, code: str) -> EvalRecord:
        r = _rec(i, [runtime], {} if i == 0 else {"x": i})
        r.detail["code_hash"] = code
        return r

    res = Results([rec(0, 10, "base"), rec(1, 5, "fast"), rec(2, 6, "a"), rec(3, 7, "b"), rec(4, 5, "fast")],
                  ["min"], objective_names=["runtime"])
    v = Validation(rows=[{"eval_id": 1, "win": False, "wrong_output_on": ["big"]}], baseline={}, rounds=10,
                   confidence=0.95, method="paired-bootstrap")
    for rule in ("first", "runtime", "knee", "no-regression"):
        picked, why = pick_point(res, rule, v)
        assert picked is not None and picked.eval_id == 2, rule  # eval 4 shares eval 1's code: left out too
        assert "right output on every workload (wrong: eval 1 on 'big')" in why
    assert pick_point(res, "first")[0].eval_id in (1, 4)  # without the re-measurement, nothing is known
    only = Results([rec(0, 10, "base"), rec(1, 5, "fast")], ["min"], objective_names=["runtime"])
    picked, why = pick_point(only, "knee", v)
    assert picked is not None and picked.eval_id == 0  # the baseline is left
    # a point asked for by id is exported as asked; what the CLI warns with says why no pick would choose it
    assert miscomputing(res, res.record(1), v) == "eval 1 computed wrong output on workload 'big'"
    assert miscomputing(res, res.record(4), v) == ("eval 4 has the machine code of eval 1, which computed wrong "
                                                   "output on workload 'big'")
    assert miscomputing(res, res.record(2), v) == "" and miscomputing(res, res.record(1)) == ""
