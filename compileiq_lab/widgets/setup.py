"""RunForm: pick a kernel, a target, a subset of the search space, objectives and settings; build a Run."""

from __future__ import annotations

import html
from typing import Any

import ipywidgets as w

from compileiq_lab.exceptions import ConfigurationError
from compileiq_lab.kernels import (
    CATALOGS,
    GPU_LANGUAGES,
    METRICS,
    KernelRun,
    KernelSpec,
    default_objectives,
    gpu_reason,
    list_kernels,
    load_kernel,
    objective_choices,
    offered_catalog,
)
from compileiq_lab.kernels import targets as kernel_targets
from compileiq_lab.run import Run, Search
from compileiq_lab.search import SearchConfiguration
from compileiq_lab.testing import toy_objective, toy_space

__all__ = ["TOY", "RunForm"]

TOY = "toy (quickstart example)"
_FORM_CATALOGS = {lang: [c for c in names if c != "nvcc_frontend"] for lang, names in CATALOGS.items()}


class RunForm:
    """The setup half of the dashboard. ``build()`` returns (Run, KernelRun or None) for the current choices.

    Args:
        folder: Where the run store and exports go (the form's "folder" field starts with it).
    """

    def __init__(self, folder: str = "compileiq_runs") -> None:
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
        self.folder = w.Text(value=folder, description="folder", layout={"width": "420px"},
                             tooltip="runs (.db) and exported files go here; relative to the notebook's folder")
        self.objective_docs = w.HTML()
        self.note = w.HTML()
        self._spec: KernelSpec | None = None
        for widget, handler in ((self.kernel, self._kernel_changed), (self.path, self._kernel_changed),
                                (self.target, self._target_changed), (self.catalog, self._catalog_changed),
                                (self.categories, self._categories_changed),
                                (self.objectives, self._objectives_changed)):
            widget.observe(handler, names="value")
        self._kernel_changed()
        self.box = w.VBox([w.HBox([self.kernel, self.path]), w.HBox([self.target, self.catalog]),
                           w.HBox([self.categories, self.objectives]), self.objective_docs, self.docs,
                           w.HBox([self.generations, self.pool, self.seed]), self.folder, self.note])

    # -- choices follow each other ---------------------------------------------------------------
    def spec(self) -> KernelSpec | None:
        """The chosen kernel spec (None for the toy)."""
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
            targets, catalogs = kernel_targets(spec), _FORM_CATALOGS[spec.language]
            reason = gpu_reason() if spec.language in GPU_LANGUAGES and not spec.static_only else None
            if reason is not None:
                self.note.value = f"no GPU runs here ({html.escape(reason)}): static metrics only"
        self.target.options, self.catalog.options = targets, catalogs
        self.target.value, self.catalog.value = targets[0], catalogs[0]  # options= alone leaves value None
        self._target_changed()
        self._catalog_changed()

    def _target_changed(self, change: Any = None) -> None:
        spec = self._spec
        if spec is None:
            self.objectives.options, self.objectives.value = ["toy objective"], ("toy objective",)
            return
        names = objective_choices(spec.language, self.target.value)
        self.objectives.options = names
        self.objectives.value = tuple(d for d in default_objectives(spec.language, self.target.value) if d in names)

    def _objectives_changed(self, change: Any = None) -> None:
        """Each chosen objective with its unit, direction and what it measures (how noisy it is, where known)."""
        chosen = [METRICS[n] for n in self.objectives.value if n in METRICS]
        self.objective_docs.value = "".join(f"<div><b>{html.escape(o.label)}</b>: {html.escape(o.doc)}</div>"
                                            for o in chosen)

    def _catalog_changed(self, change: Any = None) -> None:
        if self.catalog.value in (None, "(toy space)"):
            self.categories.options, self.docs.value = [], ""
            return
        offered = offered_catalog(self.catalog.value)
        if offered.note:  # e.g. the compiler is not installed: its controls are listed, a run says what to install
            self.note.value = f"<span style='color:#b00'>{html.escape(offered.note)}</span>"
        cats = sorted({c.category for c in offered.catalog.controls})
        self.categories.options = cats
        self.categories.value = tuple(cats)

    def _categories_changed(self, change: Any = None) -> None:
        if self.catalog.value in (None, "(toy space)"):
            return
        chosen = set(self.categories.value)
        rows = "".join(f"<tr><td><code>{html.escape(c.name)}</code></td><td>{html.escape(c.category)}</td>"
                       f"<td>{html.escape(c.tier)}</td><td>{html.escape(c.doc)}</td></tr>"
                       for c in offered_catalog(self.catalog.value).catalog.controls
                       if c.category in chosen and not c.unsafe_math)
        self.docs.value = ("<details><summary>controls searched</summary><table style='font-size:12px'>"
                           f"<tr><th>control</th><th>category</th><th>tier</th><th>what it does</th></tr>{rows}"
                           "</table></details>")

    # -- build -----------------------------------------------------------------------------------
    def build(self, store: str | None = None) -> tuple[Run, KernelRun | None]:
        """The Run (not started) and its kernel run (None for the toy) for the current choices.

        Raises:
            ConfigurationError: A choice that cannot run (no objective, no GPU, ...), with the fix.
        """
        settings = {"generations": self.generations.value, "pool_size": self.pool.value or None,
                    "seed": self.seed.value}
        spec = self.spec()
        if spec is None:
            return Run(Search(toy_objective, toy_space(), SearchConfiguration(**settings), store=store)), None
        if not self.objectives.value:
            raise ConfigurationError("pick at least one objective")
        if not self.categories.value:
            raise ConfigurationError("pick at least one category of controls to search")
        kernel_run = KernelRun(spec, self.catalog.value, list(self.objectives.value), target=self.target.value,
                               categories=list(self.categories.value))
        try:
            search = Search.of(kernel_run, store=store, **settings)
        except BaseException:
            kernel_run.close()
            raise
        return Run(search, workers=kernel_run.workers), kernel_run
