"""SearchConfiguration refuses sizes that would exhaust memory or time, naming the bound."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from compileiq_lab.exceptions import ConfigurationError
from compileiq_lab.search.config import (
    MAX_GENERATIONS,
    MAX_OBJECTIVES,
    MAX_POOL_SIZE,
    MAX_WARM_START,
    SearchConfiguration,
)


@pytest.mark.parametrize(("kwargs", "rule", "got"), [
    ({"pool_size": 10**9}, f"pool_size <= MAX_POOL_SIZE = {MAX_POOL_SIZE}", "pool_size=1000000000"),
    ({"pool_size": MAX_POOL_SIZE + 1}, "pool_size <= MAX_POOL_SIZE", f"pool_size={MAX_POOL_SIZE + 1}"),
    ({"generations": 10**12}, f"generations <= MAX_GENERATIONS = {MAX_GENERATIONS}", "generations=1000000000000"),
    ({"num_objectives": 10**9, "strategy": "nsga2"}, f"num_objectives <= MAX_OBJECTIVES = {MAX_OBJECTIVES}",
     "num_objectives=1000000000"),
    ({"warm_start": [{}] * (MAX_WARM_START + 1)}, f"len(warm_start) <= MAX_WARM_START = {MAX_WARM_START}",
     f"{MAX_WARM_START + 1} configs"),
])
def test_sizes_over_their_bound_are_refused(kwargs: dict[str, Any], rule: str, got: str) -> None:
    kwargs = {"generations": 1, **kwargs}
    with pytest.raises(ConfigurationError) as exc:
        SearchConfiguration(**kwargs)
    text = str(exc.value)
    assert text.startswith("SearchConfiguration: `") and rule in text and f"but got {got}" in text, text
    assert "\n" not in text


def test_sizes_at_their_bound_are_kept() -> None:
    cfg = SearchConfiguration(generations=MAX_GENERATIONS, pool_size=MAX_POOL_SIZE, warm_start=[{}] * MAX_WARM_START)
    assert cfg.resolve(4).pool_size == MAX_POOL_SIZE and len(cfg.warm_start or []) == MAX_WARM_START
    assert len(SearchConfiguration(generations=1, num_objectives=MAX_OBJECTIVES, strategy="nsga2").objectives()) \
        == MAX_OBJECTIVES


def test_an_endless_warm_start_is_refused_without_being_drained() -> None:
    with pytest.raises(ConfigurationError, match="MAX_WARM_START"):
        SearchConfiguration(generations=1, warm_start=itertools.repeat({}))


def test_a_resumed_run_asking_for_too_many_generations_is_refused() -> None:
    cfg = SearchConfiguration(generations=3, pool_size=4).to_dict()
    with pytest.raises(ConfigurationError, match="MAX_GENERATIONS"):
        SearchConfiguration.from_dict({**cfg, "generations": MAX_GENERATIONS + 1})
