"""Open Advanced Control Files: a reviewable, versioned JSON record of one tuned compiler-control point."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import platform
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from compileiq_lab.argcheck import DEFINE as _DEFINE
from compileiq_lab.argcheck import acf_error as _fail
from compileiq_lab.argcheck import check_argument as _check_token
from compileiq_lab.exceptions import ConfigurationError
from compileiq_lab.space.catalogs import get_catalog

__all__ = ["ACF", "ACF_FORMAT", "COMPILERS", "SCHEMA_PATH", "load_acf"]

#: The one format version this reader and writer speak.
ACF_FORMAT = "compileiq-lab-acf/1"
#: Catalog names an ACF may record.
COMPILERS = ("nvcc", "ptxas", "nvrtc", "gcc", "clang")
#: The JSON Schema (draft 2020-12) of the document; documentation and contract, checked by hand here.
SCHEMA_PATH = Path(__file__).with_name("acf_schema.json")

_CUDA = ("nvcc", "ptxas", "nvrtc")
_FIELDS = ("format", "compiler", "toolchain", "arch", "kernel", "source_sha256", "controls", "argv",
           "objectives", "baseline", "ci", "code_hash", "run", "created", "host")
#: Optional fields (absent = null).
_OPTIONAL = ("validation",)
#: validation: key -> (check, rule)
_VALIDATION = {
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
    "energy_ratio": (lambda v: v is None or _is_num(v) and v > 0, "a positive number or null"),
    "gpu": (lambda v: v is None or isinstance(v, str) and len(v) <= 200, "a string or null"),
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
    return isinstance(value, int) and not isinstance(value, bool) or isinstance(value, float) and math.isfinite(value)


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
        run: Where it came from: {"store", "run_id", "eval_id", "seed"}.
        created: ISO-8601 creation time.
        host: {"platform": ..., "gpu": ...}.
        format: Always ACF_FORMAT.
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

    @classmethod
    def from_choice(cls, *, compiler: str, controls: Mapping[str, Any], argv: Mapping[str, Any],
                    objectives: Mapping[str, Any], baseline: Mapping[str, Any], kernel: str, source_sha256: str,
                    arch: str | None, toolchain: Mapping[str, str], code_hash: str | None = None,
                    run: Mapping[str, Any] | None = None, ci: Mapping[str, Any] | None = None,
                    validation: Mapping[str, Any] | None = None, gpu: str | None = None) -> ACF:
        """Build and validate an ACF for one evaluated point (created = now, host = this machine).

        Raises:
            ConfigurationError: The point breaks a rule of the format (the message names the entry).
        """
        doc = {"format": ACF_FORMAT, "compiler": compiler, "toolchain": toolchain, "arch": arch, "kernel": kernel,
               "source_sha256": source_sha256, "code_hash": code_hash, "controls": controls, "argv": argv,
               "objectives": objectives, "baseline": baseline, "ci": ci or {},
               "run": {**dict.fromkeys(_RUN_KEYS), **dict(run or {})},
               "created": datetime.now(UTC).isoformat(timespec="seconds"),
               "host": {"platform": platform.platform(), "gpu": gpu}, "validation": validation}
        try:  # plain JSON data (numpy scalars become Python numbers, tuples lists)
            doc = json.loads(json.dumps(doc, default=_plain, allow_nan=False))
        except (TypeError, ValueError, RecursionError) as exc:
            raise _fail("from_choice", "every field is plain JSON data", type(exc).__name__,
                        f"Pass dicts of str/int/float/bool/None ({exc}).") from None
        return _validate(doc)

    def to_dict(self) -> dict[str, Any]:
        """The document as plain JSON data (a deep copy)."""
        return dataclasses.asdict(self)

    def to_json(self) -> str:
        """The document as JSON text: indent 2, sorted keys, trailing newline."""
        return json.dumps(self.to_dict(), indent=2, sort_keys=True, allow_nan=False) + "\n"

    def write(self, path: str | os.PathLike[str]) -> Path:
        """Write the document to ``path`` (UTF-8) and return the path."""
        out = Path(path)
        out.write_text(self.to_json(), encoding="utf-8")
        return out

    def _need_cuda(self, what: str) -> None:
        if self.compiler not in _CUDA:
            raise _fail("compiler", f"{what} needs a CUDA catalog ({', '.join(_CUDA)})", self.compiler,
                        "Use c_args() (or args('c')) for gcc/clang ACFs.")

    def nvcc_args(self) -> list[str]:
        """nvcc arguments: the target, the front-end ones, then each ptxas token as ``-Xptxas TOKEN``.

        For a "ptxas" ACF the front end holds only the kernel's -D knobs (part of the tuned point).
        """
        self._need_cuda("nvcc_args()")
        return [f"-arch={self.arch}", *self.argv["frontend"],
                *(a for tok in self.argv["backend"] for a in ("-Xptxas", tok))]

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
        return [f"-arch={self.arch}", *self.argv["frontend"], *(f"-Xptxas={tok}" for tok in self.argv["backend"])]

    def c_args(self) -> list[str]:
        """gcc/clang arguments."""
        if self.compiler in _CUDA:
            raise _fail("compiler", "c_args() needs a gcc or clang ACF", self.compiler,
                        "Use nvcc_args(), ptxas_args() or nvrtc_options() for CUDA ACFs.")
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
    if isinstance(path_or_text, str) and path_or_text.lstrip().startswith(("{", "[")):
        return _validate(_parse(path_or_text, "text"))
    if not isinstance(path_or_text, (str, os.PathLike)):
        raise _fail("input", "it is a path, JSON text or a dict", type(path_or_text).__name__,
                    "Pass the .acf file path.")
    try:
        text = Path(path_or_text).read_text(encoding="utf-8")
    except (OSError, ValueError) as exc:
        raise _fail("file", "the file exists and is UTF-8 text", str(path_or_text),
                    f"Check the path ({type(exc).__name__}: {exc}).") from None
    return _validate(_parse(text, str(path_or_text)))


def _parse(text: str, origin: str) -> Any:
    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        keys = [k for k, _ in items]
        dup = sorted({k for k in keys if keys.count(k) > 1})
        if dup:
            raise _fail(f"{origin}", "no key appears twice in an object", dup, "Keep one entry per key.")
        return dict(items)

    def bad_constant(name: str) -> Any:
        raise _fail(origin, "numbers are finite", name, "Replace NaN/Infinity with a number or null.")

    try:
        return json.loads(text, object_pairs_hook=pairs, parse_constant=bad_constant)
    except (ValueError, RecursionError) as exc:
        if isinstance(exc, ConfigurationError):
            raise
        raise _fail(origin, "the text is valid JSON", text[:60], f"Fix the JSON ({exc}).") from None


def _validate(doc: Any) -> ACF:
    """Schema checks, then the semantic ones; returns the ACF."""
    _check_top(doc)
    _check_scalars(doc)
    _check_maps(doc)
    _check_run_host(doc)
    _check_validation(doc.get("validation"))
    _check_controls_shape(doc["controls"])
    _check_argv_shape(doc["compiler"], doc["argv"])
    for stage in sorted(doc["argv"]):
        for i, tok in enumerate(doc["argv"][stage]):
            _check_token(f"argv.{stage}[{i}]", tok)
    try:
        acf = ACF(**json.loads(json.dumps({k: doc[k] for k in _FIELDS + _OPTIONAL if k in doc}, allow_nan=False)))
    except (TypeError, ValueError, RecursionError) as exc:
        raise _fail("document", "every value is JSON data", type(exc).__name__, f"Fix the data ({exc}).") from None
    _check_semantics(acf)
    return acf


def _check_top(doc: Any) -> None:
    if not isinstance(doc, Mapping):
        raise _fail("document", "it is a JSON object", type(doc).__name__, "Write an ACF as exported by compileiq-lab.")
    fmt = doc.get("format")
    if fmt != ACF_FORMAT:
        raise _fail("format", f"format is the supported version {ACF_FORMAT!r}", fmt,
                    "This reader does not know that version; export the ACF again with this compileiq-lab.")
    missing = [k for k in _FIELDS if k not in doc]
    extra = sorted(str(k) for k in doc if k not in _FIELDS + _OPTIONAL)
    if missing or extra:
        raise _fail("document", f"the keys are exactly {list(_FIELDS)} (and optionally {list(_OPTIONAL)})",
                    f"missing {missing}, extra {extra}", "Add the missing keys and remove the extra ones.")


def _check_scalars(doc: Mapping[str, Any]) -> None:
    if doc["compiler"] not in COMPILERS:
        raise _fail("compiler", f"compiler is one of {list(COMPILERS)}", doc["compiler"], "Use one of those names.")
    for key, (pattern, nullable, rule, fix) in _PATTERNS.items():
        value = doc[key]
        if not (value is None and nullable or isinstance(value, str) and pattern.match(value)):
            raise _fail(key, rule, value, fix)
    try:
        datetime.fromisoformat(doc["created"])
    except (TypeError, ValueError):
        raise _fail("created", "created is an ISO-8601 time", doc["created"],
                    "Write e.g. '2025-01-31T12:00:00+00:00'.") from None


def _check_map(where: str, value: Any, ok: Any, rule: str, fix: str) -> None:
    if not isinstance(value, Mapping):
        raise _fail(where, "it is a JSON object", type(value).__name__, fix)
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
        not v or len(v) == 2 and all(_is_num(x) for x in v) and v[0] <= v[1]),
        "values are [low, high] with low <= high, or []", "Write the interval as two numbers, or [].")


def _check_run_host(doc: Mapping[str, Any]) -> None:
    run = doc["run"]
    if not isinstance(run, Mapping) or sorted(map(str, run)) != sorted(_RUN_KEYS):
        raise _fail("run", f"run is an object with exactly the keys {list(_RUN_KEYS)}",
                    sorted(map(str, run)) if isinstance(run, Mapping) else run, "Write those keys (values may be null).")
    for key, (types, desc) in _RUN_KINDS.items():
        if run[key] is not None and (isinstance(run[key], bool) or not isinstance(run[key], types)):
            raise _fail(f"run.{key}", f"{key} is {desc} or null", run[key], "Write the value as recorded, or null.")
    _check_map("host", doc["host"], lambda v: v is None or isinstance(v, str) and len(v) <= 500,
               "values are strings or null", "Write {\"platform\": ..., \"gpu\": ...}.")
    if not {"platform", "gpu"} <= set(doc["host"]):
        raise _fail("host", "host has the keys 'platform' and 'gpu'", sorted(doc["host"]), "Add them (null allowed).")


def _check_validation(value: Any) -> None:
    if value is None:
        return
    keys = sorted(map(str, value)) if isinstance(value, Mapping) else None
    if keys is None or sorted(k for k in keys if k != "workloads") != sorted(_VALIDATION):
        raise _fail("validation", f"validation is null or an object with exactly the keys {list(_VALIDATION)} "
                    "(and optionally 'workloads')", keys if keys is not None else type(value).__name__,
                    "Export the point again, or set validation to null.")
    _check_workloads(value.get("workloads", {}))
    for key, (ok, rule) in _VALIDATION.items():
        if not ok(value[key]):
            raise _fail(f"validation.{key}", f"{key} is {rule}", value[key], "Write the value as measured.")
    if not value["low"] <= value["high"]:
        raise _fail("validation", "low <= high", [value["low"], value["high"]], "Write the interval's ends in order.")


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
    scalar = lambda v: isinstance(v, (str, bool)) or _is_num(v)
    if not isinstance(controls, Mapping):
        raise _fail("controls", "it is a JSON object", type(controls).__name__, "Write {control: value}.")
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


def _render(compiler: str, controls: Mapping[str, Any]) -> dict[str, list[str]]:
    """The argv the catalog produces for ``controls`` (the same layout as KernelEvaluator.argv)."""
    catalog = get_catalog(compiler)
    flat = {k: v for k, v in controls.items() if k != "defines"}
    defines = [f"-D{k}={v}" for k, v in sorted(controls.get("defines", {}).items())]
    if compiler in _CUDA:
        return {"frontend": defines + catalog.argv(flat, "frontend"), "backend": catalog.argv(flat, "backend")}
    return {"c": defines + catalog.base_argv_list() + catalog.argv(flat)}


def _check_semantics(acf: ACF) -> None:
    cuda = acf.compiler in _CUDA
    if cuda != bool(acf.arch and acf.arch.startswith("sm_")):
        raise _fail("arch", "arch is sm_XY for nvcc/ptxas/nvrtc and null for gcc/clang", acf.arch,
                    "Write the target the point was tuned for (e.g. 'sm_90'), or null for a C kernel.")
    catalog = get_catalog(acf.compiler)
    for name, value in acf.controls.items():
        if name == "defines":
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
    reason = catalog.conflict({k: v for k, v in acf.controls.items() if k != "defines"})
    if reason:
        raise _fail("controls", "the controls hit no known compiler conflict", reason, "Change one of those controls.")
    expected = _render(acf.compiler, acf.controls)
    for stage in sorted(expected):
        if acf.argv[stage] != expected[stage]:
            raise _fail(f"argv.{stage}", "argv is what the catalog renders from controls", acf.argv[stage],
                        f"Expected {expected[stage]}; fix controls or argv so they agree.")
