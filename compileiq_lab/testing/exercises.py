"""Exercise checks for the teaching notebooks: an answer against its computed reference (the verdict is printed)."""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["NOT_ANSWERED", "check_answer"]


#: What ``check_answer`` prints for an answer left at None (the stored notebooks leave every answer so).
NOT_ANSWERED = "not answered yet"


def _plain(value: Any) -> Any:
    """A NumPy scalar (np.bool_, np.int64, np.float32...) as the Python value it holds; anything else as it is."""
    item = getattr(value, "item", None)
    return item() if callable(item) and type(value).__module__ == "numpy" and getattr(value, "shape", None) == () \
        else value


def _same(answer: Any, expected: Any, rel: float) -> bool:
    answer, expected = _plain(answer), _plain(expected)
    if isinstance(expected, bool) or isinstance(answer, bool):  # True is not an answer for 1, nor 1 for True
        return isinstance(expected, bool) and isinstance(answer, bool) and answer is expected
    if isinstance(expected, numbers.Real) and isinstance(answer, numbers.Real):
        return math.isclose(float(answer), float(expected), rel_tol=rel, abs_tol=0.0 if rel else 1e-12)
    if isinstance(expected, str) and isinstance(answer, str):
        return answer.strip().lower() == expected.strip().lower()
    if isinstance(expected, Mapping) and isinstance(answer, Mapping):
        return set(answer) == set(expected) and all(_same(answer[k], expected[k], rel) for k in expected)
    if isinstance(expected, (set, frozenset)) or isinstance(answer, (set, frozenset)):
        try:
            return set(answer) == set(expected)
        except TypeError:
            return False
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
