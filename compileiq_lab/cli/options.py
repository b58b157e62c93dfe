"""Options several commands share: the build context of a kernel, and which point an export writes."""

from __future__ import annotations

import argparse
import math
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from compileiq_lab.acf.export import effective_params, point_acf
from compileiq_lab.acf.lowered import lowered_note
from compileiq_lab.analysis.validation import MIN_ROUNDS
from compileiq_lab.exceptions import ConfigurationError, did_you_mean
from compileiq_lab.kernels import (
    BLOCK_RULE,
    TRITON_PREFIX,
    BuildContext,
    KernelRun,
    KernelSpec,
    controls_fixed_by,
    load_triton_kernel,
    minimal_controls,
    refuse_fixed_controls,
    triton_usage_error,
    valid_block,
)
from compileiq_lab.store import EvalRecord, Results, Validation
from compileiq_lab.store.guard import overwrite_problem
from compileiq_lab.store.pick import PICK_CHOICES, default_pick, pick_point
from compileiq_lab.toolchain.context import check_extra_arg, parse_define

__all__ = ["UsageError", "add_build_arguments", "add_pick_arguments", "add_triton_arguments", "build_options",
           "check_output_file", "check_pick", "check_searched_not_fixed", "duration", "export_point", "fraction",
           "int_at_least", "kernel_argument", "rounds", "seconds"]

_UNITS = {"s": 1.0, "sec": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0}


class UsageError(ConfigurationError):
    """A command line that is wrong whatever the kernel, its files and the machine: a malformed, empty or repeated
    value, a name no run has, options that contradict each other (exit 2, as argparse's own usage errors). What is
    wrong only for this kernel, a file or this machine is a ConfigurationError (exit 1)."""


def int_at_least(low: int, what: str, high: int | None = None) -> Callable[[str], int]:
    """An argparse type: an integer >= ``low`` (and <= ``high`` where given; anything else is a usage error, exit 2,
    naming the rule)."""
    rule = f"an integer >= {low}" if high is None else f"an integer from {low} to {high}"

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"`{rule}` must hold ({what}), but got {text!r}") from None
        if value < low or (high is not None and value > high):
            raise argparse.ArgumentTypeError(f"`{rule}` must hold ({what}), but got {value}")
        return value

    parse.__name__ = f"int>={low}"  # argparse names the type in its messages
    return parse


def rounds(allow_off: bool = False) -> Callable[[str], int]:
    """An argparse type: interleaved timing rounds, an integer >= MIN_ROUNDS (or 0, turning the re-measurement off,
    where ``allow_off``)."""
    rule = f"an integer >= {MIN_ROUNDS}{' (or 0: off)' if allow_off else ''}"

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"`{rule}` must hold (timing rounds), but got {text!r}") from None
        if value < MIN_ROUNDS and not (allow_off and value == 0):
            raise argparse.ArgumentTypeError(f"`{rule}` must hold (timing rounds; fewer give no usable interval), "
                                             f"but got {value}; e.g. 40")
        return value

    parse.__name__ = "rounds"
    return parse


def _float(text: str) -> float:
    """``text`` as a number; NaN where it is none (every range check then fails)."""
    try:
        return float(text)
    except ValueError:
        return math.nan


def fraction(text: str) -> float:
    """An argparse type: a number in [0, 1)."""
    value = _float(text)
    if not 0 <= value < 1:  # (NaN fails it too)
        raise argparse.ArgumentTypeError(f"`a number in [0, 1)` must hold, but got {text!r}; e.g. 0.01")
    return value


def seconds(text: str) -> float:
    """An argparse type: a finite number of seconds > 0."""
    value = _float(text)
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"`a finite number of seconds > 0` must hold, but got {text!r}; e.g. 120")
    return value


def duration(text: str) -> float:
    """An argparse type: a wall time as seconds (``600``) or with a unit s, m or h (``90s``, ``10m``, ``1.5h``; also
    spelled sec, min)."""
    body = text.strip().lower()
    unit = next((u for u in sorted(_UNITS, key=len, reverse=True) if body.endswith(u)), "")
    scale, number = _UNITS.get(unit, 1.0), body[:len(body) - len(unit)].strip()
    value = _float(number) * scale if number.strip() else math.nan
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"`a duration > 0 in seconds, or with a unit s, m or h` must hold, but got "
                                         f"{text!r}; write e.g. 600, 90s, 10m or 1.5h")
    return value


def add_build_arguments(parser: argparse.ArgumentParser) -> None:
    """The build-context options of a command that loads a kernel (fixed arguments come after ``--``)."""
    parser.add_argument("-I", "--include-dir", action="append", default=[], metavar="DIR",
                        help="a folder searched for headers (repeatable; fixed, not searched)")
    parser.add_argument("--define", action="append", default=[], metavar="NAME=VALUE",
                        help="a fixed -D define (repeatable; not searched; NAME alone is NAME=1, as -DNAME is; a "
                             "Triton kernel's constexpr takes NAME=VALUE)")
    parser.add_argument("--entry", default=None, help="the kernel of a multi-kernel .cu file to tune: its plain C++ "
                                                      "name, mangled name, template instantiation, or regex:PATTERN "
                                                      "found in one kernel's name (the kernels found are listed when "
                                                      "it matches none or several)")
    parser.add_argument("--block", default=None, metavar="X[,Y[,Z]]",
                        help="a bare file's launch block, e.g. 256 or 16,16 (--maxntid values below it are not "
                             "offered)")


def add_pick_arguments(parser: argparse.ArgumentParser) -> None:
    """The point-choice options of an export."""
    parser.add_argument("--pick", default=None, metavar="OBJECTIVE|first|knee|no-regression",
                        help="the point to export: the best on one objective (first: the first objective), the knee "
                             "of the front, or the best on "
                             "the first objective among points no worse than the baseline on any objective "
                             "(default: no-regression for static runs, the first objective otherwise)")
    parser.add_argument("--no-minimize", action="store_true",
                        help="export the point's controls as they are (default: drop each control whose removal "
                             "leaves the machine code identical, and say which)")


def add_triton_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of a ``triton:FILE.py:FUNCTION`` kernel (its --define values are its constexprs)."""
    parser.add_argument("--signature", default=None, metavar="TYPES",
                        help="a Triton kernel's runtime parameter types, in order (e.g. '*fp16:16,*fp16:16,i32') or "
                             "by name ('a_ptr=*fp16:16,n=i32'); ':16' marks 16-byte aligned pointers / ints divisible "
                             "by 16, as Triton's JIT assumes for aligned tensors")
    parser.add_argument("--num-warps", type=int_at_least(1, "Triton's warps per program"), default=None,
                        help="Triton's warps per program (default: the --autotune-config's, else 4)")
    parser.add_argument("--num-stages", type=int_at_least(1, "Triton's pipelining depth"), default=None,
                        help="Triton's software-pipelining depth (default: the --autotune-config's, else 3)")
    parser.add_argument("--autotune-config", type=int_at_least(1, "a config of the kernel's @triton.autotune list"),
                        default=None, metavar="N",
                        help="take a Triton kernel's constexprs, num_warps and num_stages from config N (1 = the "
                             "first) of its @triton.autotune list, read from its file; --define, --num-warps and "
                             "--num-stages given override it")


def check_pick(rule: str | None, objectives: list[str]) -> None:
    """Refuse a --pick that names neither one of the run's ``objectives`` nor a rule (UsageError)."""
    if rule is not None and rule not in objectives and rule not in PICK_CHOICES:
        raise UsageError(f"`--pick is an objective of the run ({', '.join(objectives)}) or one of "
                         f"{', '.join(PICK_CHOICES)}` must hold, but got {rule!r}"
                         f"{did_you_mean(rule, [*objectives, *PICK_CHOICES])}; pick one of those")


def _check_defines(defines: list[str], triton: bool) -> None:
    """Refuse defines that are wrong whatever the kernel (UsageError): a name given twice, and for a Triton kernel a
    constexpr without a value."""
    for d in defines:
        try:
            parse_define(d, "--define")
        except ConfigurationError as exc:
            raise UsageError(str(exc)) from None
    names = [str(d).partition("=")[0] for d in defines]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise UsageError(f"`--define names each define once` must hold, but got {', '.join(repeated)} more than once; "
                         "keep the one value to use")
    bare = [d for d in defines if triton and "=" not in str(d)]
    if bare:
        raise UsageError(f"`a Triton constexpr's --define gives its value (NAME=VALUE)` must hold, but got "
                         f"--define {bare[0]}; write e.g. --define {bare[0]}=128")


def check_searched_not_fixed(args: argparse.Namespace, controls: list[str] | None) -> None:
    """Refuse a control named in --controls that an argument after -- fixes as well (UsageError)."""
    fixed = controls_fixed_by(list(getattr(args, "extra", None) or []), "c" if args.kernel.endswith(".c") else "cuda")
    both = [c for c in controls or [] if c in fixed]
    if both:
        raise UsageError(f"`a control is searched or fixed, not both` must hold, but got {both[0]} in --controls and "
                         f"{fixed[both[0]]} after --; drop one of the two")


def kernel_argument(args: argparse.Namespace, out_dir: Path) -> str | KernelSpec:
    """The kernel a command names: a Triton reference compiled to PTX (into ``out_dir``), else the name as given."""
    _check_defines(list(args.define or []), args.kernel.startswith(TRITON_PREFIX))
    if not args.kernel.startswith(TRITON_PREFIX):
        given = [flag for flag, value in (("--signature", args.signature), ("--num-warps", args.num_warps),
                                          ("--num-stages", args.num_stages),
                                          ("--autotune-config", args.autotune_config)) if value is not None]
        if given:
            raise UsageError(f"{given[0]} is a Triton kernel's option, but got kernel {args.kernel!r}; name it "
                             f"as triton:FILE.py:FUNCTION, or drop {given[0]}")
        return str(args.kernel)
    if args.include_dir or getattr(args, "extra", None) or args.block or args.entry:
        raise UsageError("a Triton kernel takes --signature, --define NAME=VALUE (its constexprs), "
                         "--num-warps, --num-stages and --autotune-config; -I, --block, --entry and arguments "
                         "after -- do not apply")
    said = triton_usage_error(args.kernel, args.signature, args.num_warps)
    if said:
        raise UsageError(said)
    constexprs = dict(parse_define(d, "--define") for d in args.define)
    return load_triton_kernel(args.kernel, args.signature or "", constexprs, args.arch, out_dir,
                              num_warps=args.num_warps, num_stages=args.num_stages,
                              autotune_config=args.autotune_config)


def build_options(args: argparse.Namespace) -> dict[str, Any]:
    """KernelRun arguments from the build-context options and the fixed arguments after ``--`` (none for a Triton
    kernel: its --define values are its constexprs)."""
    if args.kernel.startswith(TRITON_PREFIX):
        return {}
    extra = list(getattr(args, "extra", []) or [])
    for tok in extra:
        try:
            check_extra_arg(tok, "command line args")
        except ConfigurationError as exc:
            # a ptxas control or an output choice is said as one (exit 1: a CUDA build's rule); anything else off
            # the allow-list is wrong for any kernel (exit 2)
            if Path(args.kernel).suffix != ".c":
                refuse_fixed_controls([tok], "command line args")
            level = " It sets the optimisation level, which the search sets (-O is control opt_level)." \
                if re.fullmatch(r"-O(\d|s|z|g|fast)?", tok) else ""
            raise UsageError(f"{exc}{level}") from None
    context = BuildContext.make(args.include_dir, args.define, extra, where="command line")
    block = None
    if args.block:
        try:
            block = [int(x) for x in args.block.split(",")]
        except ValueError:
            raise UsageError(f"--block must be X[,Y[,Z]] ints, but got {args.block!r}; write e.g. "
                             "--block 256") from None
        if not valid_block(block):
            raise UsageError(f"--block: `{BLOCK_RULE}` must hold, but got {args.block!r}; write e.g. --block 256 "
                             "or --block 16,16")
    return {"entry": args.entry, "build": context or None, "block": block}


def check_output_file(path: str, flag: str, store: str | None = None) -> None:
    """Refuse an output file that cannot be written where it is asked, or that would destroy a run: the ``store``
    the command reads or writes (or its -wal, -shm and lock files, through a link too), or any other run store.
    Before any work is done for it."""
    if not path.strip():
        raise UsageError(f"{flag} must name a file, but got an empty name; name the file to write")
    if Path(path).is_dir() or not Path(path).resolve().parent.is_dir():
        raise ConfigurationError(f"{flag} must name a file in an existing folder, but got {path!r}; create the folder "
                                 f"{str(Path(path).parent)!r} first, or name a file there")
    problem = overwrite_problem(path, store)
    if problem:
        raise ConfigurationError(f"{flag} must not name a run store or the files beside it, but got {path!r}: "
                                 f"{problem}; name another file")


def export_point(args: argparse.Namespace, path: str, results: Results, run: KernelRun,
                 validation: Validation | None = None, rec: EvalRecord | None = None) -> int:
    """Write a point as an ACF: ``rec``, else the one ``--pick`` picks; its controls minimised unless
    ``--no-minimize``. Returns the exit code."""
    rule = args.pick or default_pick(run.target == "static")
    base = results.baseline_record
    fallback = ""
    if args.pick is None and rule == "no-regression" and (base is None or base.status != "ok"):
        rule = "first"  # nothing to compare with: the default falls back to the first objective
        fallback = "; no-regression compares with the baseline, which failed"
    why, default = "the point asked for", False
    if rec is None:
        rec, why = pick_point(results, rule, validation)  # (the re-measurement just made: not in this snapshot)
        default = args.pick is None
    if rec is None:
        if not any(r.status == "ok" for r in results.records):
            why = "no evaluation succeeded (`compileiq-lab show` lists the failures by status)"
        print(f"compileiq-lab: error: nothing to export from {results.store_path}: {why}", file=sys.stderr)
        return 1
    controls, dropped = effective_params(rec), {}
    if not args.no_minimize and rec.status == "ok":
        ignored = rec.detail.get("ignored_controls") or {}
        try:
            minimal = minimal_controls(run, controls, ignored)
            controls, dropped = minimal.controls, minimal.dropped
        except ConfigurationError as exc:  # e.g. no compiler here: the point is written as it was
            print(f"note: the controls are not minimised ({str(exc)[:300]})", file=sys.stderr)
    acf = point_acf(results, rec, run.kernel, run.catalog, validation=validation, controls=controls, dropped=dropped,
                    acf_path=path)
    acf.write(path)
    print(f"exported eval {rec.eval_id} ({why}{', the default pick' + fallback if default else ''}) to {path}"
          + (f"; dropped as having no effect: {', '.join(sorted(acf.dropped))}" if acf.dropped else ""),
          file=sys.stderr)
    note = lowered_note(run, controls, path)
    if note:
        print(f"note: {note}", file=sys.stderr)
    return 0
