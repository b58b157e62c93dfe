"""From common to exotic controls: search the common tier first, widen to the next tier when progress stalls."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from compileiq_lab.kernels.load import load_kernel
from compileiq_lab.kernels.run import KernelRun
from compileiq_lab.kernels.spec import KernelSpec
from compileiq_lab.run.events import GenerationEvent, RunEvent
from compileiq_lab.run.facade import Search
from compileiq_lab.space.catalogs import get_catalog
from compileiq_lab.space.catalogs.base import TIERS
from compileiq_lab.space.space import config_key

if TYPE_CHECKING:
    from compileiq_lab.space.catalogs.base import Catalog
    from compileiq_lab.store.results import Results

__all__ = ["Stage", "StageEvent", "WideningResult", "widening_search"]

log = logging.getLogger(__name__)


@dataclass
class Stage:
    """One stage of a widening search: the tiers searched, its run store, and why it ended."""

    tiers: list[str]
    controls: int
    store: str
    generations: int = 0
    evaluations: int = 0
    reason: str = ""
    warm_start: int = 0


@dataclass(frozen=True)
class StageEvent:
    """A stage of a widening search ended: ``kind`` is "widened" (another stage follows) or "stage_finished"."""

    kind: str
    stage: int
    tiers: tuple[str, ...]
    reason: str


@dataclass
class WideningResult:
    """The stages in order and the last stage's results (its front includes what earlier stages carried over)."""

    stages: list[Stage] = field(default_factory=list)
    results: Results | None = None


def _front_signature(results: Results) -> frozenset[tuple[float, ...]]:
    return frozenset(tuple(r.scores or ()) for r in results.front_records())


def widening_search(kernel: KernelSpec | str | os.PathLike[str], catalog: Catalog | str, objectives: Sequence[str],
                    store_dir: str | Path, *,
                    tiers: Sequence[str] = TIERS, stall_generations: int = 3, generations_per_stage: int = 10,
                    pool_size: int | None = None, seed: int = 0, workers: int = 1,
                    callback: Callable[[RunEvent | StageEvent], None] | None = None,
                    evaluator_options: dict[str, Any] | None = None) -> WideningResult:
    """Search ``catalog``'s first tier, then widen to the next one each time the front stops improving.

    Stage i searches the controls of ``tiers[:i+1]`` (a tier with no controls is skipped). A
    stage ends when its Pareto front (the set of score vectors) has not changed for
    ``stall_generations`` generations ("stalled"), or after ``generations_per_stage``. The next
    stage opens with the previous stage's population carried over: its front and its latest
    generation (``SearchConfiguration.warm_start``); configs keep their values, the newly added
    controls start at the compiler default. Each stage has its own run store in ``store_dir``.

    Args:
        kernel, catalog, objectives: What to tune (as for KernelRun: a kernel's name, folder or file, or its spec;
            a catalog's name, such as "gcc", or the catalog).
        store_dir: Folder for the stages' run stores.
        tiers: Tier order.
        stall_generations: Generations without front change that end a stage.
        generations_per_stage: Cap per stage.
        pool_size, seed, workers: As for a Search.
        callback: Receives every run event, plus a StageEvent when a stage ends.
        evaluator_options: Extra KernelRun arguments (arch, timeout_s, workdir, ...).
    """
    emit = callback or (lambda event: None)
    kernel = kernel if isinstance(kernel, KernelSpec) else load_kernel(kernel)
    catalog = get_catalog(catalog) if isinstance(catalog, str) else catalog
    out = WideningResult()
    carried: list[dict[str, Any]] = []
    Path(store_dir).mkdir(parents=True, exist_ok=True)
    for i in range(len(tiers)):
        active = list(tiers[: i + 1])
        sub = catalog.select(tiers=active)
        if i > 0 and len(sub.controls) == len(catalog.select(tiers=active[:-1]).controls):
            continue  # this tier adds no control
        run = KernelRun(kernel, sub, list(objectives), catalog_name=catalog.compiler, **(evaluator_options or {}))
        store = Path(store_dir) / f"{kernel.name}-stage{i + 1}-{'-'.join(active)}.db"
        stage = Stage(active, len(sub.controls), str(store), warm_start=len(carried))
        search = Search.of(run, store=stage.store, metadata=run.metadata(tiers=active, widening_stage=i + 1),
                           generations=generations_per_stage, pool_size=pool_size, seed=seed,
                           warm_start=carried or None)
        state: dict[str, Any] = {"same": 0, "front": frozenset()}

        def on_event(event: RunEvent, search: Search = search, state: dict[str, Any] = state) -> None:
            emit(event)
            if not isinstance(event, GenerationEvent) or event.generation < 1:
                return
            front = _front_signature(search.results)
            state["same"] = state["same"] + 1 if front == state["front"] else 0
            state["front"] = front
            if state["same"] >= stall_generations:
                search.stop()

        try:
            results = search.start(callback=on_event, workers=workers)
        finally:
            run.close()
        stage.generations = max((r.generation for r in results.records), default=0)
        stage.evaluations = len(results)
        stage.reason = (f"stalled: the front did not change for {stall_generations} generations"
                        if results.status == "stopped" else f"{results.status} after {stage.generations} generations")
        out.stages.append(stage)
        out.results = results
        log.info("widening stage %d (%s, %d controls): %s", i + 1, "+".join(active), stage.controls, stage.reason)
        emit(StageEvent("widened" if i + 1 < len(tiers) else "stage_finished", i + 1, tuple(active), stage.reason))
        if results.status == "interrupted":  # Ctrl-C ends the whole widening, not only this stage
            break
        last_gen = max((r.generation for r in results.records), default=0)
        keep = [r.params for r in results.front_records()]
        keep += [r.params for r in results.records if r.generation == last_gen and r.status == "ok"]
        carried = [dict(p) for p in {config_key(p): p for p in keep if p}.values()]
    return out
