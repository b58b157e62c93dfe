"""RowWindow keeps exactly the latest rows, whatever the batch sizes, without growing."""

from __future__ import annotations

import numpy as np
import pytest

from compileiq_lab.search.window import RowWindow


@pytest.mark.parametrize("batches", [[1] * 23, [3, 5, 1, 7, 2, 9], [20], [4, 4, 4, 4, 4, 4], [0, 2, 0, 11]])
def test_holds_the_latest_rows_as_a_set(batches: list[int]) -> None:
    w = RowWindow(7, (2,), np.int64)
    added = np.zeros((0, 2), dtype=np.int64)
    start = 0
    for n in batches:
        rows = np.stack([np.arange(start, start + n), -np.arange(start, start + n)], axis=1)
        start += n
        w.extend(rows)
        added = np.vstack([added, rows])
        latest = added[-7:]
        assert len(w) == len(latest)
        assert sorted(map(tuple, w.rows.tolist())) == sorted(map(tuple, latest.tolist()))


def test_scalar_rows_and_memory_stay_bounded() -> None:
    w = RowWindow(3, (), bool)
    for v in (True, False, True, True, False):
        w.extend(np.array([v]))
    assert sorted(w.rows.tolist()) == sorted([True, True, False])
    assert len(w) == 3


def test_capacity_must_be_positive() -> None:
    with pytest.raises(ValueError, match="capacity is at least 1, but got 0"):
        RowWindow(0, (2,), float)
