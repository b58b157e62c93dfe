"""Driving Triton for ``triton_src``: the user's module loaded, its @triton.jit function found, and Triton's own
stages run up to and including PTX (no driver, no cache, no cubin)."""

from __future__ import annotations

import ast
import builtins
import hashlib
import importlib
import importlib.metadata
import importlib.util
import inspect
import logging
import os
import re
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

from compileiq_lab.exceptions import ConfigurationError, OptionalDependencyError
from compileiq_lab.kernels.rules import fail, need, one_line, raised_in
from compileiq_lab.kernels.triton_autotune import autotune_hint
from compileiq_lab.kernels.triton_reduce import blank_lines, bound_names, jit_only

__all__ = ["MISSING", "TRITON_MISSING", "Attrs", "Triton", "compile_error", "constexprs_of", "environment",
           "jit_function", "load_module", "to_ptx"]

log = logging.getLogger(__name__)

TRITON_MISSING = "Triton kernels need Triton: pip install 'compileiq-lab[triton]'"
_ERROR_LINES = 3


class Triton:
    """The parts of Triton used here, imported on first use (Triton ships no type information: all Any)."""

    def __init__(self) -> None:
        try:
            self.triton: Any = importlib.import_module("triton")
            self.compiler: Any = importlib.import_module("triton.compiler.compiler")
            self.targets: Any = importlib.import_module("triton.backends.compiler")
            self.jit: Any = importlib.import_module("triton.runtime.jit")
            self.errors: Any = importlib.import_module("triton.compiler.errors")
            self.libtriton: Any = importlib.import_module("triton._C.libtriton")
        except ImportError as exc:
            raise OptionalDependencyError(f"{TRITON_MISSING} ({one_line(exc)})") from None
        self.version = str(self.triton.__version__)


def _package_of(path: Path) -> tuple[str, Path] | None:
    """The dotted name of the package a file lies in (its folders with an ``__init__.py``, innermost last) and the
    folder above that package's top, or None for a file outside any package."""
    parts: list[str] = []
    folder = path.parent
    while (folder / "__init__.py").is_file() and folder.name.isidentifier() and folder.parent != folder:
        parts.insert(0, folder.name)
        folder = folder.parent
    return (".".join(parts), folder) if parts else None


@contextmanager
def _importable_beside(path: Path) -> Iterator[str | None]:
    """While the file ``path`` executes: its own folder first on ``sys.path`` (as ``python file.py`` has it), so that
    it can import the modules beside it; and, for a file in a package, the folder above the package's top on
    ``sys.path`` with the package's modules standing in ``sys.modules`` (their folders, never their
    ``__init__.py``, which often imports the host framework), so that its relative imports (``from .utils import
    f``) and the package-qualified ones work (where another package already has the name, a folder called
    ``triton/``, the relative ones resolve under a private name). Yields the package's dotted name (None outside
    one); everything added is removed afterwards, the modules imported under the stand-ins included."""
    package = _package_of(path)
    entries = [str(path.parent)] + ([str(package[1])] if package else [])
    added = [e for e in dict.fromkeys(entries) if e not in sys.path]
    for entry in reversed(added):
        sys.path.insert(0, entry)
    stand_ins: list[str] = []
    dotted: list[str] = []
    if package:
        names = package[0].split(".")
        top = package[1] / names[0]
        taken = sys.modules.get(names[0])
        if taken is not None and str(top.resolve()) not in {str(Path(p).resolve()) for p in
                                                             getattr(taken, "__path__", [])}:
            # another package has the name (a folder called triton/): relative imports resolve under a private one
            dotted = [f"_compileiq_pkg_{hashlib.sha1(str(top).encode()).hexdigest()[:10]}", *names[1:]]
        else:
            dotted = names
        for depth in range(1, len(names) + 1):
            name = ".".join(dotted[:depth])
            if name not in sys.modules:
                stub = ModuleType(name)
                stub.__path__ = [str(package[1].joinpath(*names[:depth]))]
                stub.__package__ = name
                sys.modules[name] = stub
                stand_ins.append(name)
    before = set(sys.modules)
    try:
        yield ".".join(dotted) if package else None
    finally:
        for entry in added:
            if entry in sys.path:
                sys.path.remove(entry)
        for name in set(sys.modules) - before:
            if any(name == s or name.startswith(f"{s}.") for s in stand_ins):
                sys.modules.pop(name, None)
        for name in stand_ins:
            sys.modules.pop(name, None)


#: The module attribute where ``load_module`` records, for each top-level name the JIT functions read that is not
#: defined here, why not (the import it comes from failed here): ``compile_error`` says it.
MISSING = "__compileiq_missing__"


def load_module(path: Path, who: str, function: str | None = None) -> ModuleType:
    """The user's module with its @triton.jit functions: first only what they need (``triton_reduce.jit_only``: the
    file's tests, benchmarks and device queries do not run; an import that fails is left out), else (it raises, it
    leaves a name they read undefined, or ``function`` is not among them) the whole file imported as Python does.
    Where only the first defines the functions, the names it leaves undefined, with the failed import behind each,
    are recorded in the module's ``MISSING``."""
    try:
        text = path.read_text(errors="replace")
    except OSError as exc:
        raise fail(who, "the file can be read", str(path), f"Fix the path ({exc.strerror}).") from None
    reduced = jit_only(text)
    partial: ModuleType | None = None
    if reduced is not None:
        try:
            module, dropped = _jit_module(path, reduced.text, reduced.imports)
        except Exception as exc:  # noqa: BLE001 - the user's code: anything; the whole file is imported instead
            log.info("%s: the @triton.jit functions of %s alone do not define (%s); importing the whole file", who,
                     path.name, raised_in(path, exc))
        else:
            missing = sorted(n for n in reduced.needed if n not in vars(module) and not hasattr(builtins, n))
            if not missing and (function is None or hasattr(module, function)):
                log.info("%s: defined its @triton.jit functions and what they use; the rest of %s does not run",
                         who, path.name)
                return module
            partial = module
            setattr(module, MISSING, {n: _why_missing(n, text, dropped) for n in missing})
            log.info("%s: the @triton.jit functions of %s alone leave %s undefined; importing the whole file", who,
                     path.name, ", ".join(missing) or function)
    try:
        return _import_whole(path)
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # noqa: BLE001 - SystemExit too: the user's file must not end this process
        said = raised_in(path, exc)
        if partial is None or (function is not None and not hasattr(partial, function)):
            raise ConfigurationError(f"{who}: `{path} imports without raising` must hold, but importing it raised "
                                     f"{said}. Fix the file: importing it must neither raise nor exit (keep test "
                                     "code under `if __name__ == \"__main__\":`).") from None
        log.info("%s: importing the whole of %s raised %s; its @triton.jit functions alone are compiled", who,
                 path.name, said)
        for name, why in getattr(partial, MISSING).items():
            if not why:
                getattr(partial, MISSING)[name] = f"the whole file does not import here either: {said}"
        return partial


def _why_missing(name: str, text: str, dropped: Mapping[tuple[int, int], str], depth: int = 3) -> str:
    """Why the reduced module leaves ``name`` undefined: the dropped import that binds it (and, where that failed on
    a name another dropped import binds, that one's too), or ""."""
    lines = text.splitlines()
    for (first, last), why in dropped.items():
        try:
            nodes = ast.parse("\n".join(lines[first - 1:last])).body  # (a top-level statement: no indent)
        except SyntaxError:
            continue
        if any(name in bound_names(node) for node in nodes):
            shown = " ".join(lines[first - 1].split())
            said = f"it comes from line {first} (`{shown}`), which failed here: {why}"
            behind = re.fullmatch(r"name '(\w+)' is not defined", why)
            if behind is None or not depth:
                return said
            more = _why_missing(behind.group(1), text, dropped, depth - 1)
            return f"{said}; {behind.group(1)}: {more}" if more else said
    return ""


def _import_whole(path: Path) -> ModuleType:
    """The whole file imported as Python imports a module (as part of its package, where it lies in one); whatever
    the file raises is raised."""
    with _importable_beside(path) as package:
        stem = f"_compileiq_triton_{hashlib.sha1(str(path).encode()).hexdigest()[:10]}"
        name = f"{package}.{stem}" if package else stem
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise ImportError(f"{path} is not a Python module")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # only while it executes (dataclasses and pickle look it up)
        try:
            spec.loader.exec_module(module)
        finally:
            sys.modules.pop(name, None)
    return module


def _jit_module(path: Path, text: str, imports: list[tuple[int, int]]
                ) -> tuple[ModuleType, dict[tuple[int, int], str]]:
    """Execute the reduced text of ``path`` as its module (compiled under the file's own name, so Triton reads each
    function's source from the file, at the same lines), with the imports it dropped and why. An import that fails
    (or a statement around one that reads a name such an import left undefined) is left out and the text run again:
    the JIT functions rarely need what the file's host code imports (torch)."""
    name = f"_compileiq_triton_jit_{hashlib.sha1(str(path).encode()).hexdigest()[:10]}"
    left = list(imports)
    dropped: dict[tuple[int, int], str] = {}
    while True:
        module = ModuleType(name)
        module.__file__ = str(path)
        sys.modules[name] = module  # only while it executes (dataclasses and pickle look it up)
        try:
            with _importable_beside(path) as package:
                module.__package__ = package
                exec(compile(text, str(path), "exec"), module.__dict__)  # the user's file, as an import runs it
            return module, dropped
        except (ImportError, NameError) as exc:  # (a NameError: a kept `if` choosing an import tests a name whose
            line = _line_in(path, exc)            # own import was dropped)
            span = next((s for s in left if line is not None and s[0] <= line <= s[1]), None)
            if span is None:
                raise
            left.remove(span)
            dropped[span] = one_line(exc)
            text = blank_lines(text, [span])
        finally:
            sys.modules.pop(name, None)


def _line_in(path: Path, exc: BaseException) -> int | None:
    """The line of ``path`` an exception was raised at (its innermost frame in that file), or None."""
    tb, line = exc.__traceback__, None
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == str(path):
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


def jit_function(t: Triton, module: ModuleType, function: str, who: str) -> Any:
    if not hasattr(module, function):
        defined = sorted(k for k, v in vars(module).items() if isinstance(v, t.jit.KernelInterface))
        raise fail(who, "the file defines the function", function,
                   f"Its @triton.jit functions are {defined or 'none'}; name one of them.")
    obj = getattr(module, function)
    while isinstance(obj, t.jit.KernelInterface) and not isinstance(obj, t.jit.JITFunction) and hasattr(obj, "fn"):
        # @triton.autotune / @triton.heuristics around the @triton.jit function
        log.info("%s: %s wraps the @triton.jit function; its configs are not tried (give the values, or "
                 "--autotune-config N)", who, type(obj).__name__)
        obj = obj.fn
    if not isinstance(obj, t.jit.JITFunction):
        raise fail(who, f"{function} is a @triton.jit function", type(obj).__name__,
                   "Decorate it with @triton.jit (Triton's JIT), or name the function that is.")
    return obj


def constexprs_of(fn: Any, given: Mapping[str, Any], who: str) -> dict[str, int | float | bool | str]:
    names = list(fn.arg_names)
    out: dict[str, int | float | bool | str] = {}
    for name, value in given.items():
        need(name in names, who, f"every constant names a parameter of the function ({', '.join(names)})", name,
             "Check the spelling of the define.")
        need(isinstance(value, (bool, int, float, str)), who, f"the value of {name} is an int, float, bool or str",
             value, "Give a plain value.")
        out[name] = value
    defaults = {k: p.default for k, p in inspect.signature(fn.fn).parameters.items()}
    missing = []
    for p in fn.params:
        if p.is_constexpr and p.name not in out:
            default = defaults.get(p.name, inspect.Parameter.empty)
            if type(default).__name__ == "constexpr" and hasattr(default, "value"):  # = tl.constexpr(3)
                default = default.value
            if isinstance(default, (bool, int, float, str)):
                out[p.name] = default
            else:
                missing.append(p.name)
    if missing:
        try:
            hint = autotune_hint(Path(fn.fn.__code__.co_filename).read_text(errors="replace"), fn.fn.__name__,
                                 missing)
        except (OSError, AttributeError):
            hint = ""
        raise fail(who, "every tl.constexpr parameter without a default has a value", missing,
                   f"Give {', '.join(f'{m}=<value>' for m in missing)} (on the command line --define {missing[0]}=128, "
                   f"in the lab's constexprs field {missing[0]}=128).{hint}")
    return {k: out[k] for k in names if k in out}


@contextmanager
def environment(values: Mapping[str, str]) -> Iterator[None]:
    """``values`` set in the environment for the duration (Triton's passes read their switches from it)."""
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _def_line(fn: Any) -> int:
    """The file's line of the ``def`` of a @triton.jit function (its source, as Triton parses it, starts there)."""
    try:
        lines, start = inspect.getsourcelines(fn.fn)
    except (OSError, TypeError):
        return 1
    return start + next((i for i, line in enumerate(lines) if line.strip().startswith("def ")), 0)


def compile_error(t: Triton, exc: BaseException, fn: Any, who: str, arch: str) -> ConfigurationError:
    """Triton's compile error in one line: what it says (its first lines) and where in the user's file."""
    where = ""
    text = ""
    if isinstance(exc, t.errors.CompilationError):
        node_line = getattr(exc.node, "lineno", None)
        if node_line is not None and exc.src is not None and exc.src == getattr(fn, "src", None):
            where = f" (line {_def_line(fn) + node_line - 1})"
        elif node_line is not None:
            where = f" (line {node_line} of a function it calls)"
        text = exc.error_message or ""
        cause = exc.__cause__ or exc.__context__
        while not text and cause is not None:
            text = str(cause)
            cause = cause.__cause__ or cause.__context__
    text = text or str(exc)
    lines = [line.strip() for line in text.splitlines() if line.strip()][:_ERROR_LINES]
    said = " ".join(" / ".join(lines).split())
    said = (said if len(said) <= 300 else said[:300] + "...") or type(exc).__name__
    missing = getattr(getattr(fn, "fn", None), "__globals__", {}).get(MISSING) or {}
    why = [f"{name} is not defined here: {reason}" for name, reason in missing.items()
           if reason and re.search(rf"\b{re.escape(name)}'? is not defined", said)]
    fix = (f"Make that import work here (install what it needs, or import {'them' if len(why) > 1 else 'it'} "
           "from a module that does)" if why else
           "Fix the kernel, its signature or constants, or choose another --arch")
    return ConfigurationError(f"{who}: `it compiles for {arch}` must hold, but Triton {t.version} stopped with "
                              f"{type(exc).__name__}{where}: {said}{' (' + '; '.join(why) + ')' if why else ''}. "
                              f"{fix}.")


Attrs = dict[tuple[int, ...], list[list[Any]]]


def to_ptx(t: Triton, fn: Any, signature: dict[str, str], constexprs: dict[str, Any], attrs: Attrs, cc: int,
            options: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """Triton's pipeline (as ``triton.compile`` runs it) up to and including the 'ptx' stage: the cubin stage, the
    driver and Triton's on-disk cache are never reached, so no GPU, libcuda or ptxas of Triton's is needed."""
    target = t.targets.GPUTarget("cuda", cc, 32)
    backend = t.compiler.make_backend(target)
    src = t.compiler.ASTSource(fn, signature, constexprs, attrs)
    opts = backend.parse_options(dict(options, **src.parse_options()))
    stages: dict[str, Any] = {}
    backend.add_stages(stages, opts, src.language)
    ir = t.libtriton.ir
    context = ir.context()
    ir.load_dialects(context)
    backend.load_dialects(context)
    codegen_fns = backend.get_codegen_implementation(opts)
    module_map = backend.get_module_map()
    if "target" in inspect.signature(src.make_ir).parameters:  # Triton >= 3.5
        module = src.make_ir(target, opts, codegen_fns, module_map, context)
    else:
        module = src.make_ir(opts, codegen_fns, module_map, context)
    metadata: dict[str, Any] = {"target": target, **opts.__dict__, "triton_version": t.version}
    names = list(stages)
    for ext in names[names.index(src.ext):names.index("ptx") + 1]:
        module = stages[ext](module, metadata)
    if hasattr(context, "disable_multithreading"):  # as triton.compile ends (before a fork could copy its threads)
        context.disable_multithreading()
    return str(module), metadata


