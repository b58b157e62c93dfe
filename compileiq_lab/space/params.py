"""Search-space parameter DSL: range, choice, literal, log_sampling and flag."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, ParamSpec, TypeVar

from compileiq_lab.exceptions import SpaceDefinitionError
from compileiq_lab.space.grid import check_number, fail, grid, grid_size, log_grid, plain, preview, seed_indices

__all__ = [
    "MAX_VALUES",
    "UNSET",
    "Param",
    "choice",
    "flag",
    "literal",
    "log_sampling",
    "matching_values",
    "param_from_spec",
    "range",
]

ORDINAL = "ordinal"
CATEGORICAL = "categorical"


class _Unset:
    """The value of a parameter's ``default`` when none was declared."""

    def __repr__(self) -> str:
        return "UNSET"


#: No default declared (None can be a parameter's value, so it cannot mean "none").
UNSET: Any = _Unset()

#: The most values one parameter may have (a range's grid, log_sampling's total, a choice's list), checked before
#: any value is built: every value is held in memory and searched by index. The bundled catalogs' biggest parameter
#: has 12 values and the bundled kernels' knobs at most 4. A program that really needs more may raise it
#: (``compileiq_lab.space.params.MAX_VALUES = ...``) before building its space.
MAX_VALUES = 1_000_000
_RAISE = "or raise compileiq_lab.space.params.MAX_VALUES"


def _check_knockout(func: str, knockout_prob: float | None) -> float | None:
    if knockout_prob is None:
        return None
    if isinstance(knockout_prob, bool) or not isinstance(knockout_prob, (int, float)) or not (
        0.0 <= knockout_prob <= 1.0
    ):
        raise fail(func, "0 <= knockout_prob <= 1", f"knockout_prob={knockout_prob!r}",
                    "Pass a probability in [0, 1], or None for a parameter that is always present.")
    return float(knockout_prob)


def _json_key(value: Any, func: str) -> str:
    if isinstance(value, dict):
        raise fail(func, "values are not dicts (a dict in a space is a group of parameters)",
                    f"{value!r}", "Use a nested dict of parameters, or a list/str value.")
    try:
        return json.dumps(value, sort_keys=True, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise fail(func, "values are JSON-serialisable (str, int, float, bool, None, lists)",
                    f"{value!r} ({type(value).__name__})",
                    "Use plain strings or numbers as values.") from exc


def _canon(value: Any, func: str) -> Any:
    """The value as it reads back from JSON (tuples become lists), so stored runs compare equal."""
    return json.loads(_json_key(value, func))


@dataclass(frozen=True)
class Param:
    """One parameter of a search space.

    Attributes:
        kind: The DSL function that made it ("range", "choice", ...).
        values: Every value the parameter can take, in order.
        knockout_prob: Prior probability that the parameter is absent, or None if always present.
        encoding: "ordinal" (neighbouring values are similar) or "categorical".
        init_low: Lowest value index used when sampling the initial population.
        init_high: Highest value index used when sampling the initial population.
        args: The construction arguments, for display and serialisation.
        default: The value the baseline uses when the parameter cannot be knocked out (``UNSET``: none
            declared; a single-valued parameter's default is its value).
    """

    kind: str
    values: tuple[Any, ...]
    knockout_prob: float | None
    encoding: str
    init_low: int = 0
    init_high: int = -1
    args: dict[str, Any] = field(default_factory=dict, compare=False)
    default: Any = UNSET

    def __post_init__(self) -> None:
        if self.init_high < 0:
            object.__setattr__(self, "init_high", len(self.values) - 1)
        if self.default is UNSET and len(self.values) == 1:
            object.__setattr__(self, "default", self.values[0])

    @property
    def n_values(self) -> int:
        """Number of distinct values."""
        return len(self.values)

    @property
    def can_knockout(self) -> bool:
        """Whether the parameter has an evolvable on/off gene."""
        return self.knockout_prob is not None

    @property
    def has_default(self) -> bool:
        """Whether the parameter has a value for the baseline (declared, or its only value)."""
        return self.default is not UNSET

    def index_of(self, value: Any) -> int:
        """Return the index of ``value`` in the domain.

        Args:
            value: A value of this parameter.

        Raises:
            SpaceDefinitionError: If the value is not in the domain.
        """
        same = matching_values(self.values, value, self.kind)  # (3 names a float range's 3.0, as stored before)
        if same:
            return next(i for i, v in enumerate(self.values) if v is same[0])
        raise SpaceDefinitionError(
            f"value {value!r} is not in the domain of {self!r}; valid values: "
            f"{preview(self.values)}"
        )

    def to_spec(self) -> dict[str, Any]:
        """Return a JSON-serialisable description that ``param_from_spec`` rebuilds."""
        return {"kind": self.kind, **self.args}

    def __repr__(self) -> str:
        inner = ", ".join(f"{k}={v!r}" for k, v in self.args.items() if v is not None)
        return f"{self.kind}({inner})"


def _alias(func: str, name: str, value: Any, alias: str, aliased: Any) -> Any:
    """The value given under ``name`` or under its CompileIQ name ``alias`` (exactly one of them)."""
    def missing(v: Any) -> bool:
        return v is None or v is UNSET

    if missing(value) == missing(aliased) and not (value is None and aliased is UNSET and func == "literal"):
        raise fail(func, f"exactly one of {name} and {alias} is given", f"{name}={value!r}, {alias}={aliased!r}",
                    f"Pass the {name} (or CompileIQ's {alias}).")
    return value if missing(aliased) else aliased


def matching_values(values: Sequence[Any], value: Any, func: str) -> list[Any]:
    """The values of a domain that ``value`` names: those with its JSON, else, for a number, those equal to it as
    numbers (4 for 4.0; a bool is no number here).

    Raises:
        SpaceDefinitionError: ``value`` is not JSON data (``func`` names who asks).
    """
    key = _json_key(value, func)
    same = [v for v in values if _json_key(v, func) == key]
    if same or isinstance(value, bool) or not isinstance(value, (int, float)):
        return same
    return [v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool) and v == value]


def _declared(func: str, values: Sequence[Any], default: Any, args: dict[str, Any]) -> Any:
    """A declared default as the domain holds it (and recorded in ``args``), or UNSET; it must be a value."""
    if default is UNSET:
        return UNSET
    same = matching_values(values, default, func)
    if same:  # the value as the domain holds it (4 for a range's 4.0): the same config either way
        args["default"] = same[0]
        return same[0]
    raise fail(func, "default is one of the values", f"default={default!r}",
                f"Pass one of {preview(list(values))}, or leave default out.")


_P = ParamSpec("_P")
_R = TypeVar("_R")


def _takes_numpy(func: Callable[_P, _R]) -> Callable[_P, _R]:
    """A DSL function that also takes numpy scalars and arrays (``choice(np.arange(4))``), as CompileIQ's does: they
    are read as the Python values they hold."""
    @functools.wraps(func)
    def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        return func(*(plain(a) for a in args), **{k: plain(v) for k, v in kwargs.items()})
    return wrapper


@_takes_numpy
def range(  # noqa: A001 - the CompileIQ DSL name
    start: float,
    end: float,
    step: float = 1,
    knockout_prob: float | None = None,
    seed_low: float | None = None,
    seed_high: float | None = None,
    default: Any = UNSET,
) -> Param:
    """Ordered values ``start, start+step, ...`` up to ``end`` inclusive.

    Args:
        start: First value.
        end: Last value (included when it lies on the grid).
        step: Positive distance between values.
        knockout_prob: Prior probability that the parameter is absent; None means always present.
        seed_low: Lowest value sampled in the initial population (defaults to start).
        seed_high: Highest value sampled in the initial population (defaults to end).
        default: The value of the baseline (e.g. the compiler's own), one of the values.

    Returns:
        The parameter.
    """
    for name, v in (("start", start), ("end", end), ("step", step)):
        check_number("range", name, v)
    if not end > start:
        raise fail("range", "end > start", f"(start={start!r}, end={end!r})",
                    "Pass an end greater than start, or use literal() for a constant.")
    if not step > 0:
        raise fail("range", "step > 0", f"step={step!r}", "Pass a positive step.")
    if step > end - start:
        raise fail("range", "step <= end - start", f"(start={start!r}, end={end!r}, step={step!r})",
                    "Use a smaller step so that end can be reached, or literal() for a constant.")
    count = grid_size(start, end, step)
    if count > MAX_VALUES:
        raise fail("range", f"the range has at most MAX_VALUES = {MAX_VALUES} values",
                    f"(start={start!r}, end={end!r}, step={step!r}), which gives {count} values",
                    f"Use a coarser step, or log_sampling for wide ranges ({_RAISE}).")
    values = grid(start, end, step)
    if len(set(values)) != len(values):
        raise fail("range", "the values start + k*step are distinct floats",
                    f"(start={start!r}, end={end!r}, step={step!r}), which gives {len(values)} steps "
                    f"but only {len(set(values))} distinct values",
                    "The step is below the float resolution at this magnitude: use a larger step.")
    low, high = seed_indices(values, start, end, step, seed_low, seed_high)
    args = {"start": start, "end": end, "step": step, "knockout_prob": knockout_prob, "seed_low": seed_low,
            "seed_high": seed_high}
    return Param("range", tuple(values), _check_knockout("range", knockout_prob), ORDINAL, low, high, args,
                 _declared("range", values, default, args))


@_takes_numpy
def choice(values: Sequence[Any] | None = None, knockout_prob: float | None = None, default: Any = UNSET, *,
           choice_list: Sequence[Any] | None = None) -> Param:
    """One of an unordered set of values.

    Args:
        values: The distinct values to choose from (JSON-serialisable).
        knockout_prob: Prior probability that the parameter is absent; None means always present.
        default: The value of the baseline (e.g. the compiler's own), one of the values.
        choice_list: CompileIQ's name for ``values``.

    Returns:
        The parameter.
    """
    values = _alias("choice", "values", values, "choice_list", choice_list)
    if isinstance(values, (str, bytes, dict)) or not isinstance(values, Sequence):
        raise fail("choice", "values is a list or tuple", f"{type(values).__name__} {values!r}",
                    "Wrap the options in a list, e.g. choice(['ca', 'cg']).")
    if len(values) == 0:
        raise fail("choice", "len(values) >= 1", "an empty list",
                    "Give at least one value (two or more to have something to search).")
    if len(values) > MAX_VALUES:
        raise fail("choice", f"len(values) <= MAX_VALUES = {MAX_VALUES}", f"{len(values)} values",
                    f"Offer fewer values, or a range / log_sampling for numbers ({_RAISE}).")
    values = [_canon(v, "choice") for v in values]
    seen: dict[str, int] = {}
    for i, v in enumerate(values):
        key = _json_key(v, "choice")
        if isinstance(v, float) and v.is_integer():  # 1.0 is 1: one config, as a stored run finds it
            key = _json_key(int(v), "choice")
        if key in seen:
            raise fail("choice", "values are distinct", f"{v!r} at positions {seen[key]} and {i}",
                        "Remove the duplicate; to weight an option, use knockout_prob or a range.")
        seen[key] = i
    args = {"values": list(values), "knockout_prob": knockout_prob}
    return Param("choice", tuple(values), _check_knockout("choice", knockout_prob), CATEGORICAL, args=args,
                 default=_declared("choice", values, default, args))


@_takes_numpy
def literal(value: Any = UNSET, knockout_prob: float | None = None, default: Any = UNSET, *,
            const_value: Any = UNSET) -> Param:
    """A constant value that can be switched on and off through knockout.

    Args:
        value: The constant (JSON-serialisable).
        knockout_prob: Prior probability that the parameter is absent; None means always present.
        default: The value of the baseline: only ``value`` itself (its default anyway).
        const_value: CompileIQ's name for ``value``.

    Returns:
        The parameter.
    """
    value = _alias("literal", "value", value, "const_value", const_value)
    value = _canon(value, "literal")
    args = {"value": value, "knockout_prob": knockout_prob}
    return Param("literal", (value,), _check_knockout("literal", knockout_prob), CATEGORICAL, args=args,
                 default=_declared("literal", [value], default, args))


@_takes_numpy
def log_sampling(start: float, end: float, total: int = 10, knockout_prob: float | None = None,
                 default: Any = UNSET) -> Param:
    """``total`` values spaced geometrically from ``start`` to ``end`` (both included).

    Integer ``start`` and ``end`` give integer values (duplicates after rounding are dropped).

    Args:
        start: First value (> 0).
        end: Last value (> start).
        total: Number of values (>= 2; 10 unless given, as in CompileIQ).
        knockout_prob: Prior probability that the parameter is absent; None means always present.
        default: The value of the baseline (e.g. the compiler's own), one of the values.

    Returns:
        The parameter.
    """
    check_number("log_sampling", "start", start)
    check_number("log_sampling", "end", end)
    if not start > 0:
        raise fail("log_sampling", "start > 0", f"start={start!r}",
                    "Logarithmic spacing needs positive values; use range() for zero or negatives.")
    if not end > start:
        raise fail("log_sampling", "end > start", f"(start={start!r}, end={end!r})",
                    "Pass an end greater than start.")
    if isinstance(total, bool) or not isinstance(total, int) or total < 2:
        raise fail("log_sampling", "total is an int >= 2", f"total={total!r}",
                    "Ask for at least two values.")
    if total > MAX_VALUES:
        raise fail("log_sampling", f"total <= MAX_VALUES = {MAX_VALUES}", f"total={total!r}",
                    f"Ask for fewer values: a few dozen cover any range ({_RAISE}).")
    values = log_grid(start, end, total)
    if len(values) < 2:
        raise fail("log_sampling", "the values are distinct", f"(start={start!r}, end={end!r}, total={total})",
                    "Widen [start, end] so that the spaced values differ.")
    args = {"start": start, "end": end, "total": total, "knockout_prob": knockout_prob}
    return Param("log_sampling", tuple(values), _check_knockout("log_sampling", knockout_prob), ORDINAL,
                 args=args, default=_declared("log_sampling", values, default, args))


@_takes_numpy
def flag(name_or_value: Any, knockout_prob: float = 0.5) -> Param:
    """An on/off switch: present with its value, or absent (knocked out).

    Args:
        name_or_value: The value the config holds when the switch is on, e.g. "--use_fast_math".
        knockout_prob: Prior probability that the switch is off.

    Returns:
        The parameter.
    """
    if knockout_prob is None:
        raise fail("flag", "knockout_prob is a probability", "knockout_prob=None",
                    "A flag is an on/off switch; use literal() for a value that is always present.")
    if not isinstance(name_or_value, dict) and (not isinstance(name_or_value, str) or not name_or_value.strip()):
        raise fail("flag", "name_or_value is a non-empty string (the option the switch adds)",
                    f"name_or_value={name_or_value!r}",
                    "Pass the option, e.g. flag('--use_fast_math'); use choice() or literal() for other values.")
    name_or_value = _canon(name_or_value, "flag")  # a dict is refused there, naming groups
    return Param("flag", (name_or_value,), _check_knockout("flag", knockout_prob), CATEGORICAL,
                 args={"name_or_value": name_or_value, "knockout_prob": knockout_prob})


_FACTORIES: dict[str, Callable[..., Param]] = {"range": range, "choice": choice, "literal": literal,
              "log_sampling": log_sampling, "flag": flag}


def param_from_spec(spec: dict[str, Any]) -> Param:
    """Rebuild a parameter from ``Param.to_spec()`` output.

    Args:
        spec: The description, with a "kind" key naming the DSL function.

    Returns:
        The parameter.
    """
    args = dict(spec)
    kind = args.pop("kind", None)
    if kind not in _FACTORIES:
        raise SpaceDefinitionError(
            f"unknown parameter kind {kind!r}; valid kinds: {sorted(_FACTORIES)}")
    return _FACTORIES[kind](**args)
