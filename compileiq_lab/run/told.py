"""What a ``tell`` records, checked before anything is: the candidates ask() returned with one score (and time)
each, or CompileIQ's ``Score`` objects matched by their ``param_id``."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from compileiq_lab.exceptions import ConfigurationError, SearchStateError
from compileiq_lab.measure.measurement import Measurement
from compileiq_lab.measure.objective import classify_return
from compileiq_lab.run.compat import Score
from compileiq_lab.run.engine import Candidate

__all__ = ["checked_times", "told"]


def told(candidates: Any, scores: Any, awaiting: Sequence[Candidate], num_objectives: int,
         elapsed_s: Any = None) -> list[tuple[Candidate, Measurement]]:
    """What a ``tell`` records, checked before anything is: each candidate with its measurement (a ``Score``'s
    ``metadata`` kept in its detail), from ``tell(candidates, scores)`` or CompileIQ's ``tell([Score(...), ...])``.

    Raises:
        ConfigurationError: Candidates that are not those ask() returned (their configs, their param_ids), Score
            objects with a scores list as well, not one score (and time) per candidate, a param_id given twice.
        SearchStateError: A param_id that awaits no score.
    """
    items = _listed("candidates", candidates)
    notes: list[Any] = []
    if scores is None:
        items, values, notes = _scores_by_id(items, awaiting)
    else:
        if any(isinstance(c, Score) for c in items):
            raise ConfigurationError("tell(Score objects, scores): a Score carries its own score; call "
                                     "tell([Score(...), ...]) alone, or tell(candidates, scores) with ask()'s list")
        values = _listed("scores", scores)
        if any(isinstance(v, Score) for v in values):
            raise ConfigurationError("tell(candidates, [Score(...), ...]): a Score names its candidate itself; call "
                                     "tell([Score(...), ...]) alone, or give plain scores with ask()'s candidates")
    wrong = next((c for c in items if not isinstance(c, Candidate)), None)
    if wrong is not None:
        raise ConfigurationError(f"tell(candidates, scores) takes the Candidate objects ask() returned, but got "
                                 f"{type(wrong).__name__} {str(wrong)[:80]}; pass ask()'s list itself (evaluate each "
                                 "candidate's .config), or Score(score=..., param_id=c.param_id) objects alone")
    if len(items) != len(values):
        raise ConfigurationError(f"tell() needs one score per candidate, but got {len(items)} "
                                 f"candidates and {len(values)} scores")
    times = checked_times(elapsed_s, len(items)) if elapsed_s is not None else None
    out = []
    for i, (c, value) in enumerate(zip(items, values)):
        m = classify_return(value, num_objectives)
        if times is not None:
            m.elapsed_s = times[i]
        if notes and notes[i] not in (None, ""):
            m.detail["metadata"] = notes[i]
        out.append((c, m))
    return out


def _listed(what: str, values: Any) -> list[Any]:
    """A tell argument as a list: a list, a tuple or any other iterable of items (not one item)."""
    if isinstance(values, (str, bytes, Mapping, Candidate, Score)) or not isinstance(values, Iterable):
        raise ConfigurationError(f"tell(): `{what} is a list, one item per candidate` must hold, but got "
                                 f"{type(values).__name__} {str(values)[:80]}; pass a list even for one "
                                 f"candidate, e.g. tell([c], [score])")
    return list(values)


def _scores_by_id(scores: Sequence[Any], awaiting: Sequence[Candidate]) -> tuple[list[Any], list[Any], list[Any]]:
    """The candidates, scores and metadata of a CompileIQ-style ``tell([Score(...), ...])``, matched by param_id among
    the candidates ``awaiting`` a score."""
    out: dict[str, Score] = {}
    for s in scores:
        if not isinstance(s, Score):
            raise ConfigurationError(f"tell(scores) takes Score objects (Score(score=..., param_id=c.param_id)), but "
                                     f"got {type(s).__name__}; or call tell(candidates, scores)")
        if s.param_id in out:
            raise ConfigurationError(f"tell() got param_id {s.param_id!r} twice; give each candidate one score")
        out[s.param_id] = s
    by_id = {c.param_id: c for c in awaiting}
    unknown = sorted(set(out) - set(by_id))
    if unknown:
        raise SearchStateError(f"param_ids {unknown[:3]} are not awaiting a score; tell only what the last ask() "
                               "returned")
    return [by_id[k] for k in out], [s.score for s in out.values()], [_stored(s.metadata) for s in out.values()]


def _stored(metadata: Any) -> Any:
    """A Score's metadata as its row keeps it: as given where JSON holds it (text, a dict of numbers ...), else its
    text."""
    try:
        json.dumps(metadata, allow_nan=False)
    except (TypeError, ValueError):
        return str(metadata)
    return metadata


def checked_times(elapsed_s: Sequence[Any], n: int) -> list[float]:
    """``tell``'s evaluation times, checked before anything is recorded: one finite number >= 0 per candidate.

    Raises:
        ConfigurationError: Another count, or a time that is not such a number.
    """
    times = list(elapsed_s)
    if len(times) != n:
        raise ConfigurationError(f"tell(elapsed_s=...): one time per candidate must be given, but got {len(times)} "
                                 f"times for {n} candidates; give one per candidate, or leave elapsed_s out")
    out = []
    for i, t in enumerate(times):
        try:
            value = float(t)
        except (TypeError, ValueError):
            value = float("nan")
        if not math.isfinite(value) or value < 0:
            raise ConfigurationError(f"tell(elapsed_s=...): each time must be a finite number of seconds >= 0, but "
                                     f"elapsed_s[{i}] is {t!r}; give the measured time, or 0 where it is unknown")
        out.append(value)
    return out
