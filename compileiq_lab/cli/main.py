"""`compileiq-lab` command line: headless runs and run inspection."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from compileiq_lab._version import __version__

if TYPE_CHECKING:
    from compileiq_lab.store.results import Results

__all__ = ["main"]

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="compileiq-lab", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="exit codes: 0 ok, 1 error, 2 usage error, 130 interrupted")
    p.add_argument("--version", action="version", version=f"compileiq-lab {__version__}")
    p.add_argument("-v", "--verbose", action="store_true", help="log every generation")
    sub = p.add_subparsers(dest="command", required=True)
    from compileiq_lab.cli.options import int_at_least
    from compileiq_lab.search.config import MAX_GENERATIONS

    d = sub.add_parser("demo", help="run the quickstart search (x**2 + y) and print its results",
                       description="Run the quickstart search and print the results.\n\n"
                                   "example: compileiq-lab demo --generations 15 --seed 3",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    d.add_argument("--generations", type=int_at_least(1, "searched generations", MAX_GENERATIONS), default=15,
                   help="searched generations (default 15)")
    d.add_argument("--seed", type=int_at_least(0, "the search seed"), default=0, help="the search seed (default 0)")
    d.add_argument("--store", default=None, help="run store path (default: a new file under ./compileiq_runs/)")
    from compileiq_lab.cli.runs import add_run_parsers
    from compileiq_lab.cli.tune import add_catalog_parser, add_tune_parser

    add_tune_parser(sub)
    add_catalog_parser(sub)
    add_run_parsers(sub)
    return p


def _print_results(results: Results) -> None:
    import pandas as pd

    df = results.get_results()
    with pd.option_context("display.width", 120, "display.max_colwidth", 60):
        cols = [c for c in df.columns if c not in ("started_at",)]
        print(df[cols].tail(10).to_string(index=False))
    print(f"\n{len(df)} evaluations; statuses {results.status_counts()}; run {results.status}")
    best = results.get_best_result()
    if isinstance(best, list):
        print(f"Pareto front: {len(best)} points")
        for row in best:
            scores = [row[f"score_{i + 1}"] for i in range(results.n_objectives)]
            print(f"  eval {row['eval_id']}: {scores} {row['params']}")
    elif best is not None:
        print(f"best: score_1={best['score_1']} at eval {best['eval_id']} (generation {best['generation']}) "
              f"with {best['params']}")
    print(f"stored in {results.store_path}")


def _demo(args: argparse.Namespace) -> int:
    from compileiq_lab.run import Search
    from compileiq_lab.search import SearchConfiguration
    from compileiq_lab.testing import toy_objective, toy_space

    cfg = SearchConfiguration(generations=args.generations, seed=args.seed)
    results = Search(toy_objective, toy_space(), cfg, store=args.store).start()
    _print_results(results)
    return EXIT_INTERRUPTED if results.status == "interrupted" else EXIT_OK


def _terminate(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


#: Options whose value may start with "-": ``--time-budget -1h`` is read as ``--time-budget=-1h``, so that the
#: option's own check says what a duration is, not argparse's "expected one argument".
SIGNED_VALUE_OPTIONS = ("--time-budget", "--timeout")


def attach_signed_values(argv: Sequence[str]) -> list[str]:
    """``argv`` with each of ``SIGNED_VALUE_OPTIONS`` joined to a following value that starts with one "-"."""
    out: list[str] = []
    rest = list(argv)
    while rest:
        arg = rest.pop(0)
        if arg in SIGNED_VALUE_OPTIONS and rest and rest[0].startswith("-") and not rest[0].startswith("--"):
            arg = f"{arg}={rest.pop(0)}"
        out.append(arg)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit code."""
    from compileiq_lab.cli.options import UsageError
    from compileiq_lab.exceptions import CompileIQLabError

    argv = list(sys.argv[1:] if argv is None else argv)
    extra: list[str] = []
    if "--" in argv:  # tune FILE ... -- fixed compiler arguments
        cut = argv.index("--")
        argv, extra = argv[:cut], argv[cut + 1:]
    parser = _parser()
    args = parser.parse_args(attach_signed_values(argv))
    if extra and args.command != "tune":
        parser.error(f"arguments after -- are fixed compiler arguments of `tune`, not of `{args.command}`: {extra}")
    args.extra = extra
    # SIGTERM ends a run like Ctrl-C: compiler and kernel process groups are killed, rows kept
    signal.signal(signal.SIGTERM, _terminate)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    try:
        from compileiq_lab.cli.runs import RUN_COMMANDS
        from compileiq_lab.cli.tune import run_catalog, run_tune

        commands = {"demo": _demo, "tune": run_tune, "catalog": run_catalog, **RUN_COMMANDS}
        return commands[args.command](args)
    except UsageError as exc:
        print(f"compileiq-lab {args.command}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except CompileIQLabError as exc:
        print(f"compileiq-lab: error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except BrokenPipeError:  # the reader of our output went away (`... | head`): nothing more to say
        sys.stdout = open(os.devnull, "w")
        return EXIT_OK
    except OSError as exc:  # a path that cannot be read or written: the user's to fix
        print(f"compileiq-lab: error: {exc.strerror or exc}: {exc.filename or ''}".rstrip(": "), file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print("compileiq-lab: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
