"""The evaluations table on real runs: sorting puts failures last, filters keep exactly the rows they name, a picked
row calls on_select, highlight() selects quietly, paging reaches the last row, incremental updates match a full
redraw."""

from __future__ import annotations

import pytest

pytest.importorskip("ipywidgets")

import compileiq_lab.space as ss
from compileiq_lab import Results, Search, SearchConfiguration
from compileiq_lab.exceptions import ConfigurationError
from compileiq_lab.testing import toy_objective, toy_space
from compileiq_lab.widgets.table import EvaluationsTable


def breaks_above_15(config):
    if config["x"] > 15:
        raise ValueError("x > 15 breaks the kernel")
    return float(config["x"] ** 2 + config["y"])


@pytest.fixture(scope="module")
def toy() -> Results:
    return Search(toy_objective, toy_space(), SearchConfiguration(generations=5, seed=0), store=":memory:").start()


@pytest.fixture(scope="module")
def failing() -> Results:
    space = {"x": ss.range(start=1.0, end=20.0, step=0.5, default=4.0), "y": ss.choice([1, 2, 3], default=2),
             "z": ss.literal("this is a constant", knockout_prob=0.5)}  # defaults: the baseline runs (x=4, y=2)
    # model="none" (pymoo's offspring unscreened): the run whose rows and pages these tests were written on
    results = Search(breaks_above_15, space, SearchConfiguration(generations=5, seed=0, model="none"),
                     store=":memory:").start()
    assert any(r.status != "ok" for r in results.records) and results.baseline_record.status == "ok"
    return results


def table_of(results: Results, **kwargs) -> tuple[EvaluationsTable, list[int]]:
    picked: list[int] = []
    table = EvaluationsTable(results.objectives, on_select=picked.append, **kwargs)
    table.update(results)
    return table, picked


def ok_ids(results: Results) -> list[int]:
    return [r.eval_id for r in results.records if r.status == "ok"]


def test_rows_show_every_evaluation_with_units_change_and_the_controls_that_differ(failing):
    table, _ = table_of(failing, page_size=1000)
    assert table.shown_ids == [r.eval_id for r in failing.records]
    assert table.headers[:4] == ["eval", "gen", "status", "score_1"]
    base = failing.baseline_record
    cells = {row.rec.eval_id: row.cells for row in table._view}
    assert cells[base.eval_id][2:] == ["ok *", "18", "same", "(compiler defaults)"]
    for r in failing.records:
        if r.is_baseline:
            continue
        c = cells[r.eval_id]
        obj = failing.objectives[0]
        assert c[:3] == [str(r.eval_id), str(r.generation), r.status]
        if r.status == "ok":
            assert c[3] == obj.format(r.scores[0])
            assert c[4] == obj.change(r.scores[0], base.scores[0]).replace(" vs baseline", "").replace(
                "same as baseline", "same")
        else:
            assert c[3] == c[4] == "-"
        differ = sorted((k, v) for k, v in r.params.items() if base.params.get(k) != v)
        shown = c[5].split(", ") if c[5] != "(same as baseline)" else []
        assert [s.split("=")[0] for s in shown] == [k for k, _ in differ]
    label = table.rows.options[0][0]
    assert "\u00a0" in label and "  " not in label  # padded with no-break spaces (an <option> collapses spaces)


def test_sorting_by_score_puts_the_best_first_and_failed_rows_last_both_ways(failing):
    table, _ = table_of(failing, page_size=1000)
    table.sort_by.value = "objective:0"
    ok = sorted((r for r in failing.records if r.status == "ok"), key=lambda r: (r.scores[0], r.eval_id))
    failed = sorted(r.eval_id for r in failing.records if r.status != "ok")
    assert table.shown_ids == [r.eval_id for r in ok] + failed
    assert failing.record(table.shown_ids[0]).scores == failing.best_record(0).scores
    table.descending.value = True
    assert table.shown_ids == [r.eval_id for r in ok][::-1] + failed
    assert table.descending.description == "descending"
    table.sort_by.value = "status"
    assert table.shown_ids == failed[::-1] + sorted(r.eval_id for r in ok)[::-1]  # descending: failures first
    table.descending.value = False
    assert table.shown_ids == sorted(r.eval_id for r in ok) + failed


def test_filters_keep_exactly_the_rows_they_name(toy, failing):
    table, _ = table_of(toy, page_size=1000)
    best_x = toy.best_record(0).params["x"]
    expect = {
        "ok": ok_ids(toy),
        "x=1.0": [r.eval_id for r in toy.records if r.params.get("x") == 1.0],
        "x=1": [r.eval_id for r in toy.records if r.params.get("x") == 1.0],
        f"x={best_x}": [r.eval_id for r in toy.records if r.params.get("x") == best_x],
        f"x == {best_x:.2f}": [r.eval_id for r in toy.records if r.params.get("x") == best_x],
        "score_1<10": [r.eval_id for r in toy.records if r.status == "ok" and r.scores[0] < 10],
        "score_1 >= 100, y=3": [r.eval_id for r in toy.records
                                if r.status == "ok" and r.scores[0] >= 100 and r.params.get("y") == 3],
        "z=this is a constant": [r.eval_id for r in toy.records if "z" in r.params],
        "generation>=4": [r.eval_id for r in toy.records if r.generation >= 4],
        "x<3": [r.eval_id for r in toy.records if r.params.get("x", 99) < 3],
    }
    for text, ids in expect.items():
        table.filter.value = text
        assert table.shown_ids == ids, text
        assert table.notes == [], text
    assert expect[f"x={best_x}"] and expect["score_1<10"] and len(expect["score_1<10"]) < len(toy.records)
    table.filter.value = ""
    table.front_only.value = True
    assert table.shown_ids == sorted(r.eval_id for r in toy.front_records())
    table.filter.value = "score_1>1000"
    assert table.shown_ids == [] and "no rows" in table.info.value

    table, _ = table_of(failing, page_size=1000)
    failed = [r.eval_id for r in failing.records if r.status != "ok"]
    for text in ("error", "failed", "ERROR"):
        table.filter.value = text
        assert table.shown_ids == failed, text
    table.filter.value = "ok"
    assert table.shown_ids == ok_ids(failing)
    assert f"(filtered from {len(failing.records)})" in table.info.value


def test_a_filter_it_cannot_read_is_ignored_with_a_note_and_never_evaluated(toy):
    table, _ = table_of(toy, page_size=1000)
    for text in ("bogus<3", "score_1<ten", "x<", "__import__('os').system('false')<1"):
        table.filter.value = text
        assert table.shown_ids == [r.eval_id for r in toy.records], text
        assert len(table.notes) == 1 and "ignored" in table.notes[0], text
        assert "ignored" in table.info.value
    table.filter.value = "__import__('os')"  # a word: a status no row has
    assert table.shown_ids == [] and "no row has status" in table.notes[0]


def test_picking_a_row_calls_on_select_and_highlight_selects_without_calling_it(toy):
    table, picked = table_of(toy, page_size=10)
    table.rows.index = 3  # what the browser sends on a click
    first = table.page_ids[3]
    assert picked == [first] and table.selected == first == table.rows.value
    last = toy.records[-1].eval_id
    table.highlight(last)
    assert picked == [first]
    assert table.selected == last and table.rows.value == last and table.page == table.pages - 1
    assert last in table.page_ids
    table.sort_by.value = "objective:0"  # a re-sort keeps the selection and marks it wherever it is drawn
    assert table.selected == last and picked == [first]
    table.highlight(last)
    assert table.rows.value == last and table.page_ids.index(last) == table.rows.index
    table.filter.value = f"eval_id<{last}"  # hidden by the filter: still selected, unmarked, said
    assert table.rows.value is None and table.selected == last and "not shown here" in table.info.value
    assert picked == [first]


def test_paging_reaches_the_last_row(toy):
    table, _ = table_of(toy, page_size=7)
    n = len(toy.records)
    assert table.pages == -(-n // 7) and len(table.rows.options) == 7 and table.prev_button.disabled
    table.next_button.click()
    assert table.page == 1 and table.page_ids == table.shown_ids[7:14]
    table.last_button.click()
    assert table.page_ids[-1] == table.shown_ids[-1] == toy.records[-1].eval_id and table.next_button.disabled
    assert f"rows {7 * (table.pages - 1) + 1}-{n} of {n}" in table.info.value
    table.first_button.click()
    assert table.page == 0 and table.page_ids == table.shown_ids[:7]


@pytest.mark.parametrize("settings", [
    {}, {"sort_by": "objective:0"}, {"sort_by": "objective:0", "descending": True, "filter": "x<12"},
    {"sort_by": "change", "descending": True}, {"sort_by": "controls", "filter": "error"},
    {"front_only": True}, {"sort_by": "status", "descending": True}])
def test_updates_row_by_row_give_the_table_a_full_redraw_gives(failing, settings):
    grown, _ = table_of(Results([], objectives=failing.objectives), page_size=5)
    for name, value in settings.items():
        getattr(grown, name).value = value
    for n in range(1, len(failing.records) + 1):
        grown.update(Results(failing.records[:n], objectives=failing.objectives))
        if n == 12:
            grown.show_page(1)
    grown.update(failing)  # no new rows: nothing changes
    fresh, _ = table_of(failing, page_size=5)
    for name, value in settings.items():
        getattr(fresh, name).value = value
    fresh.update(failing)
    assert grown.shown_ids == fresh.shown_ids and grown.shown_ids
    assert grown.page == min(1, grown.pages - 1)  # an update keeps the page
    fresh.show_page(grown.page)
    assert [o[0] for o in grown.rows.options] == [o[0] for o in fresh.rows.options]


def test_another_run_replaces_the_rows_and_bad_arguments_say_the_rule(toy, failing):
    table, _ = table_of(failing)
    table.update(toy)
    assert table.shown_ids == [r.eval_id for r in toy.records]
    assert all(row.cells[4] == "-" for row in table._view)  # the toy run has no baseline: no change to show
    with pytest.raises(ConfigurationError, match="page_size >= 1"):
        EvaluationsTable(toy.objectives, page_size=0)


def test_another_run_of_as_many_rows_numbered_alike_replaces_the_rows():
    runs = [Search(toy_objective, toy_space(), SearchConfiguration(generations=2, seed=s), store=":memory:").start()
            for s in (1, 2)]
    assert len(runs[0]) == len(runs[1]) and [r.eval_id for r in runs[0].records] == [r.eval_id for r in runs[1].records]
    table, _ = table_of(runs[0], page_size=1000)
    table.update(runs[1])
    assert [row.rec.params for row in table._view] == [r.params for r in runs[1].records] != \
        [r.params for r in runs[0].records]
