"""Comparing a prediction with a recording: lanes pair by kind and position, and streams
that carry collectives pair with each other."""
from predictors.timeline import TimelineBuilder
from predictors.traces.compare import compare_timelines


def _timeline(streams):
    tb = TimelineBuilder()
    cpu = tb.lane(0, "cpu", "CPU main thread")
    tb.add(cpu, 0.0, 100.0, "cpu_op", "aten::mm")
    for name, category, dur in streams:
        lane = tb.lane(0, "stream", name)
        tb.add(lane, 10.0, dur, category, "k")
    tl = tb.build()
    return tl


def test_communication_streams_pair_with_each_other():
    pred = _timeline([("stream 0 (compute)", "gemm", 50.0),
                      ("stream 1 (communication)", "communication", 20.0)])
    rec = _timeline([("stream 7", "gemm", 60.0), ("stream 20", "memcpy", 5.0),
                     ("stream 84", "communication", 30.0)])
    rows = {r["key"]: r for r in compare_timelines(pred, rec).rows if r["group"] == "lane"}
    assert rows["stream 1 (communication) ↔ stream 84"]["recorded_ms"] == 0.03
    assert "stream 0 (compute) ↔ stream 7" in rows
    assert rows["stream 20"]["predicted_ms"] == 0.0  # nothing predicted on a copy stream
