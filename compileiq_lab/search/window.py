"""The latest rows of a growing array, kept in a ring: adding rows costs their number, not the window's size."""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["RowWindow"]


class RowWindow:
    """The last ``capacity`` rows added, in no particular order once the ring has wrapped.

    For what sums, counts or maximises over its rows (which rows, not their order): keeping a window by stacking
    the new rows under the old ones and cutting the front copies the whole window at each addition, a cost that
    grows with the run until the window is full.

    Args:
        capacity: How many rows are kept (the oldest go first); at least 1.
        shape: The shape of one row (``()`` for scalars).
        dtype: The rows' type.
    """

    def __init__(self, capacity: int, shape: tuple[int, ...], dtype: Any) -> None:
        if capacity < 1:
            raise ValueError(f"RowWindow: capacity is at least 1, but got {capacity!r}; pass a positive size")
        self._data = np.zeros((capacity, *shape), dtype=dtype)
        self._held = 0
        self._next = 0

    def __len__(self) -> int:
        return self._held

    @property
    def rows(self) -> np.ndarray:
        """The rows held (a view: it changes with the next ``extend``)."""
        return self._data[: self._held]

    def extend(self, rows: np.ndarray) -> None:
        """Add rows; past the capacity each replaces the oldest one held."""
        capacity = len(self._data)
        rows = np.asarray(rows, dtype=self._data.dtype).reshape(-1, *self._data.shape[1:])[-capacity:]
        n = len(rows)
        first = min(n, capacity - self._next)
        self._data[self._next: self._next + first] = rows[:first]
        self._data[: n - first] = rows[first:]
        self._next = (self._next + n) % capacity
        self._held = min(capacity, self._held + n)
