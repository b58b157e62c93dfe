"""KernelFields: the form's fields that name a kernel (a bundled one, a path, a bare file's build and entry, a Triton
kernel's options) and the KernelSpec they name."""

from __future__ import annotations

import shlex
from collections.abc import Callable
from pathlib import Path

import ipywidgets as w

from compileiq_lab.exceptions import ConfigurationError
from compileiq_lab.kernels import (
    BLOCK_RULE,
    GPU_LANGUAGES,
    TRITON_PREFIX,
    BuildContext,
    KernelSpec,
    autotune_choice,
    list_kernels,
    load_kernel,
    load_triton_kernel,
    parse_triton_ref,
    refuse_fixed_controls,
)
from compileiq_lab.toolchain.context import parse_define

__all__ = ["TOY", "KernelFields"]

TOY = "toy (quickstart example)"
#: The command line's options a message may name, and the form's fields that set the same.
_FORM_FIELDS = (("--include-dir", "include dirs (-I)"), ("--define", "defines (-D)"), ("--entry", "entry"),
                ("--block", "launch block"), ("--signature", "signature"), ("--num-warps", "num_warps"),
                ("--num-stages", "num_stages"), ("--autotune-config", "autotune config"), ("--store", "folder"),
                ("arguments after --", "fixed args"), ("pool_size", "pool (0=auto)"), ("--timeout", "call limit (s)"))
_STYLE = {"description_width": "initial"}
_HIDDEN, _SHOWN = "none", ""


def _constexprs(text: str) -> dict[str, str]:
    """A Triton kernel's constexpr values as the form takes them: ``NAME=VALUE`` pairs, comma-separated, each read
    as the CLI's ``--define`` reads one."""
    items = (part.strip() for part in text.split(","))
    return dict(parse_define(item, "constexprs", "BLOCK_SIZE=1024, ACTIVATION=leaky_relu") for item in items if item)


class KernelFields:
    """The kernel dropdown, the path field and the fields that apply to what the path names: a bare file's include
    folders, fixed defines, fixed arguments and entry (the CLI's -I, --define, arguments after -- and --entry), a
    Triton kernel's signature, constexprs, num_warps, num_stages and autotune config (the CLI's --signature, --define,
    --num-warps, --num-stages and --autotune-config). ``spec()`` shows the ones that apply and returns the kernel they
    name.

    Args:
        folder: The form's run folder, asked when a Triton kernel is compiled (its PTX is kept in ``<folder>/triton``).
    """

    def __init__(self, folder: Callable[[], str]) -> None:
        self._folder = folder
        self.kernel = w.Dropdown(options=[TOY, *list_kernels()], value=TOY, description="kernel", style=_STYLE)
        self.path = w.Text(placeholder="or a kernel folder / .cu / .cuh / .c file, triton:FILE.py:FUNCTION, or a run "
                                       "store (.db) to replay", description="path", style=_STYLE,
                           layout={"width": "420px"})
        self.include = w.Text(placeholder="folders of its headers, comma-separated", description="include dirs (-I)",
                              style=_STYLE, layout={"width": "420px", "display": _HIDDEN},
                              tooltip="a bare file's include folders, relative to the notebook's folder")
        self.entry = w.Text(placeholder="its kernel to tune (default: the whole file)", description="entry",
                            style=_STYLE, layout={"width": "420px", "display": _HIDDEN},
                            tooltip="a C++ name, a mangled one or regex:PATTERN; a run that cannot tell lists them")
        self.block = w.Text(placeholder="e.g. 256 or 16,16", description="launch block", style=_STYLE,
                            layout={"width": "220px", "display": _HIDDEN}, continuous_update=False,
                            tooltip="the threads per block it is launched with (the CLI's --block): --maxntid values "
                                    "below it, which build but fail to launch, are not searched")
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
        self.autotune = w.BoundedIntText(value=0, min=0, max=10_000, description="autotune config (0=none)",
                                         style=_STYLE, layout={"width": "220px", "display": _HIDDEN},
                                         tooltip="take the constexprs, num_warps and num_stages of this config of the "
                                                 "kernel's @triton.autotune list (1 = the first); the constexprs "
                                                 "field overrides it")
        self.autotune.observe(self._autotune_changed, names="value")
        self.widgets: list[w.Widget] = [self.kernel, self.path, self.include, self.entry, self.block, self.defines,
                                         self.args,
                                         self.signature, self.constexprs, self.num_warps, self.num_stages,
                                         self.autotune]
        self.rows = [w.HBox([self.kernel, self.path]), w.HBox([self.include, self.entry, self.block]),
                     w.HBox([self.defines, self.args]), w.HBox([self.signature, self.constexprs]),
                     w.HBox([self.num_warps, self.num_stages, self.autotune])]

    @staticmethod
    def in_form_terms(message: str) -> str:
        """``message`` (written for the command line) with the form's fields named for the options it names."""
        named = [f"{option} is the {field} field" for option, field in _FORM_FIELDS if option in message]
        return f"{message} (in the lab: {'; '.join(named)})" if named else message

    def store(self) -> str | None:
        """The run store named in the path field, or None."""
        value = self.path.value.strip()
        return value if value.endswith(".db") else None

    def _show(self, shown: set[w.Widget]) -> None:
        for field in self.widgets[2:]:
            field.layout.display = _SHOWN if field in shown else _HIDDEN

    def spec(self) -> KernelSpec | None:
        """The kernel the fields name (None for the toy, and for a run store in the path field), the fields that apply
        to it shown and the others hidden.

        Raises:
            ConfigurationError: What the fields name cannot be loaded or compiled (shown by the form as it is typed).
        """
        path = self.path.value.strip()
        # the path field wins over the dropdown: greyed out while the path names something, so that it cannot say
        # another kernel than the one a run tunes
        self.kernel.disabled = bool(path)
        self.kernel.tooltip = "the path field's kernel (or run store) is used; clear it to pick one here" if path \
            else None
        if self.store() is not None:
            self._show(set())
            return None
        if path.startswith(TRITON_PREFIX):
            self._show({self.signature, self.constexprs, self.num_warps, self.num_stages, self.autotune})
            return load_triton_kernel(path, self.signature.value.strip(), _constexprs(self.constexprs.value), None,
                                      Path(self._folder()) / "triton", num_warps=self.num_warps.value,
                                      num_stages=self.num_stages.value, autotune_config=self.autotune.value or None)
        if not path:
            self._show(set())
            return None if self.kernel.value == TOY else load_kernel(self.kernel.value)
        spec = load_kernel(path)
        bare = spec.spec_file is None  # a bare file takes the form's build fields and entry (a folder: kernel.toml's)
        built = bare and spec.language != "ptx"
        entered = bare and spec.language in GPU_LANGUAGES
        self._show(({self.include, self.defines, self.args} if built else set())
                   | ({self.entry, self.block} if entered else set()))
        build = self._build_context() if built else None
        entry = self.entry.value.strip() if entered else ""
        block = self._block() if entered else None
        if not build and not entry and not block:
            return spec
        return load_kernel(path, entry=entry or None, build=build or None, block=block)

    def _block(self) -> list[int] | None:
        """The launch block field's ints (None when empty), refused with the rule where it is not one."""
        text = self.block.value.strip()
        if not text:
            return None
        try:
            return [int(x) for x in text.split(",")]
        except ValueError:
            raise ConfigurationError(f"launch block: `{BLOCK_RULE}` must hold, but got {text!r}; write e.g. 256 or "
                                     "16,16") from None

    def _autotune_changed(self, change: object = None) -> None:
        """A config of the @triton.autotune list picked: its num_warps and num_stages shown in their fields (which then
        apply; its constexprs apply where the constexprs field gives none). A config that cannot be read changes
        nothing here: the form's note says why when the kernel is loaded."""
        path = self.path.value.strip()
        if not self.autotune.value or not path.startswith(TRITON_PREFIX):
            return
        try:
            chosen = autotune_choice(*parse_triton_ref(path), self.autotune.value)
        except ConfigurationError:
            return
        self.num_warps.value = chosen.options.get("num_warps", self.num_warps.value)
        self.num_stages.value = chosen.options.get("num_stages", self.num_stages.value)

    def _build_context(self) -> BuildContext:
        """A bare file's include folders, fixed defines and fixed arguments from the fields (the CLI's -I, --define and
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
