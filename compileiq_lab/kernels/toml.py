"""kernel.toml: validate one kernel spec (the rule, the value received and the fix per broken rule), build its spec."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from compileiq_lab.exceptions import ConfigurationError
from compileiq_lab.kernels import spec as _spec
from compileiq_lab.kernels.rules import expr_names
from compileiq_lab.kernels.spec import (
    DTYPES,
    GPU_LANGUAGES,
    IDENT,
    INITS,
    LANGUAGES,
    MAX_DIMS,
    REFERENCE_FILE,
    SPEC_FILE,
    BufferSpec,
    KernelSpec,
    derive_params,
    need,
    show_bytes,
)
from compileiq_lab.measure.c_shim import C_ENTRY
from compileiq_lab.toolchain.context import DEFINE_VALUE, BuildContext
from compileiq_lab.toolchain.nvidia_acf import NvidiaAcf, load_nvidia_acfs

__all__ = ["MAX_REPEATS", "SpecParser"]

_REQUIRED = ("name", "language", "source", "entry")
_INT64 = (-(1 << 63), (1 << 63) - 1)
#: C and CUDA spellings of a buffer's element type, for the fix of a dtype that is not NumPy's name.
_DTYPE_ALIASES = {"half": "float16", "__half": "float16", "fp16": "float16", "f16": "float16", "float": "float32",
                  "fp32": "float32", "f32": "float32", "double": "float64", "fp64": "float64", "f64": "float64",
                  "int": "int32", "unsigned": "uint32", "unsigned int": "uint32", "char": "int8",
                  "unsigned char": "uint8", "short": "int16", "long": "int64", "long long": "int64",
                  "size_t": "uint64", "bool": "uint8"}
#: Timed calls per measurement: enough for a stable median, not so many that one candidate takes hours.
MAX_REPEATS = 10_000
#: Buffers named in the message when the byte bound is broken.
_LISTED = 4
_TABLES: dict[str, tuple[str, ...]] = {
    "": _REQUIRED + ("description", "defines", "params", "inputs", "outputs", "check", "run", "launch", "workloads",
                  "build", "nvidia_acfs"),
    "build": ("include_dirs", "defines", "args"),
    "workloads": ("name", "params"),
    "inputs": ("name", "dtype", "shape", "init"), "outputs": ("name", "dtype", "shape"), "run": ("seed", "repeats"),
    "check": ("reference", "rtol", "atol"), "launch": ("grid", "block", "shared_bytes", "args")}


def _float_note(spec: KernelSpec) -> str:
    """What a broken shape or launch expression's message adds about float params: each one an expression names
    (which it cannot use: only int params are names there), else that they go to the kernel only; "" for none."""
    floats = sorted(set(spec.params) - set(spec.int_params))
    exprs = [d for b in spec.inputs + spec.outputs for d in b.shape] + [*(spec.grid or ()), *(spec.block or ()),
                                                                        spec.shared_bytes]
    used = [k for k in floats if any(k in expr_names(e) for e in exprs)]
    if not used:
        return (f" (float params, here {', '.join(floats)}, go to the kernel only: shapes and launch expressions use "
                "the int params)") if floats else ""
    notes = []
    for k in used:
        v = float(spec.params[k])
        notes.append(f"{k} = {v!r} is a float param, which shapes and launch expressions cannot use: "
                     + (f"write {k} = {int(v)}" if v.is_integer() else "use an int param there"))
    return f" ({'; '.join(notes)})"


class SpecParser:
    """Validates one kernel.toml document and builds its KernelSpec."""

    def __init__(self, data: dict[str, Any], folder: Path) -> None:
        self.data, self.folder, self.name = data, folder, data.get("name", folder.name)

    def need(self, ok: Any, rule: str, got: Any, fix: str) -> None:
        need(ok, f"kernel.toml of {self.name!r}", rule, got, fix)

    def table(self, value: Any, section: str) -> dict[str, Any]:
        self.need(isinstance(value, dict), f"[{section}] is a table", value, f"Write [{section}] as a TOML table.")
        allowed = _TABLES.get(section, tuple(value))
        self.need(set(value) <= set(allowed), f"{section or 'top-level'} keys are in {list(allowed)}",
                  sorted(set(value) - set(allowed)), "Remove or rename the others.")
        checked: dict[str, Any] = value
        return checked

    def ident(self, value: Any, what: str) -> str:
        self.need(isinstance(value, str) and IDENT.match(value), f"{what} is an identifier", value,
                  "Use letters, digits and _, not starting with a digit.")
        name: str = value
        return name

    def entry(self, value: Any, language: str) -> str:
        """The kernel's entry: an identifier (a plain or mangled name), for a CUDA or PTX kernel also a template
        instantiation's demangled signature or a ``regex:`` pattern, as the message of an entry that names several
        kernels lists them."""
        if language not in GPU_LANGUAGES or (isinstance(value, str) and IDENT.match(value)):
            return self.ident(value, "entry")
        self.need(isinstance(value, str) and value.strip() and len(value) <= 4096 and value.isprintable(),
                  "entry is a kernel's name (plain or mangled), its demangled signature or a regex: pattern, on one "
                  "line", value, 'Write entry = "my_kernel", or the signature or regex: entry the run lists for a '
                  "template instantiation.")
        name: str = value.strip()
        return name

    def parse(self) -> KernelSpec:
        d = self.table(self.data, "")
        self.need(all(k in d for k in _REQUIRED), f"the keys {list(_REQUIRED)} are present",
                  [k for k in _REQUIRED if k not in d], "Add the missing keys.")
        self.need(d["name"] == self.folder.name, f"name == folder name {self.folder.name!r}", d["name"],
                  f'Set name = "{self.folder.name}" or rename the folder.')
        self.need(d["language"] in LANGUAGES, f"language in {list(LANGUAGES)}", d["language"],
                  'Set language = "cuda", "ptx" or "c".')
        source_path = self.inside(d["source"], "source")
        self.need(source_path.is_file(), f"source names a file in {self.folder}", d["source"],
                  "Fix source or add the file.")
        entry = self.entry(d["entry"], d["language"])
        own = d["language"] == "c" and entry != C_ENTRY  # a C function of the user's, called with [launch] args
        self.need(not own or (entry != "main" and "args" in self.table(d.get("launch", {}), "launch")),
                  f'a C kernel has entry == "{C_ENTRY}", or names a function of its own (not main) with [launch] '
                  "args to call it with", entry,
                  f'Set entry = "{C_ENTRY}" and define void {C_ENTRY}(void **bufs, const long *params), or name the '
                  'function and list its arguments in its order: [launch] args = ["x", "y", "n"] (buffers, params).')
        self.need(isinstance(desc := d.get("description", ""), str), "description is a string", desc, "Write a line.")
        fields = dict(name=d["name"], language=d["language"], source=d["source"], entry=entry, folder=self.folder,
                      spec_file=self.folder / SPEC_FILE,
                      source_path=source_path, description=desc)
        fields.update(self.symbols_and_buffers(d))
        fields.update(self.check_and_run(self.table(d.get("check", {}), "check"), self.table(d.get("run", {}), "run")))
        fields.update(self.launch(self.table(d.get("launch", {}), "launch"), fields))
        fields["workloads"] = self.workloads(d.get("workloads", []), fields["params"])
        floats = sorted(k for k, v in fields["params"].items() if type(v) is float)
        self.need(d["language"] != "c" or own or not floats,
                  f"a C kernel's params are ints ({C_ENTRY} gets them as longs)", floats,
                  "Write them as ints, or as -D knobs ([defines]) the kernel reads, or call a function of your own "
                  "with [launch] args (a float param is passed to it as a double).")
        fields["build"] = self.build(self.table(d.get("build", {}), "build"), set(fields["defines"]))
        fields["nvidia_acfs"] = self.nvidia_acfs(d.get("nvidia_acfs", []), d["language"])
        self.need(d["language"] != "ptx" or not (fields["defines"] or fields["build"]),
                  "a PTX kernel has no [defines] or [build] (ptxas does not preprocess)",
                  sorted(k for k in ("defines", "build") if d.get(k)),
                  "Remove them; generate one PTX per -D value (nvcc -ptx -D..., Triton constexprs) instead.")
        spec = KernelSpec(**fields)
        for variant in [spec] + [spec.with_workload(w) for w in spec.workloads]:
            where = f"kernel.toml of {self.name!r}" + (f" workload {variant.workload!r}" if variant.workload else "")
            shapes: dict[str, tuple[int, ...]] = {}
            try:  # evaluate every shape and launch expression once, so broken ones fail at load
                for b in variant.inputs + variant.outputs:
                    try:
                        shapes[b.name] = variant.shape_of(b)
                    except ConfigurationError as exc:
                        raise ConfigurationError(f"shape of {b.name}: {exc}") from None
                variant.launch_dims() if variant.grid is not None else None
            except ConfigurationError as exc:
                raise ConfigurationError(f"{where}: {exc}{_float_note(variant)}") from None
            self.need(all(min(s) >= 1 for s in shapes.values()), "every buffer dim is >= 1",
                      {k: s for k, s in shapes.items() if min(s) < 1}, "Fix the shapes or the params.")
            self.buffer_bytes(variant, shapes, where)
        return spec

    def nvidia_acfs(self, files: Any, language: str) -> dict[str, NvidiaAcf]:
        """NVIDIA control files searched as one more control: files inside the kernel folder, for GPU kernels."""
        self.need(isinstance(files, list) and len(files) <= 64, "nvidia_acfs is a list of at most 64 file names",
                  files, 'Write nvidia_acfs = ["a.acf", "b.acf"].')
        self.need(not files or language in GPU_LANGUAGES, "only CUDA and PTX kernels take nvidia_acfs", files,
                  "Remove nvidia_acfs: ptxas applies them.")
        return load_nvidia_acfs([self.inside(f, "nvidia_acfs") for f in files], where=f"kernel.toml of {self.name!r}")

    def inside(self, value: Any, key: str) -> Path:
        """The resolved path of a file kernel.toml names, which must lie inside the kernel folder (symlinks
        followed: one that points out of the folder is refused too)."""
        self.need(isinstance(value, str) and value.strip() and "\0" not in value, f"{key} is a file name", value,
                  f'Write {key} = "file name in the kernel folder".')
        folder = self.folder.resolve()
        path: Path = (folder / value).resolve()
        if not path.is_relative_to(folder):
            raise ConfigurationError(
                f"kernel.toml of {self.name!r}: `{key} is a file inside the kernel folder {folder}` must hold, but "
                f"got {value!r} (it resolves to {path}). Move the file into the folder and name it relative to it "
                f"(a symlink must point inside too); share headers through [build] include_dirs.")
        return path

    def buffer_bytes(self, variant: KernelSpec, shapes: dict[str, tuple[int, ...]], where: str) -> None:
        """Refuse shapes whose buffers together exceed ``MAX_BUFFER_BYTES`` (before anything is allocated)."""
        limit = _spec.MAX_BUFFER_BYTES
        sizes = {b.name: math.prod(shapes[b.name]) * np.dtype(b.dtype).itemsize
                 for b in variant.inputs + variant.outputs}
        total = sum(sizes.values())
        if total > limit:
            largest = sorted(sizes.items(), key=lambda kv: -kv[1])[:_LISTED]
            listed = ", ".join(f"{name}: {show_bytes(n)}" for name, n in largest)
            more = ", ..." if len(sizes) > _LISTED else ""
            raise ConfigurationError(
                f"{where}: `the buffers hold at most {show_bytes(limit)} in all (MAX_BUFFER_BYTES)` must hold, but "
                f"the shapes ask for {show_bytes(total)} ({listed}{more}). Make the shapes or the params smaller "
                f"(a workload in [[workloads]] for a larger size is bound by the same limit).")

    def build(self, t: dict[str, Any], knobs: set[str]) -> BuildContext:
        dirs, defines, args = t.get("include_dirs", []), t.get("defines", {}), t.get("args", [])
        self.need(isinstance(dirs, list) and all(isinstance(x, str) and x for x in dirs),
                  "[build] include_dirs is a list of folders", dirs, 'Write include_dirs = ["../include"].')
        self.need(not any(Path(x).is_absolute() for x in dirs),
                  "[build] include_dirs are relative to the kernel folder", [x for x in dirs if Path(x).is_absolute()],
                  "Write them relative to the folder of kernel.toml.")
        self.need(isinstance(defines, dict) and all(type(v) in (int, str) for v in defines.values()),
                  "[build] defines is a table of NAME = value (int or string)", defines, 'Write defines = { N = "4" }.')
        self.need(not set(defines) & knobs, "fixed defines are not also searched knobs in [defines]",
                  sorted(set(defines) & knobs), "Keep each name in one of [build] defines or [defines].")
        self.need(isinstance(args, list) and all(isinstance(a, str) for a in args),
                  "[build] args is a list of strings", args, 'Write args = ["-std=c++17"].')
        return BuildContext.make(dirs, {k: str(v) for k, v in defines.items()}, args, base=self.folder,
                                 where=f"kernel.toml of {self.name!r}: [build]")

    def workloads(self, entries: Any, params: dict[str, int | float]) -> dict[str, dict[str, int | float]]:
        self.need(isinstance(entries, list), "workloads is a list of tables", entries, "Write [[workloads]].")
        out: dict[str, dict[str, int | float]] = {}
        for t in entries:
            t = self.table(t, "workloads")
            name = self.ident(t.get("name"), "[[workloads]] name")
            self.need(name not in out, "workload names are distinct", name, "Rename the duplicate.")
            over = t.get("params", {})
            self.need(isinstance(over, dict) and over and set(over) <= set(params),
                      f"workload {name} overrides some of the params {list(params)}", over,
                      f'Write params = {{ {next(iter(params), "n")} = 4096 }}.')
            for k, v in over.items():
                self.need(type(params[k]) is float or type(v) is int, f"workload {name} param {k} is an int, as the "
                          f"param is", v, f"Write {k} = <int>.")
                self.param_value(k, v, f"workload {name} param {k}")
            # a float param stays a float in every workload (a C function's generated call reads it as a double)
            out[name] = {k: float(v) if type(params[k]) is float else v for k, v in over.items()}
        return out

    def param_value(self, name: str, v: Any, who: str, expression: bool = False) -> None:
        """A ``[params]`` value: an int that fits int64, a finite float (passed to a float or double parameter), or
        (``expression``) an int expression over the params before it (checked when they are known)."""
        if expression and isinstance(v, str):
            self.need(bool(v.strip()), f"{who} is an int expression", v, f'Write {name} = "(N + 31) // 32".')
            return
        kinds = "an int, a float or an int expression (a string)" if expression else "an int or a float"
        self.need(type(v) in (int, float), f"{who} is {kinds}", v, f"Write {name} = <int> (or <float>).")
        if type(v) is int:
            self.need(_INT64[0] <= v <= _INT64[1], f"{who} fits a signed 64-bit int", v,
                      f"Write {name} = <int between {_INT64[0]} and {_INT64[1]}>; buffers are far smaller.")
        else:
            self.need(math.isfinite(v), f"{who} is a finite float", v, f"Write {name} = 1.0.")

    def symbols_and_buffers(self, d: dict[str, Any]) -> dict[str, Any]:
        defines, params = self.table(d.get("defines", {}), "defines"), self.table(d.get("params", {}), "params")
        for k, v in defines.items():
            self.need(isinstance(v, list) and v and all(type(x) in (int, float, str) for x in v),
                      f"define {self.ident(k, 'each define name')} is a non-empty list of ints, floats or strings",
                      v, f"Write {k} = [default, other values...].")
            self.need(all(DEFINE_VALUE.match(x) for x in v if type(x) is str),
                      f"define {k}'s strings hold only [A-Za-z0-9_.+-] (an ACF writes them; nvcc's own shell steps "
                      "would act on quotes, backslashes or $)", [x for x in v if type(x) is str and not
                                                                  DEFINE_VALUE.match(x)],
                      "Spell the value without them, e.g. an identifier the kernel maps to its string.")
            self.need(all(-(1 << 63) <= x < 1 << 64 for x in v if type(x) is int),
                      f"define {k}'s ints fit 64 bits", [x for x in v if type(x) is int and not
                                                         -(1 << 63) <= x < 1 << 64], "Use smaller values.")
        for k, v in params.items():
            self.param_value(self.ident(k, "each param name"), v, f"param {k}", expression=True)
        derived = {k: v for k, v in params.items() if isinstance(v, str)}
        params = derive_params({k: (0 if k in derived else v) for k, v in params.items()}, derived,
                               f"kernel.toml of {self.name!r}")
        bufs: dict[str, Any] = {}
        for section in ("inputs", "outputs"):
            entries = d.get(section, [])
            self.need(isinstance(entries, list), f"{section} is a list of tables", entries, f"Write [[{section}]].")
            bufs[section] = tuple(self.buffer(self.table(t, section), section) for t in entries)
        names = list(defines) + list(params) + [b.name for b in bufs["inputs"] + bufs["outputs"]]
        self.need(len(set(names)) == len(names), "define, param and buffer names are distinct",
                  sorted({n for n in names if names.count(n) > 1}), "Rename the duplicates.")
        return dict(defines={k: tuple(v) for k, v in defines.items()}, params=dict(params), derived=derived, **bufs)

    def buffer(self, t: dict[str, Any], section: str) -> BufferSpec:
        self.need(all(k in t for k in ("name", "dtype", "shape")), f"each [[{section}]] has name, dtype and shape",
                  sorted(t), "Add the missing keys.")
        name, init, shape = self.ident(t["name"], f"[[{section}]] name"), t.get("init", "uniform"), t["shape"]
        dtype = t["dtype"]
        said = dtype.lower().strip() if isinstance(dtype, str) else ""
        fix = "Pick one of those."
        if said in _DTYPE_ALIASES:
            fix = f'Write dtype = "{_DTYPE_ALIASES[said]}".'
        elif any(word in said for word in ("bf16", "bfloat", "fp8", "e4m3", "e5m2")):
            fix = "bfloat16 and fp8 buffers are not supported (NumPy has no such types)."
        self.need(dtype in DTYPES, f"dtype of {name} in {list(DTYPES)}", dtype, fix)
        self.need(section == "outputs" or init in INITS, f"init of {name} in {list(INITS)}", init, "Pick one of those.")
        self.need(isinstance(shape, list) and shape and all(type(s) in (int, str) for s in shape),
                  f"shape of {name} is a non-empty list of ints or expressions", shape, 'Write shape = ["n", 4].')
        self.need(len(shape) <= MAX_DIMS, f"shape of {name} has at most {MAX_DIMS} dims", f"{len(shape)} dims",
                  "Flatten some of the dims into one.")
        return BufferSpec(name, t["dtype"], tuple(shape), init if section == "inputs" else None)

    def check_and_run(self, check: dict[str, Any], run: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {**check, **run}
        if check:
            self.ident(check.get("reference"), "[check] reference")
            reference = self.inside(REFERENCE_FILE, REFERENCE_FILE)
            self.need(reference.is_file(), f"{REFERENCE_FILE} is next to kernel.toml",
                      "no such file", f"Add {REFERENCE_FILE} defining {check['reference']}(inputs, params).")
        for key, low, high, kinds, example in (("rtol", 0, None, (int, float), "1e-5"),
                                               ("atol", 0, None, (int, float), "1e-6"),
                                               ("seed", 0, _INT64[1], (int,), "0"),
                                               ("repeats", 1, MAX_REPEATS, (int,), "10")):
            kind = "a number" if float in kinds else "an int"
            value = out.get(key, low)
            span = f">= {low}" + ("" if high is None else f" and <= {high}")
            self.need(type(value) in kinds and value >= low and (high is None or value <= high),
                      f"{key} is {kind} {span}", out.get(key), f"Write {key} = {example}.")
        return out

    def launch(self, launch: dict[str, Any], fields: dict[str, Any]) -> dict[str, Any]:
        own = fields["language"] == "c" and fields["entry"] != C_ENTRY
        self.need(fields["language"] in GPU_LANGUAGES or own or not launch,
                  f"a C kernel whose entry is {C_ENTRY} has no [launch]", sorted(launch),
                  f"Remove [launch]: {C_ENTRY} gets its buffers and params as arrays.")
        if own:
            self.need(set(launch) == {"args"}, "a C function's [launch] holds args alone (no grid, block or shared "
                      "memory)", sorted(launch), 'Write [launch] args = ["x", "y", "n"] only.')
            return dict(args=self.launch_args(launch["args"], fields))
        if fields["language"] == "c" or not (launch or fields["outputs"]):
            return {}
        self.need(all(k in launch for k in ("grid", "block", "args")), "[launch] has grid, block and args",
                  sorted(launch), "Add the missing keys.")
        for key, dims in (("grid", launch["grid"]), ("block", launch["block"])):
            self.need(isinstance(dims, list) and 1 <= len(dims) <= 3 and all(type(x) in (int, str) for x in dims),
                      f"[launch] {key} is a list of 1 to 3 ints or expressions", dims, f'Write {key} = ["n", 1, 1].')
        return dict(grid=tuple(launch["grid"]), block=tuple(launch["block"]),
                    args=self.launch_args(launch["args"], fields), shared_bytes=launch.get("shared_bytes", 0))

    def launch_args(self, args: Any, fields: dict[str, Any]) -> tuple[str, ...]:
        """``[launch] args``: names of buffers and params, in the kernel's argument order."""
        known = list(fields["params"]) + [b.name for b in fields["inputs"] + fields["outputs"]]
        self.need(isinstance(args, list) and all(a in known for a in args), f"[launch] args are names in {known}",
                  [a for a in args if a not in known] if isinstance(args, list) else args,
                  "Name only buffers and params, in the kernel's argument order.")
        return tuple(args)
