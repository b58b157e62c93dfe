"""Shared bench helpers: environment facts and writing results as JSON plus a markdown table."""

from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"


def environment() -> dict[str, Any]:
    """Facts that make a figure comparable: interpreter, platform, CPU count, package versions."""
    import numpy
    import pymoo

    import compileiq_lab

    return {"python": sys.version.split()[0], "platform": platform.platform(), "cpus": os.cpu_count(),
            "numpy": numpy.__version__, "pymoo": pymoo.__version__,
            "compileiq_lab": compileiq_lab.__version__,
            "date": _dt.date.today().isoformat()}


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A GitHub markdown table."""
    def fmt(v: Any) -> str:
        return f"{v:.4g}" if isinstance(v, float) else str(v)
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(fmt(v) for v in r) + " |" for r in rows]
    return "\n".join(lines)


def write(name: str, data: dict[str, Any], title: str, table: str, notes: str = "",
          out: Path | None = None) -> None:
    """Write ``<out>/<name>.json`` and ``<out>/<name>.md`` (``out`` defaults to ``results/``)."""
    out = RESULTS if out is None else Path(out)
    out.mkdir(parents=True, exist_ok=True)
    data = {"environment": environment(), **data}
    (out / f"{name}.json").write_text(json.dumps(data, indent=2, default=float) + "\n")
    env = data["environment"]
    md = (f"# {title}\n\n{table}\n\n{notes}\n\n"
          f"Measured {env['date']} on {env['cpus']} CPUs, Python {env['python']}, pymoo {env['pymoo']}, "
          f"compileiq-lab {env['compileiq_lab']}.\n")
    (out / f"{name}.md").write_text(md)
    print(md)
