"""The package's import structure: no cycles (imports inside functions count), the layer order, and the few rules
that keep each part in its place (DESIGN section 2)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "compileiq_lab"
PACKAGE = "compileiq_lab"

#: Bottom to top; a part may import its own rank or lower ranks, never a higher one.
LAYERS: list[set[str]] = [
    {"exceptions", "_version"},
    {"toolchain"},
    {"space"},
    {"search", "store", "measure"},
    {"kernels", "testing"},
    {"run"},
    {"analysis", "acf"},
    {"viz"},
    {"widgets", "cli"},
    {"__init__", "__main__"},  # the public face: lazy re-exports of everything below, and `python -m` (the CLI)
]
RANK = {part: i for i, parts in enumerate(LAYERS) for part in parts}
#: What each part may import from outside the standard library and the package (None: no rule).
ONLY_UI_IMPORTS = {"ipywidgets", "IPython"}


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {_module_name(p): p for p in sorted(ROOT.rglob("*.py"))}


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(tree: ast.AST, here: str, is_package: bool, typing: bool = False) -> list[tuple[str, int]]:
    """Every imported module name with its line: module level and inside functions; under TYPE_CHECKING only
    with ``typing``."""
    found: list[tuple[str, int]] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node.test) and not typing:
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.extend((alias.name, node.lineno) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = here.split(".") if is_package else here.split(".")[:-1]
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            for alias in node.names:  # `from pkg import module` imports the module
                full = f"{base}.{alias.name}"
                found.append((full if full in MODULES else base, node.lineno))
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def _graph(typing: bool = False) -> dict[str, dict[str, int]]:
    graph: dict[str, dict[str, int]] = {}
    for name, path in MODULES.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        edges = graph.setdefault(name, {})
        for target, line in _imports(tree, name, path.name == "__init__.py", typing):
            if target == PACKAGE or target.startswith(PACKAGE + "."):
                while target not in MODULES:  # an attribute of a module, e.g. `import compileiq_lab.space.x`
                    target = target.rsplit(".", 1)[0]
                if target != name:
                    edges.setdefault(target, line)
    return graph


def _externals() -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for name, path in MODULES.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        out[name] = {t.split(".")[0] for t, _ in _imports(tree, name, path.name == "__init__.py")
                     if not t.startswith(PACKAGE)}
    return out


def _part(module: str) -> str:
    parts = module.split(".")
    return "__init__" if len(parts) == 1 else parts[1]


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def strong(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            strong(v)
    return out


GRAPH = _graph()
#: With the imports made for type checking only: they may not run up the layers either.
TYPED_GRAPH = _graph(typing=True)


def test_every_part_has_a_layer():
    assert {_part(m) for m in MODULES} <= set(RANK), "a new part of the package needs a place in LAYERS"


def test_no_import_cycle_between_modules():
    assert _cycles({m: set(e) for m, e in GRAPH.items()}) == []


def test_no_import_cycle_between_parts():
    parts: dict[str, set[str]] = {}
    for m, edges in GRAPH.items():
        parts.setdefault(_part(m), set()).update(_part(t) for t in edges if _part(t) != _part(m))
    assert _cycles(parts) == []


def test_no_arrow_runs_back_up_the_layers_not_even_for_type_checking():
    upward = [f"{m}:{line} imports {t}" for m, edges in TYPED_GRAPH.items() for t, line in edges.items()
              if RANK[_part(t)] > RANK[_part(m)]]
    assert upward == []


@pytest.mark.parametrize(("part", "allowed"), [
    ("search", {"search", "space", "exceptions"}),
    ("space", {"space", "exceptions", "toolchain"}),
    ("store", {"store", "space", "search", "exceptions", "_version"}),
])
def test_lower_parts_import_only_what_they_may(part, allowed):
    bad = [f"{m} imports {t}" for m, edges in GRAPH.items() if _part(m) == part for t in edges
           if _part(t) not in allowed]
    assert bad == []


def test_measure_never_imports_the_search_the_loop_or_the_ui():
    bad = [f"{m} imports {t}" for m, edges in GRAPH.items() if _part(m) == "measure" for t in edges
           if _part(t) in {"search", "run", "kernels", "widgets", "cli", "viz"}]
    assert bad == []


def test_the_ui_composes_no_kernel_run_itself():
    """widgets/ and cli/ get kernels, catalogs, objectives and evaluators from the kernels package's face
    (KernelRun and the choices), never from measure/, space/ or kernels' own modules."""
    bad = [f"{m} imports {t}" for m, edges in TYPED_GRAPH.items() if _part(m) in ("widgets", "cli") for t in edges
           if _part(t) in ("measure", "space") or t.startswith(f"{PACKAGE}.kernels.")]
    assert bad == []


#: Modules that run inside worker processes, where threads of their own are allowed (parent watch, NVML polling).
WORKER_SIDE = {f"{PACKAGE}.measure._worker_main", f"{PACKAGE}.measure.power"}


def test_threads_start_only_in_run_and_in_worker_processes():
    starters = {"Thread", "ThreadPoolExecutor", "Timer"}
    found = []
    for name, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call):
                called = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
                if called in starters and _part(name) != "run" and name not in WORKER_SIDE:
                    found.append(f"{name}:{node.lineno} calls {called}")
    assert found == []


def test_only_widgets_import_the_notebook_libraries():
    bad = [m for m, ext in _externals().items() if ext & ONLY_UI_IMPORTS and _part(m) != "widgets"]
    assert bad == []


def test_the_top_level_holds_only_the_public_face():
    loose = sorted(p.name for p in ROOT.glob("*.py"))
    assert len(loose) <= 5, loose


def test_the_checker_sees_imports_inside_functions_and_skips_type_checking_blocks():
    code = ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import compileiq_lab.viz\n"
            "def f():\n    from compileiq_lab.space import params\n")
    found = {t for t, _ in _imports(ast.parse(code), "compileiq_lab.store.x", False)}
    assert "compileiq_lab.space.params" in found and "compileiq_lab.viz" not in found
    assert "compileiq_lab.viz" in {t for t, _ in _imports(ast.parse(code), "compileiq_lab.store.x", False, True)}
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
