"""The runs list over real run stores: two short static runs of the bundled reduction kernel (sm_80, sm_90) and a
toy run; their facts newest first, unreadable files noted, fronts overlaid on two axes, Open hands the path on."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

pytest.importorskip("ipywidgets")
pytest.importorskip("plotly")

from compileiq_lab import KernelRun, Search, SearchConfiguration, load_results
from compileiq_lab.exceptions import ConfigurationError
from compileiq_lab.testing import tool_available, toy_objective, toy_space
from compileiq_lab.viz import overlay_fronts_figure
from compileiq_lab.widgets.runs import RunsList

needs_nvcc = pytest.mark.skipif(not tool_available("nvcc"), reason="needs nvcc (and ptxas)")
OBJECTIVES = ["sass_instructions", "registers"]
ARCHS = ("sm_80", "sm_90")


def make_toy(folder: Path, name: str = "toy.db") -> Path:
    path = folder / name
    Search(toy_objective, toy_space(), SearchConfiguration(generations=2, pool_size=6, seed=1),
           store=str(path)).start()
    return path


def make_unreadable(folder: Path) -> None:
    (folder / "broken.db").write_bytes(b"this is not a database " * 20)
    (folder / "empty.db").write_bytes(b"")
    (folder / "notes.txt").write_text("not a store, and not a .db: not listed, not noted")


@pytest.fixture(scope="module")
def kernel_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """sm_80, then sm_90, then a toy run (so newest first: toy, sm_90, sm_80), and two unreadable files."""
    if not tool_available("nvcc"):
        pytest.skip("needs nvcc (and ptxas)")
    folder = tmp_path_factory.mktemp("runs")
    for a in ARCHS:
        run = KernelRun("reduction", "ptxas", OBJECTIVES, arch=a)
        Search.of(run, store=str(folder / f"{a}.db"), generations=2, pool_size=8, seed=0).start(workers=2)
        time.sleep(0.02)  # distinct start times
    make_toy(folder)
    make_unreadable(folder)
    return folder


def ok_points(path: Path) -> list[tuple[float, float, int]]:
    res = load_results(str(path))
    return [(float(r.scores[0]), float(r.scores[1]), r.eval_id) for r in res.records if r.status == "ok"]


def non_dominated_2d(points: list[tuple[float, float, int]]) -> set[int]:
    """Eval ids no other point beats on both objectives (lower is better; a tie on both is not a beat)."""
    return {i for x, y, i in points
            if not any(a <= x and b <= y and (a < x or b < y) for a, b, _ in points)}


def traces(figure, role: str) -> list:
    return [t for t in figure.data if t.meta["role"] == role]


@needs_nvcc
def test_the_list_shows_every_run_newest_first_with_its_facts(kernel_folder: Path):
    runs = RunsList(kernel_folder)
    assert [Path(e.path).name for e in runs.entries] == ["toy.db", "sm_90.db", "sm_80.db"]
    for entry in runs.entries[1:]:
        res = load_results(entry.path)
        arch = Path(entry.path).stem
        assert (entry.kernel, entry.arch, entry.catalog) == ("reduction", arch, "ptxas")
        assert entry.objectives == tuple(OBJECTIVES) and entry.state == "finished" == res.status
        assert entry.evaluations == len(res) > 8  # the baseline and two generations of 8
        assert entry.started == time.strftime("%Y-%m-%d %H:%M", time.localtime(res.header.created_at))
        row = next(r for r in runs.table.value.split("<tr>") if Path(entry.path).name in r)
        for fact in ("reduction", arch, "ptxas", "sass_instructions, registers", str(len(res)), "finished",
                     entry.started):
            assert f">{fact}<" in row
    toy = runs.entries[0]
    assert toy.kernel == "Python: toy_objective" and (toy.arch, toy.catalog) == ("", "")
    assert all(f"evals, finished  ({Path(e.path).name})" in e.option() for e in runs.entries[1:])
    assert toy.objectives == ("score_1",) and toy.evaluations == len(load_results(toy.path))
    assert [value for _, value in runs.select.options] == [e.path for e in runs.entries]
    labels = [label for label, _ in runs.select.options]
    assert "reduction sm_90 ptxas" in labels[1] and "sm_90.db" in labels[1]
    assert "3 run stores" in runs.title.value


@needs_nvcc
def test_overlay_draws_each_runs_front_on_the_two_axes_shown(kernel_folder: Path):
    runs = RunsList(kernel_folder)
    paths = [str(kernel_folder / f"{a}.db") for a in ARCHS]
    runs.select.value = tuple(paths)
    assert runs.x.options == tuple(OBJECTIVES) and (runs.x.value, runs.y.value) == tuple(OBJECTIVES)
    runs.overlay_button.click()
    fig = runs.figure
    assert fig is not None and fig in runs.figure_area.children and "error" not in runs.message.value
    fronts = traces(fig, "front")
    assert sorted(t.meta["path"] for t in fronts) == sorted(paths)  # one front per picked run
    for t in fronts:
        pts = ok_points(Path(t.meta["path"]))
        assert set(t.customdata) == non_dominated_2d(pts)
        by_id = {i: (x, y) for x, y, i in pts}
        assert [(x, y) for x, y in zip(t.x, t.y)] == [by_id[i] for i in t.customdata]
        assert list(t.x) == sorted(t.x) and t.line.shape == "hv"
        arch = Path(t.meta["path"]).stem
        assert all(f"reduction {arch} ptxas" in text for text in t.text)  # the hover says whose point it is
    for t in traces(fig, "points"):
        assert len(t.x) == len(ok_points(Path(t.meta["path"]))) and t.marker.opacity < 0.5
    for t in traces(fig, "baseline"):
        res = load_results(t.meta["path"])
        assert list(t.customdata) == [res.baseline_record.eval_id] and t.marker.symbol == "star"
    assert fig.layout.xaxis.title.text == "sass_instructions (count, lower is better)"
    assert fig.layout.yaxis.title.text == "registers (count, lower is better)"
    # the other way round: the pickers swap, the figure is redrawn in place with the same number of traces
    runs.x.value = "registers"
    assert runs.y.value == "sass_instructions"
    runs.overlay_button.click()
    assert runs.figure is fig and len(fig.data) == 6 and fig.layout.xaxis.title.text.startswith("registers")
    for t in traces(fig, "front"):
        swapped = [(y, x, i) for x, y, i in ok_points(Path(t.meta["path"]))]
        assert set(t.customdata) == non_dominated_2d(swapped)


@needs_nvcc
def test_a_run_missing_an_objective_is_refused_with_the_objectives_it_has(kernel_folder: Path):
    sm80, toy = load_results(str(kernel_folder / "sm_80.db")), load_results(str(kernel_folder / "toy.db"))
    with pytest.raises(ConfigurationError, match=r"toy\.db.*lacks \['sass_instructions', 'registers'\].*score_1"):
        overlay_fronts_figure([sm80, toy], "sass_instructions", "registers")
    runs = RunsList(kernel_folder)
    runs.select.value = (str(kernel_folder / "sm_80.db"), str(kernel_folder / "toy.db"))
    assert runs.x.options == () and runs.x.value is None  # no objective both have
    runs.overlay_button.click()
    assert "toy.db" in runs.message.value and "score_1" in runs.message.value and "lacks" in runs.message.value
    assert runs.figure is None


@needs_nvcc
def test_open_hands_the_path_to_the_dashboard(kernel_folder: Path):
    from compileiq_lab.widgets import Dashboard

    opened = []
    runs = RunsList(kernel_folder, on_open=lambda path: opened.append(Dashboard.open(path)))
    path = str(kernel_folder / "sm_90.db")
    runs.select.value = (path,)
    runs.open_button.click()
    assert len(opened) == 1 and opened[0].run.store_path == path and "sm_90.db" in runs.message.value
    assert len(opened[0].plots.pareto.data[0].x) == len(ok_points(Path(path)))


def test_unreadable_files_are_left_out_with_a_note(tmp_path: Path):
    make_toy(tmp_path)
    make_unreadable(tmp_path)
    runs = RunsList(tmp_path)
    assert [Path(e.path).name for e in runs.entries] == ["toy.db"]
    assert [name for name, _ in runs.skipped] == ["broken.db", "empty.db"]
    assert "skipped broken.db" in runs.notes.value and "not a compileiq-lab run store" in runs.notes.value
    assert "skipped empty.db" in runs.notes.value and "notes.txt" not in runs.notes.value
    nowhere = RunsList(tmp_path / "no such folder")
    assert nowhere.entries == [] and "does not exist" in nowhere.title.value


def test_open_calls_on_open_with_the_one_picked_path_and_shows_what_goes_wrong(tmp_path: Path):
    first, second = make_toy(tmp_path, "a.db"), make_toy(tmp_path, "b.db")
    calls: list[str] = []
    runs = RunsList(tmp_path, on_open=calls.append)
    runs.open_button.click()
    assert calls == [] and "pick exactly one run" in runs.message.value
    runs.select.value = (str(first),)
    runs.open_button.click()
    assert calls == [str(first)]
    runs.select.value = (str(first), str(second))
    runs.open_button.click()
    assert calls == [str(first)] and "2 picked" in runs.message.value

    def broken(path: str) -> None:
        raise RuntimeError(f"cannot open {path}")
    runs.on_open = broken
    runs.select.value = (str(second),)
    runs.open_button.click()  # shown, not raised
    assert "RuntimeError: cannot open" in runs.message.value and "b.db" in runs.message.value


def test_refresh_finds_new_runs_and_keeps_the_picked_ones(tmp_path: Path):
    first = make_toy(tmp_path, "a.db")
    runs = RunsList(tmp_path)
    runs.select.value = (str(first),)
    time.sleep(0.02)
    make_toy(tmp_path, "b.db")
    runs.refresh_button.click()
    assert [Path(e.path).name for e in runs.entries] == ["b.db", "a.db"] and runs.select.value == (str(first),)
    runs.overlay_button.click()  # one objective: no front to draw, and said so
    assert "one objective each" in runs.message.value and runs.figure is None


@needs_nvcc
def test_runs_of_two_kernels_of_one_bare_file_are_told_apart_by_their_entry(tmp_path: Path):
    (tmp_path / "two.cu").write_text("__global__ void scale(float* y) { y[threadIdx.x] *= 2.f; }\n"
                                     "__global__ void shift(float* y) { y[threadIdx.x] += 1.f; }\n")
    for entry in ("scale", "shift"):
        kr = KernelRun(str(tmp_path / "two.cu"), "ptxas", ["registers"], arch="sm_90", controls=["opt_level"],
                       entry=entry, workdir=tmp_path / "w")
        Search.of(kr, store=str(tmp_path / f"{entry}.db"), generations=1, pool_size=2).start()
        kr.close()
    assert sorted(e.kernel for e in RunsList(tmp_path).entries) == ["two (scale)", "two (shift)"]
