"""The Sharding dock's charts and controls: the search budget, ties, imbalance and the
exposed all-to-all in the table, sorting, the placement heat map, the per-rank breakdown,
stacked timelines, and the CSV and image exports.  Fake rankings keep these fast."""
import csv
import io
import json
import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import numpy as np
import pyqtgraph as pg
import pytest
from paths import SCENARIOS
from PySide6.QtCore import QItemSelectionModel, Qt
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QApplication

from explorer.sharding.breakdown import PARTS
from explorer.sharding.view import COLUMNS
from explorer.widgets.table_export import table_csv
from explorer.window import theme
from predictors.engine.timeline import TimelineBuilder
from predictors.model.sharding import ColumnWise, Plan
from predictors.plan.rank_sharding import PlanResult, ShardingRanking
from predictors.scenario.format import load_scenario

RANKS = 4
TABLES = [{"key": f"tables/{j}", "rows": 1000 * (j + 1), "dim": 16,
           "bytes": 64_000.0 * (j + 1), "lookup_ms": 0.5 * (j + 1)} for j in range(6)]


def _timeline(span_ms: list[float]):
    b = TimelineBuilder("fake")
    for rank, ms in enumerate(span_ms):
        compute = b.lane(rank, "stream", "stream 0 (compute)")
        comm = b.lane(rank, "stream", "stream 1 (communication)")
        b.lane(rank, "cpu", "CPU main")
        b.add(compute, 0.0, 600.0 * ms, "embedding", "lookup")
        b.add(compute, 600.0 * ms, 300.0 * ms, "gemm", "mlp")
        b.add(comm, 900.0 * ms, 100.0 * ms, "communication", "all_to_all")
    return b.build()


def _result(name: str, assignment: dict, spans: list[float], tie=False) -> PlanResult:
    per_rank = []
    for rank, ms in enumerate(spans):
        parts = {"lookups": 0.5 * ms, "dense": 0.3 * ms, "exchange": 0.1 * ms,
                 "other communication": 0.04 * ms, "waiting": 0.06 * ms}
        per_rank.append({"rank": rank, "iteration_ms": ms, "device_active_ms": 0.9 * ms,
                         "exposed_comm_ms": 0.14 * ms, "lookup_ms": parts["lookups"],
                         "exposed_all_to_all_ms": parts["exchange"], "breakdown_ms": parts,
                         "peak_memory_bytes": 1_000_000 * (rank + 1)})
    plan = Plan(name, RANKS, assignment, f"how {name}")
    return PlanResult(plan, max(spans), per_rank, [1e6] * RANKS, _timeline(spans), tie=tie)


def fake_ranking() -> ShardingRanking:
    a = {f"tables/{j}": j % RANKS for j in range(6)}
    b = dict(a, **{"tables/5": "rw", "tables/4": ColumnWise((1, 3))})
    c = {f"tables/{j}": 0 for j in range(6)}
    plans = [_result("searched 1", a, [10.0, 9.0, 9.5, 8.0]),
             _result("searched 2", b, [10.05, 10.0, 9.0, 9.0], tie=True),
             _result("a very long plan name that goes on and on", c, [20.0, 3.0, 3.0, 3.0])]
    plans[0].tie = True
    return ShardingRanking("fake", "pcie-4x-a100", RANKS, plans, [],
                           ["4 ranks", "99 plans simulated in 1.0 s"], 1.0, TABLES,
                           evaluated=99)


@pytest.fixture
def dgx_scenario(tmp_path):
    doc = load_scenario(SCENARIOS / "small_dlrm.json")
    doc["platform"] = {"preset": "pcie-4x-a100"}
    path = tmp_path / "dlrm_4gpu.json"
    path.write_text(json.dumps(doc))
    return path


@pytest.fixture
def ranked(make_window, qtbot, dgx_scenario):
    """A window whose Sharding dock shows :func:`fake_ranking`; ``calls`` holds the fake's
    keyword arguments."""
    calls = []

    def fake(snapshot, **kwargs):
        calls.append(kwargs)
        return fake_ranking()

    w = make_window(dgx_scenario, rank_fn=fake)
    w.sharding.view.budget.setValue(7)
    with qtbot.waitSignal(w.sharding.runner.sigFinished, timeout=30_000):
        w.sharding.run()
    return w, w.sharding.view, calls


def select_rows(view, rows):
    view.table.clearSelection()
    model = view.table.selectionModel()
    for row in rows:
        model.select(view.table.model().index(row, 0),
                     QItemSelectionModel.Select | QItemSelectionModel.Rows)


def test_the_search_budget_reaches_the_rank_function(ranked):
    _, view, calls = ranked
    assert calls and calls[0]["budget_s"] == 7.0
    assert view.budget.minimum() == 1 and view.budget.maximum() == 600
    assert view.budget.toolTip()


def test_ties_imbalance_and_all_to_all_columns(ranked):
    _, view, _ = ranked
    r = fake_ranking()
    assert view.table.columnCount() == len(COLUMNS)
    vs = COLUMNS.index("vs best")
    assert view.table.item(0, vs).text() == "best"
    assert view.table.item(1, vs).text().startswith("≈ best")
    assert view.table.item(2, vs).text() == "+100.0 %"
    imb = view.table.item(2, COLUMNS.index("Imbalance")).text()
    assert imb == f"{100 * r.plans[2].imbalance:.1f} %"
    a2a = view.table.item(2, COLUMNS.index("Exposed all-to-all (ms)")).text()
    assert float(a2a) == pytest.approx(r.plans[2].exposed_all_to_all_ms, abs=1e-3)


def test_sorting_keeps_rows_mapped_to_their_plans(ranked):
    _, view, _ = ranked
    view.table.selectRow(0)
    chosen = view.selected()
    head = view.table.horizontalHeader()
    head.setSortIndicator(COLUMNS.index("Iteration (ms)"), Qt.DescendingOrder)
    names = [view.table.item(r, 1).text() for r in range(3)]
    assert names[0].startswith("a very long") and names[2] == "searched 1"
    assert view.selected() is chosen          # still selected, now on the last row
    for row in range(3):
        assert view.result_at(row).plan.name == view.table.item(row, 1).text()
    view.table.selectRow(0)
    assert view.selected().plan.name.startswith("a very long")
    head.setSortIndicator(COLUMNS.index("Plan"), Qt.AscendingOrder)
    assert view.table.item(0, 1).text().startswith("a very long")


def test_the_heat_map_shows_every_table_where_the_plan_puts_it(ranked):
    _, view, _ = ranked
    view.table.selectRow(1)        # "searched 2": tables/5 row-wise, tables/4 column-wise
    m = view.placement
    assert [t["key"] for t in m.order] == [f"tables/{j}" for j in range(5, -1, -1)]
    assert m.values.shape == (6, RANKS)
    assert list(m.values[0]) == pytest.approx([3.0 / RANKS] * RANKS)   # spread: rw
    assert list(m.values[1]) == pytest.approx([0.0, 1.25, 0.0, 1.25])  # its two shards
    assert "column-wise on ranks 1, 3" in m.cell_text(1, 1)
    assert "1 column-wise" in m.caption.text()
    for row, t in enumerate(m.order[2:], 2):
        j = int(t["key"].split("/")[1])
        expected = np.zeros(RANKS)
        expected[j % RANKS] = t["lookup_ms"]
        assert list(m.values[row]) == pytest.approx(list(expected))
    assert "tables/3" in m.cell_text(2, 3) and "rank 3" in m.cell_text(2, 3)
    m.measure.setCurrentIndex(1)                  # by bytes
    assert m.values.sum() == pytest.approx(sum(t["bytes"] for t in TABLES))
    assert "searched 2" in m.caption.text()


def test_the_breakdown_charts_each_ranks_parts(ranked):
    _, view, _ = ranked
    r = fake_ranking()
    view.table.selectRow(0)
    (stack,) = view.breakdown.stacks
    for part in PARTS:
        assert list(stack[part]) == pytest.approx(
            [p["breakdown_ms"][part] for p in r.plans[0].per_rank])
    select_rows(view, [0, 2])
    assert [res.plan.name for res in view.breakdown.results] == \
        ["searched 1", r.plans[2].plan.name]
    assert len(view.breakdown.stacks) == 2
    assert list(view.breakdown.stacks[1]["waiting"]) == pytest.approx(
        [p["breakdown_ms"]["waiting"] for p in r.plans[2].per_rank])
    assert not view.apply_button.isEnabled()     # Apply takes one plan


def test_two_plans_stack_their_timelines_on_one_time_axis(ranked, qtbot):
    _, view, _ = ranked
    select_rows(view, [0, 2])
    view.tabs.setCurrentWidget(view.timelines)
    t = view.timelines
    assert len(t.gantts) == 2
    assert "searched 1" in t.labels[0].text() and "10.000 ms" in t.labels[0].text()
    assert "rank 0" in t.labels[1].text()        # each plan's slowest rank
    assert t.gantts[0].timeline.ranks == [0] and len(t.gantts[1].timeline.lanes) == 2
    assert t.gantts[1].vb.linkedView(0) is t.gantts[0].vb
    t.gantts[0].vb.setXRange(2.0, 5.0, padding=0)
    assert t.gantts[1].x_range() == pytest.approx((2.0, 5.0))
    t.rank.setCurrentIndex(t.rank.findData(-2))  # all ranks, folded
    assert len(t.gantts) == 2 and t.gantts[0].timeline.ranks == list(range(RANKS))
    assert t.gantts[0].collapsed == set(range(RANKS))


def test_csv_and_image_exports(ranked, tmp_path):
    _, view, _ = ranked
    path = tmp_path / "plans.csv"
    assert view.export.export_csv(path)
    rows = list(csv.reader(io.StringIO(path.read_text(encoding="utf-8"))))
    assert rows[0] == list(COLUMNS) and len(rows) == 4
    assert rows[1][1] == "searched 1" and rows[2][3].startswith("≈ best")
    assert table_csv(view.table).decode().splitlines()[0].startswith("#,Plan")
    for tab in range(view.tabs.count()):
        view.tabs.setCurrentIndex(tab)
        out = tmp_path / f"chart{tab}.png"
        assert view.save_image(out) and out.stat().st_size > 2_000
    assert not view.save_image(tmp_path / "missing" / "x.png")
    assert view.error.isVisible()


def _text_lightness(label) -> int:
    return label.palette().color(label.foregroundRole()).lightness()


def test_the_charts_text_follows_the_dark_theme(ranked, monkeypatch):
    w, view, _ = ranked
    monkeypatch.setattr(theme, "desktop_is_dark", lambda: False)
    select_rows(view, [0, 2])
    chart = view.breakdown
    names = [i for i in chart._items if isinstance(i, pg.TextItem)]
    assert names and _text_lightness(chart.key) < 100
    try:
        w.theme.set_choice(theme.DARK)
        QApplication.processEvents()   # the widgets hear of the new palette
        assert _text_lightness(chart.key) > 180          # the legend's labels
        assert _text_lightness(view.header) > 110        # the intro / summary line
        ink = QColor(chart.ink())
        assert ink.lightness() > 180
        names = [i for i in chart._items if isinstance(i, pg.TextItem)]
        assert names and all(ink.name() in i.textItem.toHtml() for i in names)
        view.table.selectRow(0)                          # one plan: the Ranks chart
        assert ink.name() in view.plot.getPlotItem().titleLabel.item.toHtml()
        select_rows(view, [0, 2])                        # timelines made while dark
        view.tabs.setCurrentWidget(view.timelines)
        for g in view.timelines.gantts:
            assert g.plot.backgroundBrush().color().lightness() < 60
            assert g._hover_box.pen().color().lightness() > 180
        w.theme.set_choice(theme.LIGHT)
        QApplication.processEvents()
        assert _text_lightness(chart.key) < 100 and QColor(chart.ink()).lightness() < 100
    finally:
        w.theme.set_choice(theme.FOLLOW)
