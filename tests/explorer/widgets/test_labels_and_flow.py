"""Widgets that never widen their window: a label that elides (the whole text in its
tooltip), a row of widgets that wraps, and a wrapping label with an honest height."""
from PySide6.QtWidgets import QFrame, QLabel, QVBoxLayout, QWidget

from explorer.widgets import ElidedLabel, FlowLayout, WrappingLabel

LONG = "Recorded — 8 ranks (worker0_step_12.1694128201545.pt.trace.json.gz …) · aligned"


def test_an_elided_label_shows_what_fits_and_tips_the_rest(qtbot):
    label = ElidedLabel(LONG)
    qtbot.addWidget(label)
    full = label.fontMetrics().horizontalAdvance(LONG)
    assert label.minimumSizeHint().width() < full / 3   # the text sets no minimum width
    assert label.sizeHint().width() >= full
    label.resize(full // 2, 24)
    label.show()
    assert label.text() == LONG and label.is_elided()
    assert "…" in label.shown_text() and label.toolTip() == LONG
    assert label.fontMetrics().horizontalAdvance(label.shown_text()) <= label.width()
    label.resize(full + 40, 24)
    assert not label.is_elided() and label.shown_text() == LONG and label.toolTip() == ""
    label.setText("short")
    assert label.shown_text() == "short"


def _row(qtbot, width):
    host = QWidget()
    qtbot.addWidget(host)
    flow = FlowLayout(spacing=8)
    boxes = []
    for k in range(6):
        box = QFrame()
        box.setFixedSize(100, 40)
        flow.addWidget(box)
        boxes.append(box)
    outer = QVBoxLayout(host)
    outer.setContentsMargins(0, 0, 0, 0)
    outer.addLayout(flow)
    outer.addStretch(1)
    host.resize(width, 300)
    host.show()
    qtbot.wait(10)
    return host, flow, boxes


def test_a_flow_row_wraps_instead_of_widening(qtbot):
    host, flow, boxes = _row(qtbot, 700)
    assert {b.y() for b in boxes} == {0}                     # 6 x 108 fits in 700
    assert flow.minimumSize().width() == 100                 # the widest item, not the row
    host.resize(330, 300)                                    # three a row
    qtbot.waitUntil(lambda: boxes[3].y() > 0)
    assert [b.y() for b in boxes] == [0, 0, 0, 48, 48, 48]
    assert [b.x() for b in boxes[:3]] == [0, 108, 216]
    # the rows' height is the layout's minimum: a parent never draws over them
    qtbot.waitUntil(lambda: flow.minimumSize().height() == 88)
    assert host.minimumSizeHint().height() >= 88


def test_a_wrapping_label_asks_for_the_height_of_its_lines(qtbot):
    label = WrappingLabel("word " * 60)
    qtbot.addWidget(label)
    label.resize(120, 20)
    label.show()
    qtbot.wait(10)
    one_line = QLabel("word").sizeHint().height()
    assert label.minimumSizeHint().height() == label.heightForWidth(120) > 3 * one_line
