"""A kernel run on a cluster: pickled as its recipe, compiled on any worker, run where a GPU is (the Dask stages)."""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from compileiq_lab.exceptions import ConfigurationError
from compileiq_lab.kernels.spec import KernelSpec
from compileiq_lab.measure.backends.base import Backend
from compileiq_lab.measure.evaluator import Built, KernelEvaluator
from compileiq_lab.measure.measurement import Measurement
from compileiq_lab.space.catalogs import Catalog
from compileiq_lab.space.space import SearchSpace

__all__ = ["ClusterStages", "portable"]


class ClusterStages:
    """What ``KernelRun`` offers a Dask executor (see ``compileiq_lab.run.dask_executor``): its recipe for the
    workers, the resources its runs need, a worker-side preflight, and the compile and run stages apart."""

    kernel: KernelSpec
    catalog: Catalog
    workdir: Path
    measures: bool
    _recipe: dict[str, Any]
    _gpu_runs: bool
    _runs: set[str]
    _learn: bool
    _warmed: bool
    _compiler: KernelEvaluator | None
    _lazy: threading.RLock

    if TYPE_CHECKING:  # KernelRun's
        @property
        def backend(self) -> Backend: ...

        @property
        def evaluator(self) -> KernelEvaluator: ...

        @property
        def objective_names(self) -> list[str]: ...

        def warm_up(self) -> float | None: ...

        def search_space(self) -> dict[str, Any]: ...

    def __reduce__(self) -> tuple[Any, tuple[type, dict[str, Any]]]:
        """Pickled as its recipe: a worker process rebuilds the run (its own scratch folder, compilers and runner,
        made on first use: ``preflight`` makes them at once)."""
        return _rebuild, (type(self), {**self._recipe, "remote": True})

    @property
    def dask_resources(self) -> dict[str, float] | None:
        """What a Dask worker must declare to run this run's candidates: ``{"GPU": 1}`` when it times GPU runs (its
        compiles need no resource: ``compile_stage`` runs on any worker, ``run_stage`` on a GPU worker)."""
        return {"GPU": 1} if self._gpu_runs and self.measures else None

    @property
    def exclusive_runs(self) -> bool:
        """Whether its runs time the CPU (a C kernel's runtime): two at once on one machine distort each other, so a
        cluster evaluates one at a time."""
        return bool(self._runs) and not self._gpu_runs and self.measures

    def preflight(self, runs: bool = True) -> str | None:
        """Why this process cannot evaluate this run's candidates (a missing compiler; with ``runs``, no usable GPU),
        or None; what it checks is made on the way (the compilers, the GPU worker)."""
        try:
            _ = self.evaluator if runs or not self._gpu_runs else self.compiler
        except ConfigurationError as exc:
            return str(exc).splitlines()[0][:400]
        return None

    @property
    def compiler(self) -> KernelEvaluator:
        """The compile stage's evaluator where GPU runs happen on another machine (it hands out ``Built``s)."""
        with self._lazy:
            if self._compiler is None:
                self._compiler = KernelEvaluator(self.kernel, self.catalog, self.objective_names, self.backend, None,
                                                 learn=self._learn, runs_elsewhere=frozenset(self._runs))
            return self._compiler

    def compile_stage(self, config: dict[str, Any]) -> Measurement | Built:
        """Compile one config for a run elsewhere: the final Measurement of a failure, else the ``Built`` candidate
        (the binary's bytes, its run key, the static metrics) that ``run_stage`` on a GPU worker measures."""
        if not self._warmed:
            self.warm_up()
        return self.compiler.compile_stage(config)

    def run_stage(self, built: Built) -> dict[str, Any]:
        """Run a ``Built`` from ``compile_stage`` (here a GPU must be usable); returns status, error, metrics and
        whether an identical run was reused (``compileiq_lab.measure.evaluator.finish_built`` makes the row)."""
        return self.evaluator.run_stage(built, self.workdir / "built")

    def baseline_config(self) -> dict[str, Any] | None:
        """The compiler defaults of this run's space (what each GPU measures as its own baseline)."""
        return SearchSpace(self.search_space()).baseline()


def portable(ref: Any) -> Any:
    """A kernel or file reference as another process on this machine (or on a shared file system) finds it: a path
    that exists here made absolute; a bundled kernel name or a loaded spec as it is."""
    if isinstance(ref, (str, os.PathLike)) and Path(ref).exists():
        return str(Path(ref).resolve())
    if isinstance(ref, Sequence) and not isinstance(ref, (str, bytes)):
        return [portable(r) for r in ref]
    return ref


def _rebuild(cls: type, recipe: Mapping[str, Any]) -> Any:
    return cls(**recipe)
