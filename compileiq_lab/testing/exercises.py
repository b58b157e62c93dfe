"""Exercise checks for the teaching notebooks: an answer against its computed reference (the verdict is printed)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["NOT_ANSWERED", "check_answer"]


#: What ``check_answer`` prints for an answer left at None (the stored notebooks leave every answer so).
NOT_ANSWERED = "not answered yet"


def _same(answer: Any, expected: Any, rel: float) -> bool:
    if isinstance(expected, bool) or isinstance(answer, bool):
        return bool(answer) is bool(expected) and type(answer) is type(expected)
    if isinstance(expected, (int, float)) and isinstance(answer, (int, float)):
        return math.isclose(float(answer), float(expected), rel_tol=rel, abs_tol=0.0 if rel else 1e-12)
    if isinstance(expected, str) and isinstance(answer, str):
        return answer.strip().lower() == expected.strip().lower()
    if isinstance(expected, Mapping) and isinstance(answer, Mapping):
        return set(answer) == set(expected) and all(_same(answer[k], expected[k], rel) for k in expected)
    if isinstance(expected, (set, frozenset)) and isinstance(answer, (set, frozenset, list, tuple)):
        return set(answer) == set(expected)
    if isinstance(expected, Sequence) and isinstance(answer, Sequence) and not isinstance(answer, str):
        return len(answer) == len(expected) and all(_same(a, e, rel) for a, e in zip(answer, expected))
    return bool(answer == expected)


def check_answer(name: str, answer: Any, expected: Any, *, rel: float = 0.0, hint: str = "") -> bool:
    """Check an exercise's answer against its reference, computed by the notebook (never typed in).

    Prints the verdict for the learner. An answer left at None is "not answered yet" (False, no error), so a
    notebook run top to bottom as stored never fails here; a wrong answer raises, so a reference solution
    that stops matching its computed reference fails the notebook.

    Args:
        name: The exercise, as the notebook names it ("Exercise 1").
        answer: The learner's answer (None: not answered).
        expected: The reference, computed in the notebook from the same data.
        rel: Relative tolerance for numbers (0: exact).
        hint: What to look at again, shown with a wrong answer.

    Returns:
        True for a correct answer, False for one not given.

    Raises:
        AssertionError: A wrong answer (the message shows it and the hint, never the reference).
    """
    if answer is None:
        print(f"{name}: {NOT_ANSWERED} (set the answer above; the solution is in the hidden cell below)")
        return False
    if not _same(answer, expected, rel):
        raise AssertionError(f"{name}: {answer!r} is not right" + (f"; hint: {hint}" if hint else ""))
    print(f"{name}: correct ({answer!r})")
    return True
