"""A run's header and store at the start of a search: the header of a new run, and the checks that a stored run may
be continued with the given space, settings and setup."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from compileiq_lab._version import __version__
from compileiq_lab.exceptions import StoreMismatchError
from compileiq_lab.search.config import TRAJECTORY_KEYS, SearchConfiguration
from compileiq_lab.space.space import SearchSpace
from compileiq_lab.store.header import RunHeader
from compileiq_lab.store.sqlite import RunStore

__all__ = [
    "call_limit",
    "carried_settings",
    "count_run_time",
    "name_of",
    "new_header",
    "nothing_left",
    "prepare_store",
    "record_parts",
    "reopened_config",
]


def count_run_time(store: RunStore, seconds: float) -> float:
    """Count ``seconds`` of wall time spent for a run outside its ``start()`` calls (the CLI's canary builds) in its
    header's ``run_time_s``, which ``time_budget_s`` counts; returns the new total.

    Raises:
        StoreError: Another run is writing the store.
    """
    store.acquire()
    try:
        header = store.header()
        total = (header.run_time_s if header is not None else 0.0) + max(0.0, float(seconds))
        store.update_header(run_time_s=total)
        return total
    finally:
        store.release()


def carried_settings(store: RunStore, config: SearchConfiguration, dump_results: str | None,
                     stored: Mapping[str, Any]) -> tuple[SearchConfiguration, str | None]:
    """What a run keeps outside its settings, for the run continued (``Search.resume``, or ``Search(...)`` on its
    store): ``config`` with the per-call limit it was started with where none is given (``call_limit``), and the CSV
    it writes its results table to (CompileIQ's ``dump_results``: the one given, recorded in the header, else the
    stored one). ``stored``: the run's automatic settings (``prepare_store``'s). Call as the store's writer."""
    limit = stored.get("call_limit_s")
    if config.timeout_s is None and limit is not None:
        config = dataclasses.replace(config, timeout_s=float(limit))
    if dump_results is None:
        return config, stored.get("dump_results")
    absolute = str(Path(dump_results).resolve())
    header = store.header()
    if header is not None and header.resolved.get("dump_results") != absolute:
        store.update_header(resolved={**header.resolved, "dump_results": absolute})
    return config, absolute


def call_limit(store: RunStore, config: SearchConfiguration, limit: float | None) -> SearchConfiguration:
    """``config`` with the per-call ``limit`` a run is started with (``start(task_timeout=...)``, an isolated
    objective's), recorded in the header (``resolved["call_limit_s"]``) where it differs from the one recorded, so
    that the run continued calls as it did (``carried_settings``)."""
    header = store.header()
    if header is not None and header.resolved.get("call_limit_s") != limit:
        store.update_header(resolved={**header.resolved, "call_limit_s": limit})
    return config if limit == config.timeout_s else dataclasses.replace(config, timeout_s=limit)


def nothing_left(config: SearchConfiguration, header: RunHeader, store: RunStore) -> str:
    """Why a stored run started again has nothing left to evaluate, where a setting given for it is spent already
    (a budget its earlier sessions used up, fewer generations than it has), in words; "" otherwise."""
    rows = store.records()
    if config.time_budget_s is not None and header.run_time_s >= config.time_budget_s:
        return (f"its time budget of {config.time_budget_s:g} s is spent ({header.run_time_s:.3g} s ran): nothing "
                "new is evaluated; continue it with a larger time_budget_s (the budget counts the whole run)")
    if config.max_evaluations is not None and len(rows) >= config.max_evaluations:
        return (f"it has {len(rows)} evaluations, max_evaluations={config.max_evaluations}: nothing new is "
                "evaluated; continue it with a larger max_evaluations (the budget counts the whole run)")
    done = max((r.generation for r in rows), default=0)
    if done > config.generations:
        return (f"it has rows of generation {done}, beyond generations={config.generations}: nothing new is "
                f"evaluated; give generations={done} to finish that generation, or more to search on")
    return ""


def name_of(fn: Callable[..., Any] | None) -> str:
    """How a new run's header describes its objective function."""
    if fn is None:
        return "(ask/tell)"
    if hasattr(fn, "__qualname__"):
        return f"{getattr(fn, '__module__', '?')}.{fn.__qualname__}"
    return repr(fn)  # a callable object: its own description


def reopened_config(stored: Mapping[str, Any], **changes: Any) -> SearchConfiguration:
    """A stored run's settings with the changes a resumed run may make (``SearchConfiguration.reopened``)."""
    return SearchConfiguration.reopened(stored, **changes)


def new_header(space: SearchSpace, config: SearchConfiguration, objective: str,
               metadata: Mapping[str, Any] | None = None) -> RunHeader:
    """The header of a new run: schema version, space, configuration, objective, package version, metadata."""
    resolved = config.resolve(space.n_genes)
    return RunHeader(created_at=time.time(), space=space.to_spec(), config=config.to_dict(), objective=objective,
                     package_version=__version__, status="idle",
                     resolved={"pool_size": resolved.pool_size, "strategy": resolved.strategy,
                               "mutate_rate": resolved.mutate_rate},
                     metadata=dict(metadata) if metadata else {})


#: How a setup fact that differs is said, where its name and two hashes would not tell a user what changed.
_SETUP_WORDS = {
    "source_sha256": "the kernel source changed since the run was stored (sha256 {stored:.12} -> {given:.12})",
    "headers_sha256": "a header the kernel source includes changed since the run was stored (sha256 of the headers "
                      "{stored:.12} -> {given:.12})",
    "spec_entry": "kernel.toml names another entry than the run was stored with ({stored!r} -> {given!r})",
    "spec_sha256": "the kernel folder's kernel.toml or reference.py changed since the run was stored (sha256 "
                   "{stored:.12} -> {given:.12}), so its rows' inputs or output checks are not those of now",
}


#: Where a kernel run's kernel and include folders are (not part of its setup, see ``KernelMeta.identity``).
_LOCATION_KEYS = ("kernel_path", "build")


def prepare_store(store: RunStore, new: RunHeader) -> dict[str, Any]:
    """Write a new store's header, or check that the stored run matches ``new`` and may continue.

    Returns:
        The automatic settings the run searches with: the stored run's (``RunHeader.resolved``, so that a run
        keeps the pool it was stored with when a later version picks another default), else ``new``'s.

    Raises:
        StoreMismatchError: If the stored run has another space, trajectory settings or setup.
    """
    h = store.header()
    if h is None:
        store.write_header(new)
        return dict(new.resolved)
    stored_space, space = SearchSpace.from_spec(h.space), SearchSpace.from_spec(new.space)
    if stored_space != space:
        raise StoreMismatchError(
            f"run store {store.path!r} holds a run over a different search space "
            f"(stored vs given: {stored_space.diff(space)}); stored space {stored_space!r}, "
            f"given space {space!r}. Use a new store path, or resume with the stored space.")
    defaults = SearchConfiguration.defaults()  # a setting an earlier version did not store had its default
    stored_cfg, given_cfg = {**defaults, **h.config}, {**defaults, **new.config}
    if (stored_cfg["pool_size"] is None) != (given_cfg["pool_size"] is None) and h.resolved.get("pool_size"):
        # the automatic pool on one side only: it is the pool the stored run resolved (and continues with)
        stored_cfg["pool_size"] = stored_cfg["pool_size"] or h.resolved["pool_size"]
        given_cfg["pool_size"] = given_cfg["pool_size"] or h.resolved["pool_size"]
    named = [[o.name for o in x.objectives] for x in (h, new)]  # other objectives: said by their names
    said = any(stored_cfg[k] != given_cfg[k] for k in ("num_objectives", "problem_type")) and named[0] != named[1]
    diff = [f"objectives: stored {','.join(named[0])} vs given {','.join(named[1])}"] if said else []
    diff += [f"{k}: stored {stored_cfg[k]!r} vs given {given_cfg[k]!r}" for k in TRAJECTORY_KEYS
             if stored_cfg[k] != given_cfg[k] and not (said and k == "num_objectives")]
    if diff:
        raise StoreMismatchError(
            f"run store {store.path!r} was made with other search settings ({'; '.join(diff)}); "
            "a resumed run must keep them (only generations, timeout_s, max_evaluations and time_budget_s may change: "
            "tune's --generations, --timeout, --max-evals and --time-budget). Use a new store path to search with "
            "new settings.")
    stored_setup, given_setup = h.setup(), new.setup()
    keys = sorted(k for k in set(stored_setup) & set(given_setup) if stored_setup[k] != given_setup[k])
    if keys:  # a fact one side does not record is unknown, not different
        what = "; ".join(_SETUP_WORDS.get(k, f"{k}: stored {{stored!r}} vs given {{given!r}}").format(
            stored=stored_setup[k], given=given_setup[k]) for k in keys)
        nothing = h.status in ("baseline_failed", "stopped") and not any(r.status == "ok" for r in store.records())
        fix = (f"The stored run stopped early and holds no result: delete {store.path!r} and run again, or use a new "
               "store path." if nothing else "Use a new store path.")
        raise StoreMismatchError(
            f"run store {store.path!r} holds a run of another setup ({what}); its results would not compare. {fix}")
    # the stored status stays until the run starts (opened to look at, a finished run still reads finished); a run of
    # the same setup resumed from a copy of its tree elsewhere records where its kernel and include folders now are
    moved = {k: new.metadata[k] for k in _LOCATION_KEYS if k in new.metadata}
    store.write_header(h.replace(config=new.config, metadata={**h.metadata, **moved}))
    return {**new.resolved, **h.resolved}


def record_parts(store: RunStore, size: int, first: int | None = None) -> list[tuple[int, int]]:
    """How many candidates at a time the run asked from which row on (``(first row, size)``, in row order; size 0:
    the rest of a generation), with this ``size`` added from row ``first`` on (default: the rows stored) and kept in
    the header (``resolved["parts"]``): each ``start()``'s slots, each ``ask(n)``'s n. A generation is picked part
    by part, each part with every result before it, so a run continued (with other ``workers``, or reopened for
    ask/tell) replays its stored rows only when it asks them again in the parts they were asked in (``Engine``'s
    ``replay_parts``). A run stored before the setting gets [] (it replays with its slots, as it did)."""
    header = store.header() or RunHeader()
    stored = header.resolved.get("parts")
    parts: list[list[int]] = []
    for p in stored if isinstance(stored, list) else ():
        if not (isinstance(p, list) and len(p) == 2 and all(isinstance(v, int) for v in p)):
            parts = []  # a damaged list: as if stored before the setting
            break
        parts.append([int(p[0]), int(p[1])])
    if not parts and any(not r.is_baseline for r in store.records()):  # (stops at the first searched row)
        return []  # stored before the setting: how its parts were asked is not known
    if not parts or parts[-1][1] != size:
        parts.append([(len(store) if first is None else first) if parts else 0, size])
        store.update_header(resolved={**header.resolved, "parts": parts})
    return [(a, b) for a, b in parts]
