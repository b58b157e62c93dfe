"""Finding kernels: bundled names, kernel folders (kernel.toml), bare source files, and the files an ACF names."""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import math
import os
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from compileiq_lab.exceptions import ConfigurationError, OptionalDependencyError, did_you_mean
from compileiq_lab.kernels.spec import GPU_LANGUAGES, IDENT, LANGUAGES, SPEC_FILE, KernelSpec, need
from compileiq_lab.kernels.toml import SpecParser
from compileiq_lab.kernels.triton_args import parse_triton_ref
from compileiq_lab.toolchain.context import BuildContext
from compileiq_lab.toolchain.nvidia_acf import load_nvidia_acfs

__all__ = ["BLOCK_RULE", "ENV_VAR", "MAX_SPEC_BYTES", "acf_kernel_ref", "acf_nvidia_file", "adapt_kernel", "kernel_ref",
           "kernels_root", "list_kernels", "load_kernel", "load_triton_kernel", "valid_block", "without_knob_defines"]

log = logging.getLogger(__name__)

ENV_VAR = "COMPILEIQ_KERNELS"
#: Size of a kernel.toml read at all: a real one is a few KiB; a huge one is refused before it is read.
MAX_SPEC_BYTES = 1 << 20

# the repository's top-level kernels/ ships inside the package as compileiq_lab/_kernels (see pyproject.toml)
_PACKAGE = Path(__file__).resolve().parents[1]
_SHIPPED = _PACKAGE / "_kernels"
_CHECKOUT = _PACKAGE.parent / "kernels"


def kernels_root() -> Path:
    """Return the bundled kernels folder: ``$COMPILEIQ_KERNELS`` if set, else the copy installed with the package
    (``compileiq_lab/_kernels``, from a wheel) if there is one, else the repository's ``kernels/`` (a checkout or an
    editable install). The folder may not exist; ``list_kernels()`` then warns and returns no names.
    """
    env = os.environ.get(ENV_VAR, "").strip()
    if env:
        return Path(env).expanduser().resolve()
    return _SHIPPED if _SHIPPED.is_dir() else _CHECKOUT


def list_kernels() -> list[str]:
    """Return the sorted names of the bundled kernels (folders of ``kernels_root()`` with a kernel.toml)."""
    root = kernels_root()
    if not root.is_dir():
        log.warning("kernels folder %s does not exist; set %s to a folder of kernels", root, ENV_VAR)
        return []
    return sorted(p.name for p in root.iterdir() if (p / SPEC_FILE).is_file())


def load_kernel(name_or_path: str | os.PathLike[str], *, entry: str | None = None, build: BuildContext | None = None,
                block: Sequence[int] | None = None) -> KernelSpec:
    """Load a kernel: a bundled name ("dot"; wins over a local folder "dot", use "./dot"), a kernel folder,
    its kernel.toml, or a bare .cu/.cuh/.ptx/.c file (a static-only spec: language from the suffix, no buffers; a .ptx
    is assembled by ptxas alone).

    Args:
        name_or_path: The kernel.
        entry: For a bare .cu or .ptx file: the kernel whose metrics and code are tuned (plain or mangled name;
            default: the whole file). A kernel folder names its entry in kernel.toml.
        build: Build context added to the kernel's own (``[build]`` of kernel.toml).
        block: For a bare file: the threads per block it is launched with (x, y, z), so that ``--maxntid`` values
            below it are not offered.

    Raises:
        ConfigurationError: Nothing is found, or the spec breaks a rule (the message says which and the fix).
    """
    return adapt_kernel(_load(name_or_path), entry=entry, build=build, block=block)


def adapt_kernel(spec: KernelSpec, *, entry: str | None = None, build: BuildContext | None = None,
                 block: Sequence[int] | None = None,
                 nvidia_acfs: Sequence[str | os.PathLike[str]] | None = None) -> KernelSpec:
    """A loaded kernel with a command line's entry, build context, block and NVIDIA control files (see
    ``load_kernel``)."""
    changes: dict[str, object] = {}
    if nvidia_acfs:
        need(spec.language in GPU_LANGUAGES, f"kernel {spec.name!r}", "NVIDIA control files are for CUDA and PTX "
             "kernels (ptxas applies them)", [str(p) for p in nvidia_acfs], "Drop --nvidia-acf for a C kernel.")
        changes["nvidia_acfs"] = {**spec.nvidia_acfs, **load_nvidia_acfs(nvidia_acfs)}
    if build:
        need(spec.language != "ptx", f"kernel {spec.name!r}", "a PTX file is not preprocessed or compiled by a front "
             "end, so -I, --define and arguments after -- do not apply", build.argv(),
             "Drop them (build the PTX with them instead: nvcc -ptx, or Triton's constexprs).")
        changes["build"] = merged = spec.build.merged(build)
        knobs = [name for name, _ in merged.defines if name in spec.defines]
        need(not knobs, f"kernel {spec.name!r}", "a fixed --define names no -D knob the search sets", knobs,
             f"Drop --define {', '.join(knobs)}: [defines] in kernel.toml searches "
             f"{', '.join(f'{k} over {list(spec.defines[k])}' for k in knobs)}; to fix its value, list only that "
             "value there.")
    if entry is not None and entry != spec.entry:
        need(spec.spec_file is None, f"kernel {spec.name!r}", "--entry names the kernel of a bare source file; a "
             "kernel folder names its entry in kernel.toml", entry, f"Drop --entry, or edit entry in {spec.spec_file}.")
        need(spec.language in GPU_LANGUAGES, f"kernel {spec.name!r}", "--entry is for CUDA and PTX files", entry,
             "A bare .c file is built whole for static metrics; drop --entry. To time or count one of its functions, "
             "make a kernel folder whose kernel.toml names it as entry, with its [launch] args, inputs and outputs "
             "(see kernels/stencil_c).")
        need(isinstance(entry, str) and entry.strip() and len(entry) <= 4096, f"kernel {spec.name!r}",
             "the entry is a kernel name", entry, "Pass a kernel's name, e.g. --entry softmax_kernel4.")
        changes.update(entry=entry.strip(), description=f"{spec.description}, entry {entry.strip()}")
    if block is not None:
        need(spec.spec_file is None, f"kernel {spec.name!r}", "--block is for bare source files", list(block),
             f"A kernel folder's block comes from [launch] in {spec.spec_file}.")
        need(spec.language in GPU_LANGUAGES, f"kernel {spec.name!r}", "--block is for CUDA and PTX files",
             list(block), "A C kernel is called, not launched; drop --block.")
        need(valid_block(block), f"kernel {spec.name!r}", BLOCK_RULE, list(block),
             "Pass e.g. --block 256 or --block 16,16.")
        changes["block"] = tuple(block)
    return dataclasses.replace(spec, **changes) if changes else spec  # type: ignore[arg-type]


def without_knob_defines(context: BuildContext | None, spec: KernelSpec) -> BuildContext | None:
    """A recorded build context without the fixed -D defines of names ``spec`` searches as knobs: each build's knob
    -D came after them and won, so a run or ACF recorded before ``adapt_kernel`` refused them reopens as it built."""
    if context is None or not spec.defines:
        return context
    kept = tuple((n, v) for n, v in context.defines if n not in spec.defines)
    return dataclasses.replace(context, defines=kept) if len(kept) != len(context.defines) else context


#: What a launch block given for a bare file must be (``valid_block``).
BLOCK_RULE = ("the block is 1 to 3 ints between 1 and 1024 (z at most 64) whose product, the threads per block, is "
              "at most 1024, as CUDA allows")


def valid_block(block: Sequence[int]) -> bool:
    """Whether ``block`` is a launch block CUDA allows (``BLOCK_RULE``)."""
    return (1 <= len(block) <= 3 and all(type(b) is int and 1 <= b <= 1024 for b in block)
            and math.prod(block) <= 1024 and (len(block) < 3 or block[2] <= 64))


def _load(name_or_path: str | os.PathLike[str]) -> KernelSpec:
    text = os.fspath(name_or_path)
    if IDENT.match(text) and (kernels_root() / text / SPEC_FILE).is_file():
        if Path(text).exists() and Path(text).resolve() != (kernels_root() / text).resolve():
            log.warning("%r is a bundled kernel, which is loaded; the %s %r here is not (pass ./%s for it)", text,
                        "folder" if Path(text).is_dir() else "file", text, text)
        return _load_folder(kernels_root() / text)
    path = Path(text).expanduser()
    if path.is_dir() or (path.name == SPEC_FILE and path.is_file()):
        return _load_folder(path if path.is_dir() else path.parent)
    language, path = {**{v: k for k, v in LANGUAGES.items()}, ".cuh": "cuda"}.get(path.suffix), path.resolve()
    if path.is_file() and language:
        # the name runs and ACFs record: the file's stem in letters, digits, '_', '.' and '-' ("my kernel(1).cu"
        # is my_kernel_1_); the file itself is recorded as it is
        name = (re.sub(r"[^A-Za-z0-9_.-]", "_", path.stem).lstrip(".-") or "kernel")[:128]
        return KernelSpec(name=name, language=language, source=path.name, entry=None, folder=path.parent,
                          source_path=path, description=f"static-only {language} file {path.name}")
    if language and not path.exists():  # a file named by its path: say what is missing, not what a name may be
        here = path.parent
        near = sorted(p.name for p in here.glob(f"*{path.suffix}")) if here.is_dir() else []
        raise ConfigurationError(f"load_kernel: `the kernel file exists` must hold, but got {text!r}: "
                                 + (f"{here} has no {path.name}{did_you_mean(path.name, near)}" if here.is_dir()
                                    else f"the folder {here} does not exist")
                                 + ". Fix the path (a relative one starts at the working folder).")
    raise ConfigurationError(f"load_kernel: `the kernel is a bundled name, a folder with {SPEC_FILE} or a "
                             f".cu/.cuh/.ptx/.c file` must hold, but got {text!r}"
                             f"{did_you_mean(text, list_kernels())}. Use one of {list_kernels()} or fix the path.")


def _load_folder(folder: Path) -> KernelSpec:
    folder, spec_path = folder.resolve(), folder / SPEC_FILE
    need(spec_path.is_file(), "load_kernel", f"{spec_path} exists", "no such file", f"Add a {SPEC_FILE} there.")
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        raise OptionalDependencyError("reading kernel.toml needs Python >= 3.11 (tomllib)") from None
    size = spec_path.stat().st_size
    need(size <= MAX_SPEC_BYTES, str(spec_path), f"it is at most {MAX_SPEC_BYTES >> 20} MiB", f"{size} bytes",
         "A kernel.toml is a few lines; point at the right file or trim it.")
    try:
        data = tomllib.loads(spec_path.read_text(encoding="utf-8"))
    except (ValueError, RecursionError) as exc:  # TOMLDecodeError, not UTF-8, an int past Python's 4300 digits
        why = " ".join(str(exc).split())[:300] or type(exc).__name__
        raise ConfigurationError(f"{spec_path}: `it is valid TOML` must hold, but got {why}. Fix the syntax "
                                 "(TOML ints are 64-bit).") from None
    return SpecParser(data, folder).parse()


def acf_kernel_ref(name: str, source: str | None, acf_folder: Path | None) -> str:
    """Where an ACF's kernel is: its recorded source relative to the ACF's folder, else to the working folder (where
    ACFs written before the ACF's folder was the base recorded it from); a bundled kernel (no source recorded) by
    its name. A recorded source found nowhere is an error, never the bundled
    kernel of the same name (a user's ``softmax.cu`` is not the bundled ``softmax``)."""
    if source:
        found = _recorded(source, acf_folder, Path.exists)
        if found is not None:
            return str(found)
        raise ConfigurationError(f"the ACF's kernel {source!r} (relative to the ACF's folder) must be found, but it "
                                 f"is not under {_places(acf_folder, Path.cwd())}; "
                                 "pass --kernel PATH (verify, validate --acf) or kernel= to name the kernel")
    return name


def _places(*folders: Path | None) -> str:
    """Folders for a message, each once ("/a" or "/a nor under /b")."""
    shown: list[str] = []
    for f in folders:
        if f is not None and str(f.resolve()) not in shown:
            shown.append(str(f.resolve()))
    return " nor under ".join(shown)


def kernel_ref(kernel: KernelSpec) -> str:
    """How to load the kernel again: its bundled name, else its folder (with kernel.toml) or its bare source file."""
    if kernel.spec_file is None:
        return str(kernel.source_path)
    bundled = kernels_root() / kernel.name
    if (bundled / SPEC_FILE).is_file() and bundled.resolve() == kernel.folder.resolve():
        return kernel.name
    return str(kernel.folder)


def _recorded(relative: str, acf_folder: Path | None, found: Callable[[Path], bool]) -> Path | None:
    """A path an ACF records (relative to its own folder; to the working folder it was exported from, in ACFs
    written before): under the ACF's folder, else under the working folder, the first that ``found`` accepts."""
    for base in (acf_folder, Path.cwd()):
        if base is not None and found(base / relative):
            return base / relative
    return None


def acf_nvidia_file(label: str, entry: Mapping[str, str], acf_folder: Path | None) -> Path:
    """An ACF's NVIDIA control file, found relative to the ACF's folder or the working folder, with the recorded
    content."""
    path = _recorded(entry["file"], acf_folder, Path.is_file)
    if path is not None:
        if hashlib.sha256(path.read_bytes()).hexdigest() != entry["sha256"]:
            raise ConfigurationError(f"the ACF's NVIDIA control file {label!r} must have the recorded content "
                                     f"(sha256 {entry['sha256'][:12]}...), but {path} differs; restore the file "
                                     "the point was tuned with")
        return path
    raise ConfigurationError(f"the ACF's NVIDIA control file {entry['file']!r} ({label}) must be found relative to "
                             f"{acf_folder} or {Path.cwd()}, but it is in neither; copy it there")


def load_triton_kernel(ref: str, signature: str, constexprs: Mapping[str, Any], arch: str | None, out_dir: Path, *,
                       num_warps: int | None = None, num_stages: int | None = None, ptx_version: str | None = None,
                       autotune_config: int | None = None) -> KernelSpec:
    """A ``@triton.jit`` kernel as a PTX kernel: compiled to PTX without a GPU (``triton_src.triton_ptx``, cached
    in ``out_dir``), named after the function, its one entry, its launch block (``32 * num_warps`` threads) and
    how it was made (``origin["triton"]``: file, function, signature, constants, versions) recorded.

    Args:
        ref: ``triton:path/to/module.py:function``.
        signature: The runtime parameters' types, e.g. ``"*fp16:16,*fp16:16,*fp16:16,i32,i32,i32"``.
        constexprs: ``tl.constexpr`` values (text such as "128" is read as a number or a bool).
        arch: The target, e.g. "sm_90a"; None: the GPU's own as Triton picks it (arch-specific from sm_90 on), or
            sm_90a without a GPU (``triton_src.triton_arch``).
        out_dir: Where the PTX goes (keep it: the run and its ACFs name the file).
        num_warps, num_stages, ptx_version: Triton's options (num_warps 4 and num_stages 3 where neither they nor
            the autotune config give them).
        autotune_config: Take the constexprs, num_warps and num_stages of this config (1-based) of the function's
            ``@triton.autotune`` list, read from the file without running it (``triton_autotune.autotune_choice``);
            ``constexprs``, ``num_warps`` and ``num_stages`` given here override it.

    Raises:
        OptionalDependencyError: Triton is not installed (``pip install 'compileiq-lab[triton]'``).
        ConfigurationError: The reference, signature or constants are wrong, or Triton cannot compile the function
            for ``arch`` (one line each).
    """
    from compileiq_lab.kernels.choices import gpu_arch
    from compileiq_lab.kernels.triton_src import triton_arch, triton_ptx

    module, function = parse_triton_ref(ref)
    if autotune_config is not None:
        from compileiq_lab.kernels.triton_autotune import autotune_choice

        chosen = autotune_choice(module, function, autotune_config)
        constexprs = {**chosen.values, **constexprs}
        num_warps = chosen.options.get("num_warps") if num_warps is None else num_warps
        num_stages = chosen.options.get("num_stages") if num_stages is None else num_stages
    num_warps, num_stages = 4 if num_warps is None else num_warps, 3 if num_stages is None else num_stages
    arch = arch or triton_arch(gpu_arch())
    made = triton_ptx(module, function, signature, {k: _constant(v) for k, v in constexprs.items()}, arch, out_dir,
                      ptx_version=ptx_version, num_warps=num_warps, num_stages=num_stages)
    spec = _load(made.path)
    origin = {"triton": {"module": str(module), "function": function, "signature": dict(made.signature),
                         "constexprs": dict(made.constexprs), "num_warps": made.num_warps,
                         "num_stages": made.num_stages, "triton_version": made.triton_version,
                         "target": made.target, "ptx_version": made.ptx_version, "shared_bytes": made.shared_bytes,
                         "params": list(made.params)}}
    return dataclasses.replace(spec, name=function, entry=made.entry, block=(32 * made.num_warps,), origin=origin,
                               description=f"Triton kernel {function} of {module.name} ({made.triton_version}), "
                                           f"PTX {made.ptx_version} for {made.target}")


def _constant(value: Any) -> Any:
    """A constexpr as Triton wants it: "128" -> 128, "0.5" -> 0.5, "true"/"false" -> bool, other text as is."""
    if not isinstance(value, str):
        return value
    if value.lower() in ("true", "false"):
        return value.lower() == "true"
    for kind in (int, float):
        try:
            return kind(value)
        except ValueError:
            continue
    return value
