"""RunForm: pick a kernel, a target, a subset of the search space, objectives and settings; build a Run or a replay."""

from __future__ import annotations

import contextlib
import functools
import html
import importlib
import logging
import re
import shlex
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import ipywidgets as w

from compileiq_lab.exceptions import ConfigurationError
from compileiq_lab.kernels import (
    CATALOGS,
    DEFAULT_ARCH,
    GPU_LANGUAGES,
    METRICS,
    TRITON_PREFIX,
    BuildContext,
    KernelRun,
    KernelSpec,
    default_objectives,
    gpu_arch,
    gpu_reason,
    list_kernels,
    load_kernel,
    load_triton_kernel,
    objective_choices,
    offered_catalog,
    refuse_fixed_controls,
)
from compileiq_lab.kernels import targets as kernel_targets
from compileiq_lab.run import Run, Search
from compileiq_lab.search import SearchConfiguration
from compileiq_lab.store import load_results
from compileiq_lab.testing import toy_objective, toy_space
from compileiq_lab.toolchain import find_tool, run_tool

__all__ = ["REPLAY", "TOY", "RunForm", "ptxas_archs"]

log = logging.getLogger(__name__)

TOY = "toy (quickstart example)"
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


def _constexprs(text: str) -> dict[str, str]:
    """A Triton kernel's constexpr values as the form takes them: ``NAME=VALUE`` pairs, comma-separated."""
    out = {}
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        name, sep, value = item.partition("=")
        if not sep or not name.strip().isidentifier() or not value.strip():
            raise ConfigurationError(f"constexprs: each must read NAME=VALUE, but got {item!r}; write e.g. "
                                     "BLOCK_SIZE=1024, ACTIVATION=leaky_relu")
        out[name.strip()] = value.strip()
    return out


class RunForm:
    """The setup half of the dashboard. ``build()`` returns (Run, KernelRun or None) for the current choices.

    Choices carry over: a new kernel or target keeps the catalog, categories, objectives and arch chosen where they
    still apply (a choice left at its default follows the new default). The "replay" target replays the run store
    (.db) in the path field at ``speed`` instead of searching.

    Args:
        folder: Where the run store and exports go (the form's "folder" field starts with it).
    """

    def __init__(self, folder: str = "compileiq_runs") -> None:
        kernels = [TOY, *list_kernels()]
        self.kernel = w.Dropdown(options=kernels, value=TOY, description="kernel", style=_STYLE)
        self.path = w.Text(placeholder="or a kernel folder / .cu / .cuh / .c file, triton:FILE.py:FUNCTION, or a run "
                                       "store (.db) to replay", description="path", style=_STYLE,
                           layout={"width": "420px"})
        self.include = w.Text(placeholder="folders of its headers, comma-separated", description="include dirs (-I)",
                              style=_STYLE, layout={"width": "420px", "display": _HIDDEN},
                              tooltip="a bare file's include folders, relative to the notebook's folder")
        self.entry = w.Text(placeholder="its kernel to tune (default: the whole file)", description="entry",
                            style=_STYLE, layout={"width": "420px", "display": _HIDDEN},
                            tooltip="a C++ name, a mangled one or regex:PATTERN; a run that cannot tell lists them")
        self.defines = w.Text(placeholder="fixed macros: NAME=VALUE, comma-separated", description="defines (-D)",
                              style=_STYLE, layout={"width": "420px", "display": _HIDDEN}, continuous_update=False,
                              tooltip="a bare file's fixed -D defines (not searched), as the CLI's --define")
        self.args = w.Text(placeholder="fixed compiler arguments, e.g. -std=c++17 --expt-relaxed-constexpr",
                           description="fixed args", style=_STYLE, continuous_update=False,
                           layout={"width": "420px", "display": _HIDDEN},
                           tooltip="a bare file's fixed compiler arguments (not searched), as the CLI's arguments "
                                   "after --")
        # a Triton kernel's: compiled to PTX when a field is left (not on each key: Triton takes a second or more)
        self.signature = w.Text(placeholder="its runtime parameters' types: *fp16:16,*fp16:16,i32", style=_STYLE,
                                description="signature", continuous_update=False,
                                layout={"width": "420px", "display": _HIDDEN},
                                tooltip="in order, or by name (a_ptr=*fp16:16,n=i32); :16 marks 16-byte aligned "
                                        "pointers / ints divisible by 16, as Triton's JIT assumes for aligned tensors")
        self.constexprs = w.Text(placeholder="its tl.constexpr values: BLOCK_SIZE=1024, ...", style=_STYLE,
                                 description="constexprs", continuous_update=False,
                                 layout={"width": "420px", "display": _HIDDEN})
        self.num_warps = w.BoundedIntText(value=4, min=1, max=32, description="num_warps", style=_STYLE,
                                          layout={"width": "160px", "display": _HIDDEN})
        self.num_stages = w.BoundedIntText(value=3, min=1, max=16, description="num_stages", style=_STYLE,
                                           layout={"width": "160px", "display": _HIDDEN})
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
        self.folder = w.Text(value=folder, description="folder", layout={"width": "420px"}, style=_STYLE,
                             tooltip="runs (.db) and exported files go here; relative to the notebook's folder")
        self.objective_docs = w.HTML()
        self.note = w.HTML()
        self._spec: KernelSpec | None = None
        self._updating = False
        self._arch_default: str | None = None
        self._target_default: str | None = None
        self._defaults: dict[str, tuple[str, ...]] = {}  # the default of each SelectMultiple as last offered
        for widget, handler in ((self.kernel, self._kernel_changed), (self.path, self._kernel_changed),
                                (self.include, self._kernel_changed), (self.entry, self._kernel_changed),
                                (self.defines, self._kernel_changed), (self.args, self._kernel_changed),
                                (self.signature, self._kernel_changed), (self.constexprs, self._kernel_changed),
                                (self.num_warps, self._kernel_changed), (self.num_stages, self._kernel_changed),
                                (self.target, self._target_changed), (self.catalog, self._catalog_changed),
                                (self.categories, self._categories_changed),
                                (self.objectives, self._objectives_changed)):
            widget.observe(handler, names="value")
        self._search_row = w.HBox([self.catalog, self.arch])
        self._choice_row = w.HBox([self.categories, self.objectives])
        self._settings_row = w.HBox([self.generations, self.pool, self.seed])
        self._kernel_changed()
        self.box = w.VBox([w.HBox([self.kernel, self.path]), w.HBox([self.include, self.entry]),
                           w.HBox([self.defines, self.args]),
                           w.HBox([self.signature, self.constexprs]), w.HBox([self.num_warps, self.num_stages]),
                           w.HBox([self.target, self.speed]), self._search_row,
                           self._choice_row, self.objective_docs, self.docs, self._settings_row, self.folder,
                           self.note])

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
        value = self.path.value.strip()
        return value if value.endswith(".db") else None

    # -- choices follow each other ---------------------------------------------------------------
    def spec(self) -> KernelSpec | None:
        """The chosen kernel spec (None for the toy, and for a run store in the path field)."""
        if self._store() is not None:
            return None
        triton = self.path.value.strip().startswith(TRITON_PREFIX)
        for field in (self.signature, self.constexprs, self.num_warps, self.num_stages):
            field.layout.display = _SHOWN if triton else _HIDDEN
        if triton:
            for field in (self.include, self.entry, self.defines, self.args):
                field.layout.display = _HIDDEN
            return load_triton_kernel(self.path.value.strip(), self.signature.value.strip(),
                                      _constexprs(self.constexprs.value), None, Path(self.folder.value) / "triton",
                                      num_warps=self.num_warps.value, num_stages=self.num_stages.value)
        if self.path.value.strip():
            spec = load_kernel(self.path.value.strip())
            bare = spec.spec_file is None  # a bare file takes the form's build fields and entry
            for field in (self.include, self.defines, self.args):
                field.layout.display = _SHOWN if bare and spec.language != "ptx" else _HIDDEN
            self.entry.layout.display = _SHOWN if bare and spec.language in GPU_LANGUAGES else _HIDDEN
            build = self._build_context() if bare and spec.language != "ptx" else None
            entry = self.entry.value.strip() if bare and spec.language in GPU_LANGUAGES else ""
            if not build and not entry:
                return spec
            return load_kernel(self.path.value.strip(), entry=entry or None, build=build or None)
        for field in (self.include, self.entry, self.defines, self.args):
            field.layout.display = _HIDDEN
        return None if self.kernel.value == TOY else load_kernel(self.kernel.value)

    def _build_context(self) -> BuildContext:
        """A bare file's include folders, fixed defines and fixed arguments from the form (the CLI's -I, --define and
        arguments after --); a compiler control among the arguments is refused, naming it, as the CLI refuses it."""
        dirs = [d.strip() for d in self.include.value.split(",") if d.strip()]
        defines = [d.strip() for d in self.defines.value.split(",") if d.strip()]
        try:
            args = shlex.split(self.args.value)
        except ValueError as exc:
            raise ConfigurationError(f"fixed args: must split as a shell would, but got {self.args.value!r} ({exc}); "
                                     "close the quote") from None
        try:
            return BuildContext.make(dirs, defines, args, where="the form's")
        except ConfigurationError:
            if not self.path.value.strip().endswith(".c"):
                refuse_fixed_controls(args, "the form's fixed args")
            raise

    def _kernel_changed(self, change: Any = None) -> None:
        if self._updating:
            return
        self.note.value = ""
        try:
            spec = self._spec = self.spec()
        except Exception as exc:  # noqa: BLE001 - shown, not raised, while the user types
            self._spec = None
            self.note.value = f"<span style='color:#b00'>{html.escape(str(exc))}</span>"
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
        """Replay shows its speed; a search shows what it searches."""
        self.speed.layout.display = _SHOWN if replay else _HIDDEN
        for part in (self._search_row, self._choice_row, self.docs, self.objective_docs, self._settings_row):
            part.layout.display = _HIDDEN if replay else _SHOWN

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
                    "seed": self.seed.value}
        spec = self.spec()
        if spec is None:
            return Run(Search(toy_objective, toy_space(), SearchConfiguration(**settings), store=store)), None
        if not self.objectives.value:
            raise ConfigurationError("pick at least one objective")
        if not self.categories.value:
            raise ConfigurationError("pick at least one category of controls to search")
        arch = self.arch.value if spec.language in GPU_LANGUAGES else None
        kernel_run = KernelRun(spec, self.catalog.value, list(self.objectives.value), target=self.target.value,
                               categories=list(self.categories.value), arch=arch)
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
