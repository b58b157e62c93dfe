"""SearchConfiguration: validation messages, resolve() defaults and dict round trips."""

from __future__ import annotations

from typing import Any

import pytest

from compileiq_lab.exceptions import CompileIQLabError, ConfigurationError, StoreMismatchError
from compileiq_lab.search.config import SMALL_POOL_SIZE, SMALL_SPACE_GENES, SearchConfiguration, default_pool_size


def test_configuration_error_is_value_error() -> None:
    assert issubclass(ConfigurationError, ValueError)
    assert issubclass(ConfigurationError, CompileIQLabError)


@pytest.mark.parametrize(("kwargs", "rule", "got"), [
    ({"generations": 0}, "generations is an int >= 1", "generations=0"),
    ({"generations": 2.0}, "generations is an int >= 1", "generations=2.0"),
    ({"pool_size": 1}, "pool_size is an int >= 2", "pool_size=1"),
    ({"problem_type": "minimize"}, "problem_type in ['min', 'max']", "problem_type='minimize'"),
    ({"problem_type": ["min", "max"]}, "problem_type is 'min'/'max' or one of them per objective",
     "problem_type=['min', 'max'] with num_objectives=1"),
    ({"problem_type": ["min", "up"], "num_objectives": 2},
     "problem_type is 'min'/'max' or one of them per objective", "problem_type=['min', 'up']"),
    ({"num_objectives": 0}, "num_objectives is an int >= 1", "num_objectives=0"),
    ({"seed": -1}, "seed is an int >= 0", "seed=-1"),
    ({"mutate_rate": 0}, "0 < mutate_rate <= 1", "mutate_rate=0"),
    ({"mutate_rate": 1.5}, "0 < mutate_rate <= 1", "mutate_rate=1.5"),
    ({"crossover_rate": 2}, "0 <= crossover_rate <= 1", "crossover_rate=2"),
    ({"timeout_s": 0}, "0 < timeout_s < inf", "timeout_s=0"),
    ({"timeout_s": -1}, "0 < timeout_s < inf", "timeout_s=-1"),
    ({"timeout_s": float("inf")}, "0 < timeout_s < inf", "timeout_s=inf"),
    ({"strategy": "cmaes"}, "strategy in ['auto', 'ga', 'nsga2', 'random']", "strategy='cmaes'"),
    ({"strategy": "ga", "num_objectives": 2}, "strategy 'ga' has num_objectives == 1", "num_objectives=2"),
    ({"objective_names": ["time"], "num_objectives": 2},
     "objective_names holds num_objectives non-empty strings", "objective_names=['time']"),
    ({"objective_names": ["time", ""], "num_objectives": 2},
     "objective_names holds num_objectives non-empty strings", "objective_names=['time', '']"),
    ({"objective_names": ["t", "t"], "num_objectives": 2}, "objective_names are distinct",
     "objective_names=['t', 't']"),
    ({"objective_names": "runtime"}, "objective_names is a list of names", "the str 'runtime'"),
])
def test_validation_names_rule_and_value(kwargs: dict, rule: str, got: str) -> None:
    kwargs.setdefault("generations", 3)
    with pytest.raises(ConfigurationError) as info:
        SearchConfiguration(**kwargs)
    msg = str(info.value)
    assert msg.startswith("SearchConfiguration: ")
    assert f"`{rule}` must hold" in msg
    assert got in msg


def test_ga_with_two_objectives_suggests_nsga2() -> None:
    with pytest.raises(ConfigurationError, match="strategy='nsga2'"):
        SearchConfiguration(generations=1, strategy="ga", num_objectives=2)


def test_valid_edge_values_accepted() -> None:
    cfg = SearchConfiguration(generations=1, pool_size=2, mutate_rate=1, crossover_rate=0,
                              timeout_s=0.5, seed=0)
    assert (cfg.pool_size, cfg.mutate_rate, cfg.crossover_rate, cfg.timeout_s) == (2, 1, 0, 0.5)


@pytest.mark.parametrize(("n_obj", "expected"), [(1, "ga"), (2, "nsga2"), (3, "nsga2")])
def test_resolve_auto_strategy(n_obj: int, expected: str) -> None:
    assert SearchConfiguration(generations=1, num_objectives=n_obj).resolve(5).strategy == expected


def test_resolve_keeps_explicit_strategy() -> None:
    assert SearchConfiguration(generations=1, strategy="random").resolve(5).strategy == "random"


@pytest.mark.parametrize("n_genes", [1, 4, 7, 20])
def test_resolve_default_mutate_rate_is_one_over_genes(n_genes: int) -> None:
    r = SearchConfiguration(generations=1).resolve(n_genes)
    assert r.mutate_rate == pytest.approx(1.0 / n_genes)


def test_resolve_keeps_explicit_mutate_rate_and_pool_size() -> None:
    r = SearchConfiguration(generations=1, mutate_rate=0.3, pool_size=5).resolve(10)
    assert (r.mutate_rate, r.pool_size) == (0.3, 5)


@pytest.mark.parametrize("n_genes", [1, 4, 5, 10, 12, 13, 16, 17, 32, 33, 100])
@pytest.mark.parametrize("n_objectives", [1, 2])
def test_resolve_default_pool_size(n_genes: int, n_objectives: int) -> None:
    r = SearchConfiguration(generations=1, num_objectives=n_objectives).resolve(n_genes)
    assert r.pool_size == default_pool_size(n_genes, n_objectives)
    small = n_objectives == 1 and n_genes <= SMALL_SPACE_GENES
    assert (r.pool_size == SMALL_POOL_SIZE) if small else (8 <= r.pool_size <= 16)


def test_default_pool_size_grows_and_caps() -> None:
    for k in (1, 2):
        sizes = [default_pool_size(n, k) for n in range(1, 60)]
        assert sizes == sorted(sizes)
        assert sizes[-1] == 16
    assert default_pool_size(18, 2) == 10 and default_pool_size(32, 2) == 14
    # one objective refits its screen every few calls (measured up to 32 genes); a front keeps a population of 8
    assert default_pool_size(1) == default_pool_size(32) == SMALL_POOL_SIZE < default_pool_size(33) == 15
    assert default_pool_size(1, 3) == default_pool_size(12, 3) == 8


def test_a_run_stored_with_an_earlier_default_pool_resumes_with_it(tmp_path: Any, monkeypatch: Any) -> None:
    import compileiq_lab.search.config as config_module
    from compileiq_lab import Search
    from compileiq_lab import space as ss

    space = {"a": ss.choice([0, 1, 2, 3], knockout_prob=0.5), "b": ss.range(0, 9)}
    path = tmp_path / "run.sqlite"
    with monkeypatch.context() as m:  # what an earlier version picked for this space
        m.setattr(config_module, "default_pool_size", lambda n_genes, n_objectives=1: 7)
        Search(lambda c: float(c["b"]), space, SearchConfiguration(generations=2, seed=3), store=path).start()
    assert SearchConfiguration(generations=1).resolve(3).pool_size == SMALL_POOL_SIZE  # today's default differs
    rows = Search.resume(path, lambda c: float(c["b"]), generations=4).get_results()
    searched = rows[rows["generation"] > 0]
    assert searched.groupby("generation").size().tolist() == [7, 7, 7, 7]
    again = Search(lambda c: float(c["b"]), space, SearchConfiguration(generations=5, seed=3, pool_size=7), store=path)
    assert len(again.start().records) == len(rows) + 7  # the pool it resolved, given: the same run
    with pytest.raises(StoreMismatchError, match="pool_size: stored 7 vs given 6"):
        Search(lambda c: float(c["b"]), space, SearchConfiguration(generations=6, seed=3, pool_size=6), store=path)


@pytest.mark.parametrize("cfg", [
    SearchConfiguration(generations=4),
    SearchConfiguration(generations=2, pool_size=6, problem_type=["max", "min"], num_objectives=2,
                        seed=11, mutate_rate=0.2, crossover_rate=0.5, timeout_s=3.0,
                        strategy="nsga2", baseline=False, objective_names=("speed", "size")),
])
def test_to_dict_from_dict_round_trip(cfg: SearchConfiguration) -> None:
    d = cfg.to_dict()
    back = SearchConfiguration.from_dict(d)
    assert back == cfg
    assert back.to_dict() == d


def test_to_dict_is_plain_lists() -> None:
    d = SearchConfiguration(generations=1, problem_type=("min", "max"), num_objectives=2,
                            objective_names=("a", "b")).to_dict()
    assert d["problem_type"] == ["min", "max"]
    assert d["objective_names"] == ["a", "b"]


def test_from_dict_rejects_unknown_keys_naming_them() -> None:
    d = SearchConfiguration(generations=1).to_dict()
    d["popsize"] = 5
    d["zeta"] = 1
    with pytest.raises(ConfigurationError, match=r"unknown SearchConfiguration keys \['popsize', 'zeta'\]") as info:
        SearchConfiguration.from_dict(d)
    assert "pool_size" in str(info.value)


def test_from_dict_still_validates() -> None:
    d = SearchConfiguration(generations=1).to_dict()
    d["seed"] = -3
    with pytest.raises(ConfigurationError, match="seed=-3"):
        SearchConfiguration.from_dict(d)


def test_directions_from_string() -> None:
    assert SearchConfiguration(generations=1, problem_type="max", num_objectives=3).directions == ["max"] * 3


def test_directions_from_list() -> None:
    cfg = SearchConfiguration(generations=1, problem_type=("max", "min"), num_objectives=2)
    assert cfg.directions == ["max", "min"]
    assert cfg.problem_type == ["max", "min"]


def test_numpy_numbers_are_taken_as_python_numbers() -> None:
    import numpy as np

    c = SearchConfiguration(generations=np.int64(5), pool_size=np.int64(8), seed=np.int32(3),
                            mutate_rate=np.float32(0.25))
    assert (c.generations, c.pool_size, c.seed) == (5, 8, 3) and type(c.seed) is int and c.mutate_rate == 0.25
