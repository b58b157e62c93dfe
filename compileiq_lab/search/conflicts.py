"""What a run learns the compiler rejects or ignores: conflicts named by failed compiles, combinations it ignored."""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from compileiq_lab.search.states import n_states, states_of
from compileiq_lab.search.window import RowWindow
from compileiq_lab.space.space import SearchSpace

__all__ = ["LEARNED_STATUSES", "Conflict", "NamedConflicts", "conflicts_in", "lessons"]

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
    """A learned conflict: every config whose controls are all in these states fails to compile, or (``ignored``)
    compiles with that control ignored, i.e. to the code of a config without it.

    Attributes:
        states: Per named control, its index in the space and the states (see ``search.states``) that conflict.
        message: The compiler's message it was learned from.
        ignored: The control the compiler ignores in these states (its name), or None for a conflict that fails.
    """

    states: tuple[tuple[int, frozenset[int]], ...]
    message: str
    ignored: str | None = None


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

    A compile that succeeded can teach a rule too: a compiler that says it ignored a control ("Conflicting options
    '-O0' and '--register-usage-level' specified, ignoring '--register-usage-level'") compiled the config to the code
    of one without it, so asking another config that sets it in the same context would teach nothing. The evaluator
    reads such warnings against its catalog (``compileiq_lab.measure.ignored``) and keeps the rule in the row
    (``detail["ignored_rules"]``); it is learned here as a conflict with ``ignored`` set, the ignored control in any of
    its set states and the others in the states the rule names, and kept whatever compiles (it was learned from a
    compile). One mechanism for both: the same reject hook, the same list (``Results.learned_conflicts``), and a
    resumed run relearns both from its stored rows, wherever the compiles ran.

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
        self._compiled = RowWindow(self.MAX_COMPILED, (len(space.params),), np.int64)  # the latest that compiled
        self._k = n_states(space)
        self._top = {path[0]: i for i, (path, _) in enumerate(space.params) if len(path) == 1}
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

    def observe(self, X: np.ndarray, ok: Sequence[bool], messages: Sequence[str | None],
                ignored: Sequence[Sequence[Mapping[str, Any]] | None] | None = None) -> list[Conflict]:
        """Learn from evaluated genomes: whether each compiled and, for a failure, its message (None: a failure not
        to learn from); for a compile, the rules of the controls the compiler ignored (``ignored``, one list or None
        per genome, each rule ``{"control": name, "when": [{"control": name, "value": v}, {"control": name,
        "any": true} or {"control": name, "absent": true}, ...], "message": text}``, names of the space's top-level
        controls). Returns the conflicts learned."""
        X = np.asarray(X, dtype=np.int64).reshape(-1, self.space.n_genes)
        S = states_of(self.space, X)
        good = S[np.asarray(ok, dtype=bool)]
        if len(good):
            self._compiled.extend(good)
            kept = [c for c in self.conflicts if c.ignored is not None or not self._holds_any(c, good)]
            if len(kept) < len(self.conflicts):
                self.conflicts = kept
                self._reindex()
        if self._full:
            return []
        found: list[Conflict] = []
        for s, fine, message in zip(S, ok, messages):
            if not fine and message:
                c = self._learn(s, message)
                if c is not None and not self._holds_any(c, self._compiled.rows):
                    found.append(c)
        for rules in ignored or ():
            found.extend(c for c in map(self._rule, rules or ()) if c is not None)
        learned = []
        for c in found:
            if any(c.states == known.states and c.ignored == known.ignored for known in self.conflicts):
                continue
            self.conflicts.append(c)
            learned.append(c)
            log.info("learned from the compiler: %s (%s)", self.describe(c), c.message[:200])
            if len(self.conflicts) >= self.MAX_CONFLICTS:
                self._full = True
                log.info("%d conflicts learned: no more are learned in this run", len(self.conflicts))
                break
        if learned:
            self._reindex()
        return learned

    def _rule(self, rule: Mapping[str, Any]) -> Conflict | None:
        """The conflict an ignored-control rule (see ``observe``) is, or None where it names what the space does not
        hold (a control, a value)."""
        if not isinstance(rule, Mapping) or not isinstance(rule.get("when", ()), Sequence):
            return None
        i = self._top.get(str(rule.get("control")))
        if i is None:
            return None
        named = {i: self._set_states(i)}
        for cond in rule.get("when", ()):
            j = self._top.get(str(cond.get("control"))) if isinstance(cond, Mapping) else None
            if j is None and isinstance(cond, Mapping) and cond.get("absent"):
                continue  # a control the space does not hold is never set
            if j is None:
                return None
            states = ({0} if self.space.params[j][1].can_knockout else set()) if cond.get("absent") else \
                self._set_states(j) if cond.get("any") else self._value_states(j, cond.get("value"))
            named[j] = named[j] & states if j in named else states
            if not named[j]:
                return None
        return Conflict(tuple((k, frozenset(v)) for k, v in sorted(named.items())), str(rule.get("message", "")),
                        ignored=".".join(self.space.params[i][0]))

    def _set_states(self, i: int) -> set[int]:
        """The states of control ``i`` that set it (every state but "absent")."""
        return set(range(1 if self.space.params[i][1].can_knockout else 0, int(self._k[i])))

    def _value_states(self, i: int, value: Any) -> set[int]:
        """The state of control ``i`` at ``value`` (empty where it has no such value)."""
        prm = self.space.params[i][1]
        first = 1 if prm.can_knockout else 0
        return {first + j for j, v in enumerate(prm.values) if v == value and type(v) is type(value)}

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
                listed = set(_VALUES.split(tail[0].lower())) - {""} if tail else set()  # ("<0,2>" splits to "")
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
        """A conflict in words, saying what the compiler does with it: e.g. "opt_level in (0, 2, 3) and fast_compile =
        'min' fail to compile", or for an ignored control "register_usage_level is ignored with opt_level = 0"."""
        parts, own = [], c.ignored
        for i, states in c.states:
            path, prm = self.space.params[i]
            name = ".".join(path)
            if name == c.ignored and set(states) == self._set_states(i):
                continue  # ignored whatever it is set to
            first = 1 if prm.can_knockout else 0
            shown = ["(unset)" if st < first else repr(prm.values[st - first]) for st in sorted(states)]
            text = f"{name} = {shown[0]}" if len(shown) == 1 else f"{name} in ({', '.join(shown)})"
            if shown == ["(unset)"]:
                text = f"{name} unset"  # (the kernel's own value holds)
            if first and len(shown) > 1 and set(states) == self._set_states(i):
                text = f"{name} set"  # to any of its values
            if name == c.ignored:
                own = text
            else:
                parts.append(text)
        if c.ignored is None:
            return " and ".join(parts) + (" fails to compile" if len(parts) == 1 else " fail to compile")
        return f"{own} is ignored" + (f" with {' and '.join(parts)}" if parts else "")


def lessons(status: str, error: str, detail: Mapping[str, Any] | None) -> tuple[str | None, list[Any] | None]:
    """What one evaluation teaches ``NamedConflicts.observe``: the message of a failure to read (``LEARNED_STATUSES``;
    else None) and the rules of the controls the compiler ignored (``detail["ignored_rules"]``; else None)."""
    rules = detail.get("ignored_rules") if isinstance(detail, Mapping) else None
    return (error if status in LEARNED_STATUSES else None), (rules if isinstance(rules, list) else None)


def conflicts_in(space: SearchSpace, rows: Sequence[tuple[Mapping[str, Any], str, str, Mapping[str, Any] | None]]
                 ) -> list[str]:
    """The conflicts a run's rows teach, in words: each row a config of the space, its status, its error message and
    its detail (rows that are not points of the space are left out)."""
    rows = [r for r in rows if space.is_point(r[0])]
    if not rows or not space.n_genes:
        return []
    learner = NamedConflicts(space)
    taught = [lessons(status, error, detail) for _, status, error, detail in rows]
    learner.observe(np.array([space.encode(r[0]) for r in rows]), [r[1] == "ok" for r in rows],
                    [m for m, _ in taught], [rules for _, rules in taught])
    return [learner.describe(c) for c in learner.conflicts]
