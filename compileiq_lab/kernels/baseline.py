"""When a kernel run stops early: after its baseline, when no searched control can change what made the defaults
fail, or after its first generation, when every output so far was wrong."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from compileiq_lab.kernels.cudalibs import library_header_note, missing_library_note
from compileiq_lab.kernels.spec import KernelSpec
from compileiq_lab.measure.binding import device_part
from compileiq_lab.measure.c_shim import C_ENTRY, SHIM_ERROR, calls_own_function
from compileiq_lab.measure.cpu import WRITES_INPUT
from compileiq_lab.measure.entries import demangle
from compileiq_lab.space.catalogs import Catalog
from compileiq_lab.store.sqlite import EvalRecord

__all__ = ["baseline_stop_reason", "wrong_output_stop_reason"]

#: Compiler messages of a header the compiler cannot find (nvcc/cicc, gcc, clang): no control brings it back.
_MISSING_FILE = re.compile(r"cannot open source file|fatal error: .*: No such file or directory|file not found",
                           re.IGNORECASE)
#: A header of a Python framework's C++ binding (a kernel file of a PyTorch extension, say): host code, not kernel.
_BINDING = re.compile(r"""["<'\s(](?P<framework>torch|ATen|c10|pybind11|tensorflow|Python\.h|jax|paddle)[/.'":>]""")
_FRAMEWORKS = {"torch": "PyTorch", "ATen": "PyTorch", "c10": "PyTorch", "Python.h": "Python C API", "jax": "JAX",
               "tensorflow": "TensorFlow", "paddle": "Paddle"}
#: Launch errors of an entry (kernel) the module does not have.
_MISSING_ENTRY = re.compile(r"named symbol not found|CUDA_ERROR_NOT_FOUND", re.IGNORECASE)
#: Front-end failures no searched control changes: the C++ front end's diagnostics of the preprocessed source (EDG's
#: ``file(line): error``; none of the nvcc catalog's front-end controls changes the macros the preprocessor is given,
#: checked with ``nvcc --dryrun`` 13.0, while an ``#error`` directive, which the preprocessor reports as
#: ``file:line:col: error``, may depend on a -D knob), an option nvcc does not know (a fixed argument) and inline PTX
#: that does not parse (``nvcc -ptx`` checks its PTX with ptxas: an unknown instruction or modifier, a syntax error).
_SOURCE_ERROR = re.compile(r"\(\d+\): (catastrophic )?error|nvcc fatal\s*:\s*(Unknown option|Value '[^'\n]*' is not "
                           r"defined for option)|^ptxas .*, line \d+; error\s*: (Not a name of any known instruction|"
                           r"Unknown modifier|syntax error)", re.MULTILINE)
#: ptxas on code the target architecture lacks (inline PTX or intrinsics of a newer GPU): no searched control changes
#: the target, only the build's --arch does.
_TARGET_ERROR = re.compile(r"requires \.target sm_\d+ or higher|not supported on \.target")
#: A C compiler's parse errors (gcc's and clang's ``file:line:col: error: expected ...``, stray characters, unterminated
#: literals and comments): the same under every searched control for a file whose tokens no macro of theirs steers.
_C_PARSE_ERROR = re.compile(r"^(?P<file>[^\n]+?):\d+:\d+: error: (expected|stray|missing terminating|unterminated)",
                            re.MULTILINE)
#: A preprocessor conditional: a searched C control defines macros (-O: __OPTIMIZE__, -ffast-math: __FAST_MATH__,
#: -march: the ISA's), which an #if may test.
_CONDITIONAL = re.compile(r"^\s*#\s*(if|ifdef|ifndef|elif|elifdef|elifndef)\b", re.MULTILINE)
_STAGE_NAMES = {"frontend": "the front end (nvcc -ptx)", "backend": "ptxas", "c": "the C compiler"}
#: ptxas on a device function the file declares and another file defines: every build here is whole-program (no
#: relocatable device code, no device link, searched or fixed), so no control resolves it.
_UNRESOLVED = re.compile(r"Unresolved extern function '([^']+)'")
#: The linker's words for a C kernel's functions that its build lacks or has twice (ld and lld spell them so).
_C_UNDEFINED = re.compile(r"undefined (?:reference to|symbol:) [`']?(?P<name>[A-Za-z_]\w*)'?")
_C_TWICE = re.compile(r"(?:multiple definition of|duplicate symbol:?) [`']?(?P<name>[A-Za-z_]\w*)'?")


def baseline_stop_reason(kernel: KernelSpec, catalog: Catalog, record: EvalRecord,
                         cuda_version: str | None = None) -> str | None:
    """Why a search of ``catalog``'s controls (and the kernel's -D knobs) cannot get anywhere after this
    baseline evaluation, or None to search on. ``cuda_version``: the nvcc's CUDA release (``13.0``), named in the fix
    for a CUDA library's header that is missing or of another release.

    The rule: the baseline (compiler defaults) failed, and no searched control can change what failed:
    the failing compile stage has no control in the searched space (a front-end error under a ptxas-only
    space), a CUDA source the front end rejects (a syntax error, an unknown fixed option) with no -D knob searched,
    a header the compiler cannot find, or an entry the module does not have (at build: the name matches
    none or several of its kernels; at launch: the symbol is missing).
    """
    if record.status == "ok":
        return None
    detail = record.detail if isinstance(record.detail, Mapping) else {}
    stage = str(detail.get("failed_stage", ""))
    first = record.error_line or record.status
    searched = {c.stage for c in catalog.controls}
    if kernel.defines:
        searched.add(catalog.stages[0])  # -D knobs go to the first stage
    if stage == "entry":
        return f"the kernel's entry does not name one kernel of the compiled module: {record.error.strip()}"
    missing = next((ln.strip() for ln in record.error.splitlines() if _MISSING_FILE.search(ln)), "")
    if stage and missing:
        return _missing_file_reason(missing, catalog.compiler, cuda_version)
    if _MISSING_ENTRY.search(record.error):
        return f"the kernel's entry {kernel.entry!r} is not in the compiled module ({first}); fix entry in kernel.toml"
    target = next((ln.strip() for ln in record.error.splitlines() if _TARGET_ERROR.search(ln)), "")
    if stage and target:
        return (f"the kernel needs a newer GPU architecture than it is built for, and no searched control changes the "
                f"target ({target}); build for a newer one (the CLI's --arch, KernelRun(arch=...))")
    unresolved = sorted(set(_UNRESOLVED.findall(record.error)))
    if stage and unresolved:
        names = ", ".join(demangle(unresolved).values())
        return (f"the kernel calls device functions that another file defines ({names}); every build here compiles "
                "one file whole, without relocatable device code or a device link, so no control resolves them: put "
                "their definitions in this file or in a header it includes")
    if stage and stage not in searched:
        names = ", ".join(_STAGE_NAMES.get(s, s) for s in sorted(searched)) or "none"
        return (f"the baseline fails in {_STAGE_NAMES.get(stage, stage)} and the searched controls ({names}) "
                f"cannot change that: {first}{library_header_note(record.error, cuda_version)}")
    if stage == "frontend" and catalog.compiler == "nvcc" and not kernel.defines and _SOURCE_ERROR.search(
            record.error):
        library = library_header_note(record.error, cuda_version)
        fault = "" if library else " (the source or a fixed argument is at fault)"
        return (f"the kernel does not compile at the front end, and no searched control changes that{fault}: {first}"
                f"{library or _binding_note(kernel)}")
    call = SHIM_ERROR.search(record.error) if stage == "c" and calls_own_function(kernel) else None
    if call:
        return _c_call_reason(kernel, call, record.error)
    if stage == "c":
        linked = _c_link_reason(kernel, record.error)
        if linked:
            return linked
    if stage == "c" and not kernel.defines:
        return _c_syntax_error(kernel, record.error)
    return None


def _c_link_reason(kernel: KernelSpec, error: str) -> str | None:
    """Why a C kernel that does not link cannot get anywhere: a function its build defines twice (a main of the
    user's own beside the harness'), or functions it calls that no file of its build defines (its source has no
    body for them; the build is the kernel's file and the harness alone, no other file or library); else None."""
    twice = _C_TWICE.search(error)
    if twice:
        name = twice.group("name")
        return (f"the kernel does not link: {name} is defined twice ({_line_of(error, twice)}); the harness brings "
                f"its own main and cil_kernel, so a file of yours that defines {name} (a wrapper that includes the "
                f"kernel's file, say) cannot be linked with it: leave it out, or rename it with --define "
                f"{name}=user_{name}")
    names = sorted(set(_C_UNDEFINED.findall(error)))
    try:
        text = kernel.source_path.read_text(errors="replace")
    except OSError:
        return None
    lacking = [n for n in names if not re.search(rf"\b{re.escape(n)}\s*\([^;{{}}]*\)\s*\{{", text)]
    if not names or lacking != names:
        return None
    return (f"the kernel does not link: it calls {', '.join(lacking)}, which no file of its build defines (the build "
            f"compiles {kernel.source_path.name} with the timing harness alone, no other file or library); no searched "
            "control changes that: put their definitions in the file or in a header it includes")


def _line_of(text: str, match: re.Match[str]) -> str:
    """The line of ``text`` a match lies in, stripped."""
    start = text.rfind("\n", 0, match.start()) + 1
    end = text.find("\n", match.end())
    return text[start:end if end >= 0 else len(text)].strip()


def _missing_file_reason(missing: str, compiler: str, cuda_version: str | None) -> str:
    """Why a compile that misses an included file (the compiler's line ``missing``) cannot get anywhere, with the fix:
    NVRTC has no C library headers; a CUDA library's header comes with its package; a framework binding's host code
    is not the kernel; anything else needs its folder passed."""
    if compiler == "nvrtc":
        return (f"the kernel does not compile with NVRTC: a file it includes is missing ({missing}); NVRTC compiles "
                "device code only and has no C library headers (the CUDA toolkit's and the -I folders are passed): "
                "tune a file with host code with --space nvcc or ptxas, or guard its host part with "
                "#ifndef __CUDACC_RTC__")
    library = missing_library_note(missing, cuda_version)
    if library:
        return f"the kernel does not compile: a file it includes is missing ({missing}); {library}"
    binding = _BINDING.search(missing)
    framework = binding.group("framework") if binding else ""
    fix = (f"; it is the {_FRAMEWORKS.get(framework, framework)} binding's host code, which the tuner does not "
           "run: copy the __global__ kernels, with the device code and headers they use, into a file of their own "
           "and tune that" if binding else "; add its folder with -I/--include-dir (kernel.toml: [build] "
           "include_dirs)")
    return f"the kernel does not compile: a file it includes is missing ({missing}){fix}"


def _c_call_reason(kernel: KernelSpec, call: re.Match[str], error: str) -> str:
    """Why the generated entry of a C kernel (which calls the kernel's function) does not compile: ``call`` is the
    compiler's complaint about that call."""
    if "redefinition of" in call["what"] and C_ENTRY in call["what"]:
        return (f"{kernel.source_path.name} defines {C_ENTRY} itself, and kernel.toml names {kernel.entry!r}, "
                f"which a generated {C_ENTRY} would call: set entry = \"{C_ENTRY}\" and remove [launch] to tune "
                f"the file's own {C_ENTRY}, or remove it from the file")
    if "implicit declaration of function" in call["what"]:
        return (f"{kernel.source_path.name} declares no function {kernel.entry!r} ({call['what']}); set entry in "
                "kernel.toml to the name of the function to tune")
    note = re.search(r": note: ([^\n]*)", error[call.end():])
    return (f"kernel.toml's [launch] args do not fit the parameters of {kernel.entry} ({call['what']}"
            f"{'; ' + note[1] if note else ''}), in the call {kernel.entry}({', '.join(kernel.args or ())}); "
            "list its buffers and params in the order of its parameters")


def _binding_note(kernel: KernelSpec) -> str:
    """What a front-end error of a PyTorch extension's file (compiled by its device part) may come from, or ""."""
    try:
        text = kernel.source_path.read_text(errors="replace")
    except OSError:
        return ""
    if device_part(text) is None:
        return ""
    return ("; this is a PyTorch extension's file, compiled without its binding: a kernel or device function that "
            "uses the framework's own C++ types (at::Half, c10::BFloat16, torch::PackedTensorAccessor) needs CUDA's "
            "(__half, __nv_bfloat16, plain pointers) to compile without its headers")


def _c_syntax_error(kernel: KernelSpec, error: str) -> str | None:
    """Why a C kernel's syntax error stops the run: it is in the kernel's own file, which has no preprocessor
    conditional a control's macros could steer; else None."""
    source = kernel.source_path
    for m in _C_PARSE_ERROR.finditer(error):
        if Path(m.group("file")).name != source.name:
            continue
        try:
            text = source.read_text(errors="replace")
        except OSError:
            return None
        if _CONDITIONAL.search(text):
            return None
        return (f"the kernel does not compile: a syntax error in {source.name}, which no searched control changes "
                f"(fix the source): {error[m.start():].splitlines()[0].strip()}")
    return None


def wrong_output_stop_reason(kernel: KernelSpec, records: Sequence[EvalRecord]) -> str | None:
    """Why a search stops after its first generation: the baseline and every config of that generation ran and
    computed outputs other than the reference's, so the output check (the reference, its tolerances), the inputs or
    the launch is the likelier fault than the compiler's choices; else None."""
    if len(records) < 2 or any(r.status != "wrong_output" for r in records):
        return None
    first = next((r for r in records if r.is_baseline), records[0])
    said = next((line.strip() for line in first.error.splitlines() if line.strip()), "no message")
    unpassed = [b.name for b in kernel.outputs if calls_own_function(kernel) and b.name not in (kernel.args or ())]
    if unpassed:
        return (f"the baseline and all {len(records) - 1} configs of the first generation computed wrong output, and "
                f"{kernel.entry} is never given the output {', '.join(repr(n) for n in unpassed)}: it is not among "
                f"kernel.toml's [launch] args {list(kernel.args or ())}, so nothing writes it. Pass it where the "
                f"function takes its result; a function that returns its result instead needs a wrapper that stores "
                "it (a cil_kernel of the file's own, see the README's C kernels)")
    if WRITES_INPUT in first.error:  # the kernel's own fault, whatever the reference says
        return (f"the baseline and all {len(records) - 1} configs of the first generation computed wrong output "
                f"({'baseline' if first.is_baseline else 'first'}: {said}): fix the kernel so that it leaves its "
                "inputs as they are, and tune again into a new run store")
    return (f"the baseline and all {len(records) - 1} configs of the first generation computed wrong output "
            f"({'baseline' if first.is_baseline else 'first'}: {said}): no config computed what "
            f"{kernel.name}'s reference does, so the reference, the tolerances (kernel.toml's [check] rtol, atol), "
            "the inputs or the launch is likelier at fault than the compiler's choices; fix that and tune again into "
            "a new run store")
