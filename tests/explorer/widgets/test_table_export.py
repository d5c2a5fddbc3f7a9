"""Results tables out of the app: Export CSV… writes the header and every row, Copy (and
Ctrl+C in the table) puts the selected rows, or all, on the clipboard as TSV, and a file
that cannot be written is an error in the view, not a crash.  The Sharding, Sweep,
Summary and Compare tables all have both."""
import csv
import os
from types import SimpleNamespace

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import pytest
from PySide6.QtCore import QItemSelectionModel, Qt
from PySide6.QtGui import QGuiApplication

from explorer.compare.view import CompareView
from explorer.run.summary import SummaryPanel
from explorer.sharding.view import ShardingView
from explorer.sweep.view import SweepView
from predictors.plan.sweep import SweepResult, SweepRow


def sharding_view():
    v = ShardingView()
    # stand-in plans: no charts
    v.draw = lambda res: None
    v.placement.set_plan = v.breakdown.set_plans = v.timelines.set_plans = \
        lambda *a, **k: None
    ranking = SimpleNamespace(plans=[1, 2, 3], scenario_name="dlrm", notes=["three plans"])
    rows = [[str(i + 1), f"plan {i}", f"{10 + i:.3f}", "best" if i == 0 else "+1.0 %", "0",
             "2.0 %", "1 GB – 2 GB", "3 GB", "0.100", "0.050"] for i in range(3)]
    v.show_rows(ranking, ranking.plans, rows, [""] * 3, select=None)
    return v


def sweep_view():
    v = SweepView()
    v.set_sweep(SweepResult("dlrm", "platform", [
        SweepRow("dgx-a100", 10.0, 1000.0, 8.0, 0.5, 8, 2_000_000_000, True),
        SweepRow("h100-1", 12.0, 800.0, 9.0, 0.0, 1, 1_000_000_000, True),
        SweepRow("local-cpu", 90.0, 100.0, 80.0, 0.0, 1, 1_000_000_000, True)]))
    return v


def summary_panel():
    v = SummaryPanel()
    v.set_prediction(SimpleNamespace(
        scenario_name="dlrm", platform="dgx-a100", device="A100", iteration_ms=10.0,
        per_rank=[], num_ops=3, timeline=[0, 1, 2], notes=[], elapsed_s=0.1,
        profile="roofline",
        top_ops=[{"name": f"op{i}", "category": "gemm", "total_ms": 3.0 - i, "count": 2}
                 for i in range(3)]))
    return v


def compare_view():
    v = CompareView()
    rows = [{"group": "op class", "key": "gemm", "predicted_ms": 1.0, "recorded_ms": 1.2,
             "diff_ms": -0.2, "error_pct": -16.7}] * 2 + [
        {"group": "lane", "key": f"rank0 stream {i}", "predicted_ms": 2.0 + i,
         "recorded_ms": 2.5, "diff_ms": i - 0.5, "error_pct": 1.0} for i in range(3)]
    v.prediction = SimpleNamespace(scenario_name="dlrm")
    v.comparison = SimpleNamespace(rows=rows)
    v._fill_table()
    return v


VIEWS = {"sharding": sharding_view, "sweep": sweep_view, "summary": summary_panel,
         "compare": compare_view}


@pytest.fixture(params=sorted(VIEWS))
def view(request, qtbot):
    v = VIEWS[request.param]()
    qtbot.addWidget(v)
    v.resize(1000, 420)
    v.show()
    return v


def only_row(table, row: int) -> None:
    """Select ``row`` alone.  (``QTableWidget.selectRow`` extends the selection while the
    application believes Shift is held, as it may after an earlier test's Shift-drag.)"""
    table.selectionModel().select(table.model().index(row, 0),
                                  QItemSelectionModel.ClearAndSelect | QItemSelectionModel.Rows)


def header_and_cells(table):
    """What the file and the clipboard hold: the cells' texts, a marker glyph left out."""
    def text(item):
        return item.text().lstrip("■☰ ")
    head = [table.horizontalHeaderItem(c).text() for c in range(table.columnCount())]
    cells = [[text(table.item(r, c)) for c in range(table.columnCount())]
             for r in range(table.rowCount())]
    return head, cells


def test_export_csv_writes_the_header_and_every_row(view, tmp_path, monkeypatch):
    assert view.table.rowCount() == 3
    assert view.export.export_button.text() == "Export CSV…"
    assert view.export.export_button.isVisible() and view.export.copy_button.isVisible()
    target = tmp_path / "out.csv"
    monkeypatch.setattr("explorer.widgets.table_export.QFileDialog.getSaveFileName",
                        lambda *a, **k: (str(target), "CSV files (*.csv)"))
    view.table.selectRow(1)  # the file has every row all the same
    view.export.export_button.click()
    with open(target, newline="", encoding="utf-8") as f:
        got = list(csv.reader(f))
    head, cells = header_and_cells(view.table)
    assert got == [head] + cells
    assert view.export.file_stem().startswith("dlrm")


def test_copy_puts_the_selected_rows_or_all_on_the_clipboard_as_tsv(view, qtbot):
    head, cells = header_and_cells(view.table)
    clipboard = QGuiApplication.clipboard()
    view.table.clearSelection()
    view.export.copy_button.click()
    lines = clipboard.text().splitlines()
    assert lines[0].split("\t") == head and len(lines) == 4
    assert [l.split("\t") for l in lines[1:]] == [[" ".join(c.split()) for c in row]
                                                 for row in cells]
    only_row(view.table, 2)
    view.table.setFocus()
    clipboard.setText("")
    qtbot.keyClick(view.table, Qt.Key_C, Qt.ControlModifier)
    lines = clipboard.text().splitlines()
    assert lines[0].split("\t") == head and len(lines) == 2
    assert lines[1].split("\t")[0] == " ".join(cells[2][0].split())


def test_an_export_that_cannot_be_written_is_shown_not_raised(view, tmp_path):
    assert not view.export.export_csv(tmp_path)  # a folder: refused
    assert view.error.isVisible() and "not a regular file" in view.error.text()
    assert not view.export.export_csv(tmp_path / "missing" / "x.csv")
