"""A run as a table of its controls: one column per control over the successful evaluations."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from compileiq_lab.space.space import flatten_params

if TYPE_CHECKING:
    from compileiq_lab.store.results import Results
    from compileiq_lab.store.sqlite import EvalRecord

__all__ = ["DEFAULT_LABEL", "control_columns", "ok_records"]

#: How a knocked-out control (the compiler default) reads in a column.
DEFAULT_LABEL = "default"


def ok_records(results: Results) -> list[EvalRecord]:
    """The successful evaluations, in call order."""
    return [r for r in results.records if r.status == "ok" and r.scores is not None]


def control_columns(results: Results) -> list[dict[str, Any]]:
    """One column per control over the successful evaluations (``ok_records``), in space order.

    A control absent from a config (knocked out: the compiler default) reads ``"default"``.
    A control whose values are all numbers is ``"numeric"``; any other is ``"categorical"``,
    with integer ``values`` indexing its ``labels`` (``"default"`` first, then sorted).

    Returns:
        Dicts with name, kind ("control"), type, values, labels (categorical only) and raw.
    """
    flat = [flatten_params(r.params) for r in ok_records(results)]
    return [_control_column(name, [f.get(name, DEFAULT_LABEL) for f in flat])
            for name in _control_names(results, flat)]


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.6g}"
    return value if isinstance(value, str) else json.dumps(value, default=str)


def _control_names(results: Results, flat: list[dict[str, Any]]) -> list[str]:
    names: list[str] = []

    def walk(space: Mapping[str, Any], prefix: str) -> None:
        for key, spec in space.items():
            if isinstance(spec, Mapping) and isinstance(spec.get("kind"), str):
                names.append(f"{prefix}{key}")
            elif isinstance(spec, Mapping):
                walk(spec, f"{prefix}{key}.")

    walk(results.header.space, "")
    seen = set(names)
    extra = sorted({k for f in flat for k in f} - seen)
    return names + extra


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _control_column(name: str, raw: list[Any]) -> dict[str, Any]:
    if raw and all(_is_number(v) for v in raw):
        return {"name": name, "kind": "control", "type": "numeric",
                "values": [float(v) for v in raw], "raw": raw}
    keyed = {_fmt(v): v for v in raw if not (isinstance(v, str) and v == DEFAULT_LABEL)}
    nums = sorted(k for k, v in keyed.items() if _is_number(v))
    nums.sort(key=lambda k: float(keyed[k]))
    others = sorted(k for k, v in keyed.items() if not _is_number(v))
    labels = [DEFAULT_LABEL, *nums, *others]
    code = {lab: i for i, lab in enumerate(labels)}
    return {"name": name, "kind": "control", "type": "categorical",
            "values": [code[_fmt(v)] for v in raw], "labels": labels, "raw": raw}
