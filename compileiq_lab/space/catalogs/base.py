"""Catalog building blocks: a compiler Control (domain, argv, metadata) and a Catalog of them."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from compileiq_lab.exceptions import SpaceDefinitionError, did_you_mean
from compileiq_lab.space.params import Param
from compileiq_lab.toolchain.nvidia_acf import KEY as NVIDIA_ACF_KEY
from compileiq_lab.toolchain.nvidia_acf import apply_args

#: Keys of a kernel run's config that are not catalog controls: the ``-D`` knob group and the NVIDIA control file.
NON_CONTROLS = ("defines", NVIDIA_ACF_KEY)


def controls_of(config: Mapping[str, Any]) -> dict[str, Any]:
    """The catalog controls of a kernel run's config (without the ``defines`` group and the NVIDIA control file)."""
    return {k: v for k, v in config.items() if k not in NON_CONTROLS}


def run_argv(catalog: Catalog, config: Mapping[str, Any], defines: Sequence[str],
             control_file: str | os.PathLike[str] | None) -> dict[str, list[str]]:
    """The arguments of a kernel run's config per stage: its catalog controls with the ``-D`` knobs in the first
    stage (``Catalog.stage_argv``), and the NVIDIA control file, if any, applied last in the back-end stage."""
    argv = catalog.stage_argv(controls_of(config), defines)
    if control_file is not None:
        argv["backend"] = [*argv.get("backend", []), *apply_args(control_file)]
    return argv


def one_line(compiler: str, argv: Mapping[str, Sequence[str]], arch: str | None = None) -> tuple[str, list[str]]:
    """A point's per-stage arguments (``run_argv``) as one command line of the tool that takes them all, and that
    tool: a C compiler's with its ``-std=c11`` dialect; NVRTC's options, the front end as is and each ptxas token as
    ``-Xptxas=TOKEN``; otherwise nvcc's, the front end and each ptxas token as ``-Xptxas TOKEN`` (nvcc reads a bare
    ``-O1`` as the host's optimisation level, not ptxas'). ``arch`` (``sm_90``) comes first where given."""
    target = [f"-arch={arch}"] if arch else []
    if "c" in argv:
        return compiler, ["-std=c11", *argv["c"]]
    backend = argv.get("backend", [])
    if compiler == "nvrtc":
        return "nvrtc", [*target, *argv.get("frontend", []), *(f"-Xptxas={tok}" for tok in backend)]
    return "nvcc", [*target, *argv.get("frontend", []), *(a for tok in backend for a in ("-Xptxas", tok))]


def shown_argv(compiler: str, argv: Mapping[str, Sequence[str]]) -> list[str]:
    """A point's arguments as a table or a panel shows them: one stage's as they are (ptxas, gcc ...: the -D knobs
    are plainly the front end's); nvcc's or NVRTC's front end and ptxas together as the ``one_line`` that takes
    both (without the target), so that ptxas' ``-O1`` is not read as nvcc's."""
    if compiler in ("nvcc", "nvrtc") and argv.get("backend"):
        return one_line(compiler, argv)[1]
    return [a for v in argv.values() for a in v]


__all__ = ["CATEGORIES", "CUDA_COMPILERS", "NON_CONTROLS", "STAGES", "TIERS", "Catalog", "Conflict", "Control",
           "controls_of", "one_line", "option_name", "run_argv", "shown_argv"]

log = logging.getLogger(__name__)

#: What a control mostly acts on (the lab's subset picker groups by these).
CATEGORIES = ("register_allocation", "scheduling", "math_precision", "memory_caching",
              "unrolling_vectorization", "compile_speed", "code_generation")
#: Where a control applies: the CUDA front end (.cu -> .ptx), ptxas (.ptx -> cubin), or a C compiler.
STAGES = ("frontend", "backend", "c")
#: From controls every user should try to ones that rarely pay off.
TIERS = ("common", "advanced", "exotic")
#: Compilers whose arguments come in two stages (front end, then ptxas).
CUDA_COMPILERS = ("nvcc", "ptxas", "nvrtc")


@dataclass(frozen=True)
class Control:
    """One compiler control with its search domain and how it becomes arguments.

    Attributes:
        name: Key in the search space and config (e.g. "maxrregcount").
        option: The option as the compiler's ``--help`` spells it (checked by introspection).
        param: The domain, as a DSL parameter; its knockout means "leave the compiler's default".
        template: Argument text with ``{value}``, split on spaces into argv (e.g. "-Xcicc -O{value}").
        stage: "frontend", "backend" or "c".
        category: One of CATEGORIES.
        doc: One line on what it does.
        tier: "common", "advanced" or "exotic".
        unsafe_math: Whether it may change numerical results (off unless chosen).
        since: First compiler version (major.minor) that has it, or None.
    """

    name: str
    option: str
    param: Param
    template: str
    stage: str
    category: str
    doc: str
    tier: str = "common"
    unsafe_math: bool = False
    since: str | None = None

    def __post_init__(self) -> None:
        for attr, allowed in (("stage", STAGES), ("category", CATEGORIES), ("tier", TIERS)):
            if getattr(self, attr) not in allowed:
                raise SpaceDefinitionError(f"control {self.name!r}: {attr} must be one of {list(allowed)}, "
                                           f"but got {getattr(self, attr)!r}")

    def argv(self, value: Any) -> list[str]:
        """Arguments for one value of this control."""
        if isinstance(value, bool):
            value = "true" if value else "false"
        return self.template.format(value=value).split()


@dataclass(frozen=True)
class Conflict:
    """A combination the compiler rejects: when ``when`` holds, ``then`` must hold too.

    Each maps control names to the allowed values; None in a list means "absent" (the default).
    """

    when: Mapping[str, Sequence[Any]]
    then: Mapping[str, Sequence[Any]]
    reason: str

    def violated_by(self, config: Mapping[str, Any]) -> bool:
        """Whether a (flat) config hits this conflict."""
        def holds(cond: Mapping[str, Sequence[Any]]) -> bool:
            return all(config.get(k) in list(v) for k, v in cond.items())
        return holds(self.when) and not holds(self.then)


def option_name(text: str) -> str:
    """An option without its dashes and ``=value``, in lower case (``-maxrregcount=16`` -> ``maxrregcount``)."""
    return text.strip().lstrip("-").split("=", 1)[0].lower()


@dataclass(frozen=True)
class Catalog:
    """The curated controls of one compiler.

    Attributes:
        compiler: Executable name ("nvcc", "ptxas", "gcc", ...).
        controls: The controls, in display order.
        conflicts: Known combinations the compiler rejects.
        base_argv: Arguments every compile gets (not searched).
    """

    compiler: str
    controls: tuple[Control, ...]
    conflicts: tuple[Conflict, ...] = ()
    base_argv: tuple[str, ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        names = [c.name for c in self.controls]
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise SpaceDefinitionError(f"catalog {self.compiler!r} defines {sorted(dup)} twice")

    def __getitem__(self, name: str) -> Control:
        for c in self.controls:
            if c.name == name:
                return c
        raise KeyError(f"{self.compiler} catalog has no control {name!r}{self.suggest([name])}; valid names: "
                       f"{self.names}")

    def suggest(self, names: Sequence[str]) -> str:
        """`` (did you mean ...?)`` for control names a user mistyped or wrote as the compiler's option
        (``--maxrregcount=32`` is control ``maxrregcount``; nvcc's ``--fmad`` is ``fmad`` or ``ptxas_fmad``), or ""."""
        options: dict[str, list[str]] = {}
        for c in self.controls:
            options.setdefault(c.option.rstrip("="), []).append(c.name)
        aliases = {n: options[n.split("=")[0]] for n in names if n.split("=")[0] in options}
        return did_you_mean(names, self.names, aliases)

    @property
    def names(self) -> list[str]:
        """Control names in order."""
        return [c.name for c in self.controls]

    def spellings(self) -> dict[str, Control]:
        """Each spelling of a control's option (its ``--help`` name, its template's option, a flag value that is an
        option: ``-funroll-loops``, ``-fno-tree-vectorize``) as ``option_name`` has it, to the control."""
        names: dict[str, Control] = {}
        for c in self.controls:
            spelled = [c.option, c.template.split()[0]] + [v for v in c.param.values if isinstance(v, str)]
            for text in spelled:
                if text.startswith("-") and "{" not in option_name(text) and not text.startswith("-X"):
                    names.setdefault(option_name(text), c)
        return names

    def fixed_by(self, args: Iterable[str]) -> dict[str, str]:
        """The controls a build's fixed arguments set (``-march=native``, ``-fno-unroll-loops``), each with the
        argument that sets it."""
        spelled = self.spellings()
        out: dict[str, str] = {}
        for arg in args:
            name = option_name(arg)
            control = spelled.get(name) or (spelled.get(f"f{name[4:]}") if name.startswith("fno-") else None)
            if control is not None:
                out.setdefault(control.name, arg)
        return out

    def select(self, names: Iterable[str] | None = None, categories: Iterable[str] | None = None,
               tiers: Iterable[str] | None = None, include_unsafe: bool = False) -> Catalog:
        """A catalog restricted to some controls.

        Args:
            names: Controls to keep by name (unsafe ones included when named).
            categories: Keep controls of these categories.
            tiers: Keep controls of these tiers.
            include_unsafe: Keep precision-changing (``unsafe_math``) controls not named explicitly.

        Raises:
            SpaceDefinitionError: For unknown names, categories or tiers (the valid ones are listed).
        """
        wanted = set(names) if names is not None else None
        if wanted is not None and wanted - set(self.names):
            unknown = sorted(wanted - set(self.names))
            raise SpaceDefinitionError(f"{self.compiler} catalog has no controls {unknown}{self.suggest(unknown)}; "
                                       f"valid names: {self.names}")
        cats = _check_subset("categories", categories, CATEGORIES)
        tiers_ = _check_subset("tiers", tiers, TIERS)
        keep = [c for c in self.controls
                if (wanted is None or c.name in wanted)
                and (cats is None or c.category in cats)
                and (tiers_ is None or c.tier in tiers_)
                and (include_unsafe or not c.unsafe_math or (wanted is not None and c.name in wanted))]
        kept = {c.name for c in keep}
        conflicts = tuple(x for x in self.conflicts if set(x.when) | set(x.then) <= kept)
        return Catalog(self.compiler, tuple(keep), conflicts, self.base_argv)

    def base_argv_list(self) -> list[str]:
        """The arguments every compile gets."""
        return list(self.base_argv)

    @property
    def stages(self) -> tuple[str, ...]:
        """The argument stages of a build: ("frontend", "backend") for CUDA compilers, ("c",) for C ones."""
        cuda = self.compiler in CUDA_COMPILERS or any(c.stage != "c" for c in self.controls)
        return ("frontend", "backend") if cuda else ("c",)

    def stage_argv(self, config: Mapping[str, Any], defines: Sequence[str] = ()) -> dict[str, list[str]]:
        """The arguments of a build per stage: the first stage gets the ``-D`` knobs and the base arguments (a base
        argument the config's own arguments repeat, gcc's ``-O2`` beside ``opt_level`` 2, is given once).

        Args:
            config: Flat config {control name: value} (without the ``defines`` group).
            defines: The kernel's ``-DNAME=value`` arguments.
        """
        first, *rest = self.stages
        own = self.argv(config, first if rest else None)
        out = {first: [*defines, *(a for a in self.base_argv if a not in own), *own]}
        out.update({stage: self.argv(config, stage) for stage in rest})
        return out

    def space(self) -> dict[str, Param]:
        """The search space of these controls (name -> parameter)."""
        return {c.name: c.param for c in self.controls}

    def argv(self, config: Mapping[str, Any], stage: str | None = None) -> list[str]:
        """Compiler arguments for a config (controls absent from it keep the compiler default).

        Args:
            config: Flat config {control name: value}; unknown names are rejected.
            stage: Only controls of this stage (None: all).
        """
        unknown = set(config) - set(self.names)
        if unknown:
            raise SpaceDefinitionError(f"config names {sorted(unknown)} are not {self.compiler} controls; "
                                       f"valid names: {self.names}")
        out: list[str] = []
        for c in self.controls:
            if c.name in config and (stage is None or c.stage == stage):
                out += c.argv(config[c.name])
        return out

    def conflict(self, config: Mapping[str, Any]) -> str | None:
        """The reason a config would be rejected by the compiler, or None."""
        for x in self.conflicts:
            if x.violated_by(config):
                return x.reason
        return None


def _check_subset(what: str, given: Iterable[str] | None, valid: Sequence[str]) -> set[str] | None:
    if given is None:
        return None
    s = set(given)
    if s - set(valid):
        raise SpaceDefinitionError(f"unknown {what} {sorted(s - set(valid))}; valid {what}: {list(valid)}")
    return s
