"""The teaching notebooks' exercise checks: unanswered is not an error, right passes, wrong raises."""

from __future__ import annotations

import pytest

from compileiq_lab.testing import check_answer


def test_not_answered_right_and_wrong(capsys: pytest.CaptureFixture[str]) -> None:
    assert check_answer("Exercise 1", None, 6) is False
    assert "Exercise 1: not answered yet" in capsys.readouterr().out
    assert check_answer("Exercise 1", 6, 6) is True
    assert "Exercise 1: correct (6)" in capsys.readouterr().out
    with pytest.raises(AssertionError, match=r"Exercise 1: 8 is not right; hint: registers round up") as err:
        check_answer("Exercise 1", 8, 6, hint="registers round up to 8")
    assert "6" not in str(err.value).replace("Exercise 1", "")  # the reference is never given away


def test_kinds_of_answers() -> None:
    assert check_answer("e", 0.101, 0.1, rel=0.02) and check_answer("e", " Yes", "yes")
    assert check_answer("e", ["-O1", "-O3"], {"-O3", "-O1"}) and check_answer("e", {"a": 1.0}, {"a": 1})
    assert check_answer("e", (32, 8), [32, 8]) and check_answer("e", {"-O1", "-O3"}, ["-O3", "-O1"])
    np = pytest.importorskip("numpy")  # references computed with numpy or pandas are numpy scalars
    assert check_answer("e", True, np.bool_(True)) and check_answer("e", 0.37, np.float32(0.3712), rel=0.01)
    assert check_answer("e", 55, np.int64(55)) and check_answer("e", [1.0, 2.0], np.array([1.0, 2.0]).tolist())
    cases = ((0.11, 0.1), (True, 1), (1, True), ("no", "yes"), ([1, 2], [1, 2, 3]), ({"a": 2}, {"a": 1}),
             (False, np.bool_(True)), (54, np.int64(55)), (0.30, np.float32(0.3712)))
    for wrong, expected in cases:
        with pytest.raises(AssertionError):
            check_answer("e", wrong, expected)
