"""Parameter sizes are bounded before anything is built, and flag() takes a non-empty string."""

from __future__ import annotations

from typing import Any

import pytest

import compileiq_lab.space as ss
from compileiq_lab.exceptions import SpaceDefinitionError
from compileiq_lab.space.catalogs import CATALOGS, get_catalog
from compileiq_lab.space.params import MAX_VALUES


@pytest.mark.parametrize(("make", "count"), [
    (lambda: ss.range(0, 10**12), "1000000000001"),
    (lambda: ss.range(0.0, 1e9, 1e-3), "1000000000001"),
    (lambda: ss.range(0, MAX_VALUES), str(MAX_VALUES + 1)),
    (lambda: ss.range(-1e308, 1e308, 1e-300), "inf"),
    (lambda: ss.range(0, 10**300), str(10**300 + 1)),
])
def test_a_range_over_the_bound_is_refused_before_its_grid_is_built(make: Any, count: str) -> None:
    with pytest.raises(SpaceDefinitionError, match=r"range\(\): `the range has at most MAX_VALUES = ") as exc:
        make()
    text = str(exc.value)
    assert f"gives {count} values" in text and "coarser step" in text and "log_sampling" in text, text


def test_a_range_at_the_bound_is_built() -> None:
    p = ss.range(1, MAX_VALUES)
    assert p.n_values == MAX_VALUES and p.values[-1] == MAX_VALUES
    assert ss.range(0.0, 1.0, 1 / (MAX_VALUES - 1)).n_values == MAX_VALUES


def test_an_int_too_big_for_a_float_is_one_clean_error() -> None:
    with pytest.raises(SpaceDefinitionError, match="end fits a float"):
        ss.range(0, 10**400, 10**399)
    with pytest.raises(SpaceDefinitionError, match="end fits a float"):
        ss.log_sampling(1, 10**400, 4)


@pytest.mark.parametrize("total", [10**9, MAX_VALUES + 1])
def test_log_sampling_over_the_bound_is_refused(total: int) -> None:
    with pytest.raises(SpaceDefinitionError, match=r"log_sampling\(\): `total <= MAX_VALUES = ") as exc:
        ss.log_sampling(1, 10, total)
    assert f"total={total}" in str(exc.value) and "Ask for fewer values" in str(exc.value)


def test_log_sampling_at_the_bound_is_built() -> None:
    assert ss.log_sampling(1.0, 1e6, MAX_VALUES).n_values == MAX_VALUES


def test_a_choice_over_the_bound_is_refused() -> None:
    with pytest.raises(SpaceDefinitionError, match=r"choice\(\): `len\(values\) <= MAX_VALUES = "):
        ss.choice(range(MAX_VALUES + 1))


def test_a_spec_over_the_bound_is_refused_too() -> None:
    with pytest.raises(SpaceDefinitionError, match="MAX_VALUES"):
        ss.param_from_spec({"kind": "range", "start": 0, "end": 10**12})


def test_the_bundled_catalogs_stay_far_below_the_bound() -> None:
    biggest = max(c.param.n_values for name in CATALOGS for c in get_catalog(name).controls)
    assert biggest * 1000 < MAX_VALUES


def test_a_huge_space_is_counted_not_enumerated() -> None:
    space = ss.SearchSpace({f"p{i}": ss.range(0, 999) for i in range(200)})  # 1000**200 configs
    assert space.size == 1000**200 and space.n_genes == 200


@pytest.mark.parametrize("bad", ["", "   ", "\t\n", 3, 3.5, None, True, ["-x"], b"-x"])
def test_flag_needs_a_non_empty_string(bad: Any) -> None:
    with pytest.raises(SpaceDefinitionError, match=r"flag\(\): `name_or_value is a non-empty string") as exc:
        ss.flag(bad)
    assert f"name_or_value={bad!r}" in str(exc.value) and "--use_fast_math" in str(exc.value)


@pytest.mark.parametrize("good", ["-O3", "--use_fast_math", "-Xptxas=-v", "-f"])
def test_flag_keeps_its_option(good: str) -> None:
    p = ss.flag(good)
    assert p.values == (good,) and ss.param_from_spec(p.to_spec()) == p


def test_a_flag_given_a_dict_keeps_its_message() -> None:
    with pytest.raises(SpaceDefinitionError, match="values are not dicts"):
        ss.flag({"a": 1})
