"""Parameter DSL: value grids, seed bounds, validation messages and spec round trips."""

from __future__ import annotations

import math

import numpy as np
import pytest

import compileiq_lab.space as ss
from compileiq_lab.exceptions import CompileIQLabError, SpaceDefinitionError

# -- range ------------------------------------------------------------------------------------


def test_range_end_is_inclusive_for_float_step() -> None:
    p = ss.range(1.0, 20.0, 0.5)
    assert p.n_values == 39
    assert p.values[0] == 1.0
    assert p.values[-1] == 20.0
    assert all(b > a for a, b in zip(p.values, p.values[1:]))


def test_range_float_step_gives_clean_decimal_values() -> None:
    p = ss.range(0.0, 1.0, 0.1)
    assert p.n_values == 11
    assert 0.3 in p.values
    assert 0.30000000000000004 not in p.values
    assert list(p.values) == [i / 10 for i in range(11)]


def test_range_int_arguments_give_ints() -> None:
    p = ss.range(2, 8, 2)
    assert p.values == (2, 4, 6, 8)
    assert all(type(v) is int for v in p.values)


def test_range_with_any_float_argument_gives_floats_only_and_takes_the_ints_they_equal() -> None:
    for p in (ss.range(0, 3, step=0.5), ss.range(1, 5, 1.0), ss.range(0, 1, 0.1)):
        assert all(type(v) is float for v in p.values), p.values  # an objective formats every value alike
    p = ss.range(0, 3, 0.5, default=3)
    assert p.default == 3.0 and p.index_of(3) == p.index_of(3.0) == 6  # a store of ints at the ends still reads


def test_range_default_step_is_one() -> None:
    assert ss.range(0, 4).values == (0, 1, 2, 3, 4)


def test_range_end_off_grid_stops_at_last_grid_value() -> None:
    assert ss.range(0, 10, 3).values == (0, 3, 6, 9)


def test_range_is_ordinal_and_always_present_by_default() -> None:
    p = ss.range(0, 3)
    assert p.encoding == "ordinal"
    assert p.knockout_prob is None
    assert not p.can_knockout


def test_range_without_seed_bounds_seeds_whole_domain() -> None:
    p = ss.range(0, 10)
    assert (p.init_low, p.init_high) == (0, 10)


def test_range_seed_bounds_restrict_init_indices() -> None:
    p = ss.range(0, 20, 2, seed_low=4, seed_high=10)
    assert p.values[p.init_low] == 4
    assert p.values[p.init_high] == 10


def test_range_seed_bounds_between_grid_values_round_inwards() -> None:
    p = ss.range(0, 20, 2, seed_low=3, seed_high=11)
    assert p.values[p.init_low] == 4
    assert p.values[p.init_high] == 10


def test_range_single_seed_bound_keeps_other_end() -> None:
    p = ss.range(0, 10, seed_low=7)
    assert p.values[p.init_low] == 7
    assert p.init_high == p.n_values - 1


def test_sample_never_draws_outside_seed_bounds() -> None:
    space = ss.SearchSpace({"a": ss.range(0, 50, seed_low=10, seed_high=20),
                            "b": ss.range(0.0, 5.0, 0.25, seed_low=1.0, seed_high=2.0)})
    X = space.sample(np.random.default_rng(123), 2000)
    a = np.array([space.decode(x)["a"] for x in X])
    b = np.array([space.decode(x)["b"] for x in X])
    assert a.min() >= 10 and a.max() <= 20
    assert b.min() >= 1.0 and b.max() <= 2.0
    # the whole seed interval is actually used
    assert set(a) == set(range(10, 21))


def test_seed_low_equal_to_start_seeds_from_first_value() -> None:
    assert ss.range(0.5, 3.0, 0.5, seed_low=0.5).init_low == 0


def test_range_seed_interval_without_grid_value_is_definition_error() -> None:
    with pytest.raises(SpaceDefinitionError, match="seed interval holds a grid value"):
        ss.range(0, 10, 3, seed_low=9.5, seed_high=10)


def test_range_first_value_is_start_for_unclean_start() -> None:
    p = ss.range(1 / 3, 2.0, 0.5, seed_low=1 / 3)
    assert p.values[0] == 1 / 3
    assert p.init_low == 0


# -- choice, literal, log_sampling, flag ------------------------------------------------------


def test_choice_keeps_order_and_is_categorical() -> None:
    p = ss.choice(["O1", "O2", "O3"])
    assert p.values == ("O1", "O2", "O3")
    assert p.encoding == "categorical"
    assert p.knockout_prob is None


def test_choice_accepts_tuple_and_list_values() -> None:
    p = ss.choice((["-a", "-b"], ["-c"]), knockout_prob=0.25)
    assert p.values == (["-a", "-b"], ["-c"])
    assert p.knockout_prob == 0.25
    assert p.index_of(["-c"]) == 1


def test_index_of_unknown_value_lists_valid_values() -> None:
    with pytest.raises(SpaceDefinitionError, match=r"not in the domain.*valid values"):
        ss.choice(["a", "b"]).index_of("z")


def test_literal_has_single_value() -> None:
    p = ss.literal("-O3", knockout_prob=0.2)
    assert p.values == ("-O3",)
    assert p.knockout_prob == 0.2
    assert p.can_knockout


def test_literal_without_knockout_is_constant() -> None:
    p = ss.literal(128)
    assert p.values == (128,)
    assert not p.can_knockout


def test_log_sampling_int_endpoints_give_sorted_unique_ints() -> None:
    p = ss.log_sampling(1, 1000, 10)
    assert all(type(v) is int for v in p.values)
    assert list(p.values) == sorted(set(p.values))
    assert p.values[0] == 1 and p.values[-1] == 1000
    assert p.encoding == "ordinal"


def test_log_sampling_int_drops_rounding_duplicates_and_says_so(caplog: pytest.LogCaptureFixture) -> None:
    from compileiq_lab.space.grid import _merged

    _merged.cache_clear()  # (said once per process)
    p = ss.log_sampling(1, 4, 10)
    assert list(p.values) == [1, 2, 3, 4]
    assert "log_sampling(1, 4, total=10) has 4 distinct integer values, not 10" in caplog.text
    caplog.clear()
    ss.log_sampling(1, 4, 10)  # the same again (a stored space rebuilt): said once
    assert "distinct integer values" not in caplog.text
    ss.log_sampling(1, 1000, 4)  # 1, 10, 100, 1000: nothing merged, nothing said
    assert "distinct integer values" not in caplog.text


def test_log_sampling_float_is_geometric_with_exact_endpoints() -> None:
    p = ss.log_sampling(0.001, 10.0, 5)
    assert p.n_values == 5
    assert p.values[0] == 0.001
    assert p.values[-1] == 10.0
    ratios = [b / a for a, b in zip(p.values, p.values[1:])]
    assert ratios == pytest.approx([10.0] * 4)


def test_log_sampling_float_end_with_many_digits_is_included() -> None:
    p = ss.log_sampling(0.1, 1 / 3, 5)
    assert p.values[-1] == 1 / 3


def test_log_sampling_float_values_are_distinct() -> None:
    p = ss.log_sampling(1.0, 1.0000000000001, 5)
    assert len(set(p.values)) == p.n_values


def test_flag_default_knockout_is_half() -> None:
    p = ss.flag("--use_fast_math")
    assert p.knockout_prob == 0.5
    assert p.values == ("--use_fast_math",)
    assert p.can_knockout


def test_flag_accepts_boundary_probabilities() -> None:
    assert ss.flag("-x", knockout_prob=0).knockout_prob == 0.0
    assert ss.flag("-x", knockout_prob=1).knockout_prob == 1.0


# -- validation messages ----------------------------------------------------------------------


def test_space_definition_error_is_value_error() -> None:
    assert issubclass(SpaceDefinitionError, ValueError)
    assert issubclass(SpaceDefinitionError, CompileIQLabError)


@pytest.mark.parametrize(("start", "end"), [(5, 5), (10, 2)])
def test_range_end_not_above_start(start: int, end: int) -> None:
    with pytest.raises(SpaceDefinitionError, match="end > start") as info:
        ss.range(start, end)
    msg = str(info.value)
    assert f"start={start}" in msg and f"end={end}" in msg
    assert "literal()" in msg


@pytest.mark.parametrize("step", [0, -1, -0.5])
def test_range_step_not_positive(step: float) -> None:
    with pytest.raises(SpaceDefinitionError, match=r"step > 0.*step=" + str(step).replace(".", r"\.")) as info:
        ss.range(0, 10, step)
    assert "Pass a positive step" in str(info.value)


@pytest.mark.parametrize(("kwargs", "name"), [
    ({"start": math.nan, "end": 1}, "start"),
    ({"start": 0, "end": math.inf}, "end"),
    ({"start": 0, "end": 1, "step": math.inf}, "step"),
    ({"start": 0, "end": 10, "seed_low": math.nan}, "seed_low"),
])
def test_range_non_finite_numbers(kwargs: dict, name: str) -> None:
    with pytest.raises(SpaceDefinitionError, match=f"{name} is a finite number") as info:
        ss.range(**kwargs)
    assert f"{name}=" in str(info.value)
    assert "Pass a finite int or float" in str(info.value)


def test_range_rejects_string_number() -> None:
    with pytest.raises(SpaceDefinitionError, match="start is a finite number.*start='0'"):
        ss.range("0", 10)


def test_log_sampling_non_finite_end() -> None:
    with pytest.raises(SpaceDefinitionError, match=r"end is a finite number.*end=inf"):
        ss.log_sampling(1, math.inf, 4)


@pytest.mark.parametrize("prob", [1.5, -0.1])
@pytest.mark.parametrize("make", [
    lambda k: ss.range(0, 3, knockout_prob=k),
    lambda k: ss.choice(["a", "b"], knockout_prob=k),
    lambda k: ss.literal("a", knockout_prob=k),
    lambda k: ss.log_sampling(1, 8, 4, knockout_prob=k),
    lambda k: ss.flag("-a", knockout_prob=k),
])
def test_knockout_prob_outside_unit_interval(make, prob: float) -> None:
    with pytest.raises(SpaceDefinitionError, match=r"0 <= knockout_prob <= 1") as info:
        make(prob)
    assert f"knockout_prob={prob}" in str(info.value)
    assert "probability in [0, 1]" in str(info.value)


def test_choice_empty() -> None:
    with pytest.raises(SpaceDefinitionError, match=r"len\(values\) >= 1.*an empty list.*at least one"):
        ss.choice([])


def test_choice_duplicate_values_names_positions() -> None:
    with pytest.raises(SpaceDefinitionError, match=r"values are distinct.*'b' at positions 1 and 3.*Remove"):
        ss.choice(["a", "b", "c", "b"])
    with pytest.raises(SpaceDefinitionError, match=r"values are distinct.*1.0 at positions 0 and 1"):
        ss.choice([1, 1.0])  # one number: a stored run finds both as one config
    assert ss.choice([1, 1.5, True, "1"]).n_values == 4  # a bool and a string are not that number


def test_choice_string_instead_of_list() -> None:
    with pytest.raises(SpaceDefinitionError, match=r"values is a list or tuple.*str 'abc'.*Wrap the options"):
        ss.choice("abc")


@pytest.mark.parametrize("make", [
    lambda: ss.choice([{"a": 1}, "b"]),
    lambda: ss.literal({"a": 1}),
    lambda: ss.flag({"a": 1}),
])
def test_dict_values_rejected(make) -> None:
    with pytest.raises(SpaceDefinitionError, match=r"values are not dicts.*\{'a': 1\}.*nested dict"):
        make()


def test_choice_dict_container_rejected() -> None:
    with pytest.raises(SpaceDefinitionError, match="values is a list or tuple.*dict"):
        ss.choice({"a": 1})


def test_non_json_value_rejected() -> None:
    with pytest.raises(SpaceDefinitionError, match=r"JSON-serialisable.*\(object\)"):
        ss.literal(object())


@pytest.mark.parametrize("start", [0, -2.0])
def test_log_sampling_start_not_positive(start: float) -> None:
    with pytest.raises(SpaceDefinitionError, match=rf"start > 0.*start={start}.*range\(\)"):
        ss.log_sampling(start, 10, 4)


def test_log_sampling_end_not_above_start() -> None:
    with pytest.raises(SpaceDefinitionError, match=r"end > start.*start=8, end=8"):
        ss.log_sampling(8, 8, 4)


@pytest.mark.parametrize("total", [1, 0, 2.0, True])
def test_log_sampling_total_below_two_or_not_int(total) -> None:
    with pytest.raises(SpaceDefinitionError, match=rf"total is an int >= 2.*total={total!r}.*at least two"):
        ss.log_sampling(1, 10, total)


@pytest.mark.parametrize(("seed_low", "seed_high"), [(-1, None), (None, 11), (6, 4), (0, 10.5)])
def test_range_seed_bounds_outside_domain(seed_low, seed_high) -> None:
    with pytest.raises(SpaceDefinitionError, match="start <= seed_low <= seed_high <= end") as info:
        ss.range(0, 10, seed_low=seed_low, seed_high=seed_high)
    assert "start=0" in str(info.value) and "end=10" in str(info.value)
    assert "inside [start, end]" in str(info.value)


def test_flag_knockout_none_rejected() -> None:
    with pytest.raises(SpaceDefinitionError, match=r"flag\(\).*knockout_prob=None.*use literal\(\)"):
        ss.flag("-x", knockout_prob=None)


def test_messages_name_the_function() -> None:
    with pytest.raises(SpaceDefinitionError, match=r"^log_sampling\(\): "):
        ss.log_sampling(0, 1, 3)
    with pytest.raises(SpaceDefinitionError, match=r"^choice\(\): "):
        ss.choice([])


# -- spec round trip --------------------------------------------------------------------------


@pytest.mark.parametrize("param", [
    ss.range(0, 10, 3),
    ss.range(0.5, 4.0, 0.25, knockout_prob=0.3, seed_low=1.0, seed_high=2.5),
    ss.choice(["a", 2, None, ["x", "y"]], knockout_prob=0.1),
    ss.literal("-O2"),
    ss.literal(7, knockout_prob=0.6),
    ss.log_sampling(1, 4096, 13),
    ss.log_sampling(0.01, 1.0, 3, knockout_prob=0.0),
    ss.flag("--fast"),
    ss.flag("--slow", knockout_prob=0.9),
], ids=repr)
def test_param_from_spec_rebuilds_equal_param(param: ss.Param) -> None:
    rebuilt = ss.param_from_spec(param.to_spec())
    assert rebuilt == param
    assert rebuilt.kind == param.kind
    assert rebuilt.values == param.values
    assert (rebuilt.init_low, rebuilt.init_high) == (param.init_low, param.init_high)
    assert rebuilt.to_spec() == param.to_spec()


def test_param_equality_detects_difference() -> None:
    assert ss.range(0, 10) != ss.range(0, 11)
    assert ss.flag("-a") != ss.flag("-a", knockout_prob=0.4)


def test_param_from_spec_unknown_kind_lists_valid_kinds() -> None:
    with pytest.raises(SpaceDefinitionError, match="unknown parameter kind 'ranged'") as info:
        ss.param_from_spec({"kind": "ranged", "start": 0, "end": 1})
    for kind in ("choice", "flag", "literal", "log_sampling", "range"):
        assert kind in str(info.value)


def test_param_from_spec_missing_kind() -> None:
    with pytest.raises(SpaceDefinitionError, match="unknown parameter kind None; valid kinds"):
        ss.param_from_spec({"start": 0, "end": 1})


def test_numpy_values_are_read_as_the_python_values_they_hold() -> None:
    """CompileIQ's DSL takes numpy arrays and scalars (a sweep built with np.arange): the same space as plain ints."""
    assert ss.choice(np.arange(4)).values == (0, 1, 2, 3)
    assert ss.choice(list(np.arange(1, 4)), knockout_prob=np.float32(0.5)).knockout_prob == 0.5
    r = ss.range(np.int64(0), np.int64(10), step=np.int64(2), default=np.int64(4))
    assert r.values == (0, 2, 4, 6, 8, 10) and r.default == 4 and all(type(v) is int for v in r.values)
    assert ss.literal(np.float64(2.5)).values == (2.5,) and ss.log_sampling(1, 64, np.int64(7)).values[-1] == 64


def test_a_default_matches_the_value_it_equals() -> None:
    """default=4 on a grid of floats is its 4.0 (and 4.0 on a grid of ints its 4): the same config either way."""
    assert ss.range(1.0, 20.0, step=0.5, default=4).default == 4.0
    assert ss.range(1, 9, default=4.0).default == 4 and ss.choice([1, 2, 3], default=1.0).default == 1
    assert ss.range(0, 1, step=0.25, default=0.0).default == 0
    with pytest.raises(SpaceDefinitionError, match="default is one of the values"):
        ss.choice([1, 2, 3], default=True)  # a bool is not the number 1 here
