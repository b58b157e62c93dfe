"""Checks of an executed teaching notebook: figures stated in markdown are printed by the code beside them, and
every exercise has a hidden reference solution whose check passes. Run as a script, it executes one notebook
headless and reports (``python tests/notebook_check.py notebooks/01_quickstart.ipynb``)."""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
KERNEL_NAME = "python3"
#: A number as prose writes it: not part of a word (sm_90, -O1, L2), thousands separators allowed.
#: A unit may follow ("1.5x", "64-byte"); a sign counts where it stands alone ("-12 registers", not "x86-64").
_NUMBER = re.compile(r"(?<![\w.\-/])(-(?=\d))?(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?(?!\d|\.\d|,\d{3})")
#: A number in code or output: not inside an identifier, a hash or a version (sm_90, 3f12ab9c, x86-64-v3, 1.2.3).
_VALUE = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?(?![\w.]*\d)")
_TAG = re.compile(r"<[^>]+>")
_CODE_SPAN = re.compile(r"`[^`]*`")
_FENCE = re.compile(r"```.*?```", re.S)
_LINK_TARGET = re.compile(r"\]\([^)]*\)")
_HTML_COMMENT = re.compile(r"<!--.*?-->", re.S)
#: The text of an exercise check's verdict for a right answer (compileiq_lab.testing.check_answer).
CORRECT = re.compile(r"^(Exercise \S+): correct \(", re.M)


def _source(cell: Any) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else str(src)


def output_text(cell: Any) -> str:
    """The text a code cell showed: streams, and results' text/plain and text/markdown."""
    parts = []
    for out in cell.get("outputs", []):
        if out.get("output_type") == "stream":
            parts.append(str(out.get("text", "")))
        data = out.get("data") or {}
        for mime in ("text/plain", "text/markdown"):
            value = data.get(mime)
            if value:
                parts.append("".join(value) if isinstance(value, list) else str(value))
    return "\n".join(parts)


def _prose(markdown: str) -> str:
    """Markdown without headings, code, link targets and comments: the text whose numbers are stated figures."""
    text = _HTML_COMMENT.sub(" ", _FENCE.sub(" ", markdown))
    text = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))
    return _TAG.sub(" ", _LINK_TARGET.sub("]", _CODE_SPAN.sub(" ", text)))


#: Words after a number that are units, not what is counted.
_UNITS = {"s", "ms", "us", "min", "minutes", "seconds", "x", "times", "of", "to", "and", "or", "per", "in", "on", "at",
          "the", "a", "mib", "kib", "gib", "bytes", "kb", "mb"}


def _numbers(text: str) -> list[tuple[str, float, int, str]]:
    """(as written, value, decimals, the counted word after it or "") of every number in ``text``."""
    found = []
    for m in _NUMBER.finditer(text):
        sign, whole, frac = m.group(1) or "", m.group(2), m.group(3) or ""
        after = re.match(r"\s*([A-Za-z][A-Za-z-]+)", text[m.end():])
        noun = after.group(1).lower() if after and after.group(1).lower() not in _UNITS else ""
        found.append((sign + whole + frac, float(sign + whole.replace(",", "") + frac), len(frac) - 1 if frac else 0,
                      noun))
    return found


def _near_noun(value: float, decimals: int, noun: str, text: str) -> bool:
    """Whether ``text`` never names ``noun`` (nothing to compare), or states ``value`` within a line of it."""
    stem = noun[:-1] if noun.endswith("s") and len(noun) > 3 else noun
    word = re.compile(rf"\b{re.escape(stem)}")
    lines = [line for line in text.lower().splitlines() if word.search(line)]
    return not lines or any(_matches(value, decimals, _values(line)) for line in lines)


def _values(text: str) -> list[float]:
    """Every number in code or output text (1e-4, 0.5, -3), but none inside an identifier, a hash or a version."""
    return [float(m.group(0)) for m in _VALUE.finditer(re.sub(r"(?<=\d),(?=\d{3})", "", text))]


def _matches(value: float, decimals: int, candidates: list[float]) -> bool:
    """A stated integer must be printed exactly (3 is not 2.6), a decimal to its stated precision (0.37 is
    0.3712); a fraction printed may be stated as a percentage (0.3712 as 37.12 or 37 %)."""
    for c in candidates:
        if c == value or (decimals and round(c, decimals) == value):
            return True
        if abs(c) <= 1 and round(c * 100, decimals) == value:
            return True
    return False


def sections(nb: Any) -> list[list[Any]]:
    """The notebook's cells split at every markdown cell that holds a heading (the first cell is its own)."""
    out: list[list[Any]] = []
    for i, cell in enumerate(nb["cells"]):
        heading = cell["cell_type"] == "markdown" and any(
            line.lstrip().startswith("#") for line in _FENCE.sub("", _source(cell)).splitlines())
        if i <= 1 or heading or not out:
            out.append([cell])
        else:
            out[-1].append(cell)
    return out


def unverified_figures(nb: Any) -> list[str]:
    """The numbers stated in markdown (outside the first cell, headings and code) that no code cell of the same
    section prints or holds in its source, as "cell id: number (context)"."""
    problems = []
    for section in sections(nb)[1:]:
        code = [c for c in section if c["cell_type"] == "code"]
        candidates = _values("\n".join(_source(c) + "\n" + output_text(c) for c in code))
        printed = "\n".join(output_text(c) for c in code)
        for cell in section:
            if cell["cell_type"] != "markdown":
                continue
            prose = _prose(_source(cell))
            for written, value, decimals, noun in _numbers(prose):
                stated = _matches(value, decimals, candidates)
                if not stated or (noun and not _near_noun(value, decimals, noun, printed)):
                    at = prose.find(written)
                    context = " ".join(prose[max(0, at - 40):at + len(written) + 30].split())
                    problems.append(f"{cell.get('id', '?')}: {written} (\"...{context}...\")")
    return problems


def _tags(cell: Any) -> list[str]:
    return list((cell.get("metadata") or {}).get("tags", []))


def exercise_report(nb: Any) -> tuple[list[str], list[str]]:
    """(exercises found, problems): each exercise cell is followed by a hidden solution cell, the solution's check
    printed "correct", and the stored answer is None."""
    cells = nb["cells"]
    names, problems = [], []
    for i, cell in enumerate(cells):
        if "exercise" not in _tags(cell):
            continue
        name = f"exercise cell {cell.get('id', i)}"
        sol = cells[i + 1] if i + 1 < len(cells) else None
        if sol is None or "solution" not in _tags(sol):
            problems.append(f"{name}: not followed by a cell tagged 'solution'")
            continue
        if not ((sol.get("metadata") or {}).get("jupyter") or {}).get("source_hidden"):
            problems.append(f"{name}: its solution cell is not hidden (metadata jupyter.source_hidden)")
        answers = re.findall(r"^answer_\w+\s*=\s*(.*)$", _source(cell), re.M)
        if not answers or any(not re.match(r"None\b", a) for a in answers):
            problems.append(f"{name}: every stored answer must be None (answer_N = None)")
        asked = re.search(r"check_answer\(\s*[\"'](Exercise \S+?)[\"']", _source(cell))
        if "not answered yet" not in output_text(cell) or asked is None:
            problems.append(f"{name}: its check did not run on the unanswered answer")
        verdict = CORRECT.search(output_text(sol))
        if verdict is None:
            problems.append(f"{name}: the reference solution's check did not print 'correct'")
        elif asked is not None and verdict.group(1) != asked.group(1):
            problems.append(f"{name}: it checks {asked.group(1)}, its solution {verdict.group(1)}")
        else:
            names.append(verdict.group(1))
    if len(set(names)) != len(names):
        problems.append(f"exercises checked more than once: {names}")
    return names, problems


def _kernelspec(root: Path) -> Path:
    spec = root / "kernels" / KERNEL_NAME
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Python 3", "language": "python", "metadata": {"debugger": False}}))
    return root


def execute(path: Path, work: Path, timeout_s: int = 600) -> tuple[Any, float]:
    """Execute a copy of a notebook in ``work`` with this interpreter as its kernel; returns (notebook, seconds).
    Cell errors are left in the outputs (allow_errors) for the caller to report."""
    import nbclient
    import nbformat

    scratch = work / "tmp"
    scratch.mkdir(parents=True, exist_ok=True)
    os.environ.update(JUPYTER_PATH=str(_kernelspec(work / "jupyter")), TMPDIR=str(scratch),
                      COMPILEIQ_KERNELS=str(REPO / "kernels"),
                      PYTHONPATH=os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])]))
    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(nb, timeout=timeout_s, kernel_name=KERNEL_NAME, allow_errors=True,
                                     resources={"metadata": {"path": str(work)}})
    start = time.monotonic()
    client.execute()
    return nb, time.monotonic() - start


def errors(nb: Any) -> list[str]:
    return [f"{c.get('id', '?')}: {o['ename']}: {o['evalue'][:300]}" for c in nb.cells if c.cell_type == "code"
            for o in c.get("outputs", []) if o.get("output_type") == "error"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("notebook", type=Path)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="nbcheck-") as tmp:
        nb, seconds = execute(args.notebook.resolve(), Path(tmp))
    problems = [f"error {e}" for e in errors(nb)]
    problems += [f"unverified figure {f}" for f in unverified_figures(nb)]
    names, exercise_problems = exercise_report(nb)
    problems += exercise_problems
    print(f"{args.notebook.name}: ran in {seconds:.1f} s; exercises passing with the reference answers: "
          f"{', '.join(names) or 'none'}")
    for p in problems:
        print("  " + p)
    return 1 if problems or len(names) < 2 else 0


if __name__ == "__main__":
    sys.exit(main())
