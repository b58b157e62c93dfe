"""The protocol of an objective that describes itself (its space, objectives, constraint and metadata)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from compileiq_lab.space.objectives import Objective

__all__ = ["Problem"]


class Problem(Protocol):
    """An objective that describes itself (e.g. a ``compileiq_lab.kernels.KernelRun``): what ``Search.of`` takes."""

    @property
    def objectives(self) -> Sequence[Objective]: ...

    def __call__(self, config: dict[str, Any]) -> Any: ...

    def search_space(self) -> Mapping[str, Any]: ...

    def constraint(self, config: Mapping[str, Any]) -> str | None: ...

    def metadata(self) -> dict[str, Any]: ...
