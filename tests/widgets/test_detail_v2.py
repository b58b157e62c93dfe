"""The detail panel v2 on real runs: the machine code of a clicked CUDA point beside the baseline (with occupancy),
its exact flags to copy, a disabled button where there is no cubin, and a download link after an export."""

from __future__ import annotations

import base64
import html
import html.parser
import json
import re
import shlex

import pytest

pytest.importorskip("ipywidgets")

from compileiq_lab import KernelRun, Run, Search, SearchConfiguration
from compileiq_lab.acf.exporting import export_point
from compileiq_lab.analysis import machine_code
from compileiq_lab.analysis.machine_code import code_diff
from compileiq_lab.analysis.occupancy import occupancy
from compileiq_lab.measure.sass import INSTALL_HINT
from compileiq_lab.testing import tool_available, toy_objective, toy_space
from compileiq_lab.widgets import Dashboard
from compileiq_lab.widgets.detail import DOWNLOAD_LIMIT, DetailPanel, copy_button_html

needs_nvcc = pytest.mark.skipif(not tool_available("nvcc"), reason="needs nvcc")


class _Tags(html.parser.HTMLParser):
    """Every start tag with its attributes, as a browser reads them (entities decoded)."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def first(self, tag: str, cls: str) -> dict[str, str | None]:
        return next(a for t, a in self.tags if t == tag and cls in (a.get("class") or "").split())


def copied_text(button_html: str) -> str:
    """What the copy button's onclick puts on the clipboard: the JSON string literal given to writeText."""
    onclick = _Tags(button_html).first("button", "compileiq-copy")["onclick"] or ""
    start = onclick.index("navigator.clipboard.writeText(") + len("navigator.clipboard.writeText(")
    text, _ = json.JSONDecoder().raw_decode(onclick, start)
    return text


def cell(sass_html: str, metric: str) -> list[str]:
    """The baseline, point and change cells of one row of the machine-code table."""
    row = re.search(rf"<tr data-metric='{re.escape(metric)}'>(.*?)</tr>", sass_html)
    assert row, f"no {metric} row in {sass_html[:400]}"
    return re.findall(r"<td[^>]*>(.*?)</td>", row.group(1))[1:]


@pytest.fixture(scope="module")
def sgemm(tmp_path_factory):
    """A short real sgemm search (registers and SASS size, static) in a dashboard, as the lab makes it."""
    if not tool_available("nvcc"):
        pytest.skip("needs nvcc")
    folder = tmp_path_factory.mktemp("sgemm")
    kr = KernelRun("sgemm", "ptxas", ["sass_instructions", "registers"], arch="sm_90", workdir=folder / "work")
    dash = Dashboard(Run(Search.of(kr, store=str(folder / "r.db"), generations=2, seed=0)), kr)
    dash.start()
    results = dash.wait(timeout=300)
    assert results is not None and results.status == "finished"
    return dash, results, kr


def _fewer_registers_point(results):
    """An evaluation whose register count differs from the baseline's (objective 1: registers)."""
    base = results.baseline_record
    points = [r for r in results.records if r.status == "ok" and r.scores[1] != base.scores[1]]
    assert points, "the search found no config with another register count"
    return results.representative_of(points[0].eval_id)


@needs_nvcc
def test_machine_code_of_a_point_is_its_code_diff_against_the_baseline(sgemm):
    dash, results, kr = sgemm
    rec = _fewer_registers_point(results)
    dash.select(rec.eval_id)
    panel = dash.detail
    assert not panel.sass_button.disabled and "compileiq-sass-button" in panel.sass_button._dom_classes
    assert panel.sass.value == ""  # computed on a click only
    diff = panel.show_machine_code()
    base = results.baseline_record
    want = code_diff(kr, rec.params, base.params)  # computed here, apart from the panel
    assert diff is not None and not want.attrs["same_code"]
    shown = panel.sass.value
    for metric in ("registers", "sass_instructions", "smem_bytes"):
        b, p, change = cell(shown, metric)
        assert (int(b), int(p)) == (int(want.loc[metric, "baseline"]), int(want.loc[metric, "point"])), metric
        assert int(change) == int(want.loc[metric, "change"])
    regs = want.loc["registers"]
    assert int(regs["point"]) == rec.scores[1] and int(regs["baseline"]) == base.scores[1]  # what the search stored
    colour = "#080" if regs["change"] < 0 else "#b00"  # fewer green, more red
    assert re.search(rf"<tr data-metric='registers'>.*?color:{colour}", shown)
    if want.attrs["point"].mix is not None:  # with nvdisasm: the opcode classes too
        assert cell(shown, "fma/alu")[1] == str(want.attrs["point"].mix["fma/alu"])
    assert "<details><summary>ptxas -v of the point" in shown
    assert f"Used {int(regs['point'])} registers" in shown
    # occupancy at the kernel's launch block (TILE x TILE threads), as the calculator computes it
    tile = kr.kernel.define_values(rec.params.get("defines"))["TILE"]
    occ = occupancy(int(regs["point"]), tile * tile, int(want.loc["smem_bytes", "point"]), "sm_90")
    assert (f"point: {occ.blocks_per_sm} blocks of {tile * tile} threads per SM, {occ.warps_per_sm} of 64 warps"
            in shown)
    assert panel.show_machine_code() is diff  # cached: a second click compiles nothing


@needs_nvcc
def test_the_baseline_itself_has_the_same_machine_code(sgemm):
    dash, results, _ = sgemm
    dash.select(results.baseline_record.eval_id)
    dash.detail.show_machine_code()
    assert "same machine code as the baseline" in dash.detail.sass.value
    assert "<tr data-metric=" not in dash.detail.sass.value
    dash.detail.clear()
    assert dash.detail.sass_button.disabled and dash.detail.sass.value == "" and dash.detail.flags.value == ""


@needs_nvcc
def test_without_nvdisasm_the_resources_are_shown_with_the_note(sgemm, monkeypatch):
    _, results, kr = sgemm
    # no nvdisasm here: the probe says so (as it does where none is installed)
    monkeypatch.setattr(machine_code, "disassembler_reason", lambda: f"nvdisasm is not installed: {INSTALL_HINT}")
    panel = DetailPanel()  # a fresh cache
    rec = _fewer_registers_point(results)
    panel.show(results, rec.eval_id, kr)
    panel.show_machine_code()
    shown = panel.sass.value
    assert cell(shown, "registers") and "<tr data-metric='memory'>" not in shown
    assert "instruction mix left out" in shown and "compileiq-lab[sass]" in shown


@needs_nvcc
def test_flags_are_the_points_argv_per_stage_and_copy_as_one_nvcc_line(sgemm):
    dash, results, kr = sgemm
    rec = _fewer_registers_point(results)
    dash.select(rec.eval_id)
    panel = dash.detail
    argv = kr.argv(rec.params)
    lines = panel.flags.value.splitlines()
    assert "compileiq-flags" in panel.flags._dom_classes and panel.flags.layout.display is None
    assert [line.split(":")[0] for line in lines] == [*argv, "nvcc line"]
    for stage, line in zip(argv, lines):
        assert shlex.split(line.split(":", 1)[1]) == argv[stage]
    assert argv["frontend"] == kr.kernel.define_args(rec.params.get("defines"))  # e.g. -DTILE=16
    want = ["-arch=sm_90", *argv["frontend"], *(a for t in argv["backend"] for a in ("-Xptxas", t))]
    assert shlex.split(panel.flags_line) == want and lines[-1] == f"nvcc line: {panel.flags_line}"
    assert copied_text(panel.copy.value) == panel.flags_line
    panel.flags.value = "edited in the browser"  # read-only: the text is put back
    assert panel.flags.value.splitlines() == lines


def test_copy_button_escapes_any_text_safely():
    nasty = """-DX='a "b"' </button><script>alert(1)</script> & \\ \u2028 é"""
    button = copy_button_html(nasty)
    assert copied_text(button) == nasty
    tags = [t for t, _ in _Tags(button).tags]
    assert tags == ["button"]  # nothing of the text became markup


def test_a_c_kernel_has_flags_but_no_machine_code_to_compare(tmp_path):
    if not tool_available("gcc"):
        pytest.skip("needs gcc")
    kr = KernelRun("dot", "gcc", ["text_bytes"], workdir=tmp_path / "work")
    results = Search.of(kr, store=str(tmp_path / "c.db"), generations=1, seed=0).start()
    panel = DetailPanel()
    rec = next(r for r in results.records if r.status == "ok")
    panel.show(results, rec.eval_id, kr)
    assert panel.sass_button.disabled and "c kernel" in panel.sass_button.tooltip
    assert "cubin" in panel.sass_button.tooltip
    assert panel.show_machine_code() is None and "cubin" in panel.sass.value
    argv = kr.argv(rec.params)
    assert list(argv) == ["c"] and shlex.split(panel.flags.value.splitlines()[0][len("c:"):]) == argv["c"]
    assert panel.flags_line == shlex.join(["-std=c11", *argv["c"]]) and copied_text(panel.copy.value)


@needs_nvcc
def test_a_failed_point_shows_its_flags_but_no_machine_code(tmp_path):
    source = tmp_path / "broken.cu"
    source.write_text('extern "C" __global__ void broken(float* x) { x[threadIdx.x] = not_declared; }\n')
    kr = KernelRun(source, "ptxas", ["registers"], arch="sm_90", workdir=tmp_path / "work")
    results = Search.of(kr, store=str(tmp_path / "b.db"), generations=1, seed=0).start()
    base = results.baseline_record
    assert base is not None and base.status != "ok"
    panel = DetailPanel()
    panel.show(results, base.eval_id, kr)
    assert panel.sass_button.disabled and base.status in panel.sass_button.tooltip
    assert "only a point that compiled" in panel.sass_button.tooltip
    assert panel.flags.value.splitlines()[0].startswith("frontend:")


def test_a_python_objective_has_no_flags_and_its_export_downloads(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    search = Search(toy_objective, toy_space(), SearchConfiguration(generations=2, pool_size=6, seed=1),
                    store=str(tmp_path / "toy.db"))
    results = search.start()
    best = results.get_best_result()
    panel = DetailPanel()
    panel.show(results, best["eval_id"], None)
    assert panel.flags.value == "" and panel.flags.layout.display == "none" and panel.copy.value == ""
    assert panel.sass_button.disabled and "Python objective" in panel.sass_button.tooltip
    assert panel.show_machine_code() is None and panel.sass.value.startswith("<i>")
    out = export_point(results, best["eval_id"], None, folder=tmp_path / "exports")
    panel.exported(out)
    message = _Tags(panel.message.value)
    link = message.first("a", "compileiq-download")
    assert link["download"] == out.name
    href = link["href"] or ""
    assert href.startswith("data:application/json;base64,")
    assert base64.b64decode(href.split(",", 1)[1]) == out.read_bytes()
    assert f"<code class='compileiq-export'>{out.name}</code>" in panel.message.value
    assert "<code class='compileiq-export-folder'" in panel.message.value and ">exports</code>" in panel.message.value
    big = tmp_path / "exports" / "big.json"
    big.write_bytes(b" " * (DOWNLOAD_LIMIT + 1))
    panel.exported(big)
    assert "compileiq-download" not in panel.message.value and "no download link" in panel.message.value
    assert "wrote <code class='compileiq-export'>big.json</code>" in panel.message.value


@needs_nvcc
def test_an_nvcc_points_arguments_read_as_the_nvcc_line(tmp_path):
    from compileiq_lab.widgets.detail import describe

    kr = KernelRun("reduction", "nvcc", ["registers"], arch="sm_90", workdir=tmp_path / "work")
    results = Search.of(kr, store=str(tmp_path / "n.db"), generations=2, pool_size=6, seed=0).start()
    recs = [r for r in results.records if r.status == "ok" and kr.argv(r.params).get("backend")]
    assert recs  # points with ptxas controls set
    for rec in recs:
        shown = re.search(r"<div>arguments: (.*?)</div>", describe(results, rec.eval_id, kr))
        assert shown is not None
        tokens = html.unescape(re.sub(r"</?code>", "", shown.group(1))).split()
        argv = kr.argv(rec.params)
        assert tokens == [*argv["frontend"], *(a for t in argv["backend"] for a in ("-Xptxas", t))]
