"""Run the teaching notebooks headless, as a reader without a GPU would: run time per notebook, exercise checks, and
(``--html DIR``) the executed copies rendered to HTML for readers of the repository (`make docs`)."""

from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from _common import markdown_table, write
from notebook_check import errors, execute, exercise_report, unverified_figures

REPO = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((REPO / "notebooks").glob("*.ipynb"))
#: The goal per notebook (the teaching-notebooks issue): headless, without a GPU, in under a minute.
GOAL_S = 60.0
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def _scrub(nb: Any, replace: dict[str, str]) -> None:
    """Replace this machine's folders in the outputs by neutral names: a rendered copy names no local path. A folder
    is replaced only as a whole path component (``/a/b`` in ``/a/b/c``, never in ``/a/bc``)."""
    folders = sorted((k for k in replace if k.strip("/")), key=len, reverse=True)  # never "/" itself
    pattern = re.compile("|".join(rf"{re.escape(k)}(?=/|\b|$)" for k in folders))

    def fix(value: Any) -> Any:
        if isinstance(value, str):
            return pattern.sub(lambda m: replace[m.group(0)], value)
        if isinstance(value, list):
            return [fix(v) for v in value]
        if isinstance(value, dict):
            return {k: fix(v) for k, v in value.items()}
        return value

    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = [type(o)(fix(dict(o))) for o in cell.outputs]


#: What a rendered page shows instead of a live widget (its state is megabytes of plot data and needs a kernel).
WIDGET_NOTE = ("<p><i>A live widget (the dashboard) was shown here: open the notebook in JupyterLab "
               "(<code>make lab</code>) to use it.</i></p>")


def _html(nb: Any, out: Path) -> None:
    import nbformat
    from nbconvert import HTMLExporter

    nb = nbformat.from_dict(nb)
    nb.metadata.pop("widgets", None)
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            if WIDGET_VIEW in (output.get("data") or {}):
                output["data"] = {"text/html": WIDGET_NOTE}
    body, _ = HTMLExporter().from_notebook_node(nb)
    out.write_text(body, encoding="utf-8")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--html", type=Path, help="write the executed notebooks as HTML into this folder")
    ap.add_argument("--only", nargs="*", help="notebook names (default: all)")
    args = ap.parse_args()
    os.environ.setdefault("PLOTLY_RENDERER", "notebook_connected")  # figures load plotly.js when the page is read
    rows, data, failed = [], {}, False
    for path in NOTEBOOKS:
        if args.only and path.name not in args.only and path.stem not in args.only:
            continue
        with tempfile.TemporaryDirectory(prefix="nb-") as tmp:
            nb, seconds = execute(path, Path(tmp))
            names, problems = exercise_report(nb)
            problems = [*errors(nb), *unverified_figures(nb), *problems]
            if args.html:
                args.html.mkdir(parents=True, exist_ok=True)
                _scrub(nb, {str(REPO): "<repository>", str(Path(tmp).resolve()): "<scratch>", tmp: "<scratch>"})
                _html(nb, args.html / f"{path.stem}.html")
        failed |= bool(problems) or seconds > GOAL_S
        data[path.name] = {"seconds": round(seconds, 1), "exercises": names, "problems": problems}
        rows.append([path.name, f"{seconds:.1f}", "yes" if seconds <= GOAL_S else "NO", len(names),
                     "none" if not problems else "; ".join(problems)[:200]])
    write("notebooks", {"goal_s": GOAL_S, "notebooks": data}, "Teaching notebooks, run headless without a GPU",
          markdown_table(["notebook", "run time s", f"under {GOAL_S:.0f} s", "exercises passing", "problems"], rows),
          "Each notebook executed top to bottom in a fresh kernel (nbclient), as the CI test does, on this machine "
          "without a GPU; exercises pass with their reference solutions.")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
