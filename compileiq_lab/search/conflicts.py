"""Conflicts learned from failed compiles' messages: the controls a compiler names when it rejects a config."""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from compileiq_lab.search.states import states_of
from compileiq_lab.space.space import SearchSpace

__all__ = ["LEARNED_STATUSES", "Conflict", "NamedConflicts", "conflicts_in"]

log = logging.getLogger(__name__)

#: The failures whose message is read: a compile error, or an objective that raised (a user's objective raises with
#: the compiler's message). Timeouts, crashes and wrong output name no option.
LEARNED_STATUSES = ("compile_error", "error")
_NORM = re.compile(r"[^a-z0-9]")
_SPLIT = re.compile(r"[=:]")
_VALUES = re.compile(r"[^a-z0-9_.+-]+")
_QUOTES = "'\"`([{<,;"


def _norm(text: object) -> str:
    return _NORM.sub("", str(text).lower())


@dataclass(frozen=True)
class Conflict:
    """A learned conflict: every config whose controls are all in these states fails to compile.

    Attributes:
        states: Per named control, its index in the space and the states (see ``search.states``) that conflict.
        message: The compiler's message it was learned from.
    """

    states: tuple[tuple[int, frozenset[int]], ...]
    message: str


class NamedConflicts:
    """Learns what a compiler rejects from what it says: "Conflicting options -opt-level=<0,2,3> and
    --Ofast-compile=min" names two controls, so every config with those two controls in those states fails too.

    A failed compile's message is split into words. A control is named by a word whose option name (the part before
    any ``=`` or ``:``, letters and digits only) is the control's name; by an option word (one that starts with
    ``-``) that ends with its name (``--Ofast-compile`` names ``fast_compile``) or whose name ends as the option does
    but for its first letter (``-opt-level`` names ``ptxas_opt_level``, ``--Ofast-compile`` ``ptxas_fast_compile``);
    or by a word that is one of its values spelled as an option (a flag's ``--restrict``, a choice's ``-O3``). The
    conflict holds each named control in the state the failed config had, and in the other states of its values
    listed after the ``=`` (``<0,2,3>``); a control named by mistake only makes it narrower. A message is
    learned from only when it names a control and every option word in it names one (an option the space does not
    hold may be the other half of the conflict), and a conflict is dropped when a config in it has compiled.
    The search then never asks a config in a learned conflict (the strategy's reject hook), as it never asks one the
    catalog knows to conflict. Messages that name no control leave the learning to the offspring screen's failure
    pairs (``search.failures``), which need several failures per pair.

    On the tune half of bench/tables (plain spaces, seeds 400-519, paired, bench/results/variants_conflicts.md)
    learning took the sum of mean calls to the optimum from 64.6 to 62.6 (without it 1.03 times the calls, 90 %
    interval 0.99-1.07: ``sgemm2d_nvcc`` 26.6 to 25.2, ``matrixmul_ptxas`` 20.5 to 19.9); the catalog spaces, whose
    conflicts are constraints, do not fail. The offspring screen still learns from the failures a conflict explains:
    leaving them out of it (as if never evaluated) took 65.9 (``sgemm2d_nvcc`` 28.5), and out of its failure pairs or
    its densities alone 46.3 and 47.2 on those two tables against 45.1. A screen that starts with 1 or 3 compiled
    configs instead of 4 (``min_history``) was noise (0.99 times the calls, 0.95-1.03 and 0.96-1.02), and so was
    weighing the failure pairs less now that named conflicts are rules (``failure_weight`` 2 or 3, not 5: 1.02 and
    1.01 times, bench/results/variants_failure_weight.md).

    Args:
        space: The encoded space.
    """

    #: Names shorter than this are not looked for (too likely to be part of another word); an option names a control
    #: whose name ends as it does (``-opt-level`` names ``ptxas_opt_level``) in at least MIN_SUFFIX letters.
    MIN_NAME = 4
    MIN_SUFFIX = 6
    #: The most conflicts kept (bounded cost per candidate), and the most compiled configs a new one is checked
    #: against.
    MAX_CONFLICTS = 256
    MAX_COMPILED = 4096

    def __init__(self, space: SearchSpace) -> None:
        self.space = space
        self.conflicts: list[Conflict] = []
        self._names: list[str] = []
        self._options: list[dict[str, int]] = []  # per control: a value spelled as an option -> its state
        self._labels: list[dict[str, int]] = []  # per control: a value as text -> its state
        for path, prm in space.params:
            first = 1 if prm.can_knockout else 0
            self._names.append(_norm(path[-1]))
            self._labels.append({str(v).lower(): first + j for j, v in enumerate(prm.values)
                                 if isinstance(v, (str, int, float, bool))})
            self._options.append({v.strip(): first + j for j, v in enumerate(prm.values)
                                  if isinstance(v, str) and v.strip().startswith("-")})
        self._genes = [(int(space.value_gene[i]), int(space.knock_gene[i])) for i in range(len(space.params))]
        self._compiled = np.zeros((0, len(space.params)), dtype=np.int64)
        self._full = False
        # the conflicts by their first control and its states: a genome is checked against those its state there
        # is in (a few dictionary lookups per candidate however many conflicts there are)
        self._index: dict[int, dict[int, list[Conflict]]] = {}

    def _reindex(self) -> None:
        self._index = {}
        for c in self.conflicts:
            i, states = c.states[0]
            for st in states:
                self._index.setdefault(i, {}).setdefault(st, []).append(c)

    def _state(self, x: list[int], i: int) -> int:
        vg, kg = self._genes[i]
        v = x[vg] if vg >= 0 else 0
        return (0 if x[kg] == 0 else v + 1) if kg >= 0 else v

    def conflict(self, x: np.ndarray) -> Conflict | None:
        """The learned conflict a genome is in, or None."""
        if not self._index:
            return None
        row = np.asarray(x).tolist()
        for i, by_state in self._index.items():
            for c in by_state.get(self._state(row, i), ()):
                if all(self._state(row, j) in states for j, states in c.states[1:]):
                    return c
        return None

    def observe(self, X: np.ndarray, ok: Sequence[bool], messages: Sequence[str | None]) -> list[Conflict]:
        """Learn from evaluated genomes: whether each compiled and, for a failure, its message (None: a failure not
        to learn from). Returns the conflicts learned."""
        X = np.asarray(X, dtype=np.int64).reshape(-1, self.space.n_genes)
        S = states_of(self.space, X)
        good = S[np.asarray(ok, dtype=bool)]
        if len(good):
            self._compiled = np.vstack([self._compiled, good])[-self.MAX_COMPILED:]
            kept = [c for c in self.conflicts if not self._holds_any(c, good)]
            if len(kept) < len(self.conflicts):
                self.conflicts = kept
                self._reindex()
        learned = []
        for s, fine, message in zip(S, ok, messages):
            if fine or not message or self._full:
                continue
            c = self._learn(s, message)
            if c is not None and not self._holds_any(c, self._compiled) \
                    and all(c.states != known.states for known in self.conflicts):
                self.conflicts.append(c)
                self._reindex()
                learned.append(c)
                log.info("learned from a failed compile: configs with %s fail (%s)", self.describe(c), message[:200])
                if len(self.conflicts) >= self.MAX_CONFLICTS:
                    self._full = True
                    log.info("%d conflicts learned: no more are learned in this run", len(self.conflicts))
        return learned

    @staticmethod
    def _holds_any(c: Conflict, S: np.ndarray) -> bool:
        """Whether any config (rows of states) is in the conflict."""
        hit = np.ones(len(S), dtype=bool)
        for i, states in c.states:
            hit &= np.isin(S[:, i], list(states))
        return bool(hit.any())

    def _learn(self, s: np.ndarray, message: str) -> Conflict | None:
        """The conflict a failed config's message names (its states ``s``), or None."""
        named: dict[int, set[int]] = {}
        for raw in message.split():
            word = raw.strip(_QUOTES).rstrip(".,;:'\")]}>")
            option = word.startswith("-") and len(word) > 1 and word.lstrip("-")[:1].isalpha()
            head, *tail = _SPLIT.split(word, maxsplit=1)
            key = _norm(head)
            hits = [i for i, name in enumerate(self._names) if len(name) >= self.MIN_NAME and key
                    and (key == name or (option and self._names_option(name, key)))]
            hits += [i for i, spelled in enumerate(self._options) if word in spelled and i not in hits]
            if option and not hits:
                return None  # an option the space does not hold: the conflict may be with it
            for i in hits:
                states = named.setdefault(i, {int(s[i])})
                listed = set(_VALUES.split(tail[0].lower())) if tail else set()
                states.update(state for label, state in self._labels[i].items() if label in listed)
        if not named:
            return None
        return Conflict(tuple((i, frozenset(states)) for i, states in sorted(named.items())), message)

    def _names_option(self, name: str, key: str) -> bool:
        """Whether an option (``key``: its name, letters and digits) names a control called ``name``: the option ends
        with the whole name, or both end alike in at least ``MIN_SUFFIX`` letters and all of the option's but its
        first (``Ofastcompile`` and ``ptxasfastcompile``)."""
        same = 0
        for a, b in zip(reversed(key), reversed(name)):
            if a != b:
                break
            same += 1
        return same == len(name) or (same >= self.MIN_SUFFIX and same >= len(key) - 1)

    def describe(self, c: Conflict) -> str:
        """A conflict in words, e.g. "opt_level in (0, 2, 3) and fast_compile = 'min'"."""
        parts = []
        for i, states in c.states:
            path, prm = self.space.params[i]
            first = 1 if prm.can_knockout else 0
            shown = ["(unset)" if st < first else repr(prm.values[st - first]) for st in sorted(states)]
            name = ".".join(path)
            parts.append(f"{name} = {shown[0]}" if len(shown) == 1 else f"{name} in ({', '.join(shown)})")
        return " and ".join(parts)


def conflicts_in(space: SearchSpace, rows: Sequence[tuple[Mapping[str, Any], str, str]]) -> list[str]:
    """The conflicts a run's rows teach, in words: each row a config of the space, its status and its error message
    (rows that are not points of the space are left out)."""
    rows = [r for r in rows if space.is_point(r[0])]
    if not rows or not space.n_genes:
        return []
    learner = NamedConflicts(space)
    learner.observe(np.array([space.encode(c) for c, _, _ in rows]), [status == "ok" for _, status, _ in rows],
                    [error if status in LEARNED_STATUSES else None for _, status, error in rows])
    return [learner.describe(c) for c in learner.conflicts]
