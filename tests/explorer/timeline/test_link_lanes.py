"""The links' group of a multi-GPU timeline: after the ranks, named ``links``, one row per
physical link with its name, foldable like a rank; its bars are not counted twice in a
range's totals."""
import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import numpy as np
import pytest

from explorer.timeline.layout import LaneLayout, node_groups
from explorer.timeline.range_totals import range_totals
from predictors.engine.timeline import LINKS_RANK, TimelineBuilder

LINKS = ["NVLink gpu0↔nvswitch", "NVLink gpu1↔nvswitch", "NIC n0_nic"]


def two_ranks_and_links():
    b = TimelineBuilder("links")
    for r in range(2):
        main = b.lane(r, "cpu", "CPU main thread")
        comm = b.lane(r, "stream", "stream 1 (communication)")
        b.add(main, 0.0, 50.0, "cpu_op", "nccl:all_to_all", "[512, 16]")
        b.add(comm, 60.0, 30.0, "communication", "nccl:all_to_all", "[512, 16]")
    for name in LINKS:
        lane = b.lane(LINKS_RANK, "link", name)
        b.add(lane, 60.0, 30.0, "communication", "nccl:all_to_all",
              f"28.7 kB over {name}, 1.2% of its 450 GB/s each way (nvlink4) | "
              "all_to_all p2p, 0.03 MB")
    return b.build()


def test_the_links_come_after_the_ranks_in_a_group_of_their_own():
    tl = two_ranks_and_links()
    assert tl.ranks == [0, 1]
    lay = LaneLayout.of(tl)
    assert [g[0] for g in lay.groups] == [0, 1, LINKS_RANK]
    assert lay.labels[-3:] == [f"links · {name}" for name in LINKS]
    assert node_groups(lay, 1) == [(0, *lay.groups[0][1:]), (1, *lay.groups[1][1:])]
    folded = LaneLayout.of(tl, frozenset({LINKS_RANK}))
    assert folded.labels[-1] == "links (collapsed)"
    assert folded.height == pytest.approx(lay.height - 2)


def test_link_lanes_render_with_their_names_and_fold(gantt, qtbot):
    tl = two_ranks_and_links()
    gantt.set_timeline(tl)
    texts = {(kind, full) for kind, full, _, _ in gantt.lane_axis.visible_texts()}
    assert ("rank", "links") in texts
    assert {("lane", name) for name in LINKS} <= texts
    # their bars are drawn on their rows
    rows = gantt.layout_.y[[i for i, l in enumerate(tl.lanes) if l.kind == "link"]]
    bars = gantt._bars["communication"]
    assert set(np.round(rows - 0.39, 6)) <= set(np.round(bars.opts["y0"], 6))
    # hover text names the link and its group
    link_bar = int(np.flatnonzero(tl.lane == len(tl.lanes) - 1)[0])
    assert "links · NIC n0_nic" in gantt.describe(link_bar, rich=False)
    y = float(gantt.layout_.y[tl.lane[link_bar]])
    assert gantt.event_at_point(75 / 1e3, y) == link_bar
    # a click on "links" folds the group to one row; clicking again opens it
    gantt.toggle_rank(LINKS_RANK)
    assert LINKS_RANK in gantt.collapsed
    texts = {(kind, full) for kind, full, _, _ in gantt.lane_axis.visible_texts()}
    assert ("lane", LINKS[0]) not in texts and ("rank", "links") in texts
    gantt.toggle_rank(LINKS_RANK)
    assert not gantt.collapsed


def test_a_ranges_totals_leave_the_link_lanes_out():
    rows = range_totals(two_ranks_and_links(), 0.0, 0.1)
    device = [r for r in rows if r["on"] == "device"]
    assert [r["count"] for r in device] == [2]   # the two ranks' kernels, not the links
