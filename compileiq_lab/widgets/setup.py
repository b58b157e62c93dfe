"""RunForm: pick a kernel, a target, a subset of the search space, objectives and settings; build a Run."""

from __future__ import annotations

import functools
import html
import os
from dataclasses import dataclass, field
from typing import Any

import ipywidgets as w

__all__ = ["RunForm", "RunContext", "TOY"]

TOY = "toy (quickstart example)"
_CATALOGS = {"cuda": ["nvcc", "ptxas", "nvrtc"], "c": ["gcc", "clang"]}
_DEFAULTS = {"gpu": ["runtime", "energy"], "cpu": ["runtime", "text_bytes"], "static-cuda": ["sass_instructions", "registers"],
             "static-c": ["text_bytes", "compile_time"]}


@dataclass
class RunContext:
    """What a dashboard needs besides the Run: the kernel, catalog, evaluator and run metadata (None for the toy)."""

    kernel: Any = None
    catalog: Any = None
    evaluator: Any = None
    meta: dict[str, Any] = field(default_factory=dict)


@functools.lru_cache(maxsize=None)
def _active(name: str) -> Any:
    from compileiq_lab.space.catalogs import active, get_catalog

    try:
        return active(get_catalog(name))[0]
    except Exception:  # noqa: BLE001 - no compiler to check against: the curated catalog as is
        return get_catalog(name)


@functools.lru_cache(maxsize=1)
def gpu_reason() -> str | None:
    """Why no GPU runs here (cached; probed in a subprocess), or None."""
    from compileiq_lab.measure.gpu import gpu_unavailable_reason

    return gpu_unavailable_reason()


@functools.lru_cache(maxsize=1)
def gpu_arch() -> str | None:
    """The first GPU's target (e.g. "sm_90"), probed in a subprocess; None without a GPU."""
    from compileiq_lab.measure.gpu import gpu_target

    return gpu_target()


class RunForm:
    """The setup half of the dashboard. ``build()`` returns (Run, RunContext) for the current choices."""

    def __init__(self) -> None:
        from compileiq_lab.kernels import list_kernels

        kernels = [TOY, *list_kernels()]
        self.kernel = w.Dropdown(options=kernels, value=TOY, description="kernel")
        self.path = w.Text(placeholder="or a kernel folder / .cu / .c file", description="path")
        self.target = w.Dropdown(description="target")
        self.catalog = w.Dropdown(description="space")
        self.categories = w.SelectMultiple(description="categories", rows=6, layout={"width": "360px"})
        self.docs = w.HTML()
        self.objectives = w.SelectMultiple(description="objectives", rows=6, layout={"width": "360px"})
        self.generations = w.BoundedIntText(value=8, min=1, max=10_000, description="generations")
        self.pool = w.BoundedIntText(value=0, min=0, max=10_000, description="pool (0=auto)")
        self.seed = w.IntText(value=0, description="seed")
        self.note = w.HTML()
        self._spec: Any = None
        for widget, handler in ((self.kernel, self._kernel_changed), (self.path, self._kernel_changed),
                                (self.target, self._target_changed), (self.catalog, self._catalog_changed),
                                (self.categories, self._categories_changed)):
            widget.observe(handler, names="value")
        self._kernel_changed()
        self.box = w.VBox([w.HBox([self.kernel, self.path]), w.HBox([self.target, self.catalog]),
                           w.HBox([self.categories, self.objectives]), self.docs,
                           w.HBox([self.generations, self.pool, self.seed]), self.note])

    # -- choices follow each other ---------------------------------------------------------------
    def spec(self) -> Any:
        """The chosen kernel spec (None for the toy)."""
        from compileiq_lab.kernels import load_kernel

        if self.path.value.strip():
            return load_kernel(self.path.value.strip())
        return None if self.kernel.value == TOY else load_kernel(self.kernel.value)

    def _kernel_changed(self, change: Any = None) -> None:
        try:
            spec = self._spec = self.spec()
        except Exception as exc:  # noqa: BLE001 - shown, not raised, while the user types
            self._spec = None
            self.note.value = f"<span style='color:#b00'>{html.escape(str(exc))}</span>"
            return
        self.note.value = ""
        if spec is None:
            targets, catalogs = ["python"], ["(toy space)"]
        else:
            runnable = not spec.static_only
            if spec.language == "cuda":
                targets = (["gpu"] if runnable and gpu_reason() is None else []) + ["static"]
                if runnable and gpu_reason() is not None:
                    self.note.value = f"no GPU runs here ({html.escape(gpu_reason() or '')}): static metrics only"
            else:
                targets = (["cpu"] if runnable else []) + ["static"]
            catalogs = _CATALOGS[spec.language]
        self.target.options, self.catalog.options = targets, catalogs
        self.target.value, self.catalog.value = targets[0], catalogs[0]  # options= alone leaves value None
        self._target_changed()
        self._catalog_changed()

    def _target_changed(self, change: Any = None) -> None:
        from compileiq_lab.measure.evaluator import CPU_RUN_OBJECTIVES, GPU_OBJECTIVES, STATIC_OBJECTIVES

        spec = self._spec
        if spec is None:
            self.objectives.options, self.objectives.value = ["toy objective"], ("toy objective",)
            return
        target = self.target.value
        if spec.language == "cuda":
            names = list(GPU_OBJECTIVES) * (target == "gpu") + list(STATIC_OBJECTIVES)
            default = _DEFAULTS["gpu" if target == "gpu" else "static-cuda"]
        else:
            names = list(CPU_RUN_OBJECTIVES) * (target == "cpu") + ["text_bytes", "binary_size", "compile_time"]
            default = _DEFAULTS["cpu" if target == "cpu" else "static-c"]
        self.objectives.options = names
        self.objectives.value = tuple(d for d in default if d in names)

    def _catalog_changed(self, change: Any = None) -> None:
        if self.catalog.value in (None, "(toy space)"):
            self.categories.options, self.docs.value = [], ""
            return
        cats = sorted({c.category for c in _active(self.catalog.value).controls})
        self.categories.options = cats
        self.categories.value = tuple(cats)

    def _categories_changed(self, change: Any = None) -> None:
        if self.catalog.value in (None, "(toy space)"):
            return
        chosen = set(self.categories.value)
        rows = "".join(f"<tr><td><code>{html.escape(c.name)}</code></td><td>{html.escape(c.category)}</td>"
                       f"<td>{html.escape(c.tier)}</td><td>{html.escape(c.doc)}</td></tr>"
                       for c in _active(self.catalog.value).controls if c.category in chosen and not c.unsafe_math)
        self.docs.value = ("<details><summary>controls searched</summary><table style='font-size:12px'>"
                           f"<tr><th>control</th><th>category</th><th>tier</th><th>what it does</th></tr>{rows}"
                           "</table></details>")

    # -- build -----------------------------------------------------------------------------------
    def build(self, store: str | None = None) -> tuple[Any, RunContext]:
        """The Run (not started) and its context for the current choices.

        Raises:
            ConfigurationError: A choice that cannot run (no objective, no GPU, ...), with the fix.
        """
        from compileiq_lab import Run, Search, SearchConfiguration
        from compileiq_lab.exceptions import ConfigurationError

        gens, pool, seed = self.generations.value, self.pool.value or None, self.seed.value
        spec = self.spec()
        if spec is None:
            from compileiq_lab.testing import toy_objective, toy_space

            cfg = SearchConfiguration(generations=gens, pool_size=pool, seed=seed)
            return Run(Search(toy_objective, toy_space(), cfg, store=store)), RunContext()
        from compileiq_lab.measure.evaluator import KernelEvaluator

        objectives = list(self.objectives.value)
        if not objectives:
            raise ConfigurationError("pick at least one objective")
        if not self.categories.value:
            raise ConfigurationError("pick at least one category of controls to search")
        catalog = _active(self.catalog.value).select(categories=list(self.categories.value))
        compiler = self.catalog.value if self.catalog.value in ("gcc", "clang", "nvrtc") else "gcc"
        arch = gpu_arch() if spec.language == "cuda" and self.target.value == "gpu" else "sm_90"
        ev = KernelEvaluator(spec, catalog, objectives, compiler=compiler, arch=arch or "sm_90")
        meta = {"kernel": spec.name, "language": spec.language, "source_sha256": spec.source_sha256(),
                "catalog": self.catalog.value, "arch": (arch or "sm_90") if spec.language == "cuda" else None,
                "objectives": objectives, "toolchain": ev.toolchain()}
        if ev.gpu is not None:
            meta["gpu"] = ev.gpu_info
        cfg = SearchConfiguration(generations=gens, pool_size=pool, seed=seed, num_objectives=len(objectives),
                                  problem_type=ev.directions, objective_names=objectives)
        try:
            search = Search(ev, ev.space(), cfg, store=store, constraint=ev.constraint, metadata=meta)
        except BaseException:
            ev.close()
            raise
        cpu_timed = spec.language == "c" and self.target.value == "cpu"
        workers = 1 if cpu_timed else min(8, os.cpu_count() or 1)
        return Run(search, workers=workers), RunContext(spec, catalog, ev, meta)
