"""Open Advanced Control Files: a reviewable, versioned JSON record of one tuned compiler-control point."""

from __future__ import annotations

import dataclasses
import json
import os
import platform
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from compileiq_lab.acf.argcheck import acf_error as _fail
from compileiq_lab.acf.argcheck import check_argument as _check_token
from compileiq_lab.acf.shape import (
    _CUDA,
    _FIELDS,
    _OPTIONAL,
    _RUN_KEYS,
    _V2,
    ACF_FORMAT,
    ACF_FORMATS,
    COMPILERS,
    check_shape,
)
from compileiq_lab.exceptions import ConfigurationError
from compileiq_lab.space.catalogs import get_catalog
from compileiq_lab.space.catalogs.base import controls_of, one_line, run_argv
from compileiq_lab.toolchain.context import BuildContext
from compileiq_lab.toolchain.nvidia_acf import KEY as NVIDIA_ACF_KEY

__all__ = ["ACF", "ACF_FORMAT", "ACF_FORMATS", "COMPILERS", "MAX_ACF_BYTES", "NO_BUILD", "SCHEMA_PATH", "load_acf"]

#: The build section of a point that needs no build context (and of a version-1 document).
NO_BUILD: dict[str, Any] = {"source": None, "entry": None, "include_dirs": [], "defines": {}, "args": []}

#: The JSON Schema (draft 2020-12) of the document; documentation and contract, checked by hand here.
SCHEMA_PATH = Path(__file__).with_name("schema.json")
#: The largest ACF the reader reads (file or text): 4 MiB. An exported ACF is 1-8 KiB (every control of a catalog,
#: a validation with 16 workloads: 7 KiB); the bound leaves room for hand-edited ones and keeps a crafted file
#: from exhausting memory or time. Raise it here if a real ACF ever needs more.
MAX_ACF_BYTES = 4 * 2**20
_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


@dataclass
class ACF:
    """One tuned point: its compiler controls, the exact argv per stage, and what it measured.

    Attributes:
        compiler: Catalog name: "nvcc", "ptxas", "nvrtc", "gcc" or "clang".
        toolchain: Compiler versions used, e.g. {"nvcc": "13.0", "ptxas": "13.0"}.
        arch: CUDA target such as "sm_90" (None for C kernels).
        kernel: Kernel name (a bundled kernel or the stem of its source file).
        source_sha256: SHA-256 of the kernel source the point was measured on.
        controls: Control name -> value, plus an optional "defines" group {KNOB: value}.
        argv: Stage -> arguments ("frontend"/"backend" for CUDA catalogs, "c" for gcc/clang).
        objectives: Objective name -> measured value of this point.
        baseline: Objective name -> value of the default build (None where unknown).
        ci: Objective name -> [low, high] confidence interval, or [] where none ("speedup": the
            interval of the speedup over the baseline, from an interleaved re-measurement).
        code_hash: Hash of the machine code the point produced, or None.
        folder: The folder of the file the ACF was read from or written to (None for one made in memory or read
            from text), the base of its relative paths; not part of the document.
        run: Where it came from: {"store", "run_id", "eval_id", "seed"}.
        created: ISO-8601 creation time.
        host: {"platform": ..., "gpu": ...}.
        format: ACF_FORMAT when written; a read document keeps its version (ACF_FORMATS).
        build: The fixed build context (version 2): source (the kernel file relative to the ACF's own folder;
            relative to the folder it was exported from in ACFs an earlier compileiq-lab wrote; null for a bundled
            kernel), entry (the tuned kernel of a multi-kernel file, or
            null), include_dirs (relative to the kernel source's folder), defines {NAME: VALUE} and extra
            args; none of it searched. Read from version 1: no context.
        dropped: Controls of the tuned point left out of ``controls`` because they had no effect (the compiler
            ignored them, or the code was identical without them): {control: why} (version 2).
        validation: None, or the interleaved re-measurement of this point against the baseline:
            speedup with its CI (low, high, confidence, method, rounds), noise_floor (how far an A/A
            measurement of the baseline with itself strayed from 1), win (the CI lies above 1 + noise_floor),
            runtime and baseline_runtime (median seconds per launch), energy_ratio, gpu, and optionally
            workloads: {name: {speedup, low, high, win}} on the kernel's other input sizes.
    """

    compiler: str
    toolchain: dict[str, str]
    arch: str | None
    kernel: str
    source_sha256: str
    controls: dict[str, Any]
    argv: dict[str, list[str]]
    objectives: dict[str, float]
    baseline: dict[str, float | None]
    ci: dict[str, list[float]]
    code_hash: str | None
    run: dict[str, Any]
    created: str
    host: dict[str, str | None]
    format: str = ACF_FORMAT
    validation: dict[str, Any] | None = None
    build: dict[str, Any] = dataclasses.field(default_factory=lambda: json.loads(json.dumps(NO_BUILD)))
    dropped: dict[str, str] = dataclasses.field(default_factory=dict)
    #: The folder of the file it was read from or written to (None for one made or read from text here): the base of
    #: its relative paths (``build.source``). Not part of the document.
    folder: Path | None = dataclasses.field(default=None, compare=False, repr=False)

    @classmethod
    def from_choice(cls, *, compiler: str, controls: Mapping[str, Any], argv: Mapping[str, Any],
                    objectives: Mapping[str, Any], baseline: Mapping[str, Any], kernel: str, source_sha256: str,
                    arch: str | None, toolchain: Mapping[str, str], code_hash: str | None = None,
                    run: Mapping[str, Any] | None = None, ci: Mapping[str, Any] | None = None,
                    validation: Mapping[str, Any] | None = None, gpu: str | None = None,
                    build: Mapping[str, Any] | None = None, dropped: Mapping[str, str] | None = None) -> ACF:
        """Build and validate an ACF for one evaluated point (created = now, host = this machine).

        Raises:
            ConfigurationError: The point breaks a rule of the format (the message names the entry).
        """
        doc = {"format": ACF_FORMAT, "compiler": compiler, "toolchain": toolchain, "arch": arch, "kernel": kernel,
               "source_sha256": source_sha256, "code_hash": code_hash, "controls": controls, "argv": argv,
               "objectives": objectives, "baseline": baseline, "ci": ci or {},
               "run": {**dict.fromkeys(_RUN_KEYS), **dict(run or {})},
               "created": datetime.now(UTC).isoformat(timespec="seconds"),
               "host": {"platform": platform.platform(), "gpu": gpu}, "validation": validation,
               "build": {**NO_BUILD, **dict(build or {})}, "dropped": dict(dropped or {})}
        try:  # plain JSON data (numpy scalars become Python numbers, tuples lists)
            doc = json.loads(json.dumps(doc, default=_plain, allow_nan=False))
        except (TypeError, ValueError, RecursionError) as exc:
            raise _fail("from_choice", "every field is plain JSON data", type(exc).__name__,
                        f"Pass dicts of str/int/float/bool/None ({exc}).") from None
        return _validate(doc)

    def to_dict(self) -> dict[str, Any]:
        """The document as plain JSON data (a deep copy; a version-1 document keeps its version-1 keys)."""
        doc = dataclasses.asdict(self)
        doc.pop("folder")
        if self.format == ACF_FORMATS[0]:
            for key in _V2:
                doc.pop(key)
        return doc

    def build_context(self, kernel_folder: str | os.PathLike[str]) -> BuildContext:
        """The fixed build context, include directories resolved against the kernel source's folder.

        Raises:
            ConfigurationError: An include directory that does not exist there.
        """
        b = self.build
        try:
            return BuildContext.make(b["include_dirs"], b["defines"], b["args"], base=Path(kernel_folder),
                                     where="ACF build")
        except ConfigurationError as exc:
            raise ConfigurationError(f"{exc} The ACF's include folders are relative to the kernel source's folder, "
                                     f"here {os.fspath(kernel_folder)}: where the source moved without them, pass it "
                                     "with its folders beside it (--kernel PATH, or kernel= in Python).") from None

    def to_json(self) -> str:
        """The document as JSON text: indent 2, sorted keys, trailing newline."""
        return json.dumps(self.to_dict(), indent=2, sort_keys=True, allow_nan=False) + "\n"

    def write(self, path: str | os.PathLike[str]) -> Path:
        """Write the document to ``path`` (UTF-8) and return the path."""
        out = Path(path)
        out.write_text(self.to_json(), encoding="utf-8")
        self.folder = out.resolve().parent
        return out

    def _need_cuda(self, what: str) -> None:
        if self.compiler not in _CUDA:
            raise _fail("compiler", f"{what} needs a CUDA catalog ({', '.join(_CUDA)})", self.compiler,
                        "Use c_args() (or args('c'); `flags --stage c` on the command line) for gcc/clang ACFs.")

    def nvcc_args(self) -> list[str]:
        """nvcc arguments: the target, the front-end ones, then each ptxas token as ``-Xptxas TOKEN``.

        For a "ptxas" ACF the front end holds only the kernel's -D knobs (part of the tuned point).
        """
        self._need_cuda("nvcc_args()")
        return one_line("nvcc", self.argv, self.arch)[1]

    def ptxas_args(self) -> list[str]:
        """ptxas arguments (the backend stage; the PTX must come from the front-end arguments)."""
        self._need_cuda("ptxas_args()")
        return [f"-arch={self.arch}", *self.argv["backend"]]

    def nvrtc_options(self) -> list[str]:
        """NVRTC options (e.g. for ``cupy.RawModule(options=...)``): front end as is, ptxas via -Xptxas=."""
        self._need_cuda("nvrtc_options()")
        if "-Xcicc" in self.argv["frontend"]:
            raise _fail("argv.frontend", "NVRTC options have no -Xcicc", "-Xcicc",
                        "Compile this point with nvcc (`flags --stage nvcc`), or tune with the nvrtc catalog.")
        return one_line("nvrtc", self.argv, self.arch)[1]

    def c_args(self) -> list[str]:
        """gcc/clang arguments."""
        if self.compiler in _CUDA:
            raise _fail("compiler", "c_args() needs a gcc or clang ACF", self.compiler,
                        "Use nvcc_args(), ptxas_args() or nvrtc_options() (`flags --stage nvcc`, `ptxas` or `nvrtc` on "
                        "the command line) for CUDA ACFs.")
        return ["-std=c11", *self.argv["c"]]  # the dialect every tuned build used

    def args(self, stage: str) -> list[str]:
        """Arguments for one consumer: "nvcc", "ptxas", "nvrtc" or "c"."""
        table = {"nvcc": self.nvcc_args, "ptxas": self.ptxas_args, "nvrtc": self.nvrtc_options, "c": self.c_args}
        if stage not in table:
            raise _fail("args(stage)", f"stage is one of {sorted(table)}", stage, "Pick one of those.")
        return table[stage]()

    def options_file_text(self) -> str:
        """The nvcc arguments one per line, for ``nvcc --options-file``."""
        return "".join(f"{tok}\n" for tok in self.nvcc_args())


def _plain(value: Any) -> Any:
    """json.dumps fallback: numpy scalars and arrays as Python data; anything else is refused."""
    if hasattr(value, "tolist") and callable(value.tolist):
        return value.tolist()
    raise TypeError(f"{type(value).__name__} {value!r} is not JSON data")


def load_acf(path_or_text: str | os.PathLike[str] | Mapping[str, Any]) -> ACF:
    """Read and validate an ACF; nothing in it is ever executed or imported.

    Args:
        path_or_text: A path to a .acf/.json file, the JSON text itself (starts with "{"), or parsed data.

    Raises:
        ConfigurationError: The document is unreadable, malformed, of another format version, or
            breaks a rule (unknown control, value outside the domain, conflict, argv that does not
            match the controls, dangerous argument); the message names the offending entry.
    """
    if isinstance(path_or_text, Mapping):
        return _validate(path_or_text)
    if isinstance(path_or_text, str) and path_or_text[:MAX_ACF_BYTES].lstrip().startswith(("{", "[")):
        if len(path_or_text) > MAX_ACF_BYTES:
            raise _fail("text", f"an ACF is at most MAX_ACF_BYTES = {MAX_ACF_BYTES} characters", path_or_text[:60],
                        f"It holds {len(path_or_text)} characters; an exported ACF holds a few KiB.")
        return _validate(_parse(path_or_text, "text"))
    if not isinstance(path_or_text, (str, os.PathLike)):
        raise _fail("input", "it is a path, JSON text or a dict", type(path_or_text).__name__,
                    "Pass the .acf file path.")
    acf = _validate(_parse(_read_bounded(path_or_text), str(path_or_text)))
    acf.folder = Path(path_or_text).resolve().parent
    return acf


def _refuse_kind(path: str | os.PathLike[str], mode: int) -> None:
    """Refuse anything but a regular file (a device, FIFO or directory could block or never end)."""
    if not stat.S_ISREG(mode):
        kind = next((name for test, name in _KINDS if test(mode)), "no regular file")
        raise _fail("file", "the ACF is a regular file", str(path), f"It is {kind}: pass the path of an .acf file.")


def _refuse_size(path: str | os.PathLike[str], size: int, exact: bool = True) -> None:
    if size > MAX_ACF_BYTES:
        held = f"{size} bytes" if exact else f"more than {MAX_ACF_BYTES} bytes (it grew while read)"
        raise _fail("file", f"an ACF is at most MAX_ACF_BYTES = {MAX_ACF_BYTES} bytes", str(path),
                    f"It holds {held}; an exported ACF holds a few KiB.")


def _read_bounded(path: str | os.PathLike[str]) -> str:
    """The text of the file at ``path``: a regular file of at most MAX_ACF_BYTES bytes in UTF-8.

    The kind and size are checked before the file is opened (nothing blocks on a FIFO or reads /dev/zero), then
    again on the open file (it may have been swapped in between), and at most MAX_ACF_BYTES + 1 bytes are read
    (a file that grows meanwhile is still refused).
    """
    try:
        info = os.stat(path)
        _refuse_kind(path, info.st_mode)
        _refuse_size(path, info.st_size)
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
        with os.fdopen(fd, "rb") as f:
            info = os.fstat(f.fileno())
            _refuse_kind(path, info.st_mode)
            _refuse_size(path, info.st_size)
            data = f.read(MAX_ACF_BYTES + 1)
    except ConfigurationError:
        raise
    except (OSError, ValueError) as exc:
        raise _fail("file", "the file exists and is readable", str(path),
                    f"Check the path ({type(exc).__name__}: {exc}).") from None
    _refuse_size(path, len(data), exact=False)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _fail("file", "the file is UTF-8 text", str(path), f"Save it as UTF-8 ({exc}).") from None


def _parse(text: str, origin: str) -> Any:
    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        obj = dict(items)
        if len(obj) != len(items):  # linear: only a document with a duplicate pays for finding it
            seen: set[str] = set()
            dups: set[str] = set()
            for k, _ in items:
                (dups if k in seen else seen).add(k)
            dup = sorted(dups)
            raise _fail(f"{origin}", "no key appears twice in an object", dup[:20], "Keep one entry per key.")
        return obj

    def bad_constant(name: str) -> Any:
        raise _fail(origin, "numbers are finite", name, "Replace NaN/Infinity with a number or null.")

    try:
        return json.loads(text, object_pairs_hook=pairs, parse_constant=bad_constant)
    except RecursionError:
        raise _fail(origin, "objects and lists nest a few levels deep (an ACF nests 4)",
                    "nesting past the reader's recursion limit", "Write an ACF as exported by compileiq-lab.") from None
    except ValueError as exc:
        if isinstance(exc, ConfigurationError):
            raise
        raise _fail(origin, "the text is valid JSON", text[:60], f"Fix the JSON ({exc}).") from None


def _validate(doc: Any) -> ACF:
    """Schema checks, then the semantic ones; returns the ACF."""
    check_shape(doc)
    for stage in sorted(doc["argv"]):
        for i, tok in enumerate(doc["argv"][stage]):
            _check_token(f"argv.{stage}[{i}]", tok)
    try:
        acf = ACF(**json.loads(json.dumps({k: doc[k] for k in _FIELDS + _OPTIONAL + _V2 if k in doc}, allow_nan=False)))
    except (TypeError, ValueError, RecursionError) as exc:
        raise _fail("document", "every value is JSON data", type(exc).__name__, f"Fix the data ({exc}).") from None
    _check_semantics(acf)
    return acf


def _render(compiler: str, controls: Mapping[str, Any],
            nvidia_acfs: Mapping[str, Mapping[str, str]]) -> dict[str, list[str]]:
    """The argv the catalog produces for ``controls`` (the same layout as a kernel run's arguments)."""
    defines = [f"-D{k}={v}" for k, v in sorted(controls.get("defines", {}).items())]
    label = controls.get(NVIDIA_ACF_KEY)
    return run_argv(get_catalog(compiler), controls, defines,
                    nvidia_acfs[label]["file"] if label is not None and label in nvidia_acfs else None)


def _check_semantics(acf: ACF) -> None:
    cuda = acf.compiler in _CUDA
    if cuda != bool(acf.arch and acf.arch.startswith("sm_")):
        raise _fail("arch", "arch is sm_XY for nvcc/ptxas/nvrtc and null for gcc/clang", acf.arch,
                    "Write the target the point was tuned for (e.g. 'sm_90'), or null for a C kernel.")
    catalog = get_catalog(acf.compiler)
    files = acf.build.get("nvidia_acfs") or {}
    for name, value in acf.controls.items():
        if name == "defines":
            continue
        if name == NVIDIA_ACF_KEY:
            if value not in files:
                raise _fail(f"controls.{name}", "the NVIDIA control file is one of build.nvidia_acfs", value,
                            f"Use one of {sorted(files)}, or drop the control.")
            continue
        if name not in catalog.names:
            raise _fail(f"controls.{name}", f"the control is in the {acf.compiler} catalog", name,
                        f"Use one of {catalog.names} (or 'defines').")
        param = catalog[name].param
        try:
            param.index_of(value)
        except (ValueError, TypeError):
            raise _fail(f"controls.{name}", "value in the catalog domain", value,
                        f"Use one of {list(param.values)}.") from None
    reason = catalog.conflict(controls_of(acf.controls))
    if reason:
        raise _fail("controls", "the controls hit no known compiler conflict", reason, "Change one of those controls.")
    expected = _render(acf.compiler, acf.controls, files)
    for stage in sorted(expected):
        if acf.argv[stage] != expected[stage]:
            raise _fail(f"argv.{stage}", "argv is what the catalog renders from controls", acf.argv[stage],
                        f"Expected {expected[stage]}; fix controls or argv so they agree.")
