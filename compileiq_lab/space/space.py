"""SearchSpace: a (nested) dict of parameters encoded as integer genes for the search."""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from compileiq_lab.exceptions import SpaceDefinitionError
from compileiq_lab.space.params import ORDINAL, Param, param_from_spec

__all__ = ["GENE_CATEGORICAL", "GENE_KNOCKOUT", "GENE_ORDINAL", "SearchSpace", "config_key", "flatten_params"]

GENE_ORDINAL = 0
GENE_CATEGORICAL = 1
GENE_KNOCKOUT = 2
_DSL = "ss.range / ss.choice / ss.literal / ss.log_sampling / ss.flag"


def config_key(config: Mapping[str, Any]) -> str:
    """Canonical text identity of a config dict (sorted-key JSON)."""
    return json.dumps(config, sort_keys=True, separators=(",", ":"))


def flatten_params(params: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Flatten nested params to dotted names, e.g. ``{"ptxas": {"O": 3}}`` -> ``{"ptxas.O": 3}``.

    Args:
        params: A config dict, possibly nested.
        prefix: Name prefix for recursion.

    Returns:
        A flat dict of dotted name -> value.
    """
    flat: dict[str, Any] = {}
    for key, value in params.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            flat.update(flatten_params(value, prefix=f"{name}."))
        else:
            flat[name] = value
    return flat


def _flatten(definition: Mapping[str, Any], prefix: tuple[str, ...]) -> Iterator[tuple[tuple[str, ...], Param]]:
    if not isinstance(definition, Mapping):
        raise SpaceDefinitionError(
            f"a search space must be a dict of parameters, but got {type(definition).__name__}. "
            f"Build it as {{'name': ss.range(...), ...}}.")
    if not definition:
        where = f"group '{'.'.join(prefix)}'" if prefix else "the search space"
        raise SpaceDefinitionError(f"{where} is empty; add at least one parameter ({_DSL}).")
    for name, value in definition.items():
        if not isinstance(name, str) or not name or "." in name:
            raise SpaceDefinitionError(
                f"parameter names must be non-empty strings without '.', but got {name!r} "
                f"in {'.'.join(prefix) or 'the top level'}. Rename it.")
        path = prefix + (name,)
        if isinstance(value, Param):
            yield path, value
        elif isinstance(value, Mapping):
            yield from _flatten(value, path)
        else:
            raise SpaceDefinitionError(
                f"space entry '{'.'.join(path)}' must be a parameter ({_DSL}) or a dict of them, "
                f"but got {type(value).__name__} {value!r}. Wrap a constant in ss.literal({value!r}).")


class SearchSpace:
    """A search space: named parameters, each encoded as up to two integer genes.

    A parameter with more than one value has a value gene (an index into its values); a parameter
    with ``knockout_prob`` set has a knockout gene (1 = present, 0 = knocked out) that evolves
    like any other gene.

    Args:
        definition: A dict mapping names to parameters or to nested dicts of parameters.
    """

    def __init__(self, definition: Mapping[str, Any] | SearchSpace) -> None:
        source = definition.definition if isinstance(definition, SearchSpace) else definition
        self.params: list[tuple[tuple[str, ...], Param]] = list(_flatten(source, ()))
        self.definition: dict[str, Any] = _unflatten(dict(self.params))
        # per gene: kind, owning parameter, low, high, initial low and high, knockout prior
        genes: list[tuple[int, int, int, int, int, int, float]] = []
        self.value_gene = np.full(len(self.params), -1, dtype=np.int64)
        self.knock_gene = np.full(len(self.params), -1, dtype=np.int64)
        for i, (_, prm) in enumerate(self.params):
            if prm.n_values > 1:
                self.value_gene[i] = len(genes)
                kind = GENE_ORDINAL if prm.encoding == ORDINAL else GENE_CATEGORICAL
                genes.append((kind, i, 0, prm.n_values - 1, prm.init_low, prm.init_high, 0.0))
            if prm.knockout_prob is not None:
                self.knock_gene[i] = len(genes)
                genes.append((GENE_KNOCKOUT, i, 0, 1, 0, 1, prm.knockout_prob))
        columns = list(zip(*genes)) if genes else [()] * 7
        self.gene_kind, self.gene_owner, self.xl, self.xu, self.init_low, self.init_high = (
            np.array(col, dtype=np.int64) for col in columns[:6])
        self.knockout_prob = np.array(columns[6], dtype=float)
        # value genes of knock-out-able params, paired with their knockout gene (for canonical keys)
        both = (self.value_gene >= 0) & (self.knock_gene >= 0)
        self._masked_value = self.value_gene[both]
        self._masking_knock = self.knock_gene[both]

    # -- description -------------------------------------------------------------------------
    @property
    def names(self) -> list[str]:
        """Dotted names of the parameters, in definition order."""
        return [".".join(p) for p, _ in self.params]

    @property
    def n_genes(self) -> int:
        """Length of the integer genome."""
        return int(self.gene_kind.size)

    @property
    def size(self) -> int:
        """Number of distinct configs in the space."""
        return math.prod(prm.n_values + (1 if prm.can_knockout else 0) for _, prm in self.params)

    def is_point(self, config: object) -> bool:
        """Whether a config is a point of this space."""
        if not isinstance(config, Mapping):
            return False
        try:
            self.encode(config)
        except (SpaceDefinitionError, KeyError):
            return False
        return True

    def baseline(self) -> dict[str, Any] | None:
        """The config of the compiler's defaults: every knock-out-able parameter absent, every other at its
        default (declared with ``default=``, or its only value); None when some parameter has neither
        (see ``baseline_blockers``): such a space has no baseline."""
        if self.baseline_blockers():
            return None
        return _unflatten({path: prm.default for path, prm in self.params if not prm.can_knockout})

    def baseline_blockers(self) -> list[str]:
        """Parameters that can be neither knocked out nor set to a default (they leave the space without a
        baseline)."""
        return [".".join(path) for path, prm in self.params if not prm.can_knockout and not prm.has_default]

    def __getitem__(self, name: str) -> Param:
        for path, prm in self.params:
            if ".".join(path) == name:
                return prm
        raise KeyError(f"no parameter {name!r}; valid names: {self.names}")

    def __repr__(self) -> str:
        body = ", ".join(f"{n}={prm!r}" for n, prm in zip(self.names, (p for _, p in self.params)))
        return f"SearchSpace({body})"

    def __eq__(self, other: object) -> bool:
        # JSON text, not dict equality: 1, 1.0 and True differ, and so does parameter order
        return isinstance(other, SearchSpace) and json.dumps(self.to_spec()) == json.dumps(other.to_spec())

    __hash__ = None  # type: ignore[assignment]

    def to_spec(self) -> dict[str, Any]:
        """JSON-serialisable description (nested like the definition)."""
        return _unflatten({p: prm.to_spec() for p, prm in self.params})

    @classmethod
    def from_spec(cls, spec: Mapping[str, Any]) -> SearchSpace:
        """Rebuild a space from ``to_spec()`` output."""
        def build(node: Mapping[str, Any]) -> dict[str, Any]:
            return {k: param_from_spec(v) if "kind" in v and isinstance(v.get("kind"), str)
                    else build(v) for k, v in node.items()}
        return cls(build(spec))

    def diff(self, other: SearchSpace) -> str:
        """One line per parameter that differs between two spaces (for error messages)."""
        mine = {n: json.dumps(p.to_spec()) for n, (_, p) in zip(self.names, self.params)}
        theirs = {n: json.dumps(p.to_spec()) for n, (_, p) in zip(other.names, other.params)}
        shown = {n: repr(p) for n, (_, p) in zip(self.names, self.params)}
        shown_other = {n: repr(p) for n, (_, p) in zip(other.names, other.params)}
        lines = [f"'{n}': {shown.get(n, '(absent)')} vs {shown_other.get(n, '(absent)')}"
                 for n in sorted(set(mine) | set(theirs)) if mine.get(n) != theirs.get(n)]
        if not lines and self.names != other.names:
            return f"same parameters in another order ({self.names} vs {other.names})"
        return "; ".join(lines) or "(no difference)"

    # -- genomes -----------------------------------------------------------------------------
    def sample(self, rng: np.random.Generator, n: int, stratified: bool = False) -> np.ndarray:
        """Draw ``n`` genomes from the prior (seed bounds for values, knockout_prob for genes).

        Args:
            rng: Random generator.
            n: Number of genomes.
            stratified: Latin-hypercube style: each value gene's range is cut into ``n`` equal
                strata sampled once each, and each knockout gene is on in ``n * (1 - p)`` rows
                (rounded at random), so a small initial population covers every gene evenly. (One
                offset for all of a gene's strata, which makes its values distinct, took 1.11 / 1.16
                times the calls of this on the tune half of bench/tables, catalog / plain space.)
        """
        knock = self.gene_kind == GENE_KNOCKOUT
        if not stratified:
            X = rng.integers(self.init_low, self.init_high + 1, size=(n, self.n_genes))
            if knock.any():
                X[:, knock] = rng.random((n, int(knock.sum()))) >= self.knockout_prob[knock]
            return X.astype(np.int64)
        X = np.empty((n, self.n_genes), dtype=np.int64)
        width = self.init_high - self.init_low + 1
        for j in range(self.n_genes):
            if knock[j]:
                on = (1.0 - self.knockout_prob[j]) * n
                k = int(np.floor(on)) + int(rng.random() < on - np.floor(on))
                X[:, j] = rng.permutation(np.r_[np.ones(k, np.int64), np.zeros(n - k, np.int64)])
            else:
                u = (rng.permutation(n) + rng.random(n)) / n
                X[:, j] = self.init_low[j] + np.minimum((u * width[j]).astype(np.int64), width[j] - 1)
        return X

    def canonical(self, X: np.ndarray) -> np.ndarray:
        """Genomes with the value genes of knocked-out parameters set to -1 (one per config)."""
        C = np.array(X, dtype=np.int64, copy=True, ndmin=2)
        if self._masked_value.size:
            off = C[:, self._masking_knock] == 0
            C[:, self._masked_value] = np.where(off, -1, C[:, self._masked_value])
        return C

    def keys(self, X: np.ndarray) -> list[bytes]:
        """Hashable identity per genome; equal keys mean equal configs."""
        return [row.tobytes() for row in self.canonical(X)]

    def decode(self, x: np.ndarray) -> dict[str, Any]:
        """Turn one genome into the (nested) config dict the objective receives."""
        flat: dict[tuple[str, ...], Any] = {}
        for i, (path, prm) in enumerate(self.params):
            kg = self.knock_gene[i]
            if kg >= 0 and int(x[kg]) == 0:
                continue
            vg = self.value_gene[i]
            value = prm.values[int(x[vg])] if vg >= 0 else prm.values[0]
            flat[path] = copy.deepcopy(value) if isinstance(value, list) else value
        return _unflatten(flat)

    def encode(self, config: Mapping[str, Any]) -> np.ndarray:
        """Turn a config dict back into a genome (absent parameters are knocked out).

        Raises:
            SpaceDefinitionError: If a value is outside the space or a required parameter is absent.
        """
        flat = _flatten_config(config, ())
        unknown = set(flat) - {p for p, _ in self.params}
        if unknown:
            raise SpaceDefinitionError(
                f"config names {sorted('.'.join(u) for u in unknown)} are not in the space; "
                f"valid names: {self.names}")
        x = np.zeros(self.n_genes, dtype=np.int64)
        for i, (path, prm) in enumerate(self.params):
            if path not in flat:
                if self.knock_gene[i] < 0:
                    raise SpaceDefinitionError(
                        f"parameter '{'.'.join(path)}' has no knockout_prob, so it must be present "
                        f"in the config; valid values: {list(prm.values)[:8]}")
                continue
            if self.knock_gene[i] >= 0:
                x[self.knock_gene[i]] = 1
            idx = prm.index_of(flat[path])
            if self.value_gene[i] >= 0:
                x[self.value_gene[i]] = idx
        return x


def _unflatten(flat: Mapping[tuple[str, ...], Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for path, value in flat.items():
        node = out
        for part in path[:-1]:
            node = node.setdefault(part, {})
        node[path[-1]] = value
    return out


def _flatten_config(config: Mapping[str, Any], prefix: tuple[str, ...]) -> dict[tuple[str, ...], Any]:
    flat: dict[tuple[str, ...], Any] = {}
    for k, v in config.items():
        if isinstance(v, Mapping) and v:
            flat.update(_flatten_config(v, prefix + (k,)))
        else:
            flat[prefix + (k,)] = v
    return flat
