"""RunForm: pick a kernel, a target, a subset of the search space, objectives and settings; build a Run or a replay."""

from __future__ import annotations

import contextlib
import functools
import html
import importlib
import logging
import re
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import ipywidgets as w

from compileiq_lab.exceptions import ConfigurationError
from compileiq_lab.kernels import (
    CATALOGS,
    DEFAULT_ARCH,
    GPU_LANGUAGES,
    METRICS,
    KernelRun,
    KernelSpec,
    default_objectives,
    gpu_arch,
    gpu_reason,
    objective_choices,
    offered_catalog,
)
from compileiq_lab.kernels import targets as kernel_targets
from compileiq_lab.run import Run, Search
from compileiq_lab.search import SearchConfiguration
from compileiq_lab.store import load_results
from compileiq_lab.testing import toy_objective, toy_space
from compileiq_lab.toolchain import find_tool, run_tool
from compileiq_lab.widgets.kernelfields import TOY, KernelFields

__all__ = ["REPLAY", "TOY", "RunForm", "ptxas_archs"]

log = logging.getLogger(__name__)

#: The target that replays a stored run (the path field holds its .db) instead of searching.
REPLAY = "replay"
_TOY_SPACE = "(toy space)"
_FORM_CATALOGS = {lang: [c for c in names if c != "nvcc_frontend"] for lang, names in CATALOGS.items()}
_STYLE = {"description_width": "initial"}  # every label shown whole ("pool (0=auto)", "categories", ...)
_HIDDEN, _SHOWN = "none", ""


@functools.lru_cache(maxsize=1)
def ptxas_archs() -> tuple[str, ...]:
    """The real GPU targets (sm_XY, sm_XYa, sm_XYf) the installed ptxas accepts, read from its ``--help`` (asked
    once per process); just ``DEFAULT_ARCH`` when no ptxas can be found or asked."""
    try:
        res = run_tool([find_tool("ptxas"), "--help"], 15.0)
    except (ConfigurationError, OSError) as exc:
        log.info("no ptxas to list GPU targets (%s); offering %s only", exc, DEFAULT_ARCH)
        return (DEFAULT_ARCH,)
    allowed = res.stdout.split("--gpu-name", 1)[-1].split("Default value", 1)[0]
    found = set(re.findall(r"'(sm_\d+[a-z]?)'", allowed))
    return tuple(sorted(found, key=_arch_key)) or (DEFAULT_ARCH,)


def _arch_key(arch: str) -> tuple[int, str]:
    digits = re.match(r"sm_(\d+)(\w*)", arch)
    return (int(digits.group(1)), digits.group(2)) if digits else (0, arch)


def _ptx_target(spec: KernelSpec) -> str | None:
    """The ``.target`` of a PTX module (what KernelRun assembles it for unless told otherwise), or None."""
    try:
        found = re.search(r"^\s*\.target\s+(sm_\d+[a-z]?)", Path(spec.source_path).read_text(errors="replace"), re.M)
    except OSError:
        return None
    return found.group(1) if found else None


class RunForm:
    """The setup half of the dashboard. ``build()`` returns (Run, KernelRun or None) for the current choices.

    Choices carry over: a new kernel or target keeps the catalog, categories, objectives and arch chosen where they
    still apply (a choice left at its default follows the new default). The "replay" target replays the run store
    (.db) in the path field at ``speed`` instead of searching.

    Args:
        folder: Where the run store and exports go (the form's "folder" field starts with it).
    """

    def __init__(self, folder: str = "compileiq_runs") -> None:
        self.fields = KernelFields(lambda: self.folder.value)
        f = self.fields  # the form's own names for them (the dashboard and the notebooks use these)
        self.kernel, self.path, self.include, self.entry, self.block, self.defines, self.args = \
            f.kernel, f.path, f.include, f.entry, f.block, f.defines, f.args
        self.signature, self.constexprs, self.num_warps, self.num_stages, self.autotune = \
            f.signature, f.constexprs, f.num_warps, f.num_stages, f.autotune
        self.target = w.Dropdown(description="target", style=_STYLE)
        self.catalog = w.Dropdown(description="space", style=_STYLE)
        self.arch = w.Dropdown(description="arch", style=_STYLE, layout={"width": "180px", "display": _HIDDEN},
                               tooltip="the GPU target the kernel is compiled for")
        self.speed = w.FloatLogSlider(value=1.0, base=10, min=-1, max=2, step=0.1, description="speed (x)",
                                      style=_STYLE, layout={"display": _HIDDEN},
                                      tooltip="replay speed: 2 plays the stored run twice as fast as it ran")
        self.categories = w.SelectMultiple(description="categories", rows=6, style=_STYLE, layout={"width": "380px"})
        self.docs = w.HTML()
        self.objectives = w.SelectMultiple(description="objectives", rows=6, style=_STYLE, layout={"width": "380px"})
        self.generations = w.BoundedIntText(value=8, min=1, max=10_000, description="generations", style=_STYLE,
                                            layout={"width": "180px"})
        self.pool = w.BoundedIntText(value=0, min=0, max=10_000, description="pool (0=auto)", style=_STYLE,
                                     layout={"width": "180px"})
        self.seed = w.IntText(value=0, description="seed", style=_STYLE, layout={"width": "140px"})
        self.max_evals = w.BoundedIntText(value=0, min=0, max=10**7, description="evaluations (0=no limit)",
                                          style=_STYLE, layout={"width": "240px"},
                                          tooltip="end the run once it holds this many evaluations (the baseline's "
                                                  "included)")
        self.time_budget = w.BoundedFloatText(value=0, min=0, max=7 * 24 * 60, description="minutes (0=no limit)",
                                              style=_STYLE, layout={"width": "220px"},
                                              tooltip="end the run once it has run this long (paused time not "
                                                      "counted); no call starts after it")
        self.timeout = w.BoundedFloatText(value=120, min=1, max=24 * 3600, description="call limit (s)",
                                          style=_STYLE, layout={"width": "180px"},
                                          tooltip="the limit of each compiler call and kernel run: one that takes "
                                                  "longer is recorded as a timeout")
        self.folder = w.Text(value=folder, description="folder", layout={"width": "420px"}, style=_STYLE,
                             tooltip="runs (.db) and exported files go here; relative to the notebook's folder")
        self.objective_docs = w.HTML()
        self.note = w.HTML()
        self._spec: KernelSpec | None = None
        self._updating = False
        self._arch_default: str | None = None
        self._target_default: str | None = None
        self._defaults: dict[str, tuple[str, ...]] = {}  # the default of each SelectMultiple as last offered
        for widget, handler in (*((field, self._kernel_changed) for field in f.widgets),
                                (self.target, self._target_changed), (self.catalog, self._catalog_changed),
                                (self.categories, self._categories_changed),
                                (self.objectives, self._objectives_changed)):
            widget.observe(handler, names="value")
        self._search_row = w.HBox([self.catalog, self.arch])
        self._choice_row = w.HBox([self.categories, self.objectives])
        self._settings_row = w.VBox([w.HBox([self.generations, self.pool, self.seed]),
                                     w.HBox([self.max_evals, self.time_budget, self.timeout])])
        self._kernel_changed()
        self.box = w.VBox([*f.rows,
                           w.HBox([self.target, self.speed]), self._search_row,
                           self._choice_row, self.objective_docs, self.docs, self._settings_row, self.folder,
                           self.note])

    def on_edit(self, callback: Callable[[bool], None]) -> None:
        """Call ``callback(of_the_run)`` whenever the user changes a choice of the form: ``of_the_run`` False for the
        folder alone (where exports go too), True for what a run is made of."""
        for widget in (*self.fields.widgets, self.target, self.catalog, self.arch, self.categories, self.objectives,
                       self.generations, self.pool, self.seed, self.max_evals, self.time_budget, self.timeout,
                       self.folder):
            widget.observe(lambda _change, run=widget is not self.folder: None if self._updating else callback(run),
                           names="value")

    # -- helpers ---------------------------------------------------------------------------------
    @contextlib.contextmanager
    def _quiet(self) -> Iterator[None]:
        """Set several widgets without their observers running on each intermediate value."""
        was, self._updating = self._updating, True
        try:
            yield
        finally:
            self._updating = was

    @staticmethod
    def _choose(widget: w.Dropdown, options: Sequence[str], default: str) -> None:
        """Offer ``options``, keeping the current value where it is still offered."""
        keep = widget.value if widget.value in options else default
        widget.options = list(options)
        widget.value = keep  # options= alone may leave value None

    def _choose_many(self, widget: w.SelectMultiple, options: Sequence[str], default: Sequence[str]) -> None:
        """Offer ``options``, keeping the chosen ones still offered; a choice left at its default (or with none
        left) gets the new default."""
        chosen, old_default = tuple(widget.value), self._defaults.get(widget.description)
        kept = tuple(o for o in options if o in chosen)
        at_default = old_default is not None and set(chosen) == set(old_default)
        new = tuple(default) if at_default or not kept else kept
        self._defaults[widget.description] = tuple(default)
        widget.options = list(options)
        widget.value = new

    def _store(self) -> str | None:
        """The run store named in the path field, or None."""
        return self.fields.store()

    # -- choices follow each other ---------------------------------------------------------------
    def spec(self) -> KernelSpec | None:
        """The chosen kernel spec (None for the toy, and for a run store in the path field); the fields that apply to it
        are shown (``KernelFields.spec``)."""
        return self.fields.spec()

    def _kernel_changed(self, change: Any = None) -> None:
        if self._updating:
            return
        self.note.value = ""
        try:
            spec = self._spec = self.spec()
        except Exception as exc:  # noqa: BLE001 - shown, not raised, while the user types
            self._spec = None
            self.note.value = f"<span style='color:#b00'>{html.escape(self.fields.in_form_terms(str(exc)))}</span>"
            return
        if (stored := self._store()) is not None:
            targets, catalogs = [REPLAY], list(self.catalog.options) or [_TOY_SPACE]
            self.note.value = (f"replays the run stored in {html.escape(stored)}" if Path(stored).is_file() else
                               f"<span style='color:#b00'>no run store at {html.escape(stored)} (yet)</span>")
        elif spec is None:
            targets, catalogs = ["python", REPLAY], [_TOY_SPACE]
        else:
            targets, catalogs = [*kernel_targets(spec), REPLAY], _FORM_CATALOGS[spec.language]
            reason = gpu_reason() if spec.language in GPU_LANGUAGES and not spec.static_only else None
            if reason is not None:
                self.note.value = f"no GPU runs here ({html.escape(reason)}): static metrics only"
        with self._quiet():  # a target left at its default (or replay, once the store left the path) follows
            if self.target.value in (self._target_default, REPLAY) and self.target.value != targets[0]:
                self.target.value = None
            self._choose(self.target, targets, targets[0])
            self._target_default = targets[0]
            self._choose(self.catalog, catalogs, catalogs[0])
        self._catalog_changed()
        self._target_changed()

    def _target_changed(self, change: Any = None) -> None:
        if self._updating:
            return
        spec, replay = self._spec, self.target.value == REPLAY
        self._show(replay)
        with self._quiet():
            if replay:
                if self._store() is None:
                    self.note.value = "put a run store (.db) in the path field to replay it"
            elif spec is None:
                self.objectives.options, self.objectives.value = ["toy objective"], ("toy objective",)
            else:
                names = objective_choices(spec.language, self.target.value)
                self._choose_many(self.objectives, names, [d for d in default_objectives(spec.language,
                                                                                         self.target.value)
                                                           if d in names])
            self._arch_changed()
        self._objectives_changed()

    def _show(self, replay: bool) -> None:
        """Replay shows its speed; a search shows what it searches (a kernel's search its call limit too)."""
        self.speed.layout.display = _SHOWN if replay else _HIDDEN
        for part in (self._search_row, self._choice_row, self.docs, self.objective_docs, self._settings_row):
            part.layout.display = _HIDDEN if replay else _SHOWN
        self.timeout.layout.display = _HIDDEN if self._spec is None else _SHOWN  # (the toy's calls have no limit)

    def _arch_changed(self) -> None:
        """Offer the GPU targets for a CUDA/PTX kernel (hidden otherwise), keeping one the user picked."""
        spec = self._spec
        if spec is None or spec.language not in GPU_LANGUAGES or self.target.value == REPLAY:
            self.arch.layout.display = _HIDDEN
            return
        default = (_ptx_target(spec) if spec.language == "ptx" else None) \
            or (gpu_arch() if self.target.value == "gpu" else None) or DEFAULT_ARCH
        archs = list(ptxas_archs())
        if default not in archs:
            archs.append(default)
        picked = self.arch.value if self.arch.value != self._arch_default else None
        self._choose(self.arch, archs, default)
        if picked is None:
            self.arch.value = default
        self._arch_default = default
        self.arch.layout.display = _SHOWN

    def _objectives_changed(self, change: Any = None) -> None:
        """Each chosen objective with its unit, direction and what it measures (how noisy it is, where known)."""
        if self._updating:
            return
        chosen = [METRICS[n] for n in self.objectives.value if n in METRICS]
        self.objective_docs.value = "".join(f"<div><b>{html.escape(o.label)}</b>: {html.escape(o.doc)}</div>"
                                            for o in chosen)

    def offered_categories(self) -> list[str]:
        """The categories of the chosen catalog that have controls a run searches (the ones the installed
        compiler supports, precision-changing ones left out as a run leaves them out)."""
        if self.catalog.value in (None, _TOY_SPACE):
            return []
        controls = offered_catalog(self.catalog.value).catalog.controls
        return sorted({c.category for c in controls if not c.unsafe_math})

    def _catalog_changed(self, change: Any = None) -> None:
        if self._updating:
            return
        if self.catalog.value in (None, _TOY_SPACE):
            with self._quiet():
                self.categories.options = []
            self.docs.value = ""
            return
        offered = offered_catalog(self.catalog.value)
        if offered.note:  # e.g. the compiler is not installed: its controls are listed, a run says what to install
            self.note.value = f"<span style='color:#b00'>{html.escape(offered.note)}</span>"
        cats = self.offered_categories()
        with self._quiet():
            self._choose_many(self.categories, cats, cats)
        self._categories_changed()

    def _categories_changed(self, change: Any = None) -> None:
        if self._updating or self.catalog.value in (None, _TOY_SPACE):
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
        """The Run (not started) and its kernel run (None for the toy) for the current choices; for the replay
        target, a replay of the stored run in the path field (``store`` is not used then).

        Raises:
            ConfigurationError: A choice that cannot run (no objective, no GPU, no run store to replay ...), with
                the fix.
        """
        if self.target.value == REPLAY:
            return self._replay()
        if self._store() is not None:
            raise ConfigurationError(f"a run store ({self._store()!r}) in the path field is replayed, not searched; "
                                     "pick target 'replay', or put a kernel folder or file in the path field")
        settings = {"generations": self.generations.value, "pool_size": self.pool.value or None,
                    "seed": self.seed.value, "max_evaluations": self.max_evals.value or None,
                    "time_budget_s": self.time_budget.value * 60 or None}
        spec = self.spec()
        if spec is None:
            return Run(Search(toy_objective, toy_space(), SearchConfiguration(**settings), store=store)), None
        if not self.objectives.value:
            raise ConfigurationError("pick at least one objective")
        if not self.categories.value:
            raise ConfigurationError("pick at least one category of controls to search")
        arch = self.arch.value if spec.language in GPU_LANGUAGES else None
        kernel_run = KernelRun(spec, self.catalog.value, list(self.objectives.value), target=self.target.value,
                               categories=list(self.categories.value), arch=arch, timeout_s=self.timeout.value)
        try:
            search = Search.of(kernel_run, store=store, **settings)
        except BaseException:
            kernel_run.close()
            raise
        return Run(search, workers=kernel_run.workers), kernel_run

    def _replay(self) -> tuple[Any, KernelRun | None]:
        """A Run-like replay of the stored run in the path field, and (for a kernel run) its build-only KernelRun
        for the detail panel (None, with a note, where that kernel cannot be loaded here)."""
        path = self._store()
        if path is None:
            got = self.path.value.strip() or "nothing"
            raise ConfigurationError(f"target 'replay' replays a run store: the path field must name a .db file, "
                                     f"but it holds {got!r}; put a stored run's .db there (runs of this form are in "
                                     f"{self.folder.value!r})")
        if not Path(path).is_file():
            raise ConfigurationError(f"no run store at {path!r} to replay; check the path (relative to the "
                                     "notebook's folder) or pick one of the .db files in the run folder")
        header = load_results(path).header
        kernel_run: KernelRun | None = None
        if header.kernel is not None:
            try:
                kernel_run = KernelRun.from_header(header, measure=False)
            except ConfigurationError as exc:  # the replay still plays; the detail panel lacks compiler arguments
                self.note.value = f"replaying without the kernel's build: {html.escape(str(exc))}"
        replay_module = importlib.import_module("compileiq_lab.run.replay")  # lands later; the form imports today
        try:
            replay = replay_module.replay_run(path, speed=float(self.speed.value))
        except BaseException:
            if kernel_run is not None:
                kernel_run.close()
            raise
        return replay, kernel_run
