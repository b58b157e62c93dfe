"""The shape of an ACF document: its fields and the hand-written JSON-Schema checks (no catalog consulted)."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from compileiq_lab.acf.argcheck import DEFINE as _DEFINE
from compileiq_lab.acf.argcheck import acf_error as _fail

__all__ = ["ACF_FORMAT", "ACF_FORMATS", "COMPILERS", "ENTRY_NAME", "MAX_ACF_ARGS", "MAX_ACF_ENTRIES",
           "check_shape"]

#: The format version this writer writes.
ACF_FORMAT = "compileiq-lab-acf/2"
#: The versions this reader reads: 1 (no build context, no dropped controls) and 2.
ACF_FORMATS = ("compileiq-lab-acf/1", ACF_FORMAT)
#: Catalog names an ACF may record.
COMPILERS = ("nvcc", "ptxas", "nvrtc", "gcc", "clang")
#: The most entries any object of an ACF may hold (controls, defines, toolchain, objectives, ci, workloads, ...):
#: an exported one holds at most a few dozen (the biggest catalog has 25 controls); the bound keeps every check of
#: a crafted document short.
MAX_ACF_ENTRIES = 1024
#: The most arguments one argv stage may hold: every control of the biggest catalog set, plus the kernel's -D
#: knobs, renders about 50.
MAX_ACF_ARGS = 1024

_CUDA = ("nvcc", "ptxas", "nvrtc")
_FIELDS = ("format", "compiler", "toolchain", "arch", "kernel", "source_sha256", "controls", "argv",
           "objectives", "baseline", "ci", "code_hash", "run", "created", "host")
#: Optional fields (absent = null).
_OPTIONAL = ("validation",)
#: Fields of version 2 (required there, absent in version 1).
_V2 = ("build", "dropped")
_BUILD_KEYS = ("source", "entry", "include_dirs", "defines", "args")
#: Optional build keys: NVIDIA control files searched as a control ({label: {"file": relative path, "sha256": hex}}),
#: and the SHA-256 of the headers the source reads (``kernels.headers.headers_sha256``; absent: none, or not recorded).
_BUILD_OPTIONAL = ("nvidia_acfs", "headers_sha256")
_LABEL = re.compile(r"[A-Za-z0-9_.-]{1,64}\Z")
_SHA256 = re.compile(r"[0-9a-f]{64}\Z")
#: One name of a recorded path: printable, no separator (spaces and brackets are common in users' folder names; the
#: paths are opened, never run through a shell)
_PART = re.compile(r"[^/\\\x00-\x1f\x7f]{1,255}\Z")
#: A kernel entry an ACF records: a name, mangled or demangled, with nothing a shell reads (no quotes or ;|$`\\).
ENTRY_NAME = re.compile(r"[A-Za-z0-9_$.:<>,()*& ~\[\]-]{1,1024}\Z")
#: validation: key -> (check, rule)
_VALIDATION: dict[str, tuple[Callable[[Any], bool], str]] = {
    "speedup": (lambda v: _is_num(v) and v > 0, "a positive number"),
    "low": (lambda v: _is_num(v) and v > 0, "a positive number"),
    "high": (lambda v: _is_num(v) and v > 0, "a positive number"),
    "win": (lambda v: isinstance(v, bool), "true or false"),
    "noise_floor": (lambda v: _is_num(v) and v >= 0, "a number >= 0"),
    "confidence": (lambda v: _is_num(v) and 0.5 < v < 1, "a number between 0.5 and 1"),
    "method": (lambda v: isinstance(v, str) and 0 < len(v) <= 64, "a short string"),
    "rounds": (lambda v: isinstance(v, int) and not isinstance(v, bool) and v > 0, "a positive integer"),
    "runtime": (lambda v: _is_num(v) and v > 0, "a positive number (seconds)"),
    "baseline_runtime": (lambda v: _is_num(v) and v > 0, "a positive number (seconds)"),
    "energy_ratio": (lambda v: v is None or (_is_num(v) and v > 0), "a positive number or null"),
    "gpu": (lambda v: v is None or (isinstance(v, str) and len(v) <= 200), "a string or null"),
}
_RUN_KINDS = {"store": ((str,), "a string"), "run_id": ((str, int), "a string or an integer"),
              "eval_id": ((int,), "an integer"), "seed": ((int,), "an integer")}
_RUN_KEYS = tuple(_RUN_KINDS)
_ARCH = re.compile(r"(sm|compute|lto)_[0-9]{2,3}[a-z]?\Z")
_KERNEL = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}\Z")
_SHA256 = re.compile(r"[0-9a-f]{64}\Z")
_CODE_HASH = re.compile(r"[0-9a-f]{16,128}\Z")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_PATTERNS = {  # key: (pattern, null allowed, rule, fix)
    "arch": (_ARCH, True, "arch is null or like 'sm_90'", "Write the CUDA target as sm_XY (null for C kernels)."),
    "kernel": (_KERNEL, False, "kernel is a name of letters, digits, '_', '.', '-'", "Write the name, not a path."),
    "source_sha256": (_SHA256, False, "source_sha256 is 64 lowercase hex digits", "Write the source's SHA-256."),
    "code_hash": (_CODE_HASH, True, "code_hash is null or 16..128 lowercase hex digits", "Write it as recorded."),
}


def _is_num(value: Any) -> bool:
    integer = isinstance(value, int) and not isinstance(value, bool)
    return integer or (isinstance(value, float) and math.isfinite(value))


def check_shape(doc: Any) -> None:
    """Check what schema.json says, by hand: keys, scalars, maps, run/host, validation, controls, argv.

    Raises:
        ConfigurationError: The first rule broken, naming the entry.
    """
    _check_top(doc)
    _check_scalars(doc)
    _check_maps(doc)
    _check_run_host(doc)
    _check_validation(doc.get("validation"))
    _check_controls_shape(doc["controls"])
    _check_argv_shape(doc["compiler"], doc["argv"])
    if doc["format"] != ACF_FORMATS[0]:
        _check_build(doc["build"])
        _check_map("dropped", doc["dropped"], lambda v: isinstance(v, str) and len(v) <= 500,
                   "values say why the control was dropped (a string)", "Write {control: reason}.")


def _check_top(doc: Any) -> None:
    if not isinstance(doc, Mapping):
        raise _fail("document", "it is a JSON object", type(doc).__name__, "Write an ACF as exported by compileiq-lab.")
    fmt = doc.get("format")
    if fmt not in ACF_FORMATS:
        raise _fail("format", f"format is a supported version {list(ACF_FORMATS)}", fmt,
                    "This reader does not know that version; export the ACF again with this compileiq-lab.")
    fields = _FIELDS + (() if fmt == ACF_FORMATS[0] else _V2)
    missing = [k for k in fields if k not in doc]
    known = set(fields + _OPTIONAL)
    extra = sorted(str(k) for k in doc if k not in known)
    if missing or extra:
        shown = f"extra {extra}" if len(extra) <= 8 else f"{len(extra)} extra keys {extra[:8]}..."
        raise _fail("document", f"the keys of a {fmt} document are exactly {list(fields)} (and optionally "
                    f"{list(_OPTIONAL)})", f"missing {missing}, {shown}",
                    "Add the missing keys and remove the extra ones.")


def _check_scalars(doc: Mapping[str, Any]) -> None:
    if doc["compiler"] not in COMPILERS:
        raise _fail("compiler", f"compiler is one of {list(COMPILERS)}", doc["compiler"], "Use one of those names.")
    for key, (pattern, nullable, rule, fix) in _PATTERNS.items():
        value = doc[key]
        if not ((value is None and nullable) or (isinstance(value, str) and pattern.match(value))):
            raise _fail(key, rule, value, fix)
    try:
        datetime.fromisoformat(doc["created"])
    except (TypeError, ValueError):
        raise _fail("created", "created is an ISO-8601 time", doc["created"],
                    "Write e.g. '2025-01-31T12:00:00+00:00'.") from None


def _check_count(where: str, value: Mapping[Any, Any] | list[Any], what: str, bound: int, name: str) -> None:
    if len(value) > bound:
        raise _fail(where, f"it holds at most {name} = {bound} {what}", f"{len(value)} {what}",
                    "Write an ACF as exported by compileiq-lab (they hold a few dozen at most).")


def _check_map(where: str, value: Any, ok: Any, rule: str, fix: str) -> None:
    if not isinstance(value, Mapping):
        raise _fail(where, "it is a JSON object", type(value).__name__, fix)
    _check_count(where, value, "entries", MAX_ACF_ENTRIES, "MAX_ACF_ENTRIES")
    for k, v in value.items():
        if not isinstance(k, str) or not k or len(k) > 128:
            raise _fail(where, "keys are non-empty strings of at most 128 characters", k, fix)
        if not ok(v):
            raise _fail(f"{where}.{k}", rule, v, fix)


def _check_maps(doc: Mapping[str, Any]) -> None:
    _check_map("toolchain", doc["toolchain"], lambda v: isinstance(v, str) and len(v) <= 200,
               "values are version strings", "Write {tool: version}.")
    _check_map("objectives", doc["objectives"], _is_num, "values are finite numbers", "Write {objective: value}.")
    _check_map("baseline", doc["baseline"], lambda v: v is None or _is_num(v), "values are finite numbers or null",
               "Write {objective: value or null}.")
    _check_map("ci", doc["ci"], lambda v: isinstance(v, list) and (
        not v or (len(v) == 2 and all(_is_num(x) for x in v) and v[0] <= v[1])),
        "values are [low, high] with low <= high, or []", "Write the interval as two numbers, or [].")


def _check_run_host(doc: Mapping[str, Any]) -> None:
    run = doc["run"]
    if not isinstance(run, Mapping) or sorted(map(str, run)) != sorted(_RUN_KEYS):
        raise _fail("run", f"run is an object with exactly the keys {list(_RUN_KEYS)}",
                    sorted(map(str, run)) if isinstance(run, Mapping) else run,
                    "Write those keys (values may be null).")
    for key, (types, desc) in _RUN_KINDS.items():
        if run[key] is not None and (isinstance(run[key], bool) or not isinstance(run[key], types)):
            raise _fail(f"run.{key}", f"{key} is {desc} or null", run[key], "Write the value as recorded, or null.")
    _check_map("host", doc["host"], lambda v: v is None or (isinstance(v, str) and len(v) <= 500),
               "values are strings or null", "Write {\"platform\": ..., \"gpu\": ...}.")
    if not {"platform", "gpu"} <= set(doc["host"]):
        raise _fail("host", "host has the keys 'platform' and 'gpu'", sorted(doc["host"]), "Add them (null allowed).")


def _check_validation(value: Any) -> None:
    if value is None:
        return
    keys = sorted(map(str, value)) if isinstance(value, Mapping) else None
    if keys is None or sorted(k for k in keys if k not in ("workloads", "certificate")) != sorted(_VALIDATION):
        got = keys if keys is not None else type(value).__name__
        raise _fail("validation", f"validation is null or an object with exactly the keys {list(_VALIDATION)} "
                    "(and optionally 'workloads' and 'certificate')", got,
                    "Export the point again, or set validation to null.")
    _check_workloads(value.get("workloads", {}))
    _check_certificate(value.get("certificate"))
    for key, (ok, rule) in _VALIDATION.items():
        if not ok(value[key]):
            raise _fail(f"validation.{key}", f"{key} is {rule}", value[key], "Write the value as measured.")
    if not value["low"] <= value["high"]:
        raise _fail("validation", "low <= high", [value["low"], value["high"]], "Write the interval's ends in order.")


def _check_certificate(cert: Any) -> None:
    """An optional certificate (``compileiq_lab.analysis.certify.certificate``): what schema.json requires of it."""
    if cert is None:
        return
    fix = "Export the point again (compileiq-lab export), or drop validation.certificate."
    if not isinstance(cert, Mapping):
        raise _fail("validation.certificate", "it is a JSON object", type(cert).__name__, fix)
    _check_count("validation.certificate", cert, "entries", MAX_ACF_ENTRIES, "MAX_ACF_ENTRIES")
    rules: dict[str, tuple[Any, str]] = {
        "certified": (lambda v: isinstance(v, bool), "true or false"),
        "cache": (lambda v: v in ("warm", "cold"), "'warm' or 'cold'"),
        "rounds": (lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 1, "an integer >= 1"),
        "recheck": (lambda v: isinstance(v, str) and 0 < len(v) <= 4096, "a command of at most 4096 characters"),
    }
    for key, (ok, rule) in rules.items():
        if key not in cert or not ok(cert[key]):
            raise _fail(f"validation.certificate.{key}", f"{key} is {rule}", cert.get(key), fix)
    if "why_not" in cert and not (isinstance(cert["why_not"], str) and len(cert["why_not"]) <= 2000):
        raise _fail("validation.certificate.why_not", "why_not is a string of at most 2000 characters",
                    cert["why_not"], fix)


def _check_workloads(workloads: Any) -> None:
    def ok(entry: Any) -> bool:
        if not isinstance(entry, Mapping) or not isinstance(entry.get("win"), bool):
            return False
        if "error" in entry:
            return isinstance(entry["error"], str) and len(entry["error"]) <= 300
        return all(_is_num(entry.get(k)) and entry[k] > 0 for k in ("speedup", "low", "high")) and \
            entry["low"] <= entry["high"]
    _check_map("validation.workloads", workloads, ok,
               "values are {speedup, low, high, win} with 0 < low <= high, or {error, win}",
               "Export the point again.")


def _check_controls_shape(controls: Any) -> None:
    def scalar(v: Any) -> bool:
        return isinstance(v, (str, bool)) or _is_num(v)

    if not isinstance(controls, Mapping):
        raise _fail("controls", "it is a JSON object", type(controls).__name__, "Write {control: value}.")
    _check_count("controls", controls, "entries", MAX_ACF_ENTRIES, "MAX_ACF_ENTRIES")
    for name, value in controls.items():
        if name == "defines":
            _check_map("controls.defines", value, lambda v: (isinstance(v, str) or _is_num(v))
                       and bool(_DEFINE.match(f"-DX={v}")),
                       "values are numbers or strings of [A-Za-z0-9_.+-]", "Write {KNOB: value}.")
            bad = [k for k in value if not _IDENT.match(k)]
            if bad:
                raise _fail(f"controls.defines.{bad[0]}", "knob names are C identifiers", bad[0], "Rename the knob.")
        elif not isinstance(name, str) or not scalar(value):
            raise _fail(f"controls.{name}", "values are strings, booleans or finite numbers", value,
                        "Write the control's value as the catalog lists it.")


def _check_argv_shape(compiler: str, argv: Any) -> None:
    stages = ["backend", "frontend"] if compiler in _CUDA else ["c"]
    if not isinstance(argv, Mapping) or sorted(map(str, argv)) != stages:
        raise _fail("argv", f"argv is an object with exactly the stages {stages} for compiler {compiler!r}",
                    sorted(map(str, argv)) if isinstance(argv, Mapping) else argv, "Export the ACF again.")
    for stage in stages:
        toks = argv[stage]
        if not isinstance(toks, list) or not all(isinstance(t, str) for t in toks):
            raise _fail(f"argv.{stage}", "it is a list of strings", toks, "Write one argument per string.")
        _check_count(f"argv.{stage}", toks, "arguments", MAX_ACF_ARGS, "MAX_ACF_ARGS")


def _rel_path_ok(text: Any) -> bool:
    """A relative POSIX path: "." or up to 8 leading "..", then plain names (no "." or ".." among them)."""
    if not isinstance(text, str) or not text or len(text) > 1024 or text.startswith("/"):
        return False
    if text == ".":
        return True
    parts = text.split("/")
    ups = next((i for i, p in enumerate(parts) if p != ".."), len(parts))
    rest = parts[ups:]
    return ups <= 8 and all(_PART.match(p) and p not in (".", "..") for p in rest)


def _check_nvidia_acfs(files: Any) -> None:
    """NVIDIA control files by label: each a relative path and the sha256 of its content."""
    if not isinstance(files, Mapping) or len(files) > 64:
        raise _fail("build.nvidia_acfs", "nvidia_acfs is an object of at most 64 files", type(files).__name__,
                    "Export the ACF again.")
    for label, entry in files.items():
        where = f"build.nvidia_acfs.{str(label)[:64]}"
        if not (isinstance(label, str) and _LABEL.match(label)):
            raise _fail(where, "labels are letters, digits and _.- (at most 64)", label, "Export the ACF again.")
        if not (isinstance(entry, Mapping) and sorted(entry) == ["file", "sha256"]
                and isinstance(entry["file"], str) and _rel_path_ok(entry["file"])
                and isinstance(entry["sha256"], str) and _SHA256.match(entry["sha256"])):
            raise _fail(where, "each is {file: a relative path (at most 8 leading ../), sha256: 64 hex digits}",
                        str(entry)[:120], "Export the ACF again.")


def _check_build(build: Any) -> None:
    """The fixed build context: the source and include folders relative to the kernel's folder (never absolute,
    never outside its project by more than 8 levels), defines as NAME=VALUE, extra arguments from the allow-list."""
    from compileiq_lab.acf.argcheck import check_argument
    from compileiq_lab.toolchain.context import check_extra_arg, parse_define

    if not isinstance(build, Mapping) or not (
            set(_BUILD_KEYS) <= set(map(str, build)) <= set(_BUILD_KEYS + _BUILD_OPTIONAL)):
        raise _fail("build", f"build is an object with the keys {list(_BUILD_KEYS)} (and optionally "
                    f"{list(_BUILD_OPTIONAL)})", sorted(map(str, build)) if isinstance(build, Mapping) else build,
                    "Export the ACF again.")
    if "nvidia_acfs" in build:
        _check_nvidia_acfs(build["nvidia_acfs"])
    if "headers_sha256" in build and not (isinstance(build["headers_sha256"], str)
                                          and _SHA256.match(build["headers_sha256"])):
        raise _fail("build.headers_sha256", "headers_sha256 is 64 lowercase hex digits", build["headers_sha256"],
                    "Export the ACF again.")
    source, entry = build["source"], build["entry"]
    if source is not None and not _rel_path_ok(source):
        raise _fail("build.source", "source is null or a relative path (letters, digits, _.+-, at most 8 leading ../)",
                    source, "Write the kernel file's path relative to the folder the ACF is used from.")
    if entry is not None and not (isinstance(entry, str) and ENTRY_NAME.match(entry)):
        raise _fail("build.entry", "entry is null or a kernel name (mangled or demangled, no quotes or ;|$`\\)",
                    entry, "Write the kernel's name as the run recorded it.")
    dirs = build["include_dirs"]
    if not isinstance(dirs, list) or len(dirs) > 64:
        raise _fail("build.include_dirs", "include_dirs is a list of at most 64 paths", dirs, "Export the ACF again.")
    for i, d in enumerate(dirs):
        if not _rel_path_ok(d):
            raise _fail(f"build.include_dirs[{i}]", "include directories are relative to the kernel's folder (no "
                        "absolute paths, at most 8 leading ../, letters, digits, _.+-)", d,
                        "Write the folder relative to the kernel source's folder.")
    _check_map("build.defines", build["defines"], lambda v: isinstance(v, str), "values are strings",
               "Write {NAME: VALUE}.")
    for name, value in build["defines"].items():
        parse_define(f"{name}={value}", f"ACF build.defines.{name}")
    args = build["args"]
    if not isinstance(args, list) or len(args) > 64:
        raise _fail("build.args", "args is a list of at most 64 arguments", args, "Export the ACF again.")
    for i, a in enumerate(args):
        check_argument(f"build.args[{i}]", a)
        check_extra_arg(a, f"ACF build.args[{i}]")
