import numpy as np

from predictors.timeline import TimelineBuilder


def build():
    b = TimelineBuilder("t")
    cpu = b.lane(0, "cpu", "main")
    s = b.lane(0, "stream", "stream 0")
    b.add(cpu, 0, 10, "cpu_op", "a")
    b.add(s, 5, 10, "gemm", "a", "[2, 2]")
    b.add(s, 12, 10, "gemm", "b")       # overlaps the previous one: union counts once
    b.add(s, 40, 5, "elementwise", "c")
    return b.build(kernels=3)


def test_busy_time_is_a_union_of_intervals():
    tl = build()
    assert np.isclose(tl.device_active_ms(0), (22 - 5 + 5) / 1e3)
    assert np.isclose(tl.span_ms(), 45 / 1e3)


def test_top_ops_and_lane_order():
    tl = build()
    top = tl.top_ops(2, tl.lanes_of(0, "stream"))
    assert [t["name"] for t in top] == ["a", "b"] or [t["name"] for t in top] == ["b", "a"]
    assert top[0]["total_ms"] == 0.01
    order = tl.lane_order(tl.lanes_of(0, "stream")[0])
    assert list(tl.start_us[order]) == [5, 12, 40]


def test_million_events_stay_compact():
    b = TimelineBuilder()
    lane = b.lane(0, "stream", "s")
    n = 1_000_000
    tl = b.build()  # fill the columns directly, as a trace parser does
    tl.start_us = np.arange(n, dtype=np.float64)
    tl.dur_us = np.ones(n)
    tl.lane = np.full(n, lane, np.int32)
    tl.category = np.zeros(n, np.int16)
    tl.name_id = np.zeros(n, np.int32)
    tl.detail_id = np.zeros(n, np.int32)
    tl.names, tl.details = ["k"], [""]
    nbytes = sum(a.nbytes for a in (tl.start_us, tl.dur_us, tl.lane, tl.category,
                                    tl.name_id, tl.detail_id))
    assert nbytes < 40 * n
    assert np.isclose(tl.busy_ms([lane]), n / 1e3)
