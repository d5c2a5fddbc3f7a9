"""The DGX-1's hybrid cube-mesh on the platform canvas: its two quads one above the other,
every link visible (none runs under a device box) and no label covered."""
import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import pytest
from PySide6.QtCore import QPointF, QRectF

from explorer.document.editor import DocumentEditor
from explorer.platform import PlatformPage
from explorer.platform.routing import curve_point, label_box, route_bend


@pytest.fixture
def dgx1(qtbot, default_scenario, tmp_path):
    editor = DocumentEditor()
    editor.load(dict(default_scenario, platform={"preset": "dgx1-v100"}))
    page = PlatformPage(editor)
    qtbot.addWidget(page)
    page.resize(1280, 720)
    page.show()
    page.view.fit_all()
    yield page
    page.grab().save(str(tmp_path / "dgx1.png"))


def test_the_cube_mesh_is_drawn_as_two_quads_one_above_the_other(dgx1):
    pos = {k: d.pos() for k, d in dgx1.scene.devices.items()}
    top = [pos[f"gpu{i}"] for i in range(4)]
    bottom = [pos[f"gpu{i}"] for i in range(4, 8)]
    assert len({p.y() for p in top}) == 1 and len({p.y() for p in bottom}) == 1
    assert bottom[0].y() > top[0].y()
    # each GPU sits over its peer in the other quad: their link is a short vertical
    assert [p.x() for p in top] == [p.x() for p in bottom]
    assert sorted(p.x() for p in top) == [p.x() for p in top]


def test_no_link_runs_under_a_device_and_no_label_is_covered(dgx1):
    scene = dgx1.scene
    boxes = {k: d.sceneBoundingRect() for k, d in scene.devices.items()}
    assert len(scene.links) == 16
    bent = 0
    for link in scene.links:
        others = [b for k, b in boxes.items() if k not in (link.a.node_id, link.b.node_id)]
        p1, p2 = link.ends()
        for k in range(1, 40):
            p = curve_point(p1, p2, link.bend, k / 40)
            assert not any(b.contains(p) for b in others), (link.a.node_id, link.b.node_id)
        bent += link.bend != 0
    assert bent == 6   # the quads' diagonals and far sides (0-2, 1-3, 0-3, 4-6, 5-7, 4-7)
    labels = [label_box(link.label_point()) for link in scene.links
              if link.label_point() is not None]
    assert len(labels) >= 4
    for i, a in enumerate(labels):
        assert not any(a.intersects(b) for b in boxes.values())
        assert not any(a.intersects(b) for b in labels[i + 1:])


def test_a_detour_bows_away_from_the_middle_and_clears_the_box_in_its_way():
    box = QRectF(-20, -20, 40, 40)       # a device between the two ends
    p1, p2 = QPointF(-200, 0), QPointF(200, 0)
    assert route_bend(p1, p2, [QRectF(-20, 60, 40, 40)]) == 0.0   # nothing in the way
    up = route_bend(p1, p2, [box], centre=QPointF(0, 100))
    down = route_bend(p1, p2, [box], centre=QPointF(0, -100))
    mid_up, mid_down = curve_point(p1, p2, up, 0.5), curve_point(p1, p2, down, 0.5)
    assert mid_up.y() < box.top() and mid_down.y() > box.bottom()
